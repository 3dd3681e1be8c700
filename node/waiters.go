package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	first, left, ok := n.reservation(sh, q, rec, now)
	if !ok || first == holder {
		return o, false
	}
	return Outcome{Next: rec, At: now, Kind: protocol.KindQueued, Holder: first, Left: left}, true
}

// Lapse is one reservation that ran out unused at this node: the free
// resource was held for the session's turn and the session did not take
// it (it was slow, gone, or kept its votes uncommitted).
type Lapse struct {
	Resource string
	ID       string             // the client identity
	Session  protocol.SessionID // the lock session (one Acquire call)
	At       time.Time          // by the node's clock
	// Told says whether the node told the session its turn (answered its
	// Wait: free). A turn never told ran out through no fault of the
	// waiter's.
	Told bool
}

// recentLapses is how many lapses a node remembers (RecentLapses); the
// oldest is forgotten first.
const recentLapses = 256

// lapseRing is the node's bounded record of recent lapses. It has its own
// lock: lapses are added under the shard locks of different resources.
type lapseRing struct {
	mu   sync.Mutex
	buf  [recentLapses]Lapse
	next int // where the next lapse goes
	n    int // how many are held, at most recentLapses
}

func (r *lapseRing) add(l Lapse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = l
	r.next = (r.next + 1) % recentLapses
	if r.n < recentLapses {
		r.n++
	}
}

// list returns a copy of the held lapses, oldest first.
func (r *lapseRing) list() []Lapse {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Lapse, 0, r.n)
	for i := r.next - r.n; i < r.next; i++ {
		out = append(out, r.buf[(i+recentLapses)%recentLapses])
	}
	return out
}

// RecentLapses returns the last reservations (at most 256) that ran out
// unused at this node, oldest first: which client identity and lock
// session let its turn on which resource pass, and when. It is a copy, in
// memory only (a restarted node starts empty), for operators looking into
// a waiter that was passed over and for tests that must tell a slow
// waiter from an unfair queue. Each is also logged ("reservation expired
// unused") and counted in the metrics.
func (n *Node) RecentLapses() []Lapse { return n.lapses.list() }

// reservation is queue.reservation after pruning, accounting for the
// waiters it drops and the reservations that ran out unused. The caller
// holds sh.mu.
func (n *Node) reservation(sh *shard, q *queue, rec Record, now time.Time) (protocol.Holder, time.Duration, bool) {
	resource := rec.Resource
	gone, lapsed := q.prune(now, n.cfg.Rules.WaiterTTL)
	if log.Level() <= zapDebugLevel {
		for _, h := range gone {
			log.Debugw("waiter pruned", "node", n.Index(), "resource", resource, "waiter", n.clientName(h.ID)+"/"+h.Session.Hash().String()[:8])
		}
	}
	n.forget(gone)
	n.lapsed(resource, lapsed, now)
	first, left, dropped, expired, ok := q.reservation(now, n.cfg.Rules.ReserveFor, cohort(rec, now))
	n.forget(dropped)
	n.lapsed(resource, expired, now)
	if log.Level() <= zapDebugLevel {
		var line []string
		for _, w := range q.waiters {
			line = append(line, fmt.Sprintf("%s/%s c=%d polls=%d", n.clientName(w.holder.ID), w.holder.Session.Hash().String()[:8], w.cohort, w.polls))
		}
		log.Debugw("reservation", "node", n.Index(), "resource", resource, "first", first.Ref().Short(), "dropped", len(dropped), "queue", line)
	}
	if len(dropped) > 0 {
		q.notify()
	}
	return first, left, ok
}

// lapsed accounts for the turns on resource that ran out unused: the
// metric, the log and the node's record of recent lapses.
func (n *Node) lapsed(resource string, es []expiry, now time.Time) {
	for _, e := range es {
		n.ops.metrics.reservationsExpired.Inc()
		log.Infow("reservation expired unused", "node", n.Index(), "resource", resource, "identity", e.holder.ID, "told", e.told)
		n.lapses.add(Lapse{Resource: resource, ID: e.holder.ID, Session: e.holder.Session, At: now, Told: e.told})
	}
}

