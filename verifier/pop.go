package verifier

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// Proof mode: in proof mode a token alone admits nothing. The token names
// its holder (a libp2p peer ID of an Ed25519 key, see HolderKey), and every
// request must also carry the holder's signature over the request (package
// pop), so a leaked token cannot be used by anyone without the holder's
// key.

// RequireProof turns on proof mode: a request is admitted only with a proof
// of possession from the token's holder (see VerifyRequest and package
// pop), and a token alone admits nothing (VerifyFor, Admit and Fence.Admit
// refuse it with pop.ErrNoProof). Zero fields of cfg take their defaults.
func RequireProof(cfg pop.Config) Option {
	return func(o *options) { o.proof = &cfg }
}

// ProofRequired reports whether v is in proof mode.
func (v *Verifier) ProofRequired() bool { return v.proofRequired }

// VerifyRequest admits a request in proof mode, or checks one in any mode:
// tok must pass VerifyFor's checks for resource, and proof must be the
// holder's proof for req with tok. In order, cheap checks first:
//
//  1. cluster, field limits and resource (ErrWrongCluster,
//     ErrMalformedToken, ErrWrongResource);
//  2. the holder is an Ed25519 peer ID (pop.ErrBadProof wrapping
//     ErrHolderKey);
//  3. the proof's timestamp is within the window of the clock
//     (pop.ErrExpired);
//  4. the token's signature, from the cache or by pairing
//     (ErrInvalidToken);
//  5. the proof's signature under the holder's key over pop.SignedBytes
//     (pop.ErrBadProof);
//  6. the (holder, nonce) was not used within the window
//     (pop.ErrReplayed), and is recorded only now, so that only verified
//     proofs take room (pop.ErrTooManyProofs when the holder's quota,
//     MaxNoncesPerHolder, or the whole record, MaxNonces, is full).
//
// It does not look at the barrier, so it records the nonce of a stale
// token too: Fence.AdmitRequest and Fence.Middleware read the barrier
// between steps 5 and 6 and refuse a stale token before its nonce is
// recorded.
//
// On success it returns the Admission for a store's native transaction
// (BoltStore.Update, SQLStore.Update), as Admit does outside proof mode.
func (v *Verifier) VerifyRequest(tok protocol.Token, resource string, req pop.Request, proof pop.Proof) (Admission, error) {
	if err := v.checkProofUntilRecord(tok, resource, req, proof); err != nil {
		return Admission{}, err
	}
	if err := v.recordProof(tok, proof); err != nil {
		return Admission{}, err
	}
	return admitted(&tok), nil
}

// checkProofUntilRecord runs steps 1 to 5 of VerifyRequest.
func (v *Verifier) checkProofUntilRecord(tok protocol.Token, resource string, req pop.Request, proof pop.Proof) error {
	key, cached, err := v.checkProofTime(&tok, resource, proof)
	if err != nil {
		return err
	}
	if err := v.checkSignature(&tok, cached); err != nil {
		return err
	}
	return pop.Verify(key, tok, req, proof)
}

// checkProofTime runs steps 1 to 3 of VerifyRequest.
func (v *Verifier) checkProofTime(tok *protocol.Token, resource string, proof pop.Proof) (key ed25519.PublicKey, cached bool, err error) {
	cached, err = v.precheckFor(tok, resource)
	if err != nil {
		return nil, false, err
	}
	key, err = HolderKey(tok.Holder.ID)
	if err != nil {
		return nil, false, fmt.Errorf("%w: token holder %q: %w", pop.ErrBadProof, tok.Holder.ID, err)
	}
	if err := v.replay.CheckTime(proof); err != nil {
		return nil, false, err
	}
	return key, cached, nil
}

// recordProof runs step 6 of VerifyRequest.
func (v *Verifier) recordProof(tok protocol.Token, proof pop.Proof) error {
	return v.replay.Record(tok.Holder.ID, proof)
}

// AdmitRequest is Fence.Admit for a request with a holder's proof: tok and
// proof must pass v.VerifyRequest for resource and req, and tok's epoch must
// not be below the barrier; then write runs in the transaction that raises
// the barrier. The barrier is read once before the proof's nonce is
// recorded, so a stale token is refused with ErrStale without taking room
// in the replay record, and checked again, authoritatively, inside the
// transaction. The errors are VerifyRequest's, ErrStale, write's error, or
// a store error (ErrOutcomeUnknown if the commit's outcome is unknown; see
// BarrierStore.Guard).
func (f *Fence) AdmitRequest(ctx context.Context, tok protocol.Token, resource string, req pop.Request, proof pop.Proof, write func(tx Tx) error) error {
	if err := f.v.checkProofUntilRecord(tok, resource, req, proof); err != nil {
		return err
	}
	adm := admitted(&tok)
	if err := f.refuseStale(ctx, adm); err != nil {
		return err
	}
	if err := f.v.recordProof(tok, proof); err != nil {
		return err
	}
	return f.s.Guard(ctx, adm, write)
}

// refuseStale is a cheap read of the barrier outside any transaction: it
// returns a *StaleError if adm's epoch is below it. A barrier raised just
// after the read is still caught by Guard.
func (f *Fence) refuseStale(ctx context.Context, adm Admission) error {
	barrier, ok, err := f.s.Barrier(ctx, adm.resource)
	if err != nil {
		return fmt.Errorf("verifier: read barrier of %q: %w", adm.resource, err)
	}
	if ok && adm.epoch < barrier {
		return &StaleError{Resource: adm.resource, Epoch: adm.epoch, Barrier: barrier}
	}
	return nil
}
