package bls12381

import (
	"crypto/cipher"
	"encoding/hex"
	"fmt"
	"io"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"go.dedis.ch/kyber/v3"
)

// gtBase is e(g1, g2), the generator of GT.
var gtBase = *circl.Pair(circl.G1Generator(), circl.G2Generator())

// GTPoint is an element of GT, the order-r subgroup of Fp12*, written
// additively as kyber requires: Add multiplies, Mul exponentiates. It is
// backed by circl. Its encoding is 576 bytes (12 big-endian base-field
// elements, the layout circl and gnark share).
type GTPoint struct{ v circl.Gt }

var _ kyber.Point = (*GTPoint)(nil)

func toGT(p kyber.Point) *GTPoint {
	g, ok := p.(*GTPoint)
	if !ok {
		panic(fmt.Errorf("%w: point of type %T where GT was expected", ErrWrongGroup, p))
	}
	return g
}

// Equal reports whether p and q are the same element.
func (p *GTPoint) Equal(q kyber.Point) bool { return p.v.IsEqual(&toGT(q).v) }

// Null sets p to the identity (1 in Fp12) and returns p.
func (p *GTPoint) Null() kyber.Point { p.v.SetIdentity(); return p }

// Base sets p to e(g1, g2) and returns p.
func (p *GTPoint) Base() kyber.Point { p.v = gtBase; return p }

// Pick sets p to Base() raised to a random scalar picked from rand, and
// returns p.
func (p *GTPoint) Pick(rand cipher.Stream) kyber.Point {
	var s Scalar
	s.Pick(rand)
	p.v.Exp(&gtBase, &s.v)
	return p
}

// Set sets p to q and returns p.
func (p *GTPoint) Set(q kyber.Point) kyber.Point { p.v = toGT(q).v; return p }

// Clone returns a copy of p.
func (p *GTPoint) Clone() kyber.Point { c := *p; return &c }

// EmbedLen returns 0: no data is embedded in GT.
func (p *GTPoint) EmbedLen() int { return 0 }

// Embed embeds the first EmbedLen() = 0 bytes of data, that is it picks a
// random element from r, and returns p.
func (p *GTPoint) Embed(_ []byte, r cipher.Stream) kyber.Point { return p.Pick(r) }

// Data returns the EmbedLen() = 0 bytes embedded in p: always empty.
func (p *GTPoint) Data() ([]byte, error) { return []byte{}, nil }

// Add sets p to the group operation a·b (written additively) and returns p.
func (p *GTPoint) Add(a, b kyber.Point) kyber.Point {
	p.v.Mul(&toGT(a).v, &toGT(b).v)
	return p
}

// Sub sets p to a·b⁻¹ and returns p.
func (p *GTPoint) Sub(a, b kyber.Point) kyber.Point {
	var inv circl.Gt
	inv.Inv(&toGT(b).v)
	p.v.Mul(&toGT(a).v, &inv)
	return p
}

// Neg sets p to a⁻¹ and returns p.
func (p *GTPoint) Neg(a kyber.Point) kyber.Point { p.v.Inv(&toGT(a).v); return p }

// Mul sets p to q^s, or Base()^s if q is nil, and returns p.
func (p *GTPoint) Mul(s kyber.Scalar, q kyber.Point) kyber.Point {
	sc := toScalar(s)
	if q == nil {
		p.v.Exp(&gtBase, &sc.v)
		return p
	}
	p.v.Exp(&toGT(q).v, &sc.v)
	return p
}

// MarshalBinary returns the 576-byte encoding of p.
func (p *GTPoint) MarshalBinary() ([]byte, error) { return p.v.MarshalBinary() }

// UnmarshalBinary sets p from exactly 576 bytes of canonical coordinates
// that encode an element of the order-r subgroup (checked with gnark, whose
// byte layout is circl's). The identity is accepted. On error p is
// unchanged and the error wraps ErrEncoding or ErrNotInSubgroup.
func (p *GTPoint) UnmarshalBinary(b []byte) error {
	if len(b) != GTSize {
		return fmt.Errorf("%w: GT element of %d bytes, want %d", ErrEncoding, len(b), GTSize)
	}
	var e gnark.GT
	if err := e.SetBytes(b); err != nil {
		return fmt.Errorf("%w: GT: %v", ErrEncoding, err)
	}
	// gnark's IsInSubGroup assumes an invertible element: 0 passes it.
	if e.IsZero() || !e.IsInSubGroup() {
		return fmt.Errorf("%w: GT", ErrNotInSubgroup)
	}
	var v circl.Gt
	if err := v.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("%w: GT: %v", ErrEncoding, err)
	}
	p.v = v
	return nil
}

// MarshalSize returns GTSize.
func (p *GTPoint) MarshalSize() int { return GTSize }

// MarshalTo writes the encoding of p to w.
func (p *GTPoint) MarshalTo(w io.Writer) (int, error) {
	b, err := p.MarshalBinary()
	if err != nil {
		return 0, err
	}
	return w.Write(b)
}

// UnmarshalFrom reads an encoding from r into p, as UnmarshalBinary. As
// kyber specifies, if r is a cipher.Stream (an XOF), p is picked from it
// instead.
func (p *GTPoint) UnmarshalFrom(r io.Reader) (int, error) {
	if strm, ok := r.(cipher.Stream); ok {
		p.Pick(strm)
		return -1, nil
	}
	buf := make([]byte, GTSize)
	n, err := io.ReadFull(r, buf)
	if err != nil {
		return n, fmt.Errorf("bls12381: reading GT element: %w", err)
	}
	return n, p.UnmarshalBinary(buf)
}

// String returns the hexadecimal encoding of p.
func (p *GTPoint) String() string {
	b, _ := p.v.MarshalBinary()
	return hex.EncodeToString(b)
}
