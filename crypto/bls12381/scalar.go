package bls12381

import (
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	"go.dedis.ch/kyber/v3"
)

// scalarOrder is r, the order of G1, G2 and GT, big-endian.
var scalarOrder = [ScalarSize]byte{
	0x73, 0xed, 0xa7, 0x53, 0x29, 0x9d, 0x7d, 0x48, 0x33, 0x39, 0xd8, 0x08,
	0x09, 0xa1, 0xd8, 0x05, 0x53, 0xbd, 0xa4, 0x02, 0xff, 0xfe, 0x5b, 0xfe,
	0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
}

// two64 is 2^64 mod r, for reducing byte strings 64 bits at a time.
var two64 = func() circl.Scalar {
	var s circl.Scalar
	s.SetUint64(1 << 32)
	s.Mul(&s, &s)
	return s
}()

// pickBytes is how many stream bytes Scalar.Pick reduces modulo r: 512
// bits, so the bias from uniform is below 2^-257.
const pickBytes = 64

// Scalar is an element of Fr, the scalar field of BLS12-381, backed by
// circl's constant-time Montgomery arithmetic. It implements kyber.Scalar
// and is shared by G1, G2 and GT. Its encoding is 32 bytes, big-endian,
// below r.
//
// Every operation on a Scalar runs in time independent of its value, with
// two caveats: Inv (and Div) exponentiate by the public r-2, and Equal's
// result is of course observable.
type Scalar struct{ v circl.Scalar }

var _ kyber.Scalar = (*Scalar)(nil)

func toScalar(s kyber.Scalar) *Scalar {
	sc, ok := s.(*Scalar)
	if !ok {
		panic(fmt.Errorf("%w: scalar of type %T", ErrWrongGroup, s))
	}
	return sc
}

// Equal reports whether s and s2 are equal, in constant time.
func (s *Scalar) Equal(s2 kyber.Scalar) bool { return s.v.IsEqual(&toScalar(s2).v) == 1 }

// Set sets s to a and returns s.
func (s *Scalar) Set(a kyber.Scalar) kyber.Scalar { s.v.Set(&toScalar(a).v); return s }

// Clone returns a copy of s.
func (s *Scalar) Clone() kyber.Scalar { c := *s; return &c }

// SetInt64 sets s to v mod r and returns s.
func (s *Scalar) SetInt64(v int64) kyber.Scalar {
	if v >= 0 {
		s.v.SetUint64(uint64(v))
		return s
	}
	// -v overflows for math.MinInt64, but uint64 of it is still 2^63.
	s.v.SetUint64(uint64(-v))
	s.v.Neg()
	return s
}

// Zero sets s to 0 and returns s.
func (s *Scalar) Zero() kyber.Scalar { s.v.SetUint64(0); return s }

// One sets s to 1 and returns s.
func (s *Scalar) One() kyber.Scalar { s.v.SetOne(); return s }

// Add sets s to a+b mod r and returns s.
func (s *Scalar) Add(a, b kyber.Scalar) kyber.Scalar {
	s.v.Add(&toScalar(a).v, &toScalar(b).v)
	return s
}

// Sub sets s to a-b mod r and returns s.
func (s *Scalar) Sub(a, b kyber.Scalar) kyber.Scalar {
	s.v.Sub(&toScalar(a).v, &toScalar(b).v)
	return s
}

// Neg sets s to -a mod r and returns s.
func (s *Scalar) Neg(a kyber.Scalar) kyber.Scalar {
	s.v.Set(&toScalar(a).v)
	s.v.Neg()
	return s
}

// Mul sets s to a·b mod r and returns s.
func (s *Scalar) Mul(a, b kyber.Scalar) kyber.Scalar {
	s.v.Mul(&toScalar(a).v, &toScalar(b).v)
	return s
}

// Div sets s to a/b mod r and returns s. Dividing by zero gives zero.
func (s *Scalar) Div(a, b kyber.Scalar) kyber.Scalar {
	var inv circl.Scalar
	inv.Inv(&toScalar(b).v)
	s.v.Mul(&toScalar(a).v, &inv)
	return s
}

