package bls12381

import (
	"bytes"
	"errors"
	"math/big"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

// Compressed generators, from the ZCash serialization notes (and
// draft-irtf-cfrg-pairing-friendly-curves): every library must agree.
const (
	g1GenHex = "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"
	g2GenHex = "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e" +
		"024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"
)

// decodeCase is one input to the strict decoders and what they must say.
// wantKyber is what the kyber adapters' UnmarshalBinary must say: the same,
// except that it accepts the identity.
type decodeCase struct {
	name      string
	in        []byte
	want      error // nil: accepted
	wantKyber error
}

func with(b []byte, f func(b []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

func g1Cases(t *testing.T) []decodeCase {
	valid := Sign(new(Scalar).SetInt64(12345), []byte("decode")).p.BytesCompressed()
	inf := make([]byte, G1Size)
	inf[0] = 0xc0
	nsg := nonSubgroupG1(t)
	off := notOnCurveG1(t)
	xp := append([]byte(nil), fieldModulus[:]...) // x = p
	xp[0] |= flagCompressed
	xmax := make([]byte, G1Size) // x = 2^381 - 1
	for i := range xmax {
		xmax[i] = 0xff
	}
	xmax[0] = 0x9f
	order3 := make([]byte, G1Size) // (0, 2): a point of order 3
	order3[0] = flagCompressed
	order3neg := with(order3, func(b []byte) { b[0] |= flagSort }) // (0, -2)

	return []decodeCase{
		{"valid", valid, nil, nil},
		{"generator", mustHex(t, g1GenHex), nil, nil},
		{"valid other sort flag (the negation)", with(valid, func(b []byte) { b[0] ^= flagSort }), nil, nil},
		{"trailing byte", append(append([]byte(nil), valid...), 0), ErrEncoding, ErrEncoding},
		{"truncated", valid[:G1Size-1], ErrEncoding, ErrEncoding},
		{"empty", nil, ErrEncoding, ErrEncoding},
		{"uncompressed form", Sign(new(Scalar).SetInt64(12345), []byte("decode")).p.Bytes(), ErrEncoding, ErrEncoding},
		{"compression flag clear", with(valid, func(b []byte) { b[0] &^= flagCompressed }), ErrEncoding, ErrEncoding},
		{"identity", inf, ErrIdentity, nil},
		{"identity with sort flag", with(inf, func(b []byte) { b[0] |= flagSort }), ErrEncoding, ErrEncoding},
		{"identity without compression flag", with(inf, func(b []byte) { b[0] &^= flagCompressed }), ErrEncoding, ErrEncoding},
		{"identity with a low bit of byte 0", with(inf, func(b []byte) { b[0] |= 1 }), ErrEncoding, ErrEncoding},
		{"identity with a non-zero last byte", with(inf, func(b []byte) { b[G1Size-1] = 1 }), ErrEncoding, ErrEncoding},
		{"x = p", xp, ErrEncoding, ErrEncoding},
		{"x = p, sort flag", with(xp, func(b []byte) { b[0] |= flagSort }), ErrEncoding, ErrEncoding},
		{"x = 2^381-1", xmax, ErrEncoding, ErrEncoding},
		{"x + p of a valid point", malleated(t,
			func(k int64) []byte {
				return new(G1Point).Mul(new(Scalar).SetInt64(k), nil).(*G1Point).p.BytesCompressed()
			},
			func(b []byte) []byte { return b }), ErrEncoding, ErrEncoding},
		{"x off the curve", off[:], ErrEncoding, ErrEncoding},
		{"on the curve, not in G1", nsg[:], ErrNotInSubgroup, ErrNotInSubgroup},
		{"(0, 2), order 3", order3, ErrNotInSubgroup, ErrNotInSubgroup},
		{"(0, -2), order 3", order3neg, ErrNotInSubgroup, ErrNotInSubgroup},
		{"G2 point", mustHex(t, g2GenHex), ErrEncoding, ErrEncoding},
	}
}

// addP returns the encoding of x+p, the classic malleability of a decoder
// that does not check x < p, if it still fits under the flags.
func addP(enc []byte) ([]byte, bool) {
	x := new(big.Int).SetBytes(with(enc, func(b []byte) { b[0] &^= flagMask }))
	x.Add(x, bigP)
	out := make([]byte, len(enc))
	x.FillBytes(out)
	if out[0]&flagMask != 0 {
		return nil, false
	}
	out[0] |= enc[0] & flagMask
	return out, true
}

// malleated returns x+p for the first point k·g (k = 1, 2, ...) whose x+p
// fits in 381 bits; enc returns the compressed encoding of k·g and coord
// the bytes of the coordinate to malleate.
func malleated(t *testing.T, enc func(k int64) []byte, coord func([]byte) []byte) []byte {
	t.Helper()
	for k := int64(1); k < 1000; k++ {
		b := enc(k)
		c := coord(b)
		if m, ok := addP(c); ok {
			copy(c, m)
			return b
		}
	}
	t.Fatal("no point with a small enough x")
	return nil
}

func g2Cases(t *testing.T) []decodeCase {
	var sk Scalar
	sk.SetInt64(6789)
	var pk G2Point
	pk.Mul(&sk, nil)
	valid := pk.p.BytesCompressed()
	inf := make([]byte, G2Size)
	inf[0] = 0xc0
	nsg := nonSubgroupG2(t)
	off := notOnCurveG2(t)
	c1p := make([]byte, G2Size) // x.c1 = p
	copy(c1p, fieldModulus[:])
	c1p[0] |= flagCompressed
	c0p := make([]byte, G2Size) // x.c0 = p
	copy(c0p[fpSize:], fieldModulus[:])
	c0p[0] |= flagCompressed
	c0plus := malleated(t, // x.c0 + p
		func(k int64) []byte {
			return new(G2Point).Mul(new(Scalar).SetInt64(k), nil).(*G2Point).p.BytesCompressed()
		},
		func(b []byte) []byte { return b[fpSize:] })
	c1plus := malleated(t, // x.c1 + p
		func(k int64) []byte {
			return new(G2Point).Mul(new(Scalar).SetInt64(k), nil).(*G2Point).p.BytesCompressed()
		},
		func(b []byte) []byte { return b[:fpSize] })

	return []decodeCase{
		{"valid", valid, nil, nil},
		{"generator", mustHex(t, g2GenHex), nil, nil},
		{"valid other sort flag (the negation)", with(valid, func(b []byte) { b[0] ^= flagSort }), nil, nil},
		{"trailing byte", append(append([]byte(nil), valid...), 0), ErrEncoding, ErrEncoding},
		{"truncated", valid[:G2Size-1], ErrEncoding, ErrEncoding},
		{"empty", nil, ErrEncoding, ErrEncoding},
		{"uncompressed form", pk.p.Bytes(), ErrEncoding, ErrEncoding},
		{"compression flag clear", with(valid, func(b []byte) { b[0] &^= flagCompressed }), ErrEncoding, ErrEncoding},
		{"identity", inf, ErrIdentity, nil},
		{"identity with sort flag", with(inf, func(b []byte) { b[0] |= flagSort }), ErrEncoding, ErrEncoding},
		{"identity without compression flag", with(inf, func(b []byte) { b[0] &^= flagCompressed }), ErrEncoding, ErrEncoding},
		{"identity with a non-zero c0 byte", with(inf, func(b []byte) { b[G2Size-1] = 1 }), ErrEncoding, ErrEncoding},
		{"x.c1 = p", c1p, ErrEncoding, ErrEncoding},
		{"x.c0 = p", c0p, ErrEncoding, ErrEncoding},
		{"x.c0 + p of a valid point", c0plus, ErrEncoding, ErrEncoding},
		{"x.c1 + p of a valid point", c1plus, ErrEncoding, ErrEncoding},
		{"x off the twist", off[:], ErrEncoding, ErrEncoding},
		{"on the twist, not in G2", nsg[:], ErrNotInSubgroup, ErrNotInSubgroup},
		{"G1 point", mustHex(t, g1GenHex), ErrEncoding, ErrEncoding},
	}
}

func checkErr(t *testing.T, who string, got, want error) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Errorf("%s: unexpected error %v", who, got)
	case want != nil && !errors.Is(got, want):
		t.Errorf("%s: error %v, want %v", who, got, want)
	}
}

// TestDecodeG1Strict runs every G1 case through the three decoders: the
// strict circl one (DecodeG1), the strict gnark one (verification path) and
// the kyber adapter's UnmarshalBinary, and checks that an accepted input
// re-encodes to itself.
func TestDecodeG1Strict(t *testing.T) {
	for _, c := range g1Cases(t) {
		t.Run(c.name, func(t *testing.T) {
			p, err := DecodeG1(c.in)
			checkErr(t, "DecodeG1", err, c.want)
			if err == nil {
				if got, _ := p.MarshalBinary(); !bytes.Equal(got, c.in) {
					t.Errorf("DecodeG1 re-encodes to %x", got)
				}
			}
			q, err := gnarkG1(c.in)
			checkErr(t, "gnarkG1", err, c.want)
			if err == nil {
				if got := q.Bytes(); !bytes.Equal(got[:], c.in) {
					t.Errorf("gnarkG1 re-encodes to %x", got)
				}
			}
			var k G1Point
			k.Base()
			err = k.UnmarshalBinary(c.in)
			checkErr(t, "G1Point.UnmarshalBinary", err, c.wantKyber)
			if err != nil && !k.Equal(new(G1Point).Base()) {
				t.Error("failed UnmarshalBinary modified the receiver")
			}
		})
	}
}

// TestDecodeG2Strict is TestDecodeG1Strict for G2, with NewPublicKey too.
func TestDecodeG2Strict(t *testing.T) {
	for _, c := range g2Cases(t) {
		t.Run(c.name, func(t *testing.T) {
			p, err := DecodeG2(c.in)
			checkErr(t, "DecodeG2", err, c.want)
			if err == nil {
				if got, _ := p.MarshalBinary(); !bytes.Equal(got, c.in) {
					t.Errorf("DecodeG2 re-encodes to %x", got)
				}
			}
			q, err := gnarkG2(c.in)
			checkErr(t, "gnarkG2", err, c.want)
			if err == nil {
				if got := q.Bytes(); !bytes.Equal(got[:], c.in) {
					t.Errorf("gnarkG2 re-encodes to %x", got)
				}
			}
			_, err = NewPublicKey(c.in)
			checkErr(t, "NewPublicKey", err, c.want)
			var k G2Point
			k.Base()
			err = k.UnmarshalBinary(c.in)
			checkErr(t, "G2Point.UnmarshalBinary", err, c.wantKyber)
			if err != nil && !k.Equal(new(G2Point).Base()) {
				t.Error("failed UnmarshalBinary modified the receiver")
			}
		})
	}
}

// TestNonSubgroupPointsAreOnTheCurve guards the premise of the subgroup
// cases: the constructed points are genuine curve points (gnark decodes
// them when told to skip its subgroup check, and so do the raw libraries'
// on-curve tests), so only the subgroup check can reject them.
func TestNonSubgroupPointsAreOnTheCurve(t *testing.T) {
	b1 := nonSubgroupG1(t)
	q1, ok := gnarkG1NoSubgroupCheck(b1[:])
	if !ok || !q1.IsOnCurve() || q1.IsInSubGroup() {
		t.Fatalf("G1 point: on curve %v, in subgroup %v", q1.IsOnCurve(), q1.IsInSubGroup())
	}
	// r·P is not the identity for a point outside the subgroup.
	var rP gnark.G1Affine
	rP.ScalarMultiplication(&q1, bigR)
	if rP.IsInfinity() {
		t.Fatal("r·P is the identity: the point is in G1")
	}
	b2 := nonSubgroupG2(t)
	q2, ok := gnarkG2NoSubgroupCheck(b2[:])
	if !ok || !q2.IsOnCurve() || q2.IsInSubGroup() {
		t.Fatalf("G2 point: on twist %v, in subgroup %v", q2.IsOnCurve(), q2.IsInSubGroup())
	}
	var rQ gnark.G2Affine
	rQ.ScalarMultiplication(&q2, bigR)
	if rQ.IsInfinity() {
		t.Fatal("r·Q is the identity: the point is in G2")
	}
}

// TestGnarkSetBytesAcceptsTrailingBytes documents why the decoders check the
// length themselves: gnark's SetBytes reads a prefix and ignores the rest.
func TestGnarkSetBytesAcceptsTrailingBytes(t *testing.T) {
	valid := mustHex(t, g1GenHex)
	var q gnark.G1Affine
	n, err := q.SetBytes(append(append([]byte(nil), valid...), 0xde, 0xad))
	if err != nil || n != G1Size {
		t.Skipf("gnark now refuses trailing bytes (n=%d, err=%v); the length check stays anyway", n, err)
	}
	if _, err := DecodeG1(append(append([]byte(nil), valid...), 0xde, 0xad)); !errors.Is(err, ErrEncoding) {
		t.Fatalf("DecodeG1 with trailing bytes: %v", err)
	}
}

func TestGTUnmarshal(t *testing.T) {
	s := NewSuite()
	e := s.GT().Point().Pick(stream("gt"))
	b, _ := e.MarshalBinary()
	if len(b) != GTSize {
		t.Fatalf("GT encoding of %d bytes", len(b))
	}
	got := s.GT().Point()
	if err := got.UnmarshalBinary(b); err != nil || !got.Equal(e) {
		t.Fatalf("round trip: %v", err)
	}
	idb, _ := s.GT().Point().Null().MarshalBinary()
	if err := got.UnmarshalBinary(idb); err != nil {
		t.Fatalf("identity: %v", err)
	}
	if err := got.UnmarshalBinary(append(b, 0)); !errors.Is(err, ErrEncoding) {
		t.Errorf("trailing byte: %v", err)
	}
	if err := got.UnmarshalBinary(make([]byte, GTSize)); !errors.Is(err, ErrNotInSubgroup) {
		t.Errorf("zero: %v", err)
	}
	// An element of Fp12 outside GT: 2 (in Fp, so of order dividing p-1).
	two := make([]byte, GTSize)
	two[GTSize-1] = 2
	if err := got.UnmarshalBinary(two); !errors.Is(err, ErrNotInSubgroup) {
		t.Errorf("2 in Fp12: %v", err)
	}
	bad := append([]byte(nil), b...)
	copy(bad[:fpSize], fieldModulus[:])
	if err := got.UnmarshalBinary(bad); !errors.Is(err, ErrEncoding) {
		t.Errorf("coordinate = p: %v", err)
	}
}
