package verifier

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultCommitTimeout bounds the commit of a guarded write on stores that
// talk to a database server or disk (SQLStore.CommitTimeout): the commit
// runs detached from the caller's context, so that a caller's deadline
// never interrupts a commit in progress, and this is its ceiling.
const DefaultCommitTimeout = 30 * time.Second

// Tx is a resource's key-value space inside one guarded transaction. Keys
// are scoped to the resource the transaction guards: two resources never see
// each other's keys, and data never shares a namespace with barriers. Writes
// are visible to later reads in the same Tx and commit together with the
// barrier, or not at all. Keys must be non-empty. Values are copied in and
// out, so callers may reuse their slices. A Tx is valid only while the write
// function it was given to runs, and is not safe for concurrent use.
type Tx interface {
	// Get returns the value of key and whether it is present.
	Get(key string) (value []byte, ok bool, err error)
	// Put sets key to value (a nil value stores an empty value).
	Put(key string, value []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(key string) error
}

// BarrierStore keeps each resource's barrier, the highest epoch it has
// admitted, and runs guarded writes atomically with the barrier check and
// raise (S4 fencing at the resource). Guard takes an Admission, which only
// verification produces, so no guarded write runs for an unverified token. Implementations are safe for concurrent use, serialise Guard
// calls on one resource, and pass the conformance suite in package
// verifier/barriertest.
type BarrierStore interface {
	// Barrier returns the resource's barrier; ok is false if the resource has
	// never admitted a write.
	Barrier(ctx context.Context, resource string) (epoch uint64, ok bool, err error)
	// Guard runs write inside one transaction iff adm.Epoch() >=
	// barrier(adm.Resource()) (any epoch is admitted for a resource without
	// a barrier), and raises the barrier to the epoch if it is higher, committing the barrier and
	// write's changes together or neither. If the epoch is below the barrier it returns a
	// *StaleError (errors.Is ErrStale) without running write.
	//
	// The store keeps adm.Token() with the barrier it sets. At an epoch
	// equal to the barrier it admits only the holder whose token it keeps
	// (a holder writes many times with one token); another holder's token
	// there is a fork, refused with a *ForkError (errors.Is ErrFork) that
	// holds both tokens as the proof, without running write. Stores that
	// implement ForkLister keep that proof, the first per (resource,
	// epoch), committing it although the write does not run. A barrier
	// with no holder known (written before stores kept holders) admits
	// the next token at its epoch and keeps that token.
	//
	// If write
	// returns an error or panics, nothing changes and Guard returns an error
	// wrapping write's error (a panic propagates). A nil write only admits
	// the epoch. write runs at most once. Guard fails without running write
	// if ctx is already done (wrapping ctx.Err()), for the zero Admission,
	// or with ErrClosed after Close. write must not call the store.
	//
	// ctx can stop a guarded write before its commit, never during it: if
	// ctx ends before the commit starts, nothing changes and Guard returns
	// an error wrapping ctx.Err(); once the commit has started, Guard waits
	// for it (bounded by the store's own commit timeout, where it has one).
	// Guard returns nil only if the write committed. If the store cannot
	// tell whether the commit took effect (a connection lost during the
	// commit, a commit timeout, a failed fsync), the error wraps
	// ErrOutcomeUnknown; every other error means nothing changed.
	Guard(ctx context.Context, adm Admission, write func(tx Tx) error) error
	// Close releases the store. Later calls fail with ErrClosed; a second
	// Close returns nil.
	Close() error
}

var (
	errNoAdmission = errors.New("verifier: zero Admission: no token was verified")
	errEmptyKey    = errors.New("verifier: empty key")
	errTxDone      = errors.New("verifier: transaction used after its write function returned")
)

// checkGuardArgs runs the checks every store makes before a transaction.
// A verified token always names a resource, so an empty one is the zero
// Admission.
func checkGuardArgs(ctx context.Context, adm Admission) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("verifier: guard %q: %w", adm.resource, err)
	}
	if adm.resource == "" {
		return errNoAdmission
	}
	return nil
}

// cancelledBeforeCommit is the error of a guarded write whose ctx ended
// after its write function ran and before the commit: nothing changed.
func cancelledBeforeCommit(resource string, epoch uint64, err error) error {
	return fmt.Errorf("verifier: guarded write to %q at epoch %d cancelled before commit: %w", resource, epoch, err)
}

// wrapWriteErr names the failing step around a guarded write's error.
func wrapWriteErr(resource string, epoch uint64, err error) error {
	return fmt.Errorf("verifier: guarded write to %q at epoch %d: %w", resource, epoch, err)
}
