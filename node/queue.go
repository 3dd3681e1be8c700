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
// lease was live), and the rank a hash of the resource, the cohort and
// the waiter's client identity that every node computes alike. Waiters
// that started waiting during lease k go before those that started during
// lease k+1 (first come, first served between handoffs).
//
// Nothing a client chooses freely orders it (issue 20). Identities are
// admitted by cluster.json, so the rank cannot be ground the way a session
// ID could; sessions of one identity in one cohort are ordered by a hash
// of the session, which only reorders that identity's own waiters. The
// holder's identity waits behind its own lease: a Wait from it while its
// lease (or vote) lives gets the cohort after that lease, so a holder that
// starts waiting with its next session before it releases queues behind
// everyone who waited for it. A waiter moves up only by a claim that f+1
// members vouch for (signed places, protocol.Place), by one cohort at
// most, and at most one claim per queue entry is checked. An identity
// holds at most Limits.WaitersPerClientPerResource places of one queue.
// And a reservation that runs out unused counts a lapse against its
// identity in that queue: within a cohort, waiters go by the number of
// times their identity lapsed (fewest first), present and future sessions
// alike, until a lease is committed on the resource, so an identity that
// never acquires cannot keep a free resource reserved for its fresh
// sessions. Counting, not just marking, matters when every identity of a
// cohort has lapsed (honest clients whose turns split, with no lease
// committed to clear the record): a mark would put them all back in rank
// order, and an identity that ranks first and lapses on purpose would be
// reserved afresh each time its window ends; with counts, the repeat
// offender sorts after every identity that lapsed fewer times.

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
	// resource is the queue's resource, which ranks hash.
	resource string
	// lapsed are the identities whose reservation ran out unused since a
	// lease was last committed on the resource (at generation leaseGen),
	// with how many times, oldest first, at most maxLapsed.
	lapsed   []lapseCount
	leaseGen uint64
}

// doneSessions is how many committed sessions a queue remembers.
const doneSessions = 16

// maxLapsed is how many lapsed identities a queue remembers; the oldest
// is forgotten first.
const maxLapsed = 16

// maxLapseCount is where an identity's lapse count saturates: enough to
// put a repeat offender behind everyone who lapsed once or twice.
const maxLapseCount = 8

// lapseCount is one lapsed identity of a queue and how many times its
// reservation ran out unused (1..maxLapseCount).
type lapseCount struct {
	id    string
	count int
}

type waiter struct {
	holder protocol.Holder
	cohort uint64
	// rank orders the cohort's identities (rank); tie the sessions of one
	// identity (tie).
	rank, tie uint64
	// claimed is set once a claim of this entry was looked at: a node
	// checks at most one per entry.
	claimed bool
	// place is this node's signed place for the waiter, for cohort (nil
	// until signed, or after the cohort changed).
	place *protocol.SignedPlace
	// seen is the last request of the waiter; polls counts its long polls
	// in progress; told is when this node last told it the resource is
	// free for it. A waiter keeps its place while it polls or for
	// WaiterTTL after it was last seen, but it is first in line only if it
	// is still there to take its turn (see reservation).
	seen  time.Time
	polls int
	told  time.Time
	// votes counts the uncommitted votes this node gave the waiter's
	// session while it was queued: each spent a reservation (see
	// maxUncommittedVotes).
	votes int
}

// maxUncommittedVotes is how many times a waiter may spend its turn on a
// vote that is never committed (abandoned after a split round, or left to
// time out) before its turn counts as unused: an honest client's round
// splits now and then, but a client that keeps taking the vote and never
// the lease would otherwise hold a free resource for its own session for
// ever, one reservation window after another.
const maxUncommittedVotes = 3

// pollGap is how long a waiter may be between two of its long polls (it
// just had an answer and asks again) and still be taken for present.
const pollGap = 250 * time.Millisecond

// present reports whether w can take its turn now: it polls, was told
// its turn within reserveFor, or asked within pollGap.
func (w waiter) present(now time.Time, reserveFor time.Duration) bool {
	return w.polls > 0 || (!w.told.IsZero() && now.Sub(w.told) < reserveFor) || now.Sub(w.seen) < pollGap
}

