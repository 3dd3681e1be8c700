package bls12381

import "errors"

// Sentinel errors. Functions of this package wrap them with %w, so callers
// branch with errors.Is.
var (
	// ErrEncoding reports bytes that are not the canonical encoding of a
	// group element or scalar: wrong length, a forbidden flag combination,
	// a coordinate or scalar not below its modulus, or an x-coordinate with
	// no point on the curve.
	ErrEncoding = errors.New("bls12381: invalid encoding")
	// ErrNotInSubgroup reports a point that lies on the curve but outside
	// the prime-order subgroup.
	ErrNotInSubgroup = errors.New("bls12381: point not in the prime-order subgroup")
	// ErrIdentity reports the identity element where a signature, partial
	// signature or public key was expected.
	ErrIdentity = errors.New("bls12381: identity element")
	// ErrInvalidSignature reports a well-formed signature that does not
	// verify under the given public key and message.
	ErrInvalidSignature = errors.New("bls12381: invalid signature")
	// ErrWrongGroup reports a kyber.Point or kyber.Scalar that does not come
	// from this package's groups.
	ErrWrongGroup = errors.New("bls12381: element of another group")
)
