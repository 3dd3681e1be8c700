package bls12381

import (
	"errors"
	"fmt"
	"math/big"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// PublicG1 is a G1 point from public data (a signature or a partial
// signature), strictly decoded and held in gnark's form for fast public
// arithmetic. Never put a secret-dependent point in it: gnark promises no
// constant time.
type PublicG1 struct{ p gnark.G1Affine }

// DecodePublicG1 strictly decodes a signature or partial signature, as
// DecodeG1 does (length, flags, x below p, on the curve, in the subgroup,
// not the identity), with gnark's faster subgroup check. Errors wrap
// ErrEncoding, ErrNotInSubgroup or ErrIdentity.
func DecodePublicG1(b []byte) (*PublicG1, error) {
	p, err := gnarkG1(b)
	if err != nil {
		return nil, err
	}
	return &PublicG1{p: p}, nil
}

// ErrInterpolation reports points that cannot be interpolated: indices not
// distinct and positive, slices of different lengths, or a result that is
// the identity.
var ErrInterpolation = errors.New("bls12381: interpolation")

// InterpolateG1 returns the compressed encoding of Σ λ_i·P_i, the value at
// x = 0 of the polynomial through the points (indices[i], pts[i]): the
// group signature recovered from partial signatures, where indices are
// the signers' 1-based share indices. The λ_i are Lagrange's coefficients
// at 0, Π_{j≠i} x_j / (x_j − x_i) in the scalar field. The points are
// public, so the sum is computed in variable time with gnark
// (sumOfMultiples) rather than with constant-time multiplications. It
// checks nothing about the result but that it is not the identity:
// verify it.
func InterpolateG1(indices []int, pts []*PublicG1) ([]byte, error) {
	if len(indices) != len(pts) || len(pts) == 0 {
		return nil, fmt.Errorf("%w: %d indices, %d points", ErrInterpolation, len(indices), len(pts))
	}
	xs := make([]fr.Element, len(indices))
	seen := make(map[int]bool, len(indices))
	for i, x := range indices {
		if x < 1 || seen[x] {
			return nil, fmt.Errorf("%w: index %d repeated or not positive", ErrInterpolation, x)
		}
		seen[x] = true
		xs[i].SetUint64(uint64(x))
	}
	// λ_i = num_i / den_i; the denominators are inverted in one batch.
	nums := make([]fr.Element, len(xs))
	dens := make([]fr.Element, len(xs))
	for i := range xs {
		nums[i].SetOne()
		dens[i].SetOne()
		for j := range xs {
			if j == i {
				continue
			}
			var d fr.Element
			d.Sub(&xs[j], &xs[i])
			nums[i].Mul(&nums[i], &xs[j])
			dens[i].Mul(&dens[i], &d)
		}
	}
	inv := fr.BatchInvert(dens)
	lambdas := make([]fr.Element, len(xs))
	points := make([]gnark.G1Affine, len(pts))
	for i := range xs {
		lambdas[i].Mul(&nums[i], &inv[i])
		points[i] = pts[i].p
	}
	sum := sumOfMultiples(points, lambdas)
	if sum.IsInfinity() {
		return nil, fmt.Errorf("%w: the result is the identity", ErrInterpolation)
	}
	b := sum.Bytes()
	return b[:], nil
}

// sumOfMultiples returns Σ k_i·P_i for public points and scalars, in
// variable time: one GLV multiplication per point. For the few points of
// a threshold this takes about half the time of gnark's multi-scalar
// multiplication, whose buckets pay off only for many more points
// (BenchmarkInterpolate: t = 3 0.56 ms before, 0.25-0.29 ms after;
// t = 21 2.2 ms and 2.0-2.4 ms).
func sumOfMultiples(points []gnark.G1Affine, ks []fr.Element) gnark.G1Affine {
	var acc gnark.G1Jac
	var k big.Int
	for i := range points {
		var p gnark.G1Jac
		p.FromAffine(&points[i])
		p.ScalarMultiplication(&p, ks[i].BigInt(&k))
		acc.AddAssign(&p)
	}
	var sum gnark.G1Affine
	sum.FromJacobian(&acc)
	return sum
}
