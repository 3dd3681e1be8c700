// Package g2test builds bn256 G2 points outside the prime-order subgroup,
// for the subgroup tests of crypto and crypto/dkg. Tests only.
package g2test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing/bn256"
)

// fp2 is a + b·i in GF(p²) with i² = −1, as bn256's gfP2 (whose encoding
// is the i coefficient first, then the constant).
type fp2 struct{ a, b *big.Int }

var bnP, _ = new(big.Int).SetString("65000549695646603732796438742359905742825358107623003571877145026864184071783", 10)

func (x fp2) add(y fp2) fp2 {
	return fp2{new(big.Int).Mod(new(big.Int).Add(x.a, y.a), bnP), new(big.Int).Mod(new(big.Int).Add(x.b, y.b), bnP)}
}

func (x fp2) sub(y fp2) fp2 {
	return fp2{new(big.Int).Mod(new(big.Int).Sub(x.a, y.a), bnP), new(big.Int).Mod(new(big.Int).Sub(x.b, y.b), bnP)}
}

func (x fp2) mul(y fp2) fp2 {
	ac := new(big.Int).Mul(x.a, y.a)
	bd := new(big.Int).Mul(x.b, y.b)
	ad := new(big.Int).Mul(x.a, y.b)
	bc := new(big.Int).Mul(x.b, y.a)
	return fp2{new(big.Int).Mod(ac.Sub(ac, bd), bnP), new(big.Int).Mod(ad.Add(ad, bc), bnP)}
}

func (x fp2) equal(y fp2) bool { return x.a.Cmp(y.a) == 0 && x.b.Cmp(y.b) == 0 }

// sqrtFp is a square root in GF(p), p ≡ 3 (mod 4), or nil.
func sqrtFp(x *big.Int) *big.Int {
	e := new(big.Int).Add(bnP, big.NewInt(1))
	e.Rsh(e, 2)
	r := new(big.Int).Exp(x, e, bnP)
	if new(big.Int).Mod(new(big.Int).Mul(r, r), bnP).Cmp(new(big.Int).Mod(x, bnP)) != 0 {
		return nil
	}
	return r
}

// sqrt is a square root in GF(p²) by the norm method, or false.
func (x fp2) sqrt() (fp2, bool) {
	norm := new(big.Int).Mod(new(big.Int).Add(new(big.Int).Mul(x.a, x.a), new(big.Int).Mul(x.b, x.b)), bnP)
	n := sqrtFp(norm)
	if n == nil {
		return fp2{}, false
	}
	half := new(big.Int).ModInverse(big.NewInt(2), bnP)
	for _, s := range []*big.Int{n, new(big.Int).Neg(n)} {
		c := new(big.Int).Mod(new(big.Int).Mul(new(big.Int).Add(x.a, s), half), bnP)
		a := sqrtFp(c)
		if a == nil || a.Sign() == 0 {
			continue
		}
		b := new(big.Int).Mul(x.b, new(big.Int).ModInverse(new(big.Int).Lsh(a, 1), bnP))
		r := fp2{a, b.Mod(b, bnP)}
		if r.mul(r).equal(x) {
			return r, true
		}
	}
	return fp2{}, false
}

func fp2From(b []byte) fp2 {
	return fp2{new(big.Int).SetBytes(b[32:64]), new(big.Int).SetBytes(b[0:32])}
}

func (x fp2) bytes() []byte {
	out := make([]byte, 64)
	x.b.FillBytes(out[:32])
	x.a.FillBytes(out[32:])
	return out
}

// OutsideSubgroup returns the canonical encoding of a point on bn256's G2
// twist that is not in the prime-order subgroup: the twist's constant is
// derived from the generator (b = y² − x³), then x-coordinates are tried
// from tag upwards until x³ + b is a square. No cofactor is cleared, so
// the point is in the r-torsion only with probability about 1/(2p−r).
func OutsideSubgroup(t testing.TB, tag int64) []byte {
	t.Helper()
	gen, err := bn256.NewSuiteG2().Point().Base().MarshalBinary()
	require.NoError(t, err)
	gx, gy := fp2From(gen[:64]), fp2From(gen[64:])
	b := gy.mul(gy).sub(gx.mul(gx).mul(gx))
	for i := tag; ; i++ {
		x := fp2{big.NewInt(i), big.NewInt(1)}
		y, ok := x.mul(x).mul(x).add(b).sqrt()
		if !ok {
			continue
		}
		enc := append(x.bytes(), y.bytes()...)
		p := bn256.NewSuiteG2().Point()
		require.NoError(t, p.UnmarshalBinary(enc), "kyber accepts any point on the twist")
		again, _ := p.MarshalBinary()
		require.Equal(t, enc, again, "canonical")
		if inSubgroup(p) {
			continue // astronomically unlikely
		}
		return enc
	}
}

// inSubgroup reports whether r·p is the identity (crypto.InG2Subgroup,
// which this package cannot import from crypto's own tests).
func inSubgroup(p kyber.Point) bool {
	g := bn256.NewSuiteG2()
	q := g.Point().Mul(g.Scalar().SetInt64(-1), p)
	return q.Add(q, p).Equal(g.Point().Null())
}
