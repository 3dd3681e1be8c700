package crypto

import (
	"errors"

	"go.dedis.ch/kyber/v3"
)

// ErrNotInSubgroup reports a G2 point that is on the curve but outside the
// prime-order subgroup. kyber's bn256 G2 decoder checks only that a point
// lies on the twist, whose order is r·(2p−r); the cofactor 2p−r has small
// factors, so an unchecked point can carry a small-order component.
var ErrNotInSubgroup = errors.New("crypto: G2 point outside the prime-order subgroup")

// g2OrderMinusOne is r−1 as a G2 scalar. kyber's scalars are reduced
// modulo r, so r itself would be 0; r·P = O is checked as (r−1)·P + P = O.
var g2OrderMinusOne = suite.G2().Scalar().SetInt64(-1)

// InG2Subgroup reports whether p lies in bn256 G2's prime-order subgroup,
// that is whether r·p is the identity. It costs one G2 scalar
// multiplication.
func InG2Subgroup(p kyber.Point) bool {
	q := suite.G2().Point().Mul(g2OrderMinusOne, p)
	q.Add(q, p)
	return q.Equal(suite.G2().Point().Null())
}

// decodeG2Subgroup decodes a canonical, non-identity G2 point and checks
// that it lies in the prime-order subgroup. Use it for every G2 point that
// arrives from another party (DKG messages, cluster files); decodeG2 alone
// is for keys already checked once.
func decodeG2Subgroup(b []byte) (kyber.Point, error) {
	p, err := decodeG2(b)
	if err != nil {
		return nil, err
	}
	if !InG2Subgroup(p) {
		return nil, ErrNotInSubgroup
	}
	return p, nil
}
