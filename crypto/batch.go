package crypto

import (
	crand "crypto/rand"
	"fmt"
	"io"
	"slices"

	"go.dedis.ch/kyber/v3"
)

// BatchCoefficientSize is the size in bytes of the random coefficient each
// signature of a batch is weighted with. One bit is forced to 1 so no
// coefficient is zero, which leaves 127 bits of randomness: a batch holding
// invalid signatures passes with probability at most 2^-127 per check, well
// below the curve's own security level.
const BatchCoefficientSize = 16

// VerifyBatch checks many signatures under k at once: sigs[i] over msgs[i]
// for every i. It returns the indices, in ascending order, of the signatures
// that do not verify (malformed encodings included); every index not listed
// verified exactly as k.Verify would have it. bad is nil when all verify.
//
// With random coefficients r_i read from rand (crypto/rand when nil), the
// whole batch is one equation, e(Σ r_i·σ_i, g2) == e(Σ r_i·H(m_i), k): two
// pairings for the batch instead of two per signature, plus one hash per
// signature and two multi-scalar multiplications with 128-bit coefficients.
// An attacker who cannot predict the coefficients cannot make invalid
// signatures cancel out. If the equation fails, bisection over the weighted
// signatures finds the invalid ones: each is refused alone and the valid
// ones are still accepted. The coefficients must be unpredictable: pass a
// deterministic reader only in tests.
//
// err is non-nil only if rand fails or the slices differ in length; then bad
// is nil and nothing is known to verify.
func (k PublicKey) VerifyBatch(rand io.Reader, msgs [][]byte, sigs []Signature) (bad []int, err error) {
	X, err := decodeG2(k[:])
	if err != nil {
		return nil, err
	}
	return verifyBatch(X, rand, msgs, sigs)
}

// VerifyBatch is PublicKey.VerifyBatch under the group public key.
func (g *GroupKey) VerifyBatch(rand io.Reader, msgs [][]byte, sigs []Signature) (bad []int, err error) {
	return verifyBatch(g.commits[0], rand, msgs, sigs)
}

// batchItem is one signature of a batch, weighted by its coefficient r:
// rs = r·σ, rh = r·H(m).
type batchItem struct {
	index  int
	rs, rh kyber.Point
}

func verifyBatch(X kyber.Point, rand io.Reader, msgs [][]byte, sigs []Signature) ([]int, error) {
	if len(msgs) != len(sigs) {
		return nil, fmt.Errorf("crypto: batch of %d messages and %d signatures", len(msgs), len(sigs))
	}
	var bad []int
	switch len(sigs) {
	case 0:
		return nil, nil
	case 1:
		// One signature: the plain check costs the same two pairings and
		// needs no coefficient.
		if verifyPoint(X, msgs[0], sigs[0][:]) != nil {
			bad = []int{0}
		}
		return bad, nil
	}
	if rand == nil {
		rand = crand.Reader
	}
	coef := make([]byte, len(sigs)*BatchCoefficientSize)
	if _, err := io.ReadFull(rand, coef); err != nil {
		return nil, fmt.Errorf("crypto: batch verify: reading randomness: %w", err)
	}
	hs := make([]kyber.Point, 0, len(sigs))
	ss := make([]kyber.Point, 0, len(sigs))
	idx := make([]int, 0, len(sigs))
	for i := range sigs {
		s, err := decodeG1(sigs[i][:])
		if err != nil {
			bad = append(bad, i)
			continue
		}
		coef[i*BatchCoefficientSize+BatchCoefficientSize-1] |= 1 // never zero
		// Keep the coefficients of the well-formed signatures in order.
		copy(coef[len(idx)*BatchCoefficientSize:], coef[i*BatchCoefficientSize:(i+1)*BatchCoefficientSize])
		idx = append(idx, i)
		ss = append(ss, s)
		hs = append(hs, hashToG1(msgs[i]))
	}
	if len(idx) == 0 {
		return bad, nil
	}
	coef = coef[:len(idx)*BatchCoefficientSize]
	// The common case, all valid: one multi-scalar multiplication per side
	// and one pairing check.
	if pairingCheck(X, multiScalarMul(coef, hs), multiScalarMul(coef, ss)) {
		return sortInts(bad), nil
	}
	// Some are invalid: weigh each signature on its own and bisect.
	items := make([]batchItem, len(idx))
	for j, i := range idx {
		r := suite.G1().Scalar().SetBytes(coef[j*BatchCoefficientSize : (j+1)*BatchCoefficientSize])
		items[j] = batchItem{
			index: i,
			rs:    suite.G1().Point().Mul(r, ss[j]),
			rh:    suite.G1().Point().Mul(r, hs[j]),
		}
	}
	bad = append(bad, bisect(X, items, true)...)
	return sortInts(bad), nil
}

