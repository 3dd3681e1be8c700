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

// Domain separation tags.
const (
	// SignatureDST is the domain separation tag of hash_to_G1 for signing:
	// the ciphersuite ID of the basic scheme of the min-sig variant of
	// draft-irtf-cfrg-bls-signature.
	SignatureDST = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
	// PickDSTG1 is the domain separation tag with which G1Point.Pick hashes
	// random bytes to G1. It differs from SignatureDST so that a picked point
	// is never the hash of a message.
	PickDSTG1 = "PALISADE-V01-CS01-with-BLS12381G1_XMD:SHA-256_SSWU_RO_KYBER-PICK_"
	// PickDSTG2 is the domain separation tag with which G2Point.Pick hashes
	// random bytes to G2.
	PickDSTG2 = "PALISADE-V01-CS01-with-BLS12381G2_XMD:SHA-256_SSWU_RO_KYBER-PICK_"
)

// pickSeedBytes is how many stream bytes Pick hashes to the curve.
const pickSeedBytes = 64

// G1Point is a point of G1, the prime-order subgroup of E(Fp), backed by
// circl (constant-time scalar multiplication). It implements kyber.Point;
// its encoding is the 48-byte compressed ZCash/IETF form. Signatures and
// partial signatures are G1 points.
type G1Point struct{ p circl.G1 }

var _ kyber.Point = (*G1Point)(nil)

func toG1(p kyber.Point) *G1Point {
	g, ok := p.(*G1Point)
	if !ok {
		panic(fmt.Errorf("%w: point of type %T where G1 was expected", ErrWrongGroup, p))
	}
	return g
}

// Equal reports whether p and q are the same point.
func (p *G1Point) Equal(q kyber.Point) bool { return p.p.IsEqual(&toG1(q).p) }

// Null sets p to the identity and returns p.
func (p *G1Point) Null() kyber.Point { p.p.SetIdentity(); return p }

// Base sets p to the standard generator of G1 and returns p.
func (p *G1Point) Base() kyber.Point { p.p = *circl.G1Generator(); return p }

// Pick sets p to a point hashed to G1 (RFC 9380, BLS12381G1_XMD:SHA-256_SSWU_RO_,
// with PickDSTG1) from 64 bytes of rand, so its discrete logarithm is
// unknown. It returns p.
func (p *G1Point) Pick(rand cipher.Stream) kyber.Point {
	var seed [pickSeedBytes]byte
	rand.XORKeyStream(seed[:], seed[:])
	p.p.Hash(seed[:], []byte(PickDSTG1))
	return p
}

// Set sets p to q and returns p.
func (p *G1Point) Set(q kyber.Point) kyber.Point { p.p = toG1(q).p; return p }

// Clone returns a copy of p.
func (p *G1Point) Clone() kyber.Point { c := *p; return &c }

// EmbedLen returns 0: data cannot be embedded in a point of a subgroup of
// large cofactor, because the cofactor clearing that lands a point in the
// subgroup destroys the embedded coordinate.
func (p *G1Point) EmbedLen() int { return 0 }

// Embed embeds the first EmbedLen() = 0 bytes of data, that is it picks a
// random point from r, and returns p.
func (p *G1Point) Embed(_ []byte, r cipher.Stream) kyber.Point { return p.Pick(r) }

// Data returns the EmbedLen() = 0 bytes embedded in p: always empty.
func (p *G1Point) Data() ([]byte, error) { return []byte{}, nil }

// Add sets p to a+b and returns p.
func (p *G1Point) Add(a, b kyber.Point) kyber.Point {
	p.p.Add(&toG1(a).p, &toG1(b).p)
	return p
}

// Sub sets p to a-b and returns p.
func (p *G1Point) Sub(a, b kyber.Point) kyber.Point {
	nb := toG1(b).p
	nb.Neg()
	p.p.Add(&toG1(a).p, &nb)
	return p
}

// Neg sets p to -a and returns p.
func (p *G1Point) Neg(a kyber.Point) kyber.Point {
	p.p = toG1(a).p
	p.p.Neg()
	return p
}

// Mul sets p to s·q, or s·Base() if q is nil, in constant time (circl), and
// returns p.
func (p *G1Point) Mul(s kyber.Scalar, q kyber.Point) kyber.Point {
	sc := toScalar(s)
	if q == nil {
		p.p.ScalarMult(&sc.v, circl.G1Generator())
		return p
	}
	p.p.ScalarMult(&sc.v, &toG1(q).p)
	return p
}

