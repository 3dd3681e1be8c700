package bls12381

import (
	crand "crypto/rand"
	"fmt"
	"io"
	"math/big"
	"slices"

	"github.com/consensys/gnark-crypto/ecc"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// CheckSignatureEncoding applies the byte-level rules of a signature's
// encoding without decompressing it: exactly G1Size bytes, compression
// flag set, not the point at infinity, x below p. It costs a few byte
// comparisons, so a parser can refuse garbage before any cache lookup;
// whether the point is on the curve and in the subgroup is left to
// Verify, which decodes strictly. Errors wrap ErrEncoding or ErrIdentity.
func CheckSignatureEncoding(b []byte) error {
	inf, err := checkCompressed(b, G1Size)
	if err != nil {
		return err
	}
	if inf {
		return fmt.Errorf("%w: G1", ErrIdentity)
	}
	return nil
}

// MessageHash is hash_to_G1(msg) of the min-sig ciphersuite, computed once
// so that a caller who knows the message before the signature arrives
// (or checks several signatures over one message) hashes it once.
type MessageHash struct{ h gnark.G1Affine }

// HashMessage returns hash_to_G1(msg) with SignatureDST, computed by gnark
// (the message is public).
func HashMessage(msg []byte) (*MessageHash, error) {
	h, err := gnark.HashToG1(msg, []byte(SignatureDST))
	if err != nil {
		return nil, fmt.Errorf("bls12381: hash to G1: %w", err)
	}
	return &MessageHash{h: h}, nil
}

// VerifyHash is Verify for a message hashed with HashMessage: sig is
// decoded strictly and checked with one multi-pairing.
func (pk *PublicKey) VerifyHash(h *MessageHash, sig []byte) error {
	s, err := gnarkG1(sig)
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	ok, err := pk.check(&s, &h.h)
	if err != nil {
		return err
	}
	if !ok {
		return ErrInvalidSignature
	}
	return nil
}

// check reports e(s, -g2)·e(h, pk) = 1 with one Miller loop over the two
// pairs and one final exponentiation.
func (pk *PublicKey) check(s, h *gnark.G1Affine) (bool, error) {
	// gnark's Miller loop with fixed arguments scales the lines it is given
	// in place (gnark-crypto v0.22.0), so each call gets its own copy.
	ls := []lines{negG2Lines(), pk.lines}
	ok, err := gnark.PairingCheckFixedQ([]gnark.G1Affine{*s, *h}, ls)
	if err != nil {
		return false, fmt.Errorf("bls12381: pairing: %w", err)
	}
	return ok, nil
}

// BatchCoefficientSize is the size in bytes of the random coefficient each
// signature of a batch is weighted with. The lowest bit is forced to 1 so
// no coefficient is zero, which leaves 127 bits of randomness: a batch
// holding an invalid signature passes with probability at most 2^-127.
const BatchCoefficientSize = 16

// VerifyBatch checks many signatures under pk at once: sigs[i] over
// msgs[i] for every i. It returns the indices, in ascending order, of the
// signatures that do not verify (malformed encodings included); every
// index not listed verified exactly as pk.Verify would have it. bad is nil
// when all verify.
//
// With random coefficients r_i read from rand (crypto/rand when nil) the
// batch is one equation, e(Σ r_i·σ_i, -g2)·e(Σ r_i·H(m_i), pk) = 1: one
// multi-pairing for the whole batch plus one hash per signature and two
// multi-scalar multiplications (gnark's) with 128-bit coefficients. An
// attacker who cannot predict the coefficients cannot make invalid
// signatures cancel out. If the equation fails, bisection over the
// weighted signatures finds the invalid ones. The coefficients must be
// unpredictable: pass a deterministic reader only in tests.
//
// err is non-nil only if rand fails or the slices differ in length; then
// bad is nil and nothing is known to verify.
func (pk *PublicKey) VerifyBatch(rand io.Reader, msgs, sigs [][]byte) (bad []int, err error) {
	if len(msgs) != len(sigs) {
		return nil, fmt.Errorf("bls12381: batch of %d messages and %d signatures", len(msgs), len(sigs))
	}
	switch len(sigs) {
	case 0:
		return nil, nil
	case 1:
		// One signature: the plain check costs the same multi-pairing and
		// needs no coefficient.
		if pk.Verify(msgs[0], sigs[0]) != nil {
			bad = []int{0}
		}
		return bad, nil
	}
	if rand == nil {
		rand = crand.Reader
	}
	coef := make([]byte, len(sigs)*BatchCoefficientSize)
	if _, err := io.ReadFull(rand, coef); err != nil {
		return nil, fmt.Errorf("bls12381: batch verify: reading randomness: %w", err)
	}
	var (
		idx     = make([]int, 0, len(sigs))
		ss      = make([]gnark.G1Affine, 0, len(sigs))
		hs      = make([]gnark.G1Affine, 0, len(sigs))
		scalars = make([]fr.Element, 0, len(sigs))
	)
	for i := range sigs {
		s, err := gnarkG1(sigs[i])
		if err != nil {
			bad = append(bad, i)
			continue
		}
		h, err := gnark.HashToG1(msgs[i], []byte(SignatureDST))
		if err != nil {
			bad = append(bad, i)
			continue
		}
		c := coef[i*BatchCoefficientSize : (i+1)*BatchCoefficientSize]
		c[BatchCoefficientSize-1] |= 1 // never zero
		var r fr.Element
		r.SetBytes(c) // 128 bits, below r: no reduction
		idx = append(idx, i)
		ss = append(ss, s)
		hs = append(hs, h)
		scalars = append(scalars, r)
	}
	if len(idx) == 0 {
		return bad, nil
	}
	// The common case, all valid: one multi-scalar multiplication per side
	// and one multi-pairing.
	one := ecc.MultiExpConfig{NbTasks: 1}
	var sumS, sumH gnark.G1Affine
	if _, err := sumS.MultiExp(ss, scalars, one); err != nil {
		return nil, fmt.Errorf("bls12381: batch verify: %w", err)
	}
	if _, err := sumH.MultiExp(hs, scalars, one); err != nil {
		return nil, fmt.Errorf("bls12381: batch verify: %w", err)
	}
	if ok, err := pk.check(&sumS, &sumH); err != nil {
		return nil, err
	} else if ok {
		return sortedInts(bad), nil
	}
	// Some are invalid: weigh each signature on its own and bisect.
	items := make([]batchItem, len(idx))
	for j, i := range idx {
		var r big.Int
		scalars[j].BigInt(&r)
		items[j].index = i
		items[j].rs.ScalarMultiplication(&ss[j], &r)
		items[j].rh.ScalarMultiplication(&hs[j], &r)
	}
	more, err := pk.bisect(items, true)
	if err != nil {
		return nil, err
	}
	return sortedInts(append(bad, more...)), nil
}

// batchItem is one signature of a batch weighted by its coefficient r:
// rs = r·σ, rh = r·H(m).
type batchItem struct {
	index  int
	rs, rh gnark.G1Affine
}

// bisect returns the indices of the invalid items. failed says the caller
// already knows the combined equation of items fails, so it is not checked
// again: when the left half of a failed batch passes, the right half must
// fail, because the two halves' pairing products multiply to the whole's.
func (pk *PublicKey) bisect(items []batchItem, failed bool) ([]int, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if !failed {
		ok, err := pk.batchHolds(items)
		if err != nil || ok {
			return nil, err
		}
	}
	if len(items) == 1 {
		// r != 0 in a group of prime order, so r·σ against r·H(m) fails
		// exactly when σ against H(m) does.
		return []int{items[0].index}, nil
	}
	mid := len(items) / 2
	left, right := items[:mid], items[mid:]
	ok, err := pk.batchHolds(left)
	if err != nil {
		return nil, err
	}
	if ok {
		return pk.bisect(right, true)
	}
	l, err := pk.bisect(left, true)
	if err != nil {
		return nil, err
	}
	r, err := pk.bisect(right, false)
	return append(l, r...), err
}

// batchHolds checks e(Σ r_i·σ_i, -g2)·e(Σ r_i·H(m_i), pk) = 1.
func (pk *PublicKey) batchHolds(items []batchItem) (bool, error) {
	var s, h gnark.G1Jac
	for i := range items {
		s.AddMixed(&items[i].rs)
		h.AddMixed(&items[i].rh)
	}
	var sa, ha gnark.G1Affine
	sa.FromJacobian(&s)
	ha.FromJacobian(&h)
	return pk.check(&sa, &ha)
}

func sortedInts(xs []int) []int {
	slices.Sort(xs)
	return xs
}
