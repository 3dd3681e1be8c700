package crypto

import (
	"fmt"
	"io"

	"github.com/palisade-dev/palisade/crypto/bls12381"
)

// BatchCoefficientSize is the size in bytes of the random coefficient each
// signature of a batch is weighted with (see bls12381.BatchCoefficientSize):
// a batch holding invalid signatures passes with probability at most
// 2^-127 per check.
const BatchCoefficientSize = bls12381.BatchCoefficientSize

// VerifyBatch checks many signatures under k at once: sigs[i] over msgs[i]
// for every i. It returns the indices, in ascending order, of the signatures
// that do not verify (malformed encodings included); every index not listed
// verified exactly as k.Verify would have it. bad is nil when all verify.
//
// With random coefficients r_i read from rand (crypto/rand when nil), the
// whole batch is one equation, e(Σ r_i·σ_i, -g2)·e(Σ r_i·H(m_i), k) = 1:
// one multi-pairing for the batch instead of one per signature, plus one
// hash per signature and two multi-scalar multiplications with 128-bit
// coefficients. An attacker who cannot predict the coefficients cannot
// make invalid signatures cancel out. If the equation fails, bisection
// over the weighted signatures finds the invalid ones: each is refused
// alone and the valid ones are still accepted. The coefficients must be
// unpredictable: pass a deterministic reader only in tests.
//
// err is non-nil only if the key does not decode, rand fails or the slices
// differ in length; then bad is nil and nothing is known to verify.
func (k PublicKey) VerifyBatch(rand io.Reader, msgs [][]byte, sigs []Signature) (bad []int, err error) {
	pk, err := k.decode()
	if err != nil {
		return nil, err
	}
	return verifyBatch(pk, rand, msgs, sigs)
}

// VerifyBatch is PublicKey.VerifyBatch under the group public key, which
// is kept decoded.
func (g *GroupKey) VerifyBatch(rand io.Reader, msgs [][]byte, sigs []Signature) (bad []int, err error) {
	return verifyBatch(g.key, rand, msgs, sigs)
}

func verifyBatch(pk *bls12381.PublicKey, rand io.Reader, msgs [][]byte, sigs []Signature) ([]int, error) {
	if len(msgs) != len(sigs) {
		return nil, fmt.Errorf("crypto: batch of %d messages and %d signatures", len(msgs), len(sigs))
	}
	raw := make([][]byte, len(sigs))
	for i := range sigs {
		raw[i] = sigs[i][:]
	}
	bad, err := pk.VerifyBatch(rand, msgs, raw)
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	return bad, nil
}
