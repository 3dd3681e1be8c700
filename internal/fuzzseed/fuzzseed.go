// Package fuzzseed writes and reads the seed corpora that Go fuzz targets
// keep under testdata/fuzz/<Target>: files in the "go test fuzz v1" format
// holding one []byte or string argument. Tests that commit a corpus use it
// to regenerate the files and to check that each seed still decodes (or
// fails) as its name says.
package fuzzseed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// header is the first line of every corpus file.
const header = "go test fuzz v1"

// ErrFormat reports a corpus file that does not hold exactly one []byte or
// string argument.
var ErrFormat = errors.New("fuzzseed: not a one-argument corpus file")

// Bytes returns the content of a corpus file whose one argument is b.
func Bytes(b []byte) string { return fmt.Sprintf("%s\n[]byte(%q)\n", header, b) }

// String returns the content of a corpus file whose one argument is s.
func String(s string) string { return fmt.Sprintf("%s\nstring(%q)\n", header, s) }

// Parse returns the one argument of a corpus file, []byte or string.
func Parse(raw []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 2 || lines[0] != header {
		return nil, fmt.Errorf("%w: %d lines", ErrFormat, len(lines))
	}
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok {
		lit, ok = strings.CutPrefix(lines[1], "string(")
	}
	lit, ok2 := strings.CutSuffix(lit, ")")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%w: %.40q", ErrFormat, lines[1])
	}
	s, err := strconv.Unquote(lit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return []byte(s), nil
}

// Write makes dir hold exactly files (name to content, see Bytes and
// String): files of dir not named are removed.
func Write(dir string, files map[string]string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("fuzzseed: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fuzzseed: %w", err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("fuzzseed: %w", err)
		}
	}
	return nil
}

// Read returns the argument of every corpus file in dir, by file name.
func Read(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("fuzzseed: %w", err)
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("fuzzseed: %w", err)
		}
		if out[e.Name()], err = Parse(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	return out, nil
}

// ErrStale reports a committed seed file that is missing or differs from
// the seed the test makes now.
var ErrStale = errors.New("fuzzseed: seed file missing or stale")

// Sync makes sure dir holds files (name to content): with write it writes
// them, else it checks each against the file on disk and reports the first
// that is missing or differs with ErrStale. Other files of dir (inputs
// found by fuzzing) are left alone either way.
func Sync(dir string, files map[string]string, write bool) error {
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("fuzzseed: %w", err)
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		if write {
			if err := os.WriteFile(path, []byte(files[name]), 0o644); err != nil {
				return fmt.Errorf("fuzzseed: %w", err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != files[name] {
			return fmt.Errorf("%w: %s", ErrStale, path)
		}
	}
	return nil
}
