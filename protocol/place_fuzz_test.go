package protocol

import (
	"strings"
	"testing"
)

// The signed place keeps its fuzz target and seed corpus here, beside the
// other decoders' (fuzz_test.go), with the same rules: every seed is
// named valid-… or invalid-…, decodes exactly when it says so, and the
// committed files under testdata/fuzz/<Target> match placeSeeds. (The
// Wait messages, which carry places, are FuzzWaitRequest and
// FuzzWaitReply in fuzz_test.go.)

var placeFuzzTargets = []string{"FuzzSignedPlace"}

// placeSeeds returns the seeds of the place fuzz targets.
func placeSeeds(tb testing.TB) map[string][]seed {
	tb.Helper()
	fx := testFixture(tb)
	out := map[string][]seed{}
	add := func(target, name string, data []byte) {
		out[target] = append(out[target], seed{name: name, data: data})
	}
	addValid := func(target, name string, data []byte) {
		add(target, "valid-"+name, data)
		add(target, "invalid-truncated-"+name, data[:len(data)-1])
		add(target, "invalid-trailing-"+name, append(append([]byte(nil), data...), 0))
	}
	p := testClaim(fx, 41, 3)[0]
	addValid("FuzzSignedPlace", "place", p.Marshal())
	big := p
	big.Resource = strings.Repeat("r", MaxResourceLen)
	big.Holder.ID = strings.Repeat("h", MaxHolderLen)
	big.Cohort = ^uint64(0)
	big.Member = 1 << 16
	addValid("FuzzSignedPlace", "max-fields", big.Marshal())
	short := p
	short.Sig = []byte{1}
	addValid("FuzzSignedPlace", "short-unchecked-sig", short.Marshal())

	cl := p.Cluster[:]
	ref := wref(p.Holder)
	sig := wstr(string(p.Sig))
	add("FuzzSignedPlace", "invalid-member-0", wire(wu64(0), cl, wstr(p.Resource), ref, wu64(41), sig))
	add("FuzzSignedPlace", "invalid-member-too-large", wire(wu64(1<<16+1), cl, wstr(p.Resource), ref, wu64(41), sig))
	add("FuzzSignedPlace", "invalid-cohort-0", wire(wu64(3), cl, wstr(p.Resource), ref, wu64(0), sig))
	add("FuzzSignedPlace", "invalid-no-holder", wire(wu64(3), cl, wstr(p.Resource), wref(HolderRef{}), wu64(41), sig))
	add("FuzzSignedPlace", "invalid-no-signature", wire(wu64(3), cl, wstr(p.Resource), ref, wu64(41), wstr("")))
	add("FuzzSignedPlace", "invalid-signature-too-long", wire(wu64(3), cl, wstr(p.Resource), ref, wu64(41), wstr(strings.Repeat("s", MaxPlaceSigLen+1))))
	add("FuzzSignedPlace", "invalid-resource-rlo", wire(wu64(3), cl, wstr("orders-\u202egpj.exe"), ref, wu64(41), sig))
	add("FuzzSignedPlace", "invalid-holder-control", wire(wu64(3), cl, wstr(p.Resource), wref(HolderRef{ID: "h\x00", Session: p.Holder.Session}), wu64(41), sig))
	add("FuzzSignedPlace", "invalid-empty", []byte{})
	return out
}

// TestWritePlaceSeedCorpus checks that testdata/fuzz holds the place
// targets' seed corpus; with -write-corpus it writes it (see
// TestWriteSeedCorpus).
func TestWritePlaceSeedCorpus(t *testing.T) {
	syncSeedCorpus(t, placeSeeds(t), placeFuzzTargets, "TestWritePlaceSeedCorpus")
}

// TestPlaceSeedsClassified checks each place seed decodes exactly when it
// is named valid.
func TestPlaceSeedsClassified(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"FuzzSignedPlace": func(b []byte) error { _, err := UnmarshalSignedPlace(b); return err },
	}
	requireSeedsClassified(t, placeSeeds(t), decoders)
}

func FuzzSignedPlace(f *testing.F) {
	for _, s := range placeSeeds(f)["FuzzSignedPlace"] {
		if s.valid() {
			f.Add(s.data)
		}
	}
	fuzzRoundTrip(f, UnmarshalSignedPlace, marshalOf[SignedPlace])
}
