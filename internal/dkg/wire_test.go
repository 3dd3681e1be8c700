package dkg

import (
	"bytes"
	"errors"
	"flag"
	mrand "math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
	"github.com/palisade-dev/palisade/internal/fuzzseed"
	"github.com/palisade-dev/palisade/internal/transport"
)

var writeKeyCorpus = flag.Bool("write-key-corpus", false, "rewrite FuzzParseKeyRecord's seed corpus under testdata/fuzz")

// badKey is a 96-byte string in place of a ceremony key that
// parseKeyRecord must refuse, and the sentinel its refusal wraps besides
// crypto.ErrMalformedPoint.
type badKey struct {
	name string
	b    []byte
	is   error
}

// badKeys lists bad encodings in place of the valid key cur.
func badKeys(t testing.TB, cur crypto.PublicKey) []badKey {
	t.Helper()
	nonSub := bls12381test.NonSubgroupG2(3)
	offCurve := bls12381test.NotOnCurveG2(3)
	plusP, ok := bls12381test.AddModulus(cur[:])
	if !ok {
		// Another key of this ceremony whose x + p fits beside the flags.
		rnd := mrand.New(mrand.NewSource(5))
		for !ok {
			k, err := cdkg.GenerateKey(rnd)
			require.NoError(t, err)
			pk := k.Public()
			plusP, ok = bls12381test.AddModulus(pk[:])
		}
	}
	setFlags := func(set, clear byte) []byte {
		c := bytes.Clone(cur[:])
		c[0] = c[0]&^clear | set
		return c
	}
	return []badKey{
		{"subgroup", nonSub[:], crypto.ErrNotInSubgroup},
		{"identity", bls12381test.Identity(bls12381test.G2Size), bls12381.ErrIdentity},
		{"off-curve", offCurve[:], bls12381.ErrEncoding},
		{"x-plus-p", plusP, bls12381.ErrEncoding},
		{"uncompressed-flag", setFlags(0, 0x80), bls12381.ErrEncoding},
		{"infinity-flag", setFlags(0x40, 0), bls12381.ErrEncoding},
	}
}

// keyRecordSeeds is a signed key record and malformed variants of it.
func keyRecordSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	rnd := mrand.New(mrand.NewSource(1))
	id, err := transport.GenerateIdentity(rnd)
	require.NoError(t, err)
	key, err := cdkg.GenerateKey(rnd)
	require.NoError(t, err)
	k := keyRecord{PeerID: "12D3KooWExamplePeer", Key: key.Public()}
	k.Ceremony[0] = 1
	k.Sig, err = id.Sign(k.signedBytes())
	require.NoError(t, err)
	valid := k.marshal()
	keyAt := 1 + 32 + 2 + len(k.PeerID)
	out := map[string][]byte{
		"valid":                 valid,
		"invalid-empty":         {},
		"invalid-version":       append([]byte{9}, valid[1:]...),
		"invalid-truncated":     valid[:len(valid)-1],
		"invalid-truncated-key": valid[:keyAt+crypto.PublicKeySize/2],
		"invalid-trailing":      append(bytes.Clone(valid), 0),
		"invalid-no-peer":       append(append(bytes.Clone(valid[:33]), 0, 0), valid[keyAt:]...),
		"invalid-no-sig":        append(bytes.Clone(valid[:keyAt+crypto.PublicKeySize]), 0, 0),
	}
	for _, bk := range badKeys(t, k.Key) {
		c := bytes.Clone(valid)
		copy(c[keyAt:], bk.b)
		out["invalid-point-"+bk.name] = c
	}
	return out
}

func parseAndMarshal(b []byte) ([]byte, error) {
	k, err := parseKeyRecord(b)
	if err != nil {
		return nil, err
	}
	return k.marshal(), nil
}

// TestKeyRecordPointsRefused: a ceremony key record whose key is outside
// the subgroup, the identity, an x with no point or not below p, or has
// bad flag bits does not parse, whoever signed it.
func TestKeyRecordPointsRefused(t *testing.T) {
	seeds := keyRecordSeeds(t)
	valid, err := parseKeyRecord(seeds["valid"])
	require.NoError(t, err)
	for _, bk := range badKeys(t, valid.Key) {
		t.Run(bk.name, func(t *testing.T) {
			_, err := parseKeyRecord(seeds["invalid-point-"+bk.name])
			require.ErrorIs(t, err, errMalformed)
			require.ErrorIs(t, err, crypto.ErrMalformedPoint)
			require.ErrorIs(t, err, bk.is)
		})
	}
}

// TestKeyRecordSeedCorpus checks FuzzParseKeyRecord's committed corpus:
// every file parses exactly when its name says "valid". With
// -write-key-corpus it writes the corpus first:
//
//	go test ./internal/dkg -run TestKeyRecordSeedCorpus -write-key-corpus
func TestKeyRecordSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseKeyRecord")
	if *writeKeyCorpus {
		files := map[string]string{}
		for name, b := range keyRecordSeeds(t) {
			files[name] = fuzzseed.Bytes(b)
		}
		require.NoError(t, fuzzseed.Write(dir, files))
	}
	seeds, err := fuzzseed.Read(dir)
	require.NoError(t, err, "run: go test ./internal/dkg -run TestKeyRecordSeedCorpus -write-key-corpus")
	var valid, invalid int
	for name, s := range seeds {
		out, err := parseAndMarshal(s)
		switch {
		case strings.HasPrefix(name, "valid"):
			valid++
			require.NoError(t, err, name)
			require.Equal(t, s, out, name)
		case strings.HasPrefix(name, "invalid"):
			invalid++
			require.ErrorIs(t, err, errMalformed, name)
			if strings.HasPrefix(name, "invalid-point-") {
				require.ErrorIs(t, err, crypto.ErrMalformedPoint, name)
			}
		}
	}
	require.Positive(t, valid)
	require.Positive(t, invalid)
}

// FuzzParseKeyRecord: a key record that parses marshals back to the same
// bytes (so its key is canonical); one that does not is errMalformed.
func FuzzParseKeyRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := parseAndMarshal(b)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			return
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("parse then marshal changed the bytes:\n%x\n%x", b, out)
		}
	})
}

// TestWireBounds checks the ceremony's size caps against the largest
// items crypto/dkg makes with 96-byte points: a justification for t =
// crypto.MaxNodes (and even a deal) fits a list item, a deal reply fits a
// frame, and so does a list of N² responses for N = 150 members.
func TestWireBounds(t *testing.T) {
	const header = 2 + 4 // version, kind, dealer index
	maxDeal := header + crypto.PublicKeySize + cdkg.SchnorrSignatureSize + cdkg.NonceSize + 4 + cdkg.MaxCipherSize + cdkg.SchnorrSignatureSize
	maxJust := header + cdkg.SessionIDSize + 4 + cdkg.SessionIDSize + 4 + crypto.ScalarSize + 4 + 2 +
		crypto.MaxNodes*crypto.PublicKeySize + cdkg.SchnorrSignatureSize
	response := header + cdkg.SessionIDSize + 4 + 1 + cdkg.SchnorrSignatureSize
	require.Equal(t, 171, response)
	require.LessOrEqual(t, maxDeal, maxItem)
	require.LessOrEqual(t, maxJust, maxItem)
	require.LessOrEqual(t, 1+maxDeal, MaxFrameSize)
	const n = 150
	require.LessOrEqual(t, 1+4+n*n*(4+response), MaxFrameSize)
}