// Inv sets s to a^-1 mod r (computed as a^(r-2), so the inverse of zero is
// zero) and returns s.
func (s *Scalar) Inv(a kyber.Scalar) kyber.Scalar { s.v.Inv(&toScalar(a).v); return s }

// Pick sets s to a uniformly distributed scalar: 64 bytes of rand reduced
// modulo r. It returns s.
func (s *Scalar) Pick(rand cipher.Stream) kyber.Scalar {
	var buf [pickBytes]byte
	rand.XORKeyStream(buf[:], buf[:])
	s.v = reduce(buf[:])
	return s
}

// SetBytes sets s to the big-endian integer b reduced modulo r, for b of
// any length, and returns s. It runs in time that depends on len(b) only.
// Use UnmarshalBinary to decode a canonical encoding strictly.
func (s *Scalar) SetBytes(b []byte) kyber.Scalar { s.v = reduce(b); return s }

// reduce returns the big-endian integer b modulo r, by Horner's rule over
// 64-bit words with circl's Montgomery arithmetic, whose running time does
// not depend on the value of b (circl's own SetBytes goes through math/big).
func reduce(b []byte) circl.Scalar {
	var acc, w circl.Scalar
	var word [8]byte
	head := len(b) % 8
	if head != 0 {
		copy(word[8-head:], b[:head])
		acc.SetUint64(binary.BigEndian.Uint64(word[:]))
		b = b[head:]
	}
	for ; len(b) >= 8; b = b[8:] {
		acc.Mul(&acc, &two64)
		w.SetUint64(binary.BigEndian.Uint64(b[:8]))
		acc.Add(&acc, &w)
	}
	return acc
}

// lessThanOrder reports whether the 32-byte big-endian b is below r,
// without branching on b: it propagates the borrow of b - r.
func lessThanOrder(b []byte) bool {
	var borrow uint32
	for i := ScalarSize - 1; i >= 0; i-- {
		d := uint32(b[i]) - uint32(scalarOrder[i]) - borrow
		borrow = d >> 31
	}
	return borrow == 1
}

// MarshalBinary returns the 32-byte big-endian encoding of s.
func (s *Scalar) MarshalBinary() ([]byte, error) { return s.v.MarshalBinary() }

// UnmarshalBinary sets s from its canonical encoding: exactly 32 bytes,
// big-endian, below r. On error s is unchanged and the error wraps
// ErrEncoding.
func (s *Scalar) UnmarshalBinary(b []byte) error {
	if len(b) != ScalarSize {
		return fmt.Errorf("%w: scalar of %d bytes, want %d", ErrEncoding, len(b), ScalarSize)
	}
	if !lessThanOrder(b) {
		return fmt.Errorf("%w: scalar not below the group order", ErrEncoding)
	}
	s.v = reduce(b)
	return nil
}

// MarshalSize returns ScalarSize.
func (s *Scalar) MarshalSize() int { return ScalarSize }

// MarshalTo writes the encoding of s to w.
func (s *Scalar) MarshalTo(w io.Writer) (int, error) {
	b, err := s.MarshalBinary()
	if err != nil {
		return 0, err
	}
	return w.Write(b)
}

// UnmarshalFrom reads a canonical encoding from r into s. As kyber
// specifies, if r is a cipher.Stream (an XOF), s is picked from it instead.
func (s *Scalar) UnmarshalFrom(r io.Reader) (int, error) {
	if strm, ok := r.(cipher.Stream); ok {
		s.Pick(strm)
		return -1, nil
	}
	var buf [ScalarSize]byte
	n, err := io.ReadFull(r, buf[:])
	if err != nil {
		return n, fmt.Errorf("bls12381: reading scalar: %w", err)
	}
	return n, s.UnmarshalBinary(buf[:])
}

// String returns the big-endian hexadecimal encoding of s. Like every
// kyber scalar it prints its value: never format a secret.
func (s *Scalar) String() string {
	b, _ := s.MarshalBinary()
	return hex.EncodeToString(b)
}
