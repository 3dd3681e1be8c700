package node

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Push handoff and fair order (DESIGN L2). A node that answers Busy
// remembers the waiter; when the resource is free again the node reserves
// it for its first waiter for a short while (Rules.ReserveFor), answering
// others Queued, and the waiter's long poll (ProtoWait) returns at once.
// All of it is liveness: a node still votes at most once per epoch (S1),
// and a queue lives in memory only.
//
// The order must be the same at every node, or two waiters first at
// different nodes would split every round. Arrival order differs between
// nodes when waiters ask at about the same time, so a waiter's place is
// (cohort, rank): the cohort is the generation of the lease it first
// waited behind (Record.LeaseGen, the epoch of the last lease committed,
// which every node learns from the same Commit; one more if no committed
// lease was live), and the rank a hash of its session that every node
// computes alike. Waiters that started waiting during lease k go before
// those that started during lease k+1 (first come, first served between
// handoffs), and the holder who releases and asks again goes behind
// everyone who waited for it.

// queue is the waiters of one resource at one node. Its methods are pure
// given now: the driver holds the resource's shard lock around them.
type queue struct {
	waiters []waiter
	// reserved is the waiter the free resource is held for since since.
	reserved protocol.Holder
	since    time.Time
	// changed is closed (and replaced) when the resource's state changed,
	// waking the long polls of its waiters; polls counts those in
	// progress (also of waiters the queue had no room for).
	changed chan struct{}
	polls   int
	// done are the last lock sessions whose lease was committed here: a
	// long poll of theirs still in flight must not queue them again.
	done [doneSessions]protocol.Holder
	next int
}

// doneSessions is how many committed sessions a queue remembers.
const doneSessions = 16

type waiter struct {
	holder protocol.Holder
	cohort uint64
	rank   uint64
	// seen is the last request of the waiter; polls counts its long polls
	// in progress; told is when this node last told it the resource is
	// free for it. A waiter keeps its place while it polls or for
	// WaiterTTL after it was last seen, but it is first in line only if it
	// is still there to take its turn (see reservation).
	seen  time.Time
	polls int
	told  time.Time
}

// pollGap is how long a waiter may be between two of its long polls (it
// just had an answer and asks again) and still be taken for present.
const pollGap = 250 * time.Millisecond

// present reports whether w can take its turn now: it polls, was told
// its turn within reserveFor, or asked within pollGap.
func (w waiter) present(now time.Time, reserveFor time.Duration) bool {
	return w.polls > 0 || (!w.told.IsZero() && now.Sub(w.told) < reserveFor) || now.Sub(w.seen) < pollGap
}

func newQueue() *queue { return &queue{changed: make(chan struct{})} }

// cohort is the place in line of a waiter that first asks now: the epoch
// of the committed lease it waits behind, or one above the last committed
// lease if none is live.
func cohort(rec Record, now time.Time) uint64 {
	if l := rec.Lease; l.Committed && l.Active(now) && l.Epoch >= rec.LeaseGen {
		return l.Epoch
	}
	return rec.LeaseGen + 1
}

