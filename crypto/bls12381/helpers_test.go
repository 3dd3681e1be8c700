package bls12381

import (
	"crypto/cipher"
	"encoding/hex"
	"math/big"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fp"
	"go.dedis.ch/kyber/v3/xof/blake2xb"

	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
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
// not in G1 (see bls12381test.NonSubgroupG1).
func nonSubgroupG1(t testing.TB) [G1Size]byte {
	t.Helper()
	var four fp.Element
	four.SetUint64(4)
	if _, b := gnark.CurveCoefficients(); !b.Equal(&four) {
		t.Fatalf("G1 curve coefficient b = %s, want 4", b.String())
	}
	return bls12381test.NonSubgroupG1(1)
}

// nonSubgroupG2 returns the compressed encoding of a point of E'(Fp2) that
// is not in G2.
func nonSubgroupG2(t testing.TB) [G2Size]byte { t.Helper(); return bls12381test.NonSubgroupG2(1) }

// notOnCurveG1 returns a compressed G1 encoding (compression flag set) whose
// x < p has no point.
func notOnCurveG1(t testing.TB) [G1Size]byte { t.Helper(); return bls12381test.NotOnCurveG1(1) }

// notOnCurveG2 is notOnCurveG1 for the twist.
func notOnCurveG2(t testing.TB) [G2Size]byte { t.Helper(); return bls12381test.NotOnCurveG2(1) }

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
