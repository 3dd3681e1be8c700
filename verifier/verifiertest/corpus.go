package verifiertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Seed is one entry of a string fuzz target's seed corpus: named
// "valid-…" if the target's decoder accepts it, "invalid-…" otherwise.
type Seed struct {
	Name string
	Data []byte
}

// Valid reports whether the seed is named as one the decoder accepts.
func (s Seed) Valid() bool { return strings.HasPrefix(s.Name, "valid-") }

// AddSeeds adds the valid seeds to f as strings; the invalid ones reach the
// target through testdata/fuzz (CheckCorpus).
func AddSeeds(f *testing.F, seeds []Seed) {
	for _, s := range seeds {
		if s.Valid() {
			f.Add(string(s.Data))
		}
	}
}

// CheckCorpus checks the seed corpus of the string fuzz target named
// target: names are unique, at least one seed is valid and one invalid,
// decode accepts exactly the valid ones, and testdata/fuzz/<target> holds
// every seed in the form go test reads. With write it writes those files
// instead of comparing them; other files there (inputs found by fuzzing)
// are left alone.
func CheckCorpus(t *testing.T, target string, seeds []Seed, decode func(string) error, write bool) {
	t.Helper()
	var valid, invalid int
	names := map[string]bool{}
	for _, s := range seeds {
		if names[s.Name] {
			t.Fatalf("%s: duplicate seed %s", target, s.Name)
		}
		names[s.Name] = true
		err := decode(string(s.Data))
		switch {
		case s.Valid() && err != nil:
			t.Errorf("%s/%s: named valid, refused: %v", target, s.Name, err)
		case !s.Valid() && err == nil:
			t.Errorf("%s/%s: named invalid, accepted", target, s.Name)
		}
		if s.Valid() {
			valid++
		} else {
			invalid++
		}
	}
	if valid == 0 || invalid == 0 {
		t.Fatalf("%s: %d valid and %d invalid seeds, want some of each", target, valid, invalid)
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range seeds {
		path := filepath.Join(dir, s.Name)
		want := fmt.Sprintf("go test fuzz v1\nstring(%q)\n", string(s.Data))
		if write {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is missing or stale (%v); rerun %s with its -write-corpus flag", path, err, t.Name())
		}
	}
}