func sortInts(xs []int) []int {
	slices.Sort(xs)
	return xs
}

// multiScalarMul returns Σ c_i·P_i for the big-endian
// BatchCoefficientSize-byte coefficients c_i in coef, by the bucket method
// (Pippenger): for each window of w bits, from the top, the accumulator is
// doubled w times and each point is added to the bucket of its w-bit digit;
// Σ d·bucket_d then costs 2^(w+1) additions through running sums. That is
// about (128/w)·(n + 2^(w+1)) additions instead of n·192 for n separate
// double-and-add multiplications. It is not constant time: the coefficients
// are fresh for each batch, so whatever timing reveals about them comes
// after they were used.
func multiScalarMul(coef []byte, pts []kyber.Point) kyber.Point {
	const bits = BatchCoefficientSize * 8
	w := msmWindow(len(pts))
	buckets := make([]kyber.Point, 1<<w-1)
	acc := suite.G1().Point().Null()
	for win := (bits+w-1)/w - 1; win >= 0; win-- {
		for k := 0; k < w; k++ {
			acc.Add(acc, acc)
		}
		clear(buckets)
		for i, p := range pts {
			d := digit(coef[i*BatchCoefficientSize:(i+1)*BatchCoefficientSize], win*w, w)
			switch {
			case d == 0:
			case buckets[d-1] == nil:
				buckets[d-1] = p.Clone()
			default:
				buckets[d-1].Add(buckets[d-1], p)
			}
		}
		running := suite.G1().Point().Null()
		sum := suite.G1().Point().Null()
		for d := len(buckets) - 1; d >= 0; d-- {
			if buckets[d] != nil {
				running.Add(running, buckets[d])
			}
			sum.Add(sum, running)
		}
		acc.Add(acc, sum)
	}
	return acc
}

// msmWindow picks the window width that minimises the additions of
// multiScalarMul for n points.
func msmWindow(n int) int {
	const bits = BatchCoefficientSize * 8
	best, bestCost := 1, -1
	for w := 1; w <= 10; w++ {
		cost := (bits + w - 1) / w * (n + 2<<w)
		if bestCost < 0 || cost < bestCost {
			best, bestCost = w, cost
		}
	}
	return best
}

// digit returns bits lo .. lo+w-1 of the big-endian number c.
func digit(c []byte, lo, w int) int {
	d := 0
	for b := 0; b < w; b++ {
		bit := lo + b
		if bit >= 8*len(c) {
			break
		}
		if c[len(c)-1-bit/8]>>(bit%8)&1 == 1 {
			d |= 1 << b
		}
	}
	return d
}

// bisect returns the indices of the invalid items. failed says the caller
// already knows the combined equation of items fails, so it is not checked
// again: when the left half of a failed batch passes, the right half must
// fail, because the two halves' pairing quotients multiply to the whole's.
func bisect(X kyber.Point, items []batchItem, failed bool) []int {
	if len(items) == 0 {
		return nil
	}
	if !failed && batchHolds(X, items) {
		return nil
	}
	if len(items) == 1 {
		// r != 0 in a group of prime order, so r·σ vs r·H(m) fails
		// exactly when σ vs H(m) does.
		return []int{items[0].index}
	}
	mid := len(items) / 2
	left, right := items[:mid], items[mid:]
	if batchHolds(X, left) {
		return bisect(X, right, true)
	}
	return append(bisect(X, left, true), bisect(X, right, false)...)
}

// batchHolds checks e(Σ r_i·σ_i, g2) == e(Σ r_i·H(m_i), X).
func batchHolds(X kyber.Point, items []batchItem) bool {
	s := suite.G1().Point().Null()
	h := suite.G1().Point().Null()
	for _, it := range items {
		s.Add(s, it.rs)
		h.Add(h, it.rh)
	}
	return pairingCheck(X, h, s)
}
