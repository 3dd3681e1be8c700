package crypto

import (
	"go.dedis.ch/kyber/v3"

	"github.com/palisade-dev/palisade/crypto/bls12381"
)

// InG2Subgroup reports whether p is a point of BLS12-381's G2, the
// prime-order subgroup of the twist, as this package's groups hold it. The
// kyber adapter of package bls12381 refuses points outside the subgroup
// when it decodes, so the check matters for points that another decoder
// produced, or that are not of this suite at all (reported as outside).
func InG2Subgroup(p kyber.Point) bool {
	g, ok := p.(*bls12381.G2Point)
	if !ok {
		return false
	}
	if g.IsIdentity() {
		return true
	}
	b, err := g.MarshalBinary()
	if err != nil {
		return false
	}
	_, err = bls12381.DecodeG2(b)
	return err == nil
}