// Reserved says whom the free resource is held for (push handoff) and for
// how much longer: the first waiter of its queue, named by its HolderRef.
// It is zero when no reservation holds the resource: nobody waits, or a
// lease or vote holds it.
func (n *Node) Reserved(resource string) (protocol.HolderRef, time.Duration) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q := sh.queues[resource]
	if q == nil || q.idle() {
		return protocol.HolderRef{}, 0
	}
	rec, err := n.load(n.ctx, sh, resource)
	if err != nil {
		return protocol.HolderRef{}, 0
	}
	now := n.clock.Now()
	if rec.Lease.Active(now) {
		return protocol.HolderRef{}, 0
	}
	first, left, ok := n.reservation(sh, q, rec, now)
	if !ok {
		return protocol.HolderRef{}, 0
	}
	return first.Ref(), left
}

// enqueue records a request of holder on rec's resource: it joins the
// queue if there is room (per resource, per client identity, in all; a
// sibling session later in its identity's order gives its place up, see
// queue.yield), else it is only told where things stand. The caller
// holds sh.mu.
func (n *Node) enqueue(sh *shard, rec Record, holder protocol.Holder, now time.Time) *queue {
	q := sh.queues[rec.Resource]
	if q == nil {
		q = newQueue(rec.Resource)
		sh.queues[rec.Resource] = q
	}
	if ev, ok := q.yield(holder, n.cfg.Limits.WaitersPerClientPerResource); ok {
		n.forget([]protocol.Holder{ev})
	}
	if q.find(holder) < 0 && !n.waiterRoom(holder.ID) {
		return q
	}
	if q.touch(holder, cohortFor(rec, holder.ID, now), n.cfg.Limits.WaitersPerResource, n.cfg.Limits.WaitersPerClientPerResource, now) {
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

// changed runs after a transition of o.Next's resource was saved: a
// committed lease ends the turn under way, takes its holder out of the
// queue and puts the holder identity's other sessions behind it, and the
// waiters' long polls look again. (A vote does not end the
// turn: if it is abandoned, the rest of the turn is still its waiter's.)
// The caller holds sh.mu.
func (n *Node) changed(sh *shard, o Outcome) {
	q := sh.queues[o.Next.Resource]
	if q == nil {
		return
	}
	if l := o.Next.Lease; l.Active(o.At) {
		if l.Committed {
			q.leased()
			q.holderLeased(l.Holder, l.Epoch)
			if q.committed(l.Holder) {
				n.forget([]protocol.Holder{l.Holder})
			}
		}
	}
	q.notify()
	n.dropIdle(sh, o.Next.Resource, q)
}

// served takes the session tok names out of its resource's queue for good
// when its holder commits or releases it, whatever this node made of the
// request: the session has its token, so it waits no more. (A Commit can
// reach a node after the Release, or be refused there; without this, the
// session would stay first in line and hold the resource for ReserveFor.)
// Only the holder's own requests count, so nobody can take another
// client's place away.
func (n *Node) served(from peer.ID, tok protocol.Token) {
	if from.String() != tok.Holder.ID {
		return
	}
	n.dequeue(tok.Resource, tok.Holder)
}

// dequeue takes holder out of resource's queue for good (queue.committed):
// the session was served, or left. If its turn was under way, the next
// waiter gets the rest of it.
func (n *Node) dequeue(resource string, holder protocol.Holder) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q := sh.queues[resource]
	if q == nil {
		return
	}
	if q.committed(holder) {
		n.forget([]protocol.Holder{holder})
		q.notify()
	}
	n.dropIdle(sh, resource, q)
}

// dropIdle removes an empty queue nobody polls and no lease holds (its
// record of committed sessions still matters while a lease lives). The
// caller holds sh.mu.
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
		n.turnedAway(TurnedAwayUnauthorised)
		return protocol.WaitReply{Code: protocol.CodeUnauthorised, Message: fmt.Sprintf("%s may not acquire %q", from, req.Resource)}.Marshal(), nil
	}
	// The session is the one the key owns: only the process that drew the
	// key waits, or claims a place, for it.
	holder := protocol.Holder{ID: from.String(), Session: req.Key.Session()}
	ask := voteAsk{from: from, epoch: req.Epoch, ttl: req.TTL}
	wait := min(req.MaxWait, maxWait(n.cfg.RequestTimeout))
	deadline := n.clock.Now().Add(wait)
	for first := true; ; first = false {
		var claim []protocol.SignedPlace
		if first {
			claim = req.Claim
		}
		st, changed, wake, now, err := n.waitState(ctx, req.Resource, holder, claim, first, ask)
		if first && (err == nil || errors.Is(err, errWaitVote)) {
			defer n.unpoll(req.Resource, holder) // the poll was counted
		}
		if err != nil {
			logFailed(ctx, "wait failed", err, "resource", req.Resource, "peer", from)
			return protocol.WaitReply{Code: protocol.CodeInternal, Message: "node failed to load or record the resource"}.Marshal(), nil
		}
		left := deadline.Sub(n.clock.Now())
		if now || left <= 0 {
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

// errWaitVote marks a Wait whose vote could not be made or recorded: the
// poll was counted, and the answer is an internal error without a vote.
var errWaitVote = errors.New("node: vote in wait answer")

// voteAsk is what a Wait asks beyond the wait (WaitRequest.Epoch and
// TTL): the vote the waiter would ask for in its Acquire, from peer from.
// A zero epoch asks for none.
type voteAsk struct {
	from  peer.ID
	epoch uint64
	ttl   time.Duration
}

// waitState is where the resource stands for holder now, the channel that
// closes when that may change, when it changes by itself (a lease lapsing,
// a reservation running out), and whether the long poll must be answered
// now. On the first call of a long poll the holder joins the queue (if
// there is room; one cohort earlier if its claim holds, see claimPlace)
// and counts as polling. The reply carries this node's signed place for
// the holder.
//
// When the free resource is reserved for holder, the reply is Free and,
// if ask has an epoch, carries this node's vote (waitVote). While a lease
// or vote holds the resource, the waiter next in line whose asked epoch
// this node has moved past (LastEpoch at or above it) is answered at
// once, so that it asks again above: its vote can then ride in the
// answer when its turn comes.
func (n *Node) waitState(ctx context.Context, resource string, holder protocol.Holder, claim []protocol.SignedPlace, first bool, ask voteAsk) (st protocol.WaitReply, changed <-chan struct{}, wake time.Duration, now bool, err error) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec, err := n.load(ctx, sh, resource)
	if err != nil {
		return st, nil, 0, false, err
	}
	at := n.clock.Now()
	rec = n.cfg.Rules.floor(rec)
	q := n.enqueue(sh, rec, holder, at)
	if first {
		q.polls++
		if i := q.find(holder); i >= 0 {
			q.waiters[i].polls++
		}
		if len(claim) > 0 && n.claimPlace(q, rec, holder, claim) {
			q.notify() // the order may have changed
		}
	}
	st = protocol.WaitReply{LastEpoch: rec.LastEpoch}
	if i := q.find(holder); i >= 0 {
		st.Cohort, st.Place = q.waiters[i].cohort, n.place(q, i)
	}
	if l := rec.Lease; l.Active(at) {
		st.Holder, st.LeaseEpoch, st.Left, st.Pending = l.Holder.Ref(), l.Epoch, l.Expires.Sub(at), !l.Committed
		stale := ask.epoch > 0 && ask.epoch <= rec.LastEpoch && q.nextInLine(holder, l.Holder, at, n.cfg.Rules.ReserveFor)
		return st, q.changed, st.Left, stale, nil
	}
	first2, left, ok := n.reservation(sh, q, rec, at)
	if !ok || first2 == holder {
		st.Free = true
		if ok && ask.epoch > 0 {
			// Only the waiter the free resource is reserved for gets a
			// vote here; any other Free answer (nobody queued, no room)
			// leaves the vote to its Acquire, where the queue decides.
			v, last, err := n.waitVote(ctx, sh, rec, holder, ask, at)
			if err != nil {
				return st, nil, 0, false, err
			}
			st.Vote, st.LastEpoch = v, last
		}
		q.tell(holder, at)
		return st, q.changed, 0, true, nil
	}
	st.Holder, st.Left, st.Pending = first2.Ref(), left, true
	return st, q.changed, left, false, nil
}

// waitVote runs, for the waiter the free resource is reserved for, the
// acquire transition an AcquireRequest of its session at ask's epoch
// would run (voteStep: S1's one vote per epoch, the epoch window of S5,
// the era ceiling), persists it (S3: the vote is durable before it leaves
// in the reply) and returns the vote, or nil if the rules refused (a stale
// or too distant epoch), with the node's last epoch. The caller holds
// sh.mu, has checked the cluster and the client's authorisation (S6), and
// has found rec free and reserved for holder.
func (n *Node) waitVote(ctx context.Context, sh *shard, rec Record, holder protocol.Holder, ask voteAsk, now time.Time) (*protocol.WaitVote, uint64, error) {
	stmt := n.stmt(rec.Resource, ask.epoch, holder)
	o, err := n.voteStep(sh, rec, holder, stmt, ask.ttl, nil, 0, now)
	if err == nil {
		err = n.persist(ctx, sh, o)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errWaitVote, err)
	}
	if o.Kind != protocol.KindVote {
		n.noteLaterEra(o, ask.from)
		log.Debugw("no vote in wait answer", "node", n.Index(), "resource", rec.Resource, "epoch", ask.epoch, "peer", ask.from, "code", o.Code.String(), "last_epoch", o.Next.LastEpoch)
		return nil, o.Next.LastEpoch, nil
	}
	n.ops.metrics.waitVotes.Inc()
	log.Infow("vote", "resource", rec.Resource, "epoch", ask.epoch, "client", n.peerName(ask.from), "in", "wait", "repeat", o.Repeat)
	return &protocol.WaitVote{Epoch: ask.epoch, Partial: o.Next.Vote, IdentitySig: o.Next.VoteIDSig}, o.Next.LastEpoch, nil
}

