package bls12381

import (
	"bytes"
	"crypto/cipher"
	"encoding/hex"
	"fmt"
	"io"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"go.dedis.ch/kyber/v3"
)

// G2Point is a point of G2, the prime-order subgroup of the sextic twist
// E'(Fp2), backed by circl (constant-time scalar multiplication). It
// implements kyber.Point; its encoding is the 96-byte compressed ZCash/IETF
// form. Public keys, public key shares and DKG commitments are G2 points.
type G2Point struct{ p circl.G2 }

var _ kyber.Point = (*G2Point)(nil)

func toG2(p kyber.Point) *G2Point {
	g, ok := p.(*G2Point)
	if !ok {
		panic(fmt.Errorf("%w: point of type %T where G2 was expected", ErrWrongGroup, p))
	}
	return g
}

// Equal reports whether p and q are the same point.
func (p *G2Point) Equal(q kyber.Point) bool { return p.p.IsEqual(&toG2(q).p) }

// Null sets p to the identity and returns p.
func (p *G2Point) Null() kyber.Point { p.p.SetIdentity(); return p }

// Base sets p to the standard generator of G2 and returns p.
func (p *G2Point) Base() kyber.Point { p.p = *circl.G2Generator(); return p }

// Pick sets p to a point hashed to G2 (RFC 9380, BLS12381G2_XMD:SHA-256_SSWU_RO_,
// with PickDSTG2) from 64 bytes of rand, so its discrete logarithm is
// unknown. It returns p.
func (p *G2Point) Pick(rand cipher.Stream) kyber.Point {
	var seed [pickSeedBytes]byte
	rand.XORKeyStream(seed[:], seed[:])
	p.p.Hash(seed[:], []byte(PickDSTG2))
	return p
}

// Set sets p to q and returns p.
func (p *G2Point) Set(q kyber.Point) kyber.Point { p.p = toG2(q).p; return p }

// Clone returns a copy of p.
func (p *G2Point) Clone() kyber.Point { c := *p; return &c }

// EmbedLen returns 0: data cannot be embedded in a point of a subgroup of
// large cofactor (see G1Point.EmbedLen).
func (p *G2Point) EmbedLen() int { return 0 }

// Embed embeds the first EmbedLen() = 0 bytes of data, that is it picks a
// random point from r, and returns p.
func (p *G2Point) Embed(_ []byte, r cipher.Stream) kyber.Point { return p.Pick(r) }

// Data returns the EmbedLen() = 0 bytes embedded in p: always empty.
func (p *G2Point) Data() ([]byte, error) { return []byte{}, nil }

// Add sets p to a+b and returns p.
func (p *G2Point) Add(a, b kyber.Point) kyber.Point {
	p.p.Add(&toG2(a).p, &toG2(b).p)
	return p
}

// Sub sets p to a-b and returns p.
func (p *G2Point) Sub(a, b kyber.Point) kyber.Point {
	nb := toG2(b).p
	nb.Neg()
	p.p.Add(&toG2(a).p, &nb)
	return p
}

// Neg sets p to -a and returns p.
func (p *G2Point) Neg(a kyber.Point) kyber.Point {
	p.p = toG2(a).p
	p.p.Neg()
	return p
}

// Mul sets p to s·q, or s·Base() if q is nil, in constant time (circl), and
// returns p.
func (p *G2Point) Mul(s kyber.Scalar, q kyber.Point) kyber.Point {
	sc := toScalar(s)
	if q == nil {
		p.p.ScalarMult(&sc.v, circl.G2Generator())
		return p
	}
	p.p.ScalarMult(&sc.v, &toG2(q).p)
	return p
}

// IsIdentity reports whether p is the identity.
func (p *G2Point) IsIdentity() bool { return p.p.IsIdentity() }

// MarshalBinary returns the 96-byte compressed encoding of p.
func (p *G2Point) MarshalBinary() ([]byte, error) { return p.p.BytesCompressed(), nil }

// UnmarshalBinary sets p from a strict compressed encoding (see DecodeG2)
// but, unlike DecodeG2, accepts the identity. On error p is unchanged and
// the error wraps ErrEncoding or ErrNotInSubgroup.
func (p *G2Point) UnmarshalBinary(b []byte) error {
	q, err := g2FromBytes(b)
	if err != nil {
		return err
	}
	p.p = q
	return nil
}