// rank orders the waiters of one cohort: a hash every node computes alike.
func rank(resource string, h protocol.Holder) uint64 {
	d := sha256.New()
	d.Write([]byte(resource))
	d.Write([]byte{0})
	d.Write([]byte(h.ID))
	d.Write(h.Session[:])
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// before reports whether a is ahead of b.
func (a waiter) before(b waiter) bool {
	if a.cohort != b.cohort {
		return a.cohort < b.cohort
	}
	return a.rank < b.rank
}

func (q *queue) find(h protocol.Holder) int {
	for i := range q.waiters {
		if q.waiters[i].holder == h {
			return i
		}
	}
	return -1
}

// touch records a request of h: a new waiter joins with the given cohort
// and rank (if the queue has fewer than max waiters; added reports whether
// it joined), a known one keeps its place and is seen again.
func (q *queue) touch(h protocol.Holder, cohort, rank uint64, max int, now time.Time) (added bool) {
	if i := q.find(h); i >= 0 {
		q.waiters[i].seen = now
		return false
	}
	if len(q.waiters) >= max || q.served(h) {
		return false
	}
	q.waiters = append(q.waiters, waiter{holder: h, cohort: cohort, rank: rank, seen: now})
	return true
}

// claim moves h up to cohort c, the place the (f+1)-th lowest of the
// nodes gave it (protocol.WaitRequest.Cohort), if that is exactly one
// earlier: a request that reached this node just after a handoff and one
// that reached the others just before get the same place. A claim cannot
// move a waiter up further.
func (q *queue) claim(h protocol.Holder, c uint64) {
	if i := q.find(h); i >= 0 && c > 0 && c+1 == q.waiters[i].cohort {
		q.waiters[i].cohort = c
	}
}

// tell records that h was told at now that it is first on a free
// resource.
func (q *queue) tell(h protocol.Holder, now time.Time) {
	if i := q.find(h); i >= 0 {
		q.waiters[i].told = now
	}
}

// cohortOf is h's cohort, 0 if it is not queued.
func (q *queue) cohortOf(h protocol.Holder) uint64 {
	if i := q.find(h); i >= 0 {
		return q.waiters[i].cohort
	}
	return 0
}

// committed records that h's lease was committed: it leaves the queue
// (reported by left) and is not queued again.
func (q *queue) committed(h protocol.Holder) (left bool) {
	if !q.served(h) {
		q.done[q.next] = h
		q.next = (q.next + 1) % doneSessions
	}
	return q.remove(h)
}

func (q *queue) served(h protocol.Holder) bool {
	for _, d := range q.done {
		if d == h {
			return true
		}
	}
	return false
}

// remove drops h's entry; it reports whether there was one.
func (q *queue) remove(h protocol.Holder) bool {
	i := q.find(h)
	if i < 0 {
		return false
	}
	q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
	if q.reserved == h {
		q.reserved = protocol.Holder{}
	}
	return true
}

// prune drops the waiters that neither poll nor were seen within ttl, and
// returns them.
func (q *queue) prune(now time.Time, ttl time.Duration) []protocol.Holder {
	var gone []protocol.Holder
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		if w.polls == 0 && now.Sub(w.seen) > ttl {
			gone = append(gone, w.holder)
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	if q.find(q.reserved) < 0 {
		q.reserved = protocol.Holder{}
	}
	return gone
}

// head returns the first waiter, if any.
func (q *queue) head() (waiter, bool) {
	if len(q.waiters) == 0 {
		return waiter{}, false
	}
	best := q.waiters[0]
	for _, w := range q.waiters[1:] {
		if w.before(best) {
			best = w
		}
	}
	return best, true
}

// reservation says whom a free resource is held for at now, and for how
// much longer: the first waiter, for reserveFor from when it became first
// on a free resource. A first waiter that let its reservation run out, or
// that is not there to take its turn (it neither polls nor was told its
// turn: a client that gave up, or a session served elsewhere), leaves the
// queue (dropped lists it) and the next one's turn starts.
func (q *queue) reservation(now time.Time, reserveFor time.Duration) (h protocol.Holder, left time.Duration, dropped []protocol.Holder, ok bool) {
	for {
		w, ok := q.head()
		if !ok {
			q.reserved = protocol.Holder{}
			return protocol.Holder{}, 0, dropped, false
		}
		if !w.present(now, reserveFor) {
			q.remove(w.holder)
			dropped = append(dropped, w.holder)
			continue
		}
		if q.reserved != w.holder {
			q.reserved, q.since = w.holder, now
		}
		if left := reserveFor - now.Sub(q.since); left > 0 {
			return w.holder, left, dropped, true
		}
		q.remove(w.holder)
		dropped = append(dropped, w.holder)
	}
}

// busy says the resource is no longer free: a vote or a lease holds it.
// The reservation is spent; a new one starts afresh when the resource is
// free again (so a first waiter whose round split keeps its full window).
func (q *queue) busy() { q.reserved = protocol.Holder{} }

// notify wakes the long polls of the resource's waiters.
func (q *queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// idle reports whether the queue holds no waiter.
func (q *queue) idle() bool { return len(q.waiters) == 0 }
