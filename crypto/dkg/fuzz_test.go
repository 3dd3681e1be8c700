package dkg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/fuzzseed"
)

var writeDKGCorpus = flag.Bool("write-dkg-corpus", false, "rewrite the DKG decoders' seed corpus under testdata/fuzz")

var dkgFuzzTargets = map[string]func([]byte) ([]byte, error){
	"FuzzDecodeDeal": func(b []byte) ([]byte, error) {
		d, err := decodeDeal(b)
		if err != nil {
			if d != nil {
				return nil, errors.New("non-nil deal with an error")
			}
			return nil, err
		}
		return encodeDeal(d)
	},
	"FuzzDecodeResponse": func(b []byte) ([]byte, error) {
		r, err := decodeResponse(b)
		if err != nil {
			if r != nil {
				return nil, errors.New("non-nil response with an error")
			}
			return nil, err
		}
		return encodeResponse(r)
	},
	"FuzzDecodeJustification": func(b []byte) ([]byte, error) {
		j, err := decodeJustification(b)
		if err != nil {
			if j != nil {
				return nil, errors.New("non-nil justification with an error")
			}
			return nil, err
		}
		return encodeJustification(j)
	},
}

// dkgSeeds makes valid messages from a real 4-member ceremony with one
// corrupted deal (so there is a complaint and a justification), and
// invalid variants of each: bad header, truncated, trailing bytes, bad
// scalars and counts, and every point replaced by each encoding that
// badG2 lists (outside the subgroup, identity, no point, x + p, flags).
func dkgSeeds(t testing.TB) map[string]map[string][]byte {
	ms := newMembers(t, 4)
	var dkgs []*DKG
	for _, m := range ms {
		d, err := New(Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3})
		require.NoError(t, err)
		dkgs = append(dkgs, d)
	}
	deals, _, err := dkgs[0].Deals()
	require.NoError(t, err)
	resp, err := dkgs[1].ProcessDeal(deals[2])
	require.NoError(t, err)
	// A complaint: member 3 gets a deal whose share is wrong.
	badDeal, err := dkgs[0].CorruptDeal(3)
	require.NoError(t, err)
	complaint, err := dkgs[2].ProcessDeal(badDeal)
	require.NoError(t, err)
	just, err := dkgs[0].ProcessResponse(complaint)
	require.NoError(t, err)
	require.NotNil(t, just)

	variants := func(target string, valid []byte, extra map[string][]byte) map[string][]byte {
		out := map[string][]byte{
			"valid":                    valid,
			"invalid-empty":            {},
			"invalid-version":          append([]byte{9}, valid[1:]...),
			"invalid-version-1":        append([]byte{1}, valid[1:]...),
			"invalid-kind":             append([]byte{valid[0], 7}, valid[2:]...),
			"invalid-truncated":        valid[:len(valid)-1],
			"invalid-truncated-header": valid[:6],
			"invalid-truncated-point":  valid[:len(valid)-SchnorrSignatureSize+crypto.PublicKeySize/2],
			"invalid-trailing":         append(bytes.Clone(valid), 0),
			"invalid-index-range":      append(append([]byte{valid[0], valid[1]}, 0xff, 0xff, 0xff, 0xff), valid[6:]...),
		}
		for k, v := range extra {
			out[k] = v
		}
		// Every point replaced by each bad encoding.
		for i, sp := range pointSpots(target, valid) {
			cur := valid[sp.at : sp.at+crypto.PublicKeySize]
			for _, bp := range badG2(t, uint64(11+i), cur) {
				out["invalid-point-"+sp.name+"-"+bp.name] = withPoint(valid, sp.at, bp.b)
			}
		}
		return out
	}
	flip := func(b []byte, at int) []byte {
		c := bytes.Clone(b)
		c[at] ^= 0xff
		return c
	}
	return map[string]map[string][]byte{
		"FuzzDecodeDeal": variants("FuzzDecodeDeal", deals[2], map[string][]byte{
			"valid-corrupt-share": badDeal,
			"invalid-dh-key":      flip(deals[2], 6),
			"invalid-cipher-len":  flip(deals[2], 6+crypto.PublicKeySize+SchnorrSignatureSize+NonceSize),
			"invalid-cipher-cap": func() []byte {
				c := bytes.Clone(deals[2])
				binary.BigEndian.PutUint32(c[6+crypto.PublicKeySize+SchnorrSignatureSize+NonceSize:], MaxCipherSize+1)
				return c
			}(),
			"invalid-dh-sig-scalar": func() []byte {
				c := bytes.Clone(deals[2])
				copy(c[6+crypto.PublicKeySize+crypto.PublicKeySize:], bytes.Repeat([]byte{0xff}, crypto.ScalarSize))
				return c
			}(),
		}),
		"FuzzDecodeResponse": variants("FuzzDecodeResponse", resp, map[string][]byte{
			"valid-complaint": complaint,
			"invalid-status":  func() []byte { c := bytes.Clone(resp); c[6+SessionIDSize+4] = 2; return c }(),
			"invalid-sig":     flip(resp, len(resp)-SchnorrSignatureSize),
		}),
		"FuzzDecodeJustification": variants("FuzzDecodeJustification", just, map[string][]byte{
			"invalid-share-scalar": func() []byte {
				c := bytes.Clone(just)
				copy(c[6+32+4+32+4:], bytes.Repeat([]byte{0xff}, crypto.ScalarSize))
				return c
			}(),
			"invalid-commitment": flip(just, len(just)-SchnorrSignatureSize-10),
			"invalid-commitment-count": func() []byte {
				c := bytes.Clone(just)
				c[6+32+4+32+4+crypto.ScalarSize+4+1]++
				return c
			}(),
		}),
	}
}

