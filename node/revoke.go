package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Operator revocation. A node's operator may end the lease of a resource
// at their own node (Node.Revoke, through the admin API: POST /revoke).
// One node dropping its lease frees nothing by itself: a client needs the
// votes of t = 2f+1 members, and every member that still holds the lease
// answers Busy. The resource is free for others only once the operators
// of t nodes have each revoked it (more exactly, once at most f members
// still hold it and t are free), so no single organisation, nor f of them,
// can take a lock away from its holder.
//
// Safety does not depend on any of it: the next holder's token carries a
// higher epoch, and the resource's verifier fences the old token (S4).
// Revocation keeps the node's last epoch, so the node never votes at the
// revoked epoch again (S1), and it records the revoked epoch as released,
// so a Commit or Renew of the old token cannot bring the lease back here.

// Errors of Revoke.
var (
	// ErrNoLease reports that the resource has no live lease (nor
	// uncommitted vote) at this node: there is nothing to revoke.
	ErrNoLease = errors.New("node: no live lease")
	// ErrOtherEpoch reports that the live lease is not at the epoch the
	// operator named: the lock changed hands since they looked.
	ErrOtherEpoch = errors.New("node: the live lease is at another epoch")
)

// Revoked describes a lease that Revoke ended.
type Revoked struct {
	Resource string
	Epoch    uint64
	Holder   protocol.Holder
	// Committed is false for an uncommitted vote.
	Committed bool
	// Left is what the lease had left.
	Left time.Duration
}

// Revoke is the pure rule of an operator revocation: it ends the live
// lease (or uncommitted vote) of rec, if its epoch is epoch (0: whatever
// the epoch), and audits it with detail. LastEpoch is unchanged (S1), and
// the lease's epoch counts as released, so its token cannot start a lease
// here again.
func (r Rules) Revoke(rec Record, epoch uint64, detail string, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	o.expire(now)
	n := &o.Next
	l := n.Lease
	switch {
	case l.Holder.IsZero():
		return o.refuse(protocol.CodeNoLease, "no live lease")
	case epoch != 0 && l.Epoch != epoch:
		return o.refuse(protocol.CodeNotHolder, fmt.Sprintf("the live lease is at epoch %d, not %d", l.Epoch, epoch))
	}
	o.Holder, o.LeaseEpoch, o.Left, o.Pending = l.Holder, l.Epoch, l.Expires.Sub(now), !l.Committed
	n.Lease = Lease{}
	n.Released = max(n.Released, l.Epoch)
	o.Changed = true
	o.audit(now, AuditRevoke, n.Resource, l.Epoch, l.Holder, detail)
	return o
}

// Revoke ends the live lease (or uncommitted vote) on resource at this
// node, on its operator's request, and records it in the audit log (kind
// revoke, with detail, e.g. who asked) before it returns. epoch, if not 0,
// must be the lease's epoch, else nothing changes and the error matches
// ErrOtherEpoch. With no live lease the error matches ErrNoLease.
//
// The lease ends for clients only when the operators of t nodes have each
// revoked it; see the comment at the top of revoke.go.
func (n *Node) Revoke(ctx context.Context, resource string, epoch uint64, detail string) (Revoked, error) {
	if err := protocol.ValidateResource(resource); err != nil {
		return Revoked{}, fmt.Errorf("node: revoke: %w", err)
	}
	n.closeMu.RLock()
	if n.closed {
		n.closeMu.RUnlock()
		return Revoked{}, ErrClosed
	}
	n.wg.Add(1)
	n.closeMu.RUnlock()
	defer n.wg.Done()
	o, err := n.apply(ctx, resource, func(rec Record, now time.Time) (Outcome, error) {
		return n.cfg.Rules.Revoke(rec, epoch, detail, now), nil
	})
	if err != nil {
		return Revoked{}, fmt.Errorf("node: revoke %q: %w", resource, err)
	}
	if o.Kind == protocol.KindRefuse {
		if o.Code == protocol.CodeNoLease {
			return Revoked{}, fmt.Errorf("%w on %q at node %d", ErrNoLease, resource, n.Index())
		}
		return Revoked{}, fmt.Errorf("%w: %s", ErrOtherEpoch, o.Message)
	}
	log.Warnw("lease revoked by the operator", "resource", resource, "epoch", o.LeaseEpoch, "holder", n.holderName(o.Holder.Ref()), "pending", o.Pending, "detail", detail)
	return Revoked{Resource: resource, Epoch: o.LeaseEpoch, Holder: o.Holder, Committed: !o.Pending, Left: o.Left}, nil
}
