package crypto

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	mrand "math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json")

// seeded returns a deterministic randomness source: tests must not depend on
// crypto/rand.
func seeded(seed int64) *mrand.Rand { return mrand.New(mrand.NewSource(seed)) }

func deal(t testing.TB, n int) (*GroupKey, []*Share) {
	t.Helper()
	_, th := FaultThreshold(n)
	gk, shares, err := Deal(seeded(int64(n)), n, th)
	require.NoError(t, err)
	return gk, shares
}

func signAll(t testing.TB, shares []*Share, msg []byte) []PartialSig {
	t.Helper()
	out := make([]PartialSig, len(shares))
	for i, s := range shares {
		p, err := s.Sign(msg)
		require.NoError(t, err)
		out[i] = p
	}
	return out
}

type golden struct {
	N           int      `json:"n"`
	T           int      `json:"t"`
	Commitments []string `json:"commitments"`
	Message     string   `json:"message"`
	Partials    []string `json:"partials"`
	Signature   string   `json:"signature"`
}

// TestGolden pins the byte-level output of dealing, signing and combining, so
// that a dependency upgrade cannot silently change what verifies. It checks
// nothing independently: testdata/golden.json is written by this same code
// (go test -run TestGolden -update), so it only guards against unintended
// change. TestGoldenOtherImplementation checks the pinned values with
// gnark-crypto's BLS12-381 called directly (not circl, which signs), and the verifier
// package's TestTokenVectorsOtherImplementation does the same for the token
// vectors (verifier/testdata/vectors).
func TestGolden(t *testing.T) {
	gk, shares := deal(t, 4)
	msg := []byte("palisade golden vector")
	partials := signAll(t, shares, msg)
	sig, bad, err := gk.Combine(msg, partials)
	require.NoError(t, err)
	require.Empty(t, bad)
	got := golden{N: 4, T: 3, Message: string(msg), Signature: hex.EncodeToString(sig[:])}
	for _, c := range gk.Commitments() {
		got.Commitments = append(got.Commitments, hex.EncodeToString(c))
	}
	for _, p := range partials {
		got.Partials = append(got.Partials, hex.EncodeToString(p.Marshal()))
	}
	path := filepath.Join("testdata", "golden.json")
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var want golden
	require.NoError(t, json.Unmarshal(b, &want))
	require.Equal(t, want, got)

	// The vector also verifies from its encoded form alone.
	commits := make([][]byte, len(want.Commitments))
	for i, c := range want.Commitments {
		commits[i], err = hex.DecodeString(c)
		require.NoError(t, err)
	}
	gk2, err := NewGroupKey(want.N, commits)
	require.NoError(t, err)
	rawSig, err := hex.DecodeString(want.Signature)
	require.NoError(t, err)
	s, err := ParseSignature(rawSig)
	require.NoError(t, err)
	require.NoError(t, gk2.Verify([]byte(want.Message), s))
	require.NoError(t, gk2.PublicKey().Verify([]byte(want.Message), s))
}

// TestGoldenOtherImplementation checks testdata/golden.json without this
// package's signing code (circl): with gnark-crypto's BLS12-381 called
// directly, its RFC 9380 hash_to_G1 under the ciphersuite's DST and one
// pairing check per signature. Every partial verifies under its share's
// public key, the sum of commitment j times index^j, and the signature
// under the group key, the first commitment. BLS signatures are unique, so
// this also checks the combination.
func TestGoldenOtherImplementation(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(b, &g))
	require.True(t, len(g.Commitments) == g.T && len(g.Partials) == g.N)
	mustHex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	var commits []gnark.G2Jac
	for i, c := range g.Commitments {
		var pt gnark.G2Affine
		_, err := pt.SetBytes(mustHex(c))
		require.NoError(t, err, "commitment %d", i)
		var j gnark.G2Jac
		j.FromAffine(&pt)
		commits = append(commits, j)
	}
	hm, err := gnark.HashToG1([]byte(g.Message), []byte("BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"))
	require.NoError(t, err)
	_, _, _, g2 := gnark.Generators()
	var negG2 gnark.G2Affine
	negG2.Neg(&g2)
	verifies := func(pk *gnark.G2Jac, sig []byte) bool {
		var s gnark.G1Affine
		if _, err := s.SetBytes(sig); err != nil {
			return false
		}
		var pka gnark.G2Affine
		pka.FromJacobian(pk)
		ok, err := gnark.PairingCheck([]gnark.G1Affine{s, hm}, []gnark.G2Affine{negG2, pka})
		return err == nil && ok
	}
	for i, p := range g.Partials {
		raw := mustHex(p)
		require.Len(t, raw, 2+48)
		require.Equal(t, i+1, int(raw[0])<<8|int(raw[1]), "partial %d index", i)
		pk, x := commits[0], big.NewInt(int64(i+1))
		for j, xj := 1, new(big.Int).Set(x); j < len(commits); j, xj = j+1, xj.Mul(xj, x) {
			var term gnark.G2Jac
			term.ScalarMultiplication(&commits[j], xj)
			pk.AddAssign(&term)
		}
		require.True(t, verifies(&pk, raw[2:]), "partial %d: e(sig_i, -g2)·e(H(m), PK_i) == 1", i+1)
	}
	require.Len(t, mustHex(g.Signature), 48)
	require.True(t, verifies(&commits[0], mustHex(g.Signature)), "e(sig, -g2)·e(H(m), PK) == 1")
	require.False(t, verifies(&commits[1], mustHex(g.Signature)), "not under another key")
}

