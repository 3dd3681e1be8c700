package verifier

import (
	"context"

	"github.com/palisade-dev/palisade/protocol"
)

// Fence is what a resource embeds: a Verifier for the cluster's tokens and a
// BarrierStore for the resource's barriers. It is safe for concurrent use.
type Fence struct {
	v *Verifier
	s BarrierStore

	// MaxBodyBytes bounds the request body Middleware buffers before it
	// opens the guarded transaction; zero means DefaultMaxBodyBytes. Set it
	// before the fence serves requests.
	MaxBodyBytes int64
}

// NewFence returns a fence that checks tokens with v and barriers in s. The
// fence does not own s: close it yourself.
func NewFence(v *Verifier, s BarrierStore) *Fence {
	return &Fence{v: v, s: s}
}

// Admit applies the S4 rule (fencing at the resource) to one request: tok must verify for resource
// (Verifier.Admit: cheap checks, then the pairing check) and its epoch
// must not be below the resource's barrier (BarrierStore.Guard); then write
// runs in the transaction that raises the barrier. The error wraps
// ErrMalformedToken, ErrWrongCluster, ErrWrongResource, ErrInvalidToken,
// ErrStale (a *StaleError), ErrFork (a *ForkError with the proof: another
// holder's token was admitted at this epoch), write's error, ctx's error
// if ctx ended before the commit, or a store error; in all these cases
// nothing changed (but for the store's fork record). An
// error wrapping ErrOutcomeUnknown means the commit was sent but not
// confirmed: the write may have committed (see BarrierStore.Guard).
func (f *Fence) Admit(ctx context.Context, tok protocol.Token, resource string, write func(tx Tx) error) error {
	adm, err := f.v.Admit(tok, resource)
	if err != nil {
		return err
	}
	return f.s.Guard(ctx, adm, write)
}
