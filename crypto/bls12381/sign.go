package bls12381

import (
	"fmt"
	"sync"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
)

// HashToG1 returns hash_to_G1(msg) of the min-sig ciphersuite: RFC 9380's
// BLS12381G1_XMD:SHA-256_SSWU_RO_ with SignatureDST, computed by circl.
func HashToG1(msg []byte) *G1Point {
	var p G1Point
	p.p.Hash(msg, []byte(SignatureDST))
	return &p
}

// Sign returns the signature of msg under the secret key (or key share) x:
// x·hash_to_G1(msg). The scalar multiplication is circl's constant-time one.
// Encode the result with MarshalBinary.
func Sign(x kyber.Scalar, msg []byte) *G1Point {
	h := HashToG1(msg)
	h.p.ScalarMult(&toScalar(x).v, &h.p)
	return h
}

// SignShare returns the partial signature of msg under the key share sh,
// indexed as sh, ready for share.RecoverCommit over NewSuite().G1().
func SignShare(sh *share.PriShare, msg []byte) *share.PubShare {
	return &share.PubShare{I: sh.I, V: Sign(sh.V, msg)}
}

// lines is gnark's precomputed Miller-loop lines for one fixed G2 point.
type lines = [2][len(gnark.LoopCounter) - 1]gnark.LineEvaluationAff

// negG2Lines holds the lines of -g2, the fixed second argument of every
// verification's first pairing.
var negG2Lines = sync.OnceValue(func() lines {
	_, _, _, g2 := gnark.Generators()
	var neg gnark.G2Affine
	neg.Neg(&g2)
	return gnark.PrecomputeLines(neg)
})

// PublicKey is a group public key or public key share, decoded and checked
// once, with gnark's Miller-loop lines precomputed, so that Verify decodes
// only the signature. A PublicKey is immutable and safe for concurrent use.
type PublicKey struct {
	enc   [G2Size]byte
	q     gnark.G2Affine
	lines lines
}

// NewPublicKey strictly decodes a 96-byte compressed G2 public key (see
// DecodeG2: the identity and points outside the subgroup are refused) and
// precomputes its lines. Errors wrap ErrEncoding, ErrNotInSubgroup or
// ErrIdentity.
func NewPublicKey(b []byte) (*PublicKey, error) {
	q, err := gnarkG2(b)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pk := &PublicKey{q: q, lines: gnark.PrecomputeLines(q)}
	copy(pk.enc[:], b)
	return pk, nil
}

// PublicKeyFromPoint returns the PublicKey of a G2 point of this package,
// such as a DKG's group key or share.PubPoly.Eval(i).V. The identity is
// refused with ErrIdentity.
func PublicKeyFromPoint(p kyber.Point) (*PublicKey, error) {
	g, ok := p.(*G2Point)
	if !ok {
		return nil, fmt.Errorf("public key: %w: point of type %T", ErrWrongGroup, p)
	}
	return NewPublicKey(g.p.BytesCompressed())
}

// Bytes returns the 96-byte compressed encoding of pk.
func (pk *PublicKey) Bytes() []byte { return append([]byte(nil), pk.enc[:]...) }

// Point returns pk as a kyber G2 point.
func (pk *PublicKey) Point() *G2Point {
	q, err := g2FromBytes(pk.enc[:])
	if err != nil {
		panic(fmt.Sprintf("bls12381: public key %x no longer decodes: %v", pk.enc, err))
	}
	return &G2Point{p: q}
}

// Verify checks that sig, a 48-byte compressed signature, is the signature
// of msg under pk. sig is decoded strictly (see DecodeG1). The check is one
// multi-pairing with gnark, a single Miller loop over two pairs and one
// final exponentiation: e(sig, -g2)·e(hash_to_G1(msg), pk) = 1, using the
// precomputed lines of -g2 and pk. Errors wrap ErrEncoding,
// ErrNotInSubgroup, ErrIdentity or ErrInvalidSignature.
func (pk *PublicKey) Verify(msg, sig []byte) error {
	h, err := HashMessage(msg)
	if err != nil {
		return err
	}
	return pk.VerifyHash(h, sig)
}

// Verify checks that sig is the signature of msg under the 96-byte public
// key pk, decoding both strictly. It is one multi-pairing with gnark's
// PairingCheck: e(sig, -g2)·e(hash_to_G1(msg), pk) = 1. Prefer NewPublicKey
// and PublicKey.Verify for a key used more than once. Errors wrap
// ErrEncoding, ErrNotInSubgroup, ErrIdentity or ErrInvalidSignature.
func Verify(pk, msg, sig []byte) error {
	q, err := gnarkG2(pk)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	s, err := gnarkG1(sig)
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	h, err := gnark.HashToG1(msg, []byte(SignatureDST))
	if err != nil {
		return fmt.Errorf("bls12381: hash to G1: %w", err)
	}
	_, _, _, g2 := gnark.Generators()
	var negG2 gnark.G2Affine
	negG2.Neg(&g2)
	ok, err := gnark.PairingCheck([]gnark.G1Affine{s, h}, []gnark.G2Affine{negG2, q})
	if err != nil {
		return fmt.Errorf("bls12381: pairing: %w", err)
	}
	if !ok {
		return ErrInvalidSignature
	}
	return nil
}