func TestCombineAnyQuorumGivesSameSignature(t *testing.T) {
	for _, n := range []int{4, 7, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			gk, shares := deal(t, n)
			msg := []byte("resource/epoch/holder")
			ps := signAll(t, shares, msg)
			first, _, err := gk.Combine(msg, ps[:gk.Threshold()])
			require.NoError(t, err)
			last, _, err := gk.Combine(msg, ps[n-gk.Threshold():])
			require.NoError(t, err)
			require.Equal(t, first, last, "BLS threshold signatures are unique")
			require.NoError(t, gk.Verify(msg, first))
			require.ErrorIs(t, gk.Verify([]byte("other message"), first), ErrInvalidSignature)
		})
	}
}

func TestCombineDropsBadPartialsAndNamesThem(t *testing.T) {
	gk, shares := deal(t, 7)
	msg := []byte("m")
	ps := signAll(t, shares, msg)
	// Node 2 signs another message; node 5 sends node 6's signature under its
	// own index.
	wrong, err := shares[1].Sign([]byte("not m"))
	require.NoError(t, err)
	ps[1] = wrong
	ps[4] = PartialSig{Index: 5, Sig: ps[5].Sig}
	sig, bad, err := gk.Combine(msg, ps)
	require.NoError(t, err)
	require.ElementsMatch(t, []int{2, 5}, bad)
	require.NoError(t, gk.Verify(msg, sig))
}

func TestCombineNotEnough(t *testing.T) {
	gk, shares := deal(t, 4)
	msg := []byte("m")
	ps := signAll(t, shares, msg)
	_, _, err := gk.Combine(msg, ps[:2])
	require.ErrorIs(t, err, ErrNotEnoughPartials)

	// Three partials, one bad: not enough valid ones, and the bad one is named.
	bad3, err := shares[2].Sign([]byte("x"))
	require.NoError(t, err)
	_, bad, err := gk.Combine(msg, []PartialSig{ps[0], ps[1], bad3})
	require.ErrorIs(t, err, ErrNotEnoughPartials)
	require.Equal(t, []int{3}, bad)

	// A duplicated index counts once and is reported.
	_, bad, err = gk.Combine(msg, []PartialSig{ps[0], ps[1], ps[1]})
	require.ErrorIs(t, err, ErrNotEnoughPartials)
	require.Equal(t, []int{2}, bad)

	// An index outside the group is refused, not interpolated.
	out := PartialSig{Index: 9, Sig: ps[2].Sig}
	_, bad, err = gk.Combine(msg, []PartialSig{ps[0], ps[1], out})
	require.ErrorIs(t, err, ErrNotEnoughPartials)
	require.Equal(t, []int{9}, bad)
	require.ErrorIs(t, gk.VerifyPartial(msg, out), ErrBadIndex)
}