func newQueue(resource string) *queue {
	return &queue{resource: resource, changed: make(chan struct{})}
}

// cohort is the place in line of a waiter that first asks now: the epoch
// of the committed lease it waits behind, or one above the last committed
// lease if none is live.
func cohort(rec Record, now time.Time) uint64 {
	if l := rec.Lease; l.Committed && l.Active(now) && l.Epoch >= rec.LeaseGen {
		return l.Epoch
	}
	return rec.LeaseGen + 1
}

// cohortFor is the cohort of a waiter of identity id that first asks now:
// cohort, except that the identity holding the live lease or vote waits
// behind that lease (its epoch's successor), whatever session it asks in.
func cohortFor(rec Record, id string, now time.Time) uint64 {
	c := cohort(rec, now)
	if l := rec.Lease; l.Active(now) && l.Holder.ID == id && l.Epoch >= c {
		c = l.Epoch + 1
	}
	return c
}

// Domains of the order's hashes.
const (
	rankDomain = "palisade/queue-rank/v1\x00"
	tieDomain  = "palisade/queue-tie/v1\x00"
)

// rank orders the identities of one cohort: a hash of the resource, the
// cohort and the identity, which every node computes alike and no client
// chooses (identities are admitted by cluster.json). The cohort is in it
// so that no identity is first in every cohort.
func rank(resource string, cohort uint64, id string) uint64 {
	d := sha256.New()
	d.Write([]byte(rankDomain))
	d.Write(binary.AppendUvarint(nil, uint64(len(resource))))
	d.Write([]byte(resource))
	d.Write(binary.BigEndian.AppendUint64(nil, cohort))
	d.Write([]byte(id))
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// tie orders the sessions of one identity in one cohort: a hash of the
// session. A client choosing its session reorders only its own waiters.
func tie(s protocol.SessionID) uint64 {
	d := sha256.New()
	d.Write([]byte(tieDomain))
	d.Write(s[:])
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// before reports whether a is ahead of b: the earlier cohort; in one
// cohort, the waiter whose identity lapsed fewer times; then rank, then tie
// (and, for hashes that collide, the identity and session bytes, so the
// order is total).
func (q *queue) before(a, b waiter) bool {
	if a.cohort != b.cohort {
		return a.cohort < b.cohort
	}
	if la, lb := q.lapses(a.holder.ID), q.lapses(b.holder.ID); la != lb {
		return la < lb
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.holder.ID != b.holder.ID {
		return a.holder.ID < b.holder.ID
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return string(a.holder.Session[:]) < string(b.holder.Session[:])
}

func (q *queue) find(h protocol.Holder) int {
	for i := range q.waiters {
		if q.waiters[i].holder == h {
			return i
		}
	}
	return -1
}

// touch records a request of h: a new waiter joins in the given cohort
// (if the queue has fewer than max waiters and h's identity fewer than
// perClient; added reports whether it joined), a known one keeps its
// place and is seen again.
func (q *queue) touch(h protocol.Holder, cohort uint64, max, perClient int, now time.Time) (added bool) {
	if i := q.find(h); i >= 0 {
		q.waiters[i].seen = now
		return false
	}
	if len(q.waiters) >= max || q.served(h) || q.countOf(h.ID) >= perClient {
		return false
	}
	q.waiters = append(q.waiters, waiter{holder: h, cohort: cohort, rank: rank(q.resource, cohort, h.ID), tie: tie(h.Session), seen: now})
	return true
}

// countOf is the number of waiters of identity id.
func (q *queue) countOf(id string) int {
	k := 0
	for _, w := range q.waiters {
		if w.holder.ID == id {
			k++
		}
	}
	return k
}

// checkClaim says whether h's claim of cohort c is worth checking: h is
// queued, no claim of its entry was looked at before, and c is exactly
// one earlier than its cohort (a request that reached this node just
// after a handoff and the others just before gets the same place; a claim
// never moves a waiter up further). Any claim spends the entry's one
// look, so a waiter makes at most one claim per entry.
func (q *queue) checkClaim(h protocol.Holder, c uint64) bool {
	i := q.find(h)
	if i < 0 || q.waiters[i].claimed {
		return false
	}
	q.waiters[i].claimed = true
	return c > 0 && c+1 == q.waiters[i].cohort
}

// moveUp puts h in cohort c, the place its verified claim shows f+1
// members gave it.
func (q *queue) moveUp(h protocol.Holder, c uint64) {
	if i := q.find(h); i >= 0 {
		w := &q.waiters[i]
		w.cohort, w.rank, w.place = c, rank(q.resource, c, h.ID), nil
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
		if q.before(w, best) {
			best = w
		}
	}
	return best, true
}

// nextInLine reports whether h is first in line after skip, the holder of the
// live lease or vote (still queued until its lease is committed): the
// waiter the resource will be reserved for when it is free again, unless
// the line changes first.
func (q *queue) nextInLine(h, skip protocol.Holder) bool {
	var best *waiter
	for i := range q.waiters {
		w := &q.waiters[i]
		if w.holder == skip {
			continue
		}
		if best == nil || q.before(*w, *best) {
			best = w
		}
	}
	return best != nil && best.holder == h
}

// reservation says whom a free resource is held for at now, and for how
// much longer: the first waiter, for reserveFor from when it became first
// on a free resource. A first waiter that let its reservation run out, or
// that is not there to take its turn (it neither polls nor was told its
// turn: a client that gave up, or a session served elsewhere), leaves the
// queue (dropped lists it) and the next one's turn starts. One whose
// reservation had started and ends so, unused, is also listed in expired,
// and its identity lapses (see lapse).
func (q *queue) reservation(now time.Time, reserveFor time.Duration) (h protocol.Holder, left time.Duration, dropped, expired []protocol.Holder, ok bool) {
	for {
		w, ok := q.head()
		if !ok {
			q.reserved = protocol.Holder{}
			return protocol.Holder{}, 0, dropped, expired, false
		}
		if !w.present(now, reserveFor) || w.votes >= maxUncommittedVotes {
			if q.reserved == w.holder || w.votes >= maxUncommittedVotes {
				q.lapse(w.holder.ID)
				expired = append(expired, w.holder)
			}
			q.remove(w.holder)
			dropped = append(dropped, w.holder)
			continue
		}
		if q.reserved != w.holder {
			q.reserved, q.since = w.holder, now
		}
		if left := reserveFor - now.Sub(q.since); left > 0 {
			return w.holder, left, dropped, expired, true
		}
		q.lapse(w.holder.ID)
		expired = append(expired, w.holder)
		q.remove(w.holder)
		dropped = append(dropped, w.holder)
	}
}

// lapse counts a lapse of identity id: its reservation ran out unused.
// Its waiters order after those of their cohort whose identities lapsed
// fewer times, until a lease is committed (leaseCommitted). The count
// saturates at maxLapseCount; the record keeps the last maxLapsed
// identities to lapse.
func (q *queue) lapse(id string) {
	for i := range q.lapsed {
		if q.lapsed[i].id == id {
			if q.lapsed[i].count < maxLapseCount {
				q.lapsed[i].count++
			}
			return
		}
	}
	if len(q.lapsed) >= maxLapsed {
		q.lapsed = append(q.lapsed[:0], q.lapsed[1:]...)
	}
	q.lapsed = append(q.lapsed, lapseCount{id: id, count: 1})
}

// lapses is how many times identity id lapsed since the last committed
// lease (0: never, or forgotten).
func (q *queue) lapses(id string) int {
	for _, l := range q.lapsed {
		if l.id == id {
			return l.count
		}
	}
	return 0
}

// leaseCommitted records that a lease of generation gen is committed on
// the resource: from a newer generation on, no identity is lapsed.
func (q *queue) leaseCommitted(gen uint64) {
	if gen > q.leaseGen {
		q.leaseGen = gen
		q.lapsed = nil
	}
}

// voted records that h's session took this node's vote (uncommitted) on
// the resource: its turn is spent once more.
func (q *queue) voted(h protocol.Holder) {
	if i := q.find(h); i >= 0 {
		q.waiters[i].votes++
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