// Hash sets p to hash_to_G1(msg) with SignatureDST and returns p, so that
// kyber's sign/bls and sign/tbls sign over this suite exactly as Sign does.
func (p *G1Point) Hash(msg []byte) kyber.Point {
	p.p.Hash(msg, []byte(SignatureDST))
	return p
}

// IsIdentity reports whether p is the identity.
func (p *G1Point) IsIdentity() bool { return p.p.IsIdentity() }

// MarshalBinary returns the 48-byte compressed encoding of p.
func (p *G1Point) MarshalBinary() ([]byte, error) { return p.p.BytesCompressed(), nil }

// UnmarshalBinary sets p from a strict compressed encoding (see DecodeG1)
// but, unlike DecodeG1, accepts the identity. On error p is unchanged and
// the error wraps ErrEncoding or ErrNotInSubgroup.
func (p *G1Point) UnmarshalBinary(b []byte) error {
	q, err := g1FromBytes(b)
	if err != nil {
		return err
	}
	p.p = q
	return nil
}

// MarshalSize returns G1Size.
func (p *G1Point) MarshalSize() int { return G1Size }

// MarshalTo writes the encoding of p to w.
func (p *G1Point) MarshalTo(w io.Writer) (int, error) { return w.Write(p.p.BytesCompressed()) }

// UnmarshalFrom reads an encoding from r into p, as UnmarshalBinary. As
// kyber specifies, if r is a cipher.Stream (an XOF), p is picked from it
// instead.
func (p *G1Point) UnmarshalFrom(r io.Reader) (int, error) {
	if strm, ok := r.(cipher.Stream); ok {
		p.Pick(strm)
		return -1, nil
	}
	var buf [G1Size]byte
	n, err := io.ReadFull(r, buf[:])
	if err != nil {
		return n, fmt.Errorf("bls12381: reading G1 point: %w", err)
	}
	return n, p.UnmarshalBinary(buf[:])
}

// String returns the hexadecimal compressed encoding of p.
func (p *G1Point) String() string { return hex.EncodeToString(p.p.BytesCompressed()) }

// g1FromBytes decodes a strict compressed G1 encoding with circl. The
// identity is accepted.
func g1FromBytes(b []byte) (circl.G1, error) {
	var q circl.G1
	inf, err := checkCompressed(b, G1Size)
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
		if _, onCurve := gnarkG1NoSubgroupCheck(b); onCurve {
			return q, fmt.Errorf("%w: G1", ErrNotInSubgroup)
		}
		return q, fmt.Errorf("%w: G1 x-coordinate not on the curve", ErrEncoding)
	}
	return q, nil
}

// gnarkG1NoSubgroupCheck decompresses a G1 point with gnark, which then
// checks only that it is on the curve.
func gnarkG1NoSubgroupCheck(b []byte) (gnark.G1Affine, bool) {
	var q gnark.G1Affine
	err := gnark.NewDecoder(bytes.NewReader(b), gnark.NoSubgroupChecks()).Decode(&q)
	return q, err == nil
}

// gnarkG1 decodes a strict compressed G1 encoding with gnark, for
// verification. The identity is refused.
func gnarkG1(b []byte) (gnark.G1Affine, error) {
	inf, err := checkCompressed(b, G1Size)
	if err != nil {
		return gnark.G1Affine{}, err
	}
	if inf {
		return gnark.G1Affine{}, fmt.Errorf("%w: G1", ErrIdentity)
	}
	q, onCurve := gnarkG1NoSubgroupCheck(b)
	if !onCurve {
		return q, fmt.Errorf("%w: G1 x-coordinate not on the curve", ErrEncoding)
	}
	if !q.IsInSubGroup() {
		return q, fmt.Errorf("%w: G1", ErrNotInSubgroup)
	}
	return q, nil
}

// DecodeG1 strictly decodes a signature or partial signature: exactly 48
// bytes of compressed encoding, compression flag set, canonical x below p,
// on the curve, in the prime-order subgroup and not the identity. Errors
// wrap ErrEncoding, ErrNotInSubgroup or ErrIdentity.
func DecodeG1(b []byte) (*G1Point, error) {
	q, err := g1FromBytes(b)
	if err != nil {
		return nil, err
	}
	if q.IsIdentity() {
		return nil, fmt.Errorf("%w: G1", ErrIdentity)
	}
	return &G1Point{p: q}, nil
}
