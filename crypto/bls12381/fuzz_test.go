package bls12381

import (
	"bytes"
	"errors"
	"math/big"
	"strings"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

// Fuzz targets for the strict decoders. Seeds live in
// testdata/fuzz/<FuzzName>/; run one with, e.g.,
//
//	go test ./crypto/bls12381/ -run '^$' -fuzz '^FuzzDecodeG1$' -fuzztime 30s

// class names the sentinel an error wraps, so the circl and gnark paths
// can be compared.
func class(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrIdentity):
		return "identity"
	case errors.Is(err, ErrNotInSubgroup):
		return "subgroup"
	case errors.Is(err, ErrEncoding):
		return "encoding"
	}
	return "other: " + err.Error()
}

// FuzzDecodeG1: the circl decoder (DecodeG1, used for partials), the gnark
// decoder (used by Verify) and the kyber UnmarshalBinary must reach the
// same verdict on any input; an accepted input re-encodes to itself and is
// accepted by the libraries' own (laxer) decoders.
func FuzzDecodeG1(f *testing.F) {
	f.Add(mustHex(f, g1GenHex))
	f.Add(append([]byte{0xc0}, make([]byte, G1Size-1)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, errC := DecodeG1(b)
		q, errG := gnarkG1(b)
		if class(errC) != class(errG) {
			t.Fatalf("%x: circl %v, gnark %v", b, errC, errG)
		}
		var k G1Point
		errK := k.UnmarshalBinary(b)
		if errors.Is(errC, ErrIdentity) {
			if errK != nil || !k.IsIdentity() {
				t.Fatalf("%x: identity refused by UnmarshalBinary: %v", b, errK)
			}
		} else if class(errK) != class(errC) {
			t.Fatalf("%x: UnmarshalBinary %v, DecodeG1 %v", b, errK, errC)
		}
		if errC != nil {
			if strings.HasPrefix(class(errC), "other") {
				t.Fatalf("%x: error wraps no sentinel: %v", b, errC)
			}
			return
		}
		enc, _ := p.MarshalBinary()
		genc := q.Bytes()
		if !bytes.Equal(enc, b) || !bytes.Equal(genc[:], b) {
			t.Fatalf("%x re-encodes to %x (circl), %x (gnark)", b, enc, genc)
		}
		var lax gnark.G1Affine
		if _, err := lax.SetBytes(b); err != nil {
			t.Fatalf("%x: strict accepts, gnark.SetBytes refuses: %v", b, err)
		}
	})
}

// FuzzDecodeG2 is FuzzDecodeG1 for public keys (DecodeG2, NewPublicKey).
func FuzzDecodeG2(f *testing.F) {
	f.Add(mustHex(f, g2GenHex))
	f.Add(append([]byte{0xc0}, make([]byte, G2Size-1)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, errC := DecodeG2(b)
		q, errG := gnarkG2(b)
		if class(errC) != class(errG) {
			t.Fatalf("%x: circl %v, gnark %v", b, errC, errG)
		}
		if _, errP := NewPublicKey(b); class(errP) != class(errG) {
			t.Fatalf("%x: NewPublicKey %v, gnark %v", b, errP, errG)
		}
		var k G2Point
		errK := k.UnmarshalBinary(b)
		if errors.Is(errC, ErrIdentity) {
			if errK != nil || !k.IsIdentity() {
				t.Fatalf("%x: identity refused by UnmarshalBinary: %v", b, errK)
			}
		} else if class(errK) != class(errC) {
			t.Fatalf("%x: UnmarshalBinary %v, DecodeG2 %v", b, errK, errC)
		}
		if errC != nil {
			if strings.HasPrefix(class(errC), "other") {
				t.Fatalf("%x: error wraps no sentinel: %v", b, errC)
			}
			return
		}
		enc, _ := p.MarshalBinary()
		genc := q.Bytes()
		if !bytes.Equal(enc, b) || !bytes.Equal(genc[:], b) {
			t.Fatalf("%x re-encodes to %x (circl), %x (gnark)", b, enc, genc)
		}
	})
}

// FuzzScalar: UnmarshalBinary accepts exactly the 32-byte big-endian
// values below r and round-trips them; SetBytes reduces any input as
// math/big does.
func FuzzScalar(f *testing.F) {
	f.Add(make([]byte, ScalarSize))
	f.Add(scalarOrder[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(big.Int).Mod(new(big.Int).SetBytes(b), bigR)
		var s Scalar
		s.SetBytes(b)
		got, _ := s.MarshalBinary()
		if new(big.Int).SetBytes(got).Cmp(want) != 0 {
			t.Fatalf("SetBytes(%x) = %x, want %x", b, got, want)
		}
		err := s.UnmarshalBinary(b)
		canonical := len(b) == ScalarSize && new(big.Int).SetBytes(b).Cmp(bigR) < 0
		if canonical != (err == nil) {
			t.Fatalf("UnmarshalBinary(%x): %v, canonical %v", b, err, canonical)
		}
		if err != nil && !errors.Is(err, ErrEncoding) {
			t.Fatalf("UnmarshalBinary(%x): %v does not wrap ErrEncoding", b, err)
		}
		if err == nil {
			if enc, _ := s.MarshalBinary(); !bytes.Equal(enc, b) {
				t.Fatalf("%x re-encodes to %x", b, enc)
			}
		}
	})
}