// TestEncodingAttacks alters a valid signature and a valid partial in
// every way a BLS12-381 encoding can be bent and checks where each is
// refused: byte-level faults already at parsing, the others at
// verification, and none ever verifies.
func TestEncodingAttacks(t *testing.T) {
	gk, shares := deal(t, 4)
	msg := []byte("attack")
	partials := signAll(t, shares, msg)
	sig, _, err := gk.Combine(msg, partials)
	require.NoError(t, err)
	flip := func(mask byte) []byte {
		b := append([]byte(nil), sig[:]...)
		b[0] ^= mask
		return b
	}
	nonSub := bls12381test.NonSubgroupG1(1)
	offCurve := bls12381test.NotOnCurveG1(1)
	cases := []struct {
		name      string
		enc       []byte
		atParse   bool  // refused by ParseSignature already
		verifyErr error // what Verify reports otherwise
	}{
		{"compression flag cleared", flip(0x80), true, nil},
		{"infinity flag set", flip(0x40), true, nil},
		{"identity", bls12381test.Identity(SignatureSize), true, nil},
		{"sort flag flipped: the negated point", flip(0x20), false, ErrInvalidSignature},
		{"outside the subgroup", nonSub[:], false, ErrNotInSubgroup},
		{"x with no point", offCurve[:], false, ErrMalformedPoint},
		{"short", sig[:SignatureSize-1], true, nil},
	}
	if x, ok := bls12381test.AddModulus(sig[:]); ok {
		cases = append(cases, struct {
			name      string
			enc       []byte
			atParse   bool
			verifyErr error
		}{"x + p", x, true, nil})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSignature(c.enc)
			if c.atParse {
				require.ErrorIs(t, err, ErrMalformedPoint)
				return
			}
			require.NoError(t, err)
			s := Signature(c.enc)
			require.ErrorIs(t, gk.Verify(msg, s), c.verifyErr)
			require.ErrorIs(t, gk.PublicKey().Verify(msg, s), c.verifyErr)
			require.ErrorIs(t, gk.Prepare(msg).Verify(s), c.verifyErr)
			bad, err := gk.VerifyBatch(nil, [][]byte{msg, msg}, []Signature{sig, s})
			require.NoError(t, err)
			require.Equal(t, []int{1}, bad)
			// The same bytes as node 1's partial: refused, node 1 named.
			forged := append([]PartialSig{{Index: 1, Sig: s}}, partials[1:]...)
			require.Error(t, gk.VerifyPartial(msg, forged[0]))
			got, bad, err := gk.Combine(msg, forged)
			require.NoError(t, err, "three honest partials remain")
			require.Equal(t, []int{1}, bad)
			require.Equal(t, sig, got)
		})
	}
}

func TestStrictDecoding(t *testing.T) {
	gk, shares := deal(t, 4)
	msg := []byte("m")
	p, err := shares[0].Sign(msg)
	require.NoError(t, err)
	raw := p.Marshal()
	cases := map[string][]byte{
		"empty":          nil,
		"short":          raw[:PartialSize-1],
		"long":           append(append([]byte{}, raw...), 0),
		"index zero":     append([]byte{0, 0}, raw[2:]...),
		"index too big":  append([]byte{0xff, 0xff}, raw[2:]...),
		"identity":       append([]byte{0, 1}, make([]byte, SignatureSize)...),
		"not on curve":   append([]byte{0, 1}, bytes.Repeat([]byte{7}, SignatureSize)...),
		"all ones coord": append([]byte{0, 1}, bytes.Repeat([]byte{0xff}, SignatureSize)...),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePartial(b)
			require.Error(t, err)
			require.Equal(t, PartialSig{}, got)
		})
	}
	back, err := ParsePartial(raw)
	require.NoError(t, err)
	require.True(t, back.Equal(p))
	require.NoError(t, gk.VerifyPartial(msg, back))

	pk := gk.PublicKey()
	_, err = ParsePublicKey(pk[:PublicKeySize-1])
	require.ErrorIs(t, err, ErrMalformedPoint)
	_, err = ParsePublicKey(make([]byte, PublicKeySize))
	require.ErrorIs(t, err, ErrMalformedPoint)
	got, err := ParsePublicKey(pk[:])
	require.NoError(t, err)
	require.True(t, got.Equal(pk))
}

