package verifier

import (
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// VerifyBatch is Verify for many tokens at once, for resources that see many
// new holders: it returns one error per token, nil for each token that
// Verify would accept, and for every other token the error Verify would
// give (ErrWrongCluster, ErrMalformedToken or ErrInvalidToken).
//
// Tokens that fail the cheap checks or are already in the verified-token
// cache cost no pairing (and no point decoding). The rest are checked
// together under the group key with a random linear combination: one
// multi-pairing for the whole batch instead of one per token (see
// crypto.GroupKey.VerifyBatch). An invalid token in the batch is found by
// bisection and refused alone with ErrInvalidToken; the valid ones are
// still accepted. Every accepted token enters the cache.
func (v *Verifier) VerifyBatch(toks []protocol.Token) []error {
	errs := make([]error, len(toks))
	var (
		idx  []int
		msgs [][]byte
		sigs []crypto.Signature
	)
	for i := range toks {
		cached, err := v.precheck(&toks[i])
		if err != nil {
			errs[i] = err
			continue
		}
		if cached {
			continue
		}
		idx = append(idx, i)
		msgs = append(msgs, toks[i].Statement.SignedBytes())
		sigs = append(sigs, toks[i].Signature)
	}
	if len(idx) == 0 {
		return errs
	}
	bad, err := v.key.VerifyBatch(nil, msgs, sigs)
	if err != nil {
		// checkSignature counts each token it checks.
		// No randomness: check one by one rather than fail valid tokens.
		for _, i := range idx {
			errs[i] = v.checkSignature(&toks[i], false)
		}
		return errs
	}
	v.checked.Add(uint64(len(idx)))
	for _, j := range bad {
		i := idx[j]
		// Name the cause as Verify would: a malformed point (the strict
		// decoding fails, which costs no pairing) or a signature that
		// does not verify (checked alone once more, as an invalid token
		// already cost its bisection's pairings).
		cause := v.key.Verify(msgs[j], sigs[j])
		if cause == nil {
			cause = crypto.ErrInvalidSignature
		}
		errs[i] = invalid(toks[i], cause)
	}
	if v.cache != nil {
		next := 0
		for j, i := range idx {
			if next < len(bad) && bad[next] == j {
				next++
				continue
			}
			v.cache.add(&toks[i])
		}
	}
	return errs
}
