package bls12381

import (
	"bytes"
	"fmt"
)

// Encoded sizes.
const (
	// G1Size is the size of a compressed G1 point: a signature or partial
	// signature.
	G1Size = 48
	// G2Size is the size of a compressed G2 point: a public key.
	G2Size = 96
	// GTSize is the size of an encoded GT element (12 base-field elements).
	GTSize = 576
	// ScalarSize is the size of an encoded scalar: big-endian, below r.
	ScalarSize = 32
	// SignatureSize is the size of a signature: a compressed G1 point.
	SignatureSize = G1Size
	// PublicKeySize is the size of a public key: a compressed G2 point.
	PublicKeySize = G2Size

	fpSize = 48
)

// Flag bits of the first byte of a ZCash/IETF point encoding.
const (
	flagCompressed = 0x80
	flagInfinity   = 0x40
	flagSort       = 0x20
	flagMask       = flagCompressed | flagInfinity | flagSort
)

// fieldModulus is p, the base-field modulus, big-endian.
var fieldModulus = [fpSize]byte{
	0x1a, 0x01, 0x11, 0xea, 0x39, 0x7f, 0xe6, 0x9a, 0x4b, 0x1b, 0xa7, 0xb6,
	0x43, 0x4b, 0xac, 0xd7, 0x64, 0x77, 0x4b, 0x84, 0xf3, 0x85, 0x12, 0xbf,
	0x67, 0x30, 0xd2, 0xa0, 0xf6, 0xb0, 0xf6, 0x24, 0x1e, 0xab, 0xff, 0xfe,
	0xb1, 0x53, 0xff, 0xff, 0xb9, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xaa, 0xab,
}

// checkCompressed applies the byte-level rules of the compressed
// ZCash/IETF serialization to b, which must hold a point of exactly size
// bytes (G1Size or G2Size): the compression flag is set; the point at
// infinity has its sort flag clear and every other bit zero; otherwise each
// 48-byte coordinate (flags masked) is below p. It reports whether b encodes
// the point at infinity. Whether the point is on the curve and in the
// subgroup is left to the libraries. b is public: nothing here needs to be
// constant time.
func checkCompressed(b []byte, size int) (infinity bool, err error) {
	if len(b) != size {
		return false, fmt.Errorf("%w: %d bytes, want %d", ErrEncoding, len(b), size)
	}
	flags := b[0] & flagMask
	if flags&flagCompressed == 0 {
		return false, fmt.Errorf("%w: compression flag not set", ErrEncoding)
	}
	if flags&flagInfinity != 0 {
		if flags&flagSort != 0 {
			return false, fmt.Errorf("%w: sort flag set on the point at infinity", ErrEncoding)
		}
		if b[0]&^flagMask != 0 || !allZero(b[1:]) {
			return false, fmt.Errorf("%w: point at infinity with non-zero coordinate bits", ErrEncoding)
		}
		return true, nil
	}
	var coord [fpSize]byte
	for off := 0; off < size; off += fpSize {
		copy(coord[:], b[off:off+fpSize])
		if off == 0 {
			coord[0] &^= flagMask
		}
		if bytes.Compare(coord[:], fieldModulus[:]) >= 0 {
			return false, fmt.Errorf("%w: coordinate not below p", ErrEncoding)
		}
	}
	return false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
