package verifier

import (
	"context"
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/protocol"
)

// Forks at the resource.
//
// S1 says one holder per (resource, epoch), but only while at most f
// nodes misbehave: f+1 colluding nodes, or nodes restored from old copies
// of their vote stores, can sign a second token at an epoch already
// certified. Were equal epochs always admitted, both holders would write.
// So every store keeps, with the barrier, the token that set it, and
// refuses a token at the barrier epoch whose holder differs with a
// *ForkError (ErrFork): the two tokens are the proof (protocol.Fork). The
// first proof per (resource, epoch) is kept durably as a fork record
// (ForkLister), at most MaxForksPerResource per resource, and later
// traffic never overwrites it.
//
// A barrier written before the store kept holders has none: it admits
// the next token at its epoch, as before, and records that token's
// holder, so the next different holder is refused.

// MaxForksPerResource bounds the fork records a store keeps per resource:
// one per epoch, the first MaxForksPerResource epochs at which a fork was
// seen. Later forks are still refused, with their proof in the error,
// but not kept. A fork needs more than f misbehaving nodes, so a resource
// should never see one; the bound only stops such nodes from filling the
// store.
const MaxForksPerResource = 16

// ForkError is the error a barrier store returns for a token at the
// resource's barrier epoch whose holder is not the holder the store
// admitted at that epoch. errors.Is(err, ErrFork) holds for it, and Fork
// is the proof: anyone with the cluster file can check it
// (protocol.VerifyFork).
type ForkError struct {
	// Fork holds the token that set the barrier and the refused token, in
	// canonical order.
	Fork protocol.Fork
	// Barrier is the holder admitted at the epoch, whose token the store
	// keeps with the barrier.
	Barrier protocol.Holder
	// Refused is the holder of the refused token.
	Refused protocol.Holder
	// Kept reports that this refusal stored the proof as the fork record
	// of (resource, epoch): the first fork seen there. It is false when a
	// record was already kept for the epoch, the resource already holds
	// MaxForksPerResource records, or storing the record failed (the error
	// then says so too).
	Kept bool
}

// Error implements error.
func (e *ForkError) Error() string {
	return fmt.Sprintf("verifier: fork at resource %q epoch %d: holder %s refused, the barrier is held by %s; two valid tokens for one epoch mean more than f nodes misbehaved",
		e.Fork.Resource(), e.Fork.Epoch(), e.Refused.Short(), e.Barrier.Short())
}

// Is makes errors.Is(err, ErrFork) true.
func (e *ForkError) Is(target error) bool { return target == ErrFork }

// ForkLister is implemented by barrier stores that keep fork records:
// MemoryStore, BoltStore and SQLStore do. It is a separate interface so
// that other BarrierStore implementations keep compiling.
type ForkLister interface {
	// Forks returns the fork records kept for resource, by ascending
	// epoch: at most one per epoch and MaxForksPerResource in all. A
	// resource without forks has none (and no error).
	Forks(ctx context.Context, resource string) ([]protocol.Fork, error)
}

// barrierRecord is what a store keeps per resource: the barrier and the
// token admitted at it.
type barrierRecord struct {
	epoch uint64
	// token is the token admitted at epoch, or the zero Token when the
	// holder is unknown (a barrier written before stores kept holders, or
	// by an Admission without a token).
	token protocol.Token
}

// known reports whether the record names the holder admitted at its
// epoch.
func (r barrierRecord) known() bool {
	return !r.token.Holder.IsZero() && r.token.Epoch == r.epoch
}

// verdict is what a guarded write may do once the barrier admits it.
type verdict int

const (
	// keepRecord: the epoch equals the barrier and the record stays (same
	// holder, or an Admission without a token).
	keepRecord verdict = iota + 1
	// raiseRecord: no barrier, or the epoch is above it: the record
	// becomes the Admission's.
	raiseRecord
	// fillRecord: the epoch equals the barrier and the record names no
	// holder: it takes the Admission's token.
	fillRecord
	// replaceRecord: the epoch equals the barrier and the record holds a
	// token of another cluster, which cannot fork with this one (the
	// store was used by another cluster's verifier): the record takes the
	// Admission's token, as fillRecord.
	replaceRecord
)

// judge applies S4 and the fork rule to adm against the resource's
// record (ok false: no barrier yet). It returns the verdict, or a
// *StaleError or *ForkError (Kept false) without a verdict.
func judge(adm Admission, rec barrierRecord, ok bool) (verdict, error) {
	switch {
	case !ok || adm.epoch > rec.epoch:
		return raiseRecord, nil
	case adm.epoch < rec.epoch:
		return 0, &StaleError{Resource: adm.resource, Epoch: adm.epoch, Barrier: rec.epoch}
	case adm.token.Holder.IsZero():
		return keepRecord, nil
	case !rec.known():
		return fillRecord, nil
	case rec.token.Cluster != adm.token.Cluster:
		return replaceRecord, nil
	case rec.token.Holder == adm.token.Holder:
		return keepRecord, nil
	}
	fork, err := protocol.NewFork(rec.token, adm.token)
	if err != nil {
		// Both tokens name this resource, epoch and cluster with different
		// holders: only a record changed behind the store's back fails
		// here. Fail closed.
		return 0, fmt.Errorf("verifier: barrier record of %q at epoch %d: %w", adm.resource, adm.epoch, err)
	}
	return 0, &ForkError{Fork: fork, Barrier: rec.token.Holder, Refused: adm.token.Holder}
}

// parseRecordToken decodes the token a store keeps with the barrier of
// resource at epoch. A token that does not parse or names another
// resource is corruption, and fails closed; one of another epoch (a
// barrier raised since by a process that did not keep holders) names no
// holder of this epoch and yields the zero Token.
func parseRecordToken(resource string, epoch uint64, b []byte) (protocol.Token, error) {
	tok, err := protocol.ParseToken(b)
	if err != nil {
		return protocol.Token{}, fmt.Errorf("verifier: corrupt barrier record of %q: %w", resource, err)
	}
	if tok.Resource != resource {
		return protocol.Token{}, fmt.Errorf("verifier: corrupt barrier record of %q: token for %q", resource, tok.Resource)
	}
	if tok.Epoch != epoch {
		return protocol.Token{}, nil
	}
	return tok, nil
}

// asFork returns err's *ForkError, if it is one.
func asFork(err error) (*ForkError, bool) {
	var fe *ForkError
	if err == nil || !errors.As(err, &fe) {
		return nil, false
	}
	return fe, true
}