func TestShareNeverPrintsSecret(t *testing.T) {
	_, shares := deal(t, 4)
	s := shares[0]
	raw, err := s.MarshalBinary()
	require.NoError(t, err)
	secretHex := hex.EncodeToString(raw[2:])
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		out := fmt.Sprintf(verb, s)
		require.NotContains(t, strings.ToLower(out), secretHex[:16], verb)
		require.Contains(t, out, "redacted", verb)
	}
	back, err := ParseShare(raw)
	require.NoError(t, err)
	require.Equal(t, s.Index(), back.Index())
	msg := []byte("m")
	a, err := s.Sign(msg)
	require.NoError(t, err)
	b, err := back.Sign(msg)
	require.NoError(t, err)
	require.True(t, a.Equal(b))
}

func TestCheckShare(t *testing.T) {
	gk, shares := deal(t, 4)
	for _, s := range shares {
		require.NoError(t, gk.CheckShare(s))
	}
	other, otherShares := deal(t, 7)
	require.Error(t, gk.CheckShare(otherShares[0]))
	require.False(t, gk.Equal(other))
}

func TestDealParameters(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {3, 4}, {4, 0}, {MaxNodes + 1, 3}} {
		_, _, err := Deal(seeded(1), c[0], c[1])
		require.ErrorIs(t, err, ErrBadParameters, "n=%d t=%d", c[0], c[1])
	}
	_, _, err := Deal(bytes.NewReader(make([]byte, 10)), 4, 3)
	require.Error(t, err, "short randomness must fail, not panic")
}

func BenchmarkPartialSign(b *testing.B) {
	_, shares := deal(b, 4)
	msg := []byte("benchmark message of typical length: cluster|resource|epoch|holder")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := shares[0].Sign(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	gk, shares := deal(b, 4)
	msg := []byte("benchmark message")
	sig, _, err := gk.Combine(msg, signAll(b, shares, msg))
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := gk.Verify(msg, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCombineVerify measures the optimistic path: one unchecked
// interpolation of t partials and one verification.
func BenchmarkCombineVerify(b *testing.B) {
	for _, n := range []int{4, 7, 10} {
		gk, shares := deal(b, n)
		msg := []byte("benchmark message")
		ps := signAll(b, shares, msg)[:gk.Threshold()]
		b.Run(fmt.Sprintf("t=%d", gk.Threshold()), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, _, err := gk.Combine(msg, ps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCombineOneBad measures the pessimistic path taken when one of the
// first t partials is invalid.
func BenchmarkCombineOneBad(b *testing.B) {
	gk, shares := deal(b, 4)
	msg := []byte("benchmark message")
	ps := signAll(b, shares, msg)
	ps[0], _ = shares[0].Sign([]byte("other"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := gk.Combine(msg, ps); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFaultThresholdQuorumsIntersect: for every n, two quorums of t share
// at least f+1 nodes (so one honest node would have to vote twice for two
// tokens to exist, S1), and n-f nodes still make a quorum (liveness).
func TestFaultThresholdQuorumsIntersect(t *testing.T) {
	for n := 1; n <= 100; n++ {
		f, th := FaultThreshold(n)
		require.Equal(t, (n-1)/3, f, "n=%d", n)
		require.GreaterOrEqual(t, 2*th-n, f+1, "n=%d t=%d: quorums overlap in too few nodes", n, th)
		require.LessOrEqual(t, th, n-f, "n=%d t=%d: f crashed nodes block every quorum", n, th)
		if n%3 == 1 {
			require.Equal(t, 2*f+1, th, "n=3f+1 gives t=2f+1")
		}
	}
}

// TestPreparedVerify: a check prepared from the message accepts exactly
// what Verify accepts.
func TestPreparedVerify(t *testing.T) {
	key, shares := deal(t, 4)
	msg := []byte("prepared statement")
	sig, _, err := key.Combine(msg, signAll(t, shares[:3], msg))
	require.NoError(t, err)
	pk := key.PublicKey()
	require.NoError(t, pk.Prepare(msg).Verify(sig))
	require.ErrorIs(t, pk.Prepare([]byte("another statement")).Verify(sig), ErrInvalidSignature)
	other, _, err := key.Combine([]byte("x"), signAll(t, shares[:3], []byte("x")))
	require.NoError(t, err)
	require.ErrorIs(t, pk.Prepare(msg).Verify(other), ErrInvalidSignature)
	var zero Signature
	require.ErrorIs(t, pk.Prepare(msg).Verify(zero), ErrMalformedPoint)
}
