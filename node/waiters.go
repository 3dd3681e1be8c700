package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// The driver of push handoff: the queue (queue.go) in each resource's
// shard, the Acquire veto that serves waiters in order, the long poll
// (ProtoWait) that tells a waiter its turn, and the bounds on what waiters
// can make a node keep (S6): per resource, per client identity and in all.

// maxWait is the longest a node holds a Wait request: short enough that
// the reply leaves well within the client's request timeout.
func maxWait(requestTimeout time.Duration) time.Duration { return requestTimeout * 4 / 5 }

// queueAcquire applies the wait queue to an Acquire the rules decided (o,
// from rec): a fresh vote on a free resource that is reserved for another
// waiter becomes a Queued reply. It reports queued and the outcome to use
// instead. An Acquire never joins the queue: a client joins by waiting
// (Wait), so a TryAcquire that was told Busy and went away holds nobody
// up. The caller holds sh.mu.
func (n *Node) queueAcquire(sh *shard, rec Record, holder protocol.Holder, o Outcome, now time.Time) (Outcome, bool) {
	if o.Kind != protocol.KindVote || o.Repeat || (rec.Lease.Active(now) && rec.Lease.Holder == holder) {
		return o, false // not a fresh vote on a free resource
	}
	q := sh.queues[rec.Resource]
	if q == nil || q.idle() {
		return o, false // nobody waits: vote
	}
	first, left, ok := n.reservation(sh, q, rec.Resource, now)
	if !ok || first == holder {
		return o, false
	}
	return Outcome{Next: rec, At: now, Kind: protocol.KindQueued, Holder: first, Left: left}, true
}

// reservation is queue.reservation after pruning, accounting for the
// waiters it drops. The caller holds sh.mu.
func (n *Node) reservation(sh *shard, q *queue, resource string, now time.Time) (protocol.Holder, time.Duration, bool) {
	n.forget(q.prune(now, n.cfg.Rules.WaiterTTL))
	first, left, dropped, ok := q.reservation(now, n.cfg.Rules.ReserveFor)
	n.forget(dropped)
	if len(dropped) > 0 {
		q.notify()
	}
	return first, left, ok
}

// enqueue records a request of holder on rec's resource: it joins the
// queue if there is room (per resource, per client identity, in all),
// else it is only told where things stand. The caller holds sh.mu.
func (n *Node) enqueue(sh *shard, rec Record, holder protocol.Holder, now time.Time) *queue {
	q := sh.queues[rec.Resource]
	if q == nil {
		q = newQueue()
		sh.queues[rec.Resource] = q
	}
	if q.find(holder) < 0 && !n.waiterRoom(holder.ID) {
		return q
	}
	if q.touch(holder, cohort(rec, now), rank(rec.Resource, holder), n.cfg.Limits.WaitersPerResource, now) {
		n.waiterCount(holder.ID).Add(1)
		n.waiterTotal.Add(1)
	}
	return q
}

// waiterRoom reports whether one more waiter of identity id may be kept.
func (n *Node) waiterRoom(id string) bool {
	return n.waiterTotal.Load() < int64(n.cfg.Limits.Waiters) &&
		n.waiterCount(id).Load() < int32(n.cfg.Limits.WaitersPerClient)
}

func (n *Node) waiterCount(id string) *atomic.Int32 {
	v, _ := n.waitersOf.LoadOrStore(id, new(atomic.Int32))
	return v.(*atomic.Int32)
}

// forget accounts for waiters that left a queue.
func (n *Node) forget(hs []protocol.Holder) {
	for _, h := range hs {
		n.waiterCount(h.ID).Add(-1)
		n.waiterTotal.Add(-1)
	}
}

// changed runs after a transition of o.Next's resource was saved: a lease
// or vote now holding the resource spends its reservation, a committed
// lease takes its holder out of the queue, and the waiters' long polls
// look again. The caller holds sh.mu.
func (n *Node) changed(sh *shard, o Outcome) {
	q := sh.queues[o.Next.Resource]
	if q == nil {
		return
	}
	if l := o.Next.Lease; l.Active(o.At) {
		q.busy()
		if l.Committed && q.remove(l.Holder) {
			n.forget([]protocol.Holder{l.Holder})
		}
	}
	q.notify()
	n.dropIdle(sh, o.Next.Resource, q)
}

// dropIdle removes an empty queue nobody polls. The caller holds sh.mu.
func (n *Node) dropIdle(sh *shard, resource string, q *queue) {
	if q.idle() && q.polls == 0 {
		delete(sh.queues, resource)
	}
}

