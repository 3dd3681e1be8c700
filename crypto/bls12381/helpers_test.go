package bls12381

import (
	"crypto/cipher"
	"encoding/hex"
	"math/big"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fp"
	"go.dedis.ch/kyber/v3/xof/blake2xb"
)

// stream returns a deterministic cipher.Stream, so failures reproduce.
func stream(seed string) cipher.Stream { return blake2xb.New([]byte(seed)) }

var (
	bigP = new(big.Int).SetBytes(fieldModulus[:])
	bigR = new(big.Int).SetBytes(scalarOrder[:])
)

// randomScalar returns a scalar and its big.Int value.
func randomScalar(rand cipher.Stream) (*Scalar, *big.Int) {
	s := new(Scalar)
	s.Pick(rand)
	b, _ := s.MarshalBinary()
	return s, new(big.Int).SetBytes(b)
}

// nonSubgroupG1 returns the compressed encoding of a point of E(Fp) that is
// not in G1: the first x = 1, 2, ... for which x^3 + 4 is a square, with
// that square root as y. No cofactor is cleared, so the point is in G1 with
// probability 1/h.
func nonSubgroupG1(t testing.TB) [G1Size]byte {
	t.Helper()
	var four fp.Element
	four.SetUint64(4)
	_, b := gnark.CurveCoefficients()
	if !b.Equal(&four) {
		t.Fatalf("G1 curve coefficient b = %s, want 4", b.String())
	}
	for i := uint64(1); i < 1000; i++ {
		var x, rhs, y fp.Element
		x.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &four)
		if y.Sqrt(&rhs) == nil {
			continue
		}
		q := gnark.G1Affine{X: x, Y: y}
		if !q.IsOnCurve() {
			t.Fatalf("x=%d: (x, sqrt(x^3+4)) not on the curve", i)
		}
		if q.IsInSubGroup() {
			continue
		}
		return q.Bytes()
	}
	t.Fatal("no point outside G1 found")
	return [G1Size]byte{}
}

// nonSubgroupG2 returns the compressed encoding of a point of E'(Fp2) that
// is not in G2: x = (i, 0) for the first i with x^3 + 4(1+u) a square.
func nonSubgroupG2(t testing.TB) [G2Size]byte {
	t.Helper()
	var b2 gnark.E2
	b2.A0.SetUint64(4)
	b2.A1.SetUint64(4)
	for i := uint64(1); i < 1000; i++ {
		var x, rhs, y gnark.E2
		x.A0.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &b2)
		if rhs.Legendre() != 1 {
			continue
		}
		y.Sqrt(&rhs)
		q := gnark.G2Affine{X: x, Y: y}
		if !q.IsOnCurve() {
			t.Fatalf("x=%d: (x, sqrt(x^3+b')) not on the twist", i)
		}
		if q.IsInSubGroup() {
			continue
		}
		return q.Bytes()
	}
	t.Fatal("no point outside G2 found")
	return [G2Size]byte{}
}

// notOnCurveX returns a compressed G1 encoding (compression flag set) whose
// x < p has no point: x^3 + 4 is not a square.
func notOnCurveG1(t testing.TB) [G1Size]byte {
	t.Helper()
	var four fp.Element
	four.SetUint64(4)
	for i := uint64(1); i < 1000; i++ {
		var x, rhs fp.Element
		x.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &four)
		if rhs.Legendre() == -1 {
			var out [G1Size]byte
			xb := x.Bytes()
			copy(out[:], xb[:])
			out[0] |= flagCompressed
			return out
		}
	}
	t.Fatal("no x off the curve found")
	return [G1Size]byte{}
}

// notOnCurveG2 is notOnCurveG1 for the twist.
func notOnCurveG2(t testing.TB) [G2Size]byte {
	t.Helper()
	var b2 gnark.E2
	b2.A0.SetUint64(4)
	b2.A1.SetUint64(4)
	for i := uint64(1); i < 1000; i++ {
		var x, rhs gnark.E2
		x.A0.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &b2)
		if rhs.Legendre() == -1 {
			var out [G2Size]byte
			c0 := x.A0.Bytes()
			copy(out[fpSize:], c0[:]) // x = c1 || c0, c1 = 0
			out[0] |= flagCompressed
			return out
		}
	}
	t.Fatal("no x off the twist found")
	return [G2Size]byte{}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