// MarshalSize returns G2Size.
func (p *G2Point) MarshalSize() int { return G2Size }

// MarshalTo writes the encoding of p to w.
func (p *G2Point) MarshalTo(w io.Writer) (int, error) { return w.Write(p.p.BytesCompressed()) }

// UnmarshalFrom reads an encoding from r into p, as UnmarshalBinary. As
// kyber specifies, if r is a cipher.Stream (an XOF), p is picked from it
// instead.
func (p *G2Point) UnmarshalFrom(r io.Reader) (int, error) {
	if strm, ok := r.(cipher.Stream); ok {
		p.Pick(strm)
		return -1, nil
	}
	var buf [G2Size]byte
	n, err := io.ReadFull(r, buf[:])
	if err != nil {
		return n, fmt.Errorf("bls12381: reading G2 point: %w", err)
	}
	return n, p.UnmarshalBinary(buf[:])
}

// String returns the hexadecimal compressed encoding of p.
func (p *G2Point) String() string { return hex.EncodeToString(p.p.BytesCompressed()) }

// g2FromBytes decodes a strict compressed G2 encoding with circl, or
// copies it out of g2Decoded if it decoded before. The identity is
// accepted.
func g2FromBytes(b []byte) (circl.G2, error) {
	if q, ok := g2Decoded.get(b); ok {
		return q, nil
	}
	q, err := g2Decode(b)
	if err == nil {
		g2Decoded.put(b, q)
	}
	return q, err
}

// g2Decode is g2FromBytes without the cache.
func g2Decode(b []byte) (circl.G2, error) {
	var q circl.G2
	inf, err := checkCompressed(b, G2Size)
	if err != nil {
		return q, err
	}
	if inf {
		q.SetIdentity()
		return q, nil
	}
	if err := q.SetBytes(b); err != nil {
		// circl does not say why; ask gnark, without its subgroup check,
		// whether the point is on the curve at all.
		if _, onCurve := gnarkG2NoSubgroupCheck(b); onCurve {
			return q, fmt.Errorf("%w: G2", ErrNotInSubgroup)
		}
		return q, fmt.Errorf("%w: G2 x-coordinate not on the curve", ErrEncoding)
	}
	return q, nil
}

// gnarkG2NoSubgroupCheck decompresses a G2 point with gnark, which then
// checks only that it is on the curve.
func gnarkG2NoSubgroupCheck(b []byte) (gnark.G2Affine, bool) {
	var q gnark.G2Affine
	err := gnark.NewDecoder(bytes.NewReader(b), gnark.NoSubgroupChecks()).Decode(&q)
	return q, err == nil
}

// gnarkG2 decodes a strict compressed G2 encoding with gnark, for
// verification. The identity is refused.
func gnarkG2(b []byte) (gnark.G2Affine, error) {
	inf, err := checkCompressed(b, G2Size)
	if err != nil {
		return gnark.G2Affine{}, err
	}
	if inf {
		return gnark.G2Affine{}, fmt.Errorf("%w: G2", ErrIdentity)
	}
	q, onCurve := gnarkG2NoSubgroupCheck(b)
	if !onCurve {
		return q, fmt.Errorf("%w: G2 x-coordinate not on the curve", ErrEncoding)
	}
	if !q.IsInSubGroup() {
		return q, fmt.Errorf("%w: G2", ErrNotInSubgroup)
	}
	return q, nil
}

// DecodeG2 strictly decodes a public key or public key share: exactly 96
// bytes of compressed encoding, compression flag set, both coordinates of x
// below p, on the curve, in the prime-order subgroup and not the identity.
// Errors wrap ErrEncoding, ErrNotInSubgroup or ErrIdentity.
func DecodeG2(b []byte) (*G2Point, error) {
	q, err := g2FromBytes(b)
	if err != nil {
		return nil, err
	}
	if q.IsIdentity() {
		return nil, fmt.Errorf("%w: G2", ErrIdentity)
	}
	return &G2Point{p: q}, nil
}
