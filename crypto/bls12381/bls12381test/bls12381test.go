// Package bls12381test builds BLS12-381 encodings that strict decoders must
// refuse although they look like points: points on the curve outside the
// prime-order subgroup, and x-coordinates with no point at all. Tests of
// every layer that decodes points (crypto, crypto/dkg, protocol, the
// Byzantine nodes of testnet) use it. It depends on gnark-crypto only, so
// package bls12381's own tests can use it too.
package bls12381test

import (
	"fmt"
	"math/big"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fp"
)

// Sizes of compressed encodings.
const (
	G1Size = 48
	G2Size = 96
)

// compressedFlag is the compression flag of the first byte.
const compressedFlag = 0x80

// maxTries bounds the search from a tag: about half of all x-coordinates
// give a point, so a thousand tries never run out.
const maxTries = 1000

// NonSubgroupG1 returns the compressed encoding of a point of E(Fp) that is
// not in G1: the first x = tag, tag+1, ... (tag ≥ 1) for which x³ + 4 is a
// square, with that square root as y. No cofactor is cleared, so the point
// lies in G1 with probability 1/h. Different tags give different points.
func NonSubgroupG1(tag uint64) [G1Size]byte {
	var four fp.Element
	four.SetUint64(4)
	for i := tag; i < tag+maxTries; i++ {
		var x, rhs, y fp.Element
		x.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &four)
		if y.Sqrt(&rhs) == nil {
			continue
		}
		q := gnark.G1Affine{X: x, Y: y}
		if !q.IsOnCurve() || q.IsInSubGroup() {
			continue
		}
		return q.Bytes()
	}
	panic(fmt.Sprintf("bls12381test: no point outside G1 from x = %d", tag))
}

// NonSubgroupG2 returns the compressed encoding of a point of the twist
// E'(Fp²) that is not in G2: x = (i, 0) for the first i ≥ tag with
// x³ + 4(1+u) a square.
func NonSubgroupG2(tag uint64) [G2Size]byte {
	var b2 gnark.E2
	b2.A0.SetUint64(4)
	b2.A1.SetUint64(4)
	for i := tag; i < tag+maxTries; i++ {
		var x, rhs, y gnark.E2
		x.A0.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &b2)
		if rhs.Legendre() != 1 {
			continue
		}
		y.Sqrt(&rhs)
		q := gnark.G2Affine{X: x, Y: y}
		if !q.IsOnCurve() || q.IsInSubGroup() {
			continue
		}
		return q.Bytes()
	}
	panic(fmt.Sprintf("bls12381test: no point outside G2 from x = %d", tag))
}

// NotOnCurveG1 returns a compressed G1 encoding (compression flag set, x
// below p) whose x has no point: x³ + 4 is not a square, for the first
// x ≥ tag.
func NotOnCurveG1(tag uint64) [G1Size]byte {
	var four fp.Element
	four.SetUint64(4)
	for i := tag; i < tag+maxTries; i++ {
		var x, rhs fp.Element
		x.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &four)
		if rhs.Legendre() == -1 {
			var out [G1Size]byte
			xb := x.Bytes()
			copy(out[:], xb[:])
			out[0] |= compressedFlag
			return out
		}
	}
	panic(fmt.Sprintf("bls12381test: no x off the curve from %d", tag))
}

// NotOnCurveG2 is NotOnCurveG1 for the twist: x = (i, 0).
func NotOnCurveG2(tag uint64) [G2Size]byte {
	var b2 gnark.E2
	b2.A0.SetUint64(4)
	b2.A1.SetUint64(4)
	for i := tag; i < tag+maxTries; i++ {
		var x, rhs gnark.E2
		x.A0.SetUint64(i)
		rhs.Square(&x).Mul(&rhs, &x).Add(&rhs, &b2)
		if rhs.Legendre() == -1 {
			var out [G2Size]byte
			c0 := x.A0.Bytes()
			copy(out[G2Size/2:], c0[:]) // x = c1 || c0, c1 = 0
			out[0] |= compressedFlag
			return out
		}
	}
	panic(fmt.Sprintf("bls12381test: no x off the twist from %d", tag))
}

// Identity returns the compressed encoding of the point at infinity of a
// group whose points take size bytes (G1Size or G2Size).
func Identity(size int) []byte {
	b := make([]byte, size)
	b[0] = 0xc0
	return b
}

// AddModulus returns the encoding enc (G1 or G2, compressed) with p added
// to the x-coordinate's first 48-byte part: the same residue written
// non-canonically, which strict decoders must refuse. ok is false when
// x + p does not fit beside the three flag bits.
func AddModulus(enc []byte) (out []byte, ok bool) {
	const flags = 0xe0
	x := new(big.Int).SetBytes(append([]byte{enc[0] &^ flags}, enc[1:fp.Bytes]...))
	x.Add(x, fp.Modulus())
	if x.BitLen() > 8*fp.Bytes-3 {
		return nil, false
	}
	out = append([]byte(nil), enc...)
	x.FillBytes(out[:fp.Bytes])
	out[0] |= enc[0] & flags
	return out, true
}
