package verifier

import (
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/internal/mint"
)

// Admission is what a token that passed verification for one resource
// admits: the resource, the token's epoch and holder, and the token
// itself, which the store keeps with the barrier so that another holder's
// token at the same epoch is refused with its proof (ErrFork). Only verification produces one
// ([Verifier.Admit], [Verifier.VerifyRequest]), and the barrier stores take
// an Admission rather than a raw epoch ([BarrierStore.Guard],
// [BoltStore.Update], [SQLStore.Update]), so a guarded write cannot skip
// the token check (S4: the barrier compares only verified epochs). The zero Admission admits nothing: every store refuses
// it.
//
// An Admission is a value: it stays valid for as long as the caller keeps
// it, and the barrier check in the store still decides, atomically with
// the write, whether its epoch is stale.
type Admission struct {
	resource string
	epoch    uint64
	holder   protocol.Holder
	token    protocol.Token
}

// Resource is the resource the token was verified for.
func (a Admission) Resource() string { return a.resource }

// Epoch is the verified token's epoch, the fencing number the store
// compares with the resource's barrier.
func (a Admission) Epoch() uint64 { return a.epoch }

// Holder is the verified token's holder (identity and lock session).
func (a Admission) Holder() protocol.Holder { return a.holder }

// Token is the verified token: a barrier store keeps it with the barrier
// it sets, as the first half of the proof if another holder's token comes
// at the same epoch. The Admissions the conformance suite
// (verifier/barriertest) makes to drive a store at any epoch without
// signing a token have none (the zero Token, no holder): a store treats
// them as a holder it does not know, which never forks.
func (a Admission) Token() protocol.Token { return a.token }

// admitted builds the Admission of tok, which the caller has just verified
// for tok.Resource: the only place an Admission is made from a token.
func admitted(tok *protocol.Token) Admission {
	return Admission{resource: tok.Resource, epoch: tok.Epoch, holder: tok.Holder, token: *tok}
}

func init() {
	mint.Admission = func(resource string, epoch uint64) any {
		return Admission{resource: resource, epoch: epoch}
	}
}

// Admit verifies tok for resource, as VerifyFor does, and returns the
// Admission a barrier store needs to run a guarded write for it. Its
// errors are VerifyFor's; in proof mode (RequireProof) it refuses every
// token with pop.ErrNoProof: use VerifyRequest there.
func (v *Verifier) Admit(tok protocol.Token, resource string) (Admission, error) {
	if err := v.VerifyFor(tok, resource); err != nil {
		return Admission{}, err
	}
	return admitted(&tok), nil
}