// TestDKGSeedCorpus checks the committed seed corpus: every file decodes
// exactly when its name says "valid". With -write-dkg-corpus it writes a
// fresh corpus first (messages carry random nonces, so it differs from run
// to run):
//
//	go test ./crypto/dkg -run TestDKGSeedCorpus -write-dkg-corpus
func TestDKGSeedCorpus(t *testing.T) {
	if *writeDKGCorpus {
		for target, seeds := range dkgSeeds(t) {
			files := map[string]string{}
			for name, b := range seeds {
				files[name] = fuzzseed.Bytes(b)
			}
			require.NoError(t, fuzzseed.Write(filepath.Join("testdata", "fuzz", target), files))
		}
	}
	for target, decode := range dkgFuzzTargets {
		seeds, err := fuzzseed.Read(filepath.Join("testdata", "fuzz", target))
		require.NoError(t, err, "run: go test ./crypto/dkg -run TestDKGSeedCorpus -write-dkg-corpus")
		var valid, invalid int
		for name, b := range seeds {
			out, err := decode(b)
			if strings.HasPrefix(name, "valid") {
				valid++
				require.NoError(t, err, "%s/%s", target, name)
				require.Equal(t, b, out, "%s/%s re-encodes differently", target, name)
			} else if strings.HasPrefix(name, "invalid") {
				invalid++
				require.ErrorIs(t, err, ErrMalformed, "%s/%s", target, name)
				if strings.HasPrefix(name, "invalid-point-") {
					require.ErrorIs(t, err, crypto.ErrMalformedPoint, "%s/%s", target, name)
				}
			}
		}
		require.Positive(t, valid, target)
		require.Positive(t, invalid, target)
	}
}

func fuzzDKG(f *testing.F, target string) {
	decode := dkgFuzzTargets[target]
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("decode then encode changed the bytes:\n%x\n%x", b, out)
		}
	})
}

func FuzzDecodeDeal(f *testing.F)          { fuzzDKG(f, "FuzzDecodeDeal") }
func FuzzDecodeResponse(f *testing.F)      { fuzzDKG(f, "FuzzDecodeResponse") }
func FuzzDecodeJustification(f *testing.F) { fuzzDKG(f, "FuzzDecodeJustification") }
