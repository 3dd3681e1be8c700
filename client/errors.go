package client

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Errors callers can branch on (with errors.Is).
var (
	// ErrNotEnoughNodes: fewer than 2f+1 nodes gave a usable answer.
	ErrNotEnoughNodes = errors.New("client: not enough nodes")
	// ErrBusy: another holder has the resource. A *BusyError names it.
	ErrBusy = errors.New("client: resource busy")
	// ErrHeldLocally: this Client itself already holds, or is acquiring,
	// the resource; one Client holds at most one Lock per resource.
	// TryAcquire returns it at once; Acquire waits for the other Lock to
	// end instead. errors.Is(err, ErrBusy) also holds for it, but it is
	// never a *BusyError (no node reported anything).
	ErrHeldLocally = fmt.Errorf("client: already held or being acquired by this client: %w", ErrBusy)
	// ErrRefused: nodes refused the request (unauthorised, wrong cluster …).
	ErrRefused = errors.New("client: refused")
	// ErrLost: the lock's lease ended before Release.
	ErrLost = errors.New("client: lease lost")
	// ErrBadToken: a Lock handed out at the vote (see Lock.Committed)
	// carried a token that did not verify: a member that had signed
	// validly before sent a forged partial. The Lock is lost (its error
	// wraps ErrLost too) and the resource refuses the token; acquire
	// again. The member's partials are checked first from then on.
	ErrBadToken = errors.New("client: token does not verify")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrFork: the nodes know two valid tokens for one (resource, epoch)
	// with different holders: more than f nodes signed twice, or were
	// restored from old copies of their vote stores (issue 21). S1 no
	// longer holds for the resource, so Acquire stops rather than take
	// an epoch above the fork. A *ForkError carries the fork.
	ErrFork = errors.New("client: fork")
)

// ForkError reports a fork a status round found: two certified tokens
// with valid signatures for one (resource, epoch) and different holders.
// It unwraps to ErrFork.
type ForkError struct {
	Op   string
	Fork protocol.Fork
}

// Error names the operation, the fork's ID, resource, epoch and holders.
func (e *ForkError) Error() string {
	return fmt.Sprintf("client: %s: fork %s: two valid tokens for %q at epoch %d, holders %s and %s (more than f nodes signed twice)",
		e.Op, e.Fork.ID(), e.Fork.Resource(), e.Fork.Epoch(), e.Fork.A.Holder.Short(), e.Fork.B.Holder.Short())
}

// Unwrap lets errors.Is find ErrFork.
func (e *ForkError) Unwrap() error { return ErrFork }

// NodeError is one node's failure, named by index and peer ID.
type NodeError struct {
	Index int
	Peer  string
	Err   error
}

// Error names the node and its failure.
func (e *NodeError) Error() string {
	return fmt.Sprintf("node %d (%s): %v", e.Index, shortID(e.Peer), e.Err)
}

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports that an operation could not gather 2f+1 usable
// answers. It unwraps to ErrNotEnoughNodes and to every node's error.
type QuorumError struct {
	Op    string
	Need  int
	Got   int
	Nodes []*NodeError
}

// Error names the operation and every node that failed, in index order.
// It does not modify e, so goroutines may log one error concurrently.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("client: %s: %d of %d needed nodes answered", e.Op, e.Got, e.Need) + nodeList(e.Nodes)
}

// nodeList formats nodes in index order as ": node …; node …", sorting a
// copy (never the caller's slice); it is empty for no nodes.
func nodeList(nodes []*NodeError) string {
	sorted := slices.Clone(nodes)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	var b strings.Builder
	for i, n := range sorted {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(n.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is find ErrNotEnoughNodes and each node's error.
func (e *QuorumError) Unwrap() []error {
	out := []error{ErrNotEnoughNodes}
	for _, n := range e.Nodes {
		out = append(out, n)
	}
	return out
}

// Failed lists the indices of the nodes that failed.
func (e *QuorumError) Failed() []int {
	out := make([]int, len(e.Nodes))
	for i, n := range e.Nodes {
		out[i] = n.Index
	}
	sort.Ints(out)
	return out
}

// BusyError reports who holds the resource, as more than f nodes said
// (a committed lease of another holder), or, with Queued, that the
// resource is free but reserved for a client that waited before us. A
// resource this Client itself holds is reported as ErrHeldLocally
// instead.
type BusyError struct {
	Resource string
	// Holder names the lock session holding the resource (with Queued: the
	// waiter it is reserved for) by identity and session hash, as the
	// nodes' replies do: never by session ID.
	Holder protocol.HolderRef
	Epoch  uint64
	Left   time.Duration
	// Nodes are the indices of the nodes that answered busy.
	Nodes []int
	// Queued is set when the nodes hold the free resource for earlier
	// waiters (push handoff serves waiters in order); Left is then how
	// long the reservation lasts at most and Epoch is 0.
	Queued bool
}

// Error names the holder and how long it has left.
func (e *BusyError) Error() string {
	if e.Queued {
		return fmt.Sprintf("client: %q is reserved for %s, which waited first, for at most %v (nodes %v)", e.Resource, e.Holder.Short(), e.Left.Round(time.Millisecond), e.Nodes)
	}
	return fmt.Sprintf("client: %q is held by %s at epoch %d for about %v (nodes %v)", e.Resource, e.Holder.Short(), e.Epoch, e.Left.Round(time.Millisecond), e.Nodes)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// RefusedError reports that enough nodes refused for a reason retrying
// will not fix.
type RefusedError struct {
	Op    string
	Nodes []*NodeError
}

// Error names the operation and the refusing nodes, in index order.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("client: refused: %s", e.Op) + nodeList(e.Nodes)
}

// Unwrap lets errors.Is find ErrRefused and each node's error.
func (e *RefusedError) Unwrap() []error {
	out := []error{ErrRefused}
	for _, n := range e.Nodes {
		out = append(out, n)
	}
	return out
}

func shortID(s string) string {
	if len(s) > 16 {
		return s[:6] + "…" + s[len(s)-6:]
	}
	return s
}
