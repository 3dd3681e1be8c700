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
}

type waiter struct {
	holder protocol.Holder
	cohort uint64
	rank   uint64
	// seen is the last request of the waiter; polls counts its long polls
	// in progress. A waiter is alive while it polls or for WaiterTTL after
	// it was last seen.
	seen  time.Time
	polls int
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
	if len(q.waiters) >= max {
		return false
	}
	q.waiters = append(q.waiters, waiter{holder: h, cohort: cohort, rank: rank, seen: now})
	return true
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
// on a free resource. A first waiter that let its reservation run out
// leaves the queue (dropped lists it) and the next one's starts.
func (q *queue) reservation(now time.Time, reserveFor time.Duration) (h protocol.Holder, left time.Duration, dropped []protocol.Holder, ok bool) {
	for {
		w, ok := q.head()
		if !ok {
			q.reserved = protocol.Holder{}
			return protocol.Holder{}, 0, dropped, false
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

// idle reports whether the queue can be dropped.
func (q *queue) idle() bool { return len(q.waiters) == 0 }