// claimPlace moves holder up one step (stepBefore) if its claim shows f+1 members
// put it there (protocol.VerifyClaim), or back to the claimed cohort if
// that is later than its place here (queue.waive, unverified: a waiter
// may give up its own place), and reports whether it moved. It looks at
// most at one claim per queue entry to move up (queue.checkClaim), and
// verifies at most f+1 signatures of it; a claim that fails is the
// entry's last. The caller holds sh.mu.
func (n *Node) claimPlace(q *queue, rec Record, holder protocol.Holder, claim []protocol.SignedPlace) bool {
	resource := rec.Resource
	c := protocol.ClaimCohort(claim)
	if q.waive(holder, c) {
		return true
	}
	if !q.checkClaim(holder, c, rec) {
		return false
	}
	if _, err := protocol.VerifyClaim(n.cfg.Cluster, resource, holder.Ref(), claim); err != nil {
		log.Infow("wait claim refused", "node", n.Index(), "resource", resource, "identity", holder.ID, "cohort", c, "err", err)
		return false
	}
	q.moveUp(holder, c)
	return true
}

// place is this node's signed place for the waiter at index i of q,
// signed once per cohort. A node whose identity key cannot sign gives no
// place (its waiters then cannot cite it in a claim). The caller holds
// sh.mu.
func (n *Node) place(q *queue, i int) *protocol.SignedPlace {
	w := &q.waiters[i]
	if w.place != nil && w.place.Cohort == w.cohort {
		return w.place
	}
	key := n.host.Peerstore().PrivKey(n.host.ID())
	p := protocol.Place{Cluster: n.cfg.Cluster.ID, Resource: q.resource, Holder: w.holder.Ref(), Cohort: w.cohort, Member: n.Index()}
	sp, err := protocol.SignPlace(key, p)
	if err != nil {
		log.Warnw("cannot sign a waiter's place", "node", n.Index(), "resource", q.resource, "err", err)
		return nil
	}
	w.place = &sp
	return w.place
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
			if gone, lapsed := q.prune(now, n.cfg.Rules.WaiterTTL); len(gone) > 0 {
				n.forget(gone)
				n.lapsed(resource, lapsed, now)
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

// zapDebugLevel is zapcore.DebugLevel.
const zapDebugLevel = -1

// clientName names a client identity by its cluster.json name.
func (n *Node) clientName(id string) string {
	if c, ok := n.client(id); ok && c.Name != "" {
		return c.Name
	}
	return id
}