// handleWait answers a waiter's long poll: at once when the resource is
// free for it (no live lease, and it is first in the queue), else when that
// changes or after the request's MaxWait (capped by maxWait), whichever is
// first, with what holds the resource.
func (n *Node) handleWait(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalWaitRequest(b)
	if err != nil {
		return protocol.WaitReply{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Cluster != n.cfg.Cluster.ID {
		return protocol.WaitReply{Code: protocol.CodeWrongCluster, Message: "request is for cluster " + req.Cluster.String()}.Marshal(), nil
	}
	// S6: only clients that may acquire the resource wait for it.
	if !n.mayAcquire(from, req.Resource) {
		n.limits.unauth.Add(1)
		return protocol.WaitReply{Code: protocol.CodeUnauthorised, Message: fmt.Sprintf("%s may not acquire %q", from, req.Resource)}.Marshal(), nil
	}
	holder := protocol.Holder{ID: from.String(), Session: req.Session}
	wait := min(req.MaxWait, maxWait(n.cfg.RequestTimeout))
	deadline := n.clock.Now().Add(wait)
	for first := true; ; first = false {
		st, changed, wake, err := n.waitState(ctx, req.Resource, holder, first)
		if err == nil && first {
			defer n.unpoll(req.Resource, holder)
		}
		if err != nil {
			log.Errorw("wait failed", "resource", req.Resource, "peer", from, "err", err)
			return protocol.WaitReply{Code: protocol.CodeInternal, Message: "node failed to load the resource"}.Marshal(), nil
		}
		left := deadline.Sub(n.clock.Now())
		if st.Free || left <= 0 {
			return st.Marshal(), nil
		}
		if wake <= 0 || wake > left {
			wake = left
		}
		t := n.clock.NewTimer(wake)
		select {
		case <-changed:
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// waitState is where the resource stands for holder now, the channel that
// closes when that may change, and when it changes by itself (a lease
// lapsing, a reservation running out). On the first call of a long poll
// the holder joins the queue (if there is room) and counts as polling.
func (n *Node) waitState(ctx context.Context, resource string, holder protocol.Holder, first bool) (st protocol.WaitReply, changed <-chan struct{}, wake time.Duration, err error) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec, err := n.load(ctx, sh, resource)
	if err != nil {
		return st, nil, 0, err
	}
	now := n.clock.Now()
	rec = n.cfg.Rules.floor(rec)
	q := n.enqueue(sh, rec, holder, now)
	if first {
		q.polls++
		if i := q.find(holder); i >= 0 {
			q.waiters[i].polls++
		}
	}
	st = protocol.WaitReply{LastEpoch: rec.LastEpoch}
	if l := rec.Lease; l.Active(now) {
		st.Holder, st.LeaseEpoch, st.Left, st.Pending = l.Holder, l.Epoch, l.Expires.Sub(now), !l.Committed
		return st, q.changed, st.Left, nil
	}
	first2, left, ok := n.reservation(sh, q, resource, now)
	if !ok || first2 == holder {
		st.Free = true
		return st, q.changed, 0, nil
	}
	st.Holder, st.Left, st.Pending = first2, left, true
	return st, q.changed, left, nil
}

// unpoll ends one long poll of holder.
func (n *Node) unpoll(resource string, holder protocol.Holder) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q := sh.queues[resource]
	if q == nil {
		return
	}
	q.polls--
	if i := q.find(holder); i >= 0 && q.waiters[i].polls > 0 {
		q.waiters[i].polls--
		q.waiters[i].seen = n.clock.Now()
	}
	n.dropIdle(sh, resource, q)
}

// sweep drops, every WaiterTTL until the node closes, the waiters that
// stopped asking from every queue, so queues of resources nobody touches
// again do not keep them. The ticker is the real clock's: it only says
// when to look, and what counts as stopped is judged on the node's clock,
// so tests that count a fake clock's waiters do not see this one.
func (n *Node) sweep() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Rules.WaiterTTL)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.sweepQueues()
		}
	}
}

// sweepQueues is one sweep.
func (n *Node) sweepQueues() {
	now := n.clock.Now()
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		for resource, q := range sh.queues {
			if gone := q.prune(now, n.cfg.Rules.WaiterTTL); len(gone) > 0 {
				n.forget(gone)
				q.notify()
			}
			n.dropIdle(sh, resource, q)
		}
		sh.mu.Unlock()
	}
}

// QueueStats is what the wait queues hold, for operators and tests.
type QueueStats struct {
	// Waiters is the number of waiters queued on all resources; Queues
	// the number of resources with a queue.
	Waiters, Queues int
}

// QueueStats returns what the node's wait queues hold now.
func (n *Node) QueueStats() QueueStats {
	var s QueueStats
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		s.Queues += len(sh.queues)
		for _, q := range sh.queues {
			s.Waiters += len(q.waiters)
		}
		sh.mu.Unlock()
	}
	return s
}
