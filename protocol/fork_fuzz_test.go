package protocol

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The fork keeps its fuzz targets and seed corpus here, beside the other
// decoders' (fuzz_test.go), with the same rules: every seed is named
// valid-… or invalid-…, decodes exactly when it says so, and the committed
// files under testdata/fuzz/<Target> match forkSeeds.

var forkFuzzTargets = []string{"FuzzParseFork", "FuzzParseForkText"}

// forkSeeds returns the seeds of the fork fuzz targets.
func forkSeeds(tb testing.TB) map[string][]seed {
	tb.Helper()
	fx := testFixture(tb)
	ft := testForkTokens(tb)
	out := map[string][]seed{}
	add := func(target, name string, data []byte) {
		out[target] = append(out[target], seed{name: name, data: data})
	}
	addValid := func(target, name string, data []byte) {
		add(target, "valid-"+name, data)
		add(target, "invalid-truncated-"+name, data[:len(data)-1])
		add(target, "invalid-trailing-"+name, append(append([]byte(nil), data...), 0))
	}
	mustFork := func(x, y Token) Fork {
		f, err := NewFork(x, y)
		if err != nil {
			tb.Fatal(err)
		}
		return f
	}
	enc := func(f Fork) []byte {
		b, err := f.MarshalBinary()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	tokBin := func(t Token) []byte { return t.appendTo(nil) }
	// raw builds a fork's binary form field by field, unchecked.
	raw := func(tag string, version uint8, a, b []byte) []byte {
		e := encoder{}
		e.fixed([]byte(tag))
		e.u8(version)
		e.bytes(a)
		e.bytes(b)
		return e.b
	}

	// canon is raw with the tokens in canonical order, so that a seed is
	// refused for what it is named after, not for its order.
	canon := func(x, y []byte) []byte {
		x, y = sortedPair(x, y)
		return raw(DomainFork, Version, x, y)
	}

	clients := mustFork(ft.ref, ft.other)
	sessions := mustFork(ft.ref, ft.samID)
	addValid("FuzzParseFork", "fork", enc(clients))
	addValid("FuzzParseFork", "fork-other-session", enc(sessions))
	// The largest fields; the signatures parse but do not verify, which
	// decoding does not check.
	bigA, bigB := fx.tok, fx.tok
	for _, t := range []*Token{&bigA, &bigB} {
		t.Resource = strings.Repeat("r", MaxResourceLen)
		t.Epoch = ^uint64(0)
	}
	bigA.Holder = Holder{ID: strings.Repeat("h", MaxHolderLen), Session: testSession}
	bigB.Holder = Holder{ID: strings.Repeat("h", MaxHolderLen), Session: otherHolder.Session}
	addValid("FuzzParseFork", "fork-max-fields", enc(mustFork(bigA, bigB)))

	a, b := clients.ordered()
	add("FuzzParseFork", "invalid-empty", []byte{})
	add("FuzzParseFork", "invalid-swapped", raw(DomainFork, Version, b, a))
	add("FuzzParseFork", "invalid-same-token", raw(DomainFork, Version, a, a))
	add("FuzzParseFork", "invalid-domain", raw("palisade/fork\x01", Version, a, b))
	add("FuzzParseFork", "invalid-evidence-tag", raw(DomainVote, Version, a, b))
	add("FuzzParseFork", "invalid-version-2", raw(DomainFork, 2, a, b))
	add("FuzzParseFork", "invalid-version-4", raw(DomainFork, 4, a, b))
	oneTok := raw(DomainFork, Version, a, nil)
	add("FuzzParseFork", "invalid-one-token", oneTok[:len(oneTok)-1])
	add("FuzzParseFork", "invalid-bare-token", a)
	other := ft.other
	other.Epoch++
	add("FuzzParseFork", "invalid-other-epoch", canon(tokBin(ft.ref), tokBin(other)))
	other = ft.other
	other.Resource = "invoices"
	add("FuzzParseFork", "invalid-other-resource", canon(tokBin(ft.ref), tokBin(other)))
	other = ft.other
	other.Cluster[0] ^= 1
	add("FuzzParseFork", "invalid-other-cluster", canon(tokBin(ft.ref), tokBin(other)))
	over := raw(DomainFork, Version, a, append(append([]byte(nil), b...), make([]byte, MaxTokenSize)...))
	add("FuzzParseFork", "invalid-token-over-long", over)
	badTok := append([]byte(nil), b...)
	badTok[0] = 2 // a token of the bn256 release
	add("FuzzParseFork", "invalid-token-version-2", canon(a, badTok))

	// Text.
	add("FuzzParseForkText", "valid-fork", []byte(clients.String()))
	add("FuzzParseForkText", "valid-fork-spaces", []byte(" "+sessions.String()+"\r\n"))
	add("FuzzParseForkText", "invalid-empty", []byte{})
	add("FuzzParseForkText", "invalid-prefix-only", []byte(ForkTextPrefix))
	add("FuzzParseForkText", "invalid-token-text", []byte(ft.ref.String()))
	text := clients.String()
	add("FuzzParseForkText", "invalid-padded", []byte(text+"=="))
	add("FuzzParseForkText", "invalid-line-break", []byte(text[:30]+"\n"+text[30:]))
	add("FuzzParseForkText", "invalid-over-long", []byte(ForkTextPrefix+strings.Repeat("A", MaxForkTextLen)))
	add("FuzzParseForkText", "invalid-swapped", []byte(ForkTextPrefix+base64.RawURLEncoding.EncodeToString(raw(DomainFork, Version, b, a))))
	return out
}

// sortedPair returns x and y, the smaller first.
func sortedPair(x, y []byte) ([]byte, []byte) {
	if string(x) > string(y) {
		return y, x
	}
	return x, y
}

// TestWriteForkSeedCorpus checks that testdata/fuzz holds the fork
// targets' seed corpus; with -write-corpus it writes it (see
// TestWriteSeedCorpus).
func TestWriteForkSeedCorpus(t *testing.T) {
	syncSeedCorpus(t, forkSeeds(t), forkFuzzTargets, "TestWriteForkSeedCorpus")
}

// TestForkSeedsClassified checks each fork seed decodes exactly when it is
// named valid.
func TestForkSeedsClassified(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"FuzzParseFork":     func(b []byte) error { _, err := ParseFork(b); return err },
		"FuzzParseForkText": func(b []byte) error { _, err := ParseForkText(string(b)); return err },
	}
	requireSeedsClassified(t, forkSeeds(t), decoders)
}

func FuzzParseFork(f *testing.F) {
	for _, s := range forkSeeds(f)["FuzzParseFork"] {
		if s.valid() {
			f.Add(s.data)
		}
	}
	fuzzRoundTrip(f, ParseFork, func(fk Fork) []byte {
		b, err := fk.MarshalBinary()
		if err != nil {
			panic(fmt.Sprintf("parsed fork does not marshal: %v", err))
		}
		return b
	})
}

func FuzzParseForkText(f *testing.F) {
	for _, s := range forkSeeds(f)["FuzzParseForkText"] {
		if s.valid() {
			f.Add(string(s.data))
		}
	}
	f.Fuzz(func(t *testing.T, in string) {
		fk, err := ParseForkText(in)
		if err != nil {
			if fk != (Fork{}) {
				t.Fatalf("failed parse returned %+v, want the zero value", fk)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalidField) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrInvalidField", err)
			}
			return
		}
		if out := fk.String(); out != strings.TrimSpace(in) {
			t.Fatalf("parse then String changed the text:\n in: %q\nout: %q", strings.TrimSpace(in), out)
		}
	})
}
