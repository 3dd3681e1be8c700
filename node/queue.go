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
// its cohort: the generation of the lease it first waited behind
// (Record.LeaseGen, the epoch of the last lease committed, which every
// node learns from the same Commit; one more if no committed lease was
// live). Waiters that started waiting during lease k go before those that
// started during lease k+1 (first come, first served between handoffs);
// the identities of one cohort take turns (see below) in the order of
// their rank, a hash of the resource and the client identity that every
// node computes alike.
//
// Nothing a client chooses freely orders it (issue 20). Identities are
// admitted by cluster.json, so a hash over the identity cannot be ground
// the way a session ID could; sessions of one identity in one cohort are
// ordered by a hash of the session, which only reorders that identity's
// own waiters. The holder's identity waits behind its own lease: once a
// lease is committed, the other waiting sessions of its holder's identity
// move to the cohort after it, and a Wait from that identity while the
// lease lives gets that cohort too, so a holder that starts waiting with
// its next session before it releases queues behind everyone who waited
// for it. A waiter moves up only by a claim that f+1 members vouch for
// (signed places, protocol.Place), by one cohort at most, and at most one
// claim per queue entry is checked; it moves back to the cohort it claims
// if this member put it earlier (waive: its Wait reached this member just
// before a handoff and f+1 others after). An identity holds at most
// Limits.WaitersPerClientPerResource places of one queue.
//
// Turns are slots of one grid. Time is cut into slots of ReserveFor on
// the wall clock, which the members share (to the skew of their clocks).
// In slot k the first waiter is the one of the earliest cohort whose
// identity has the lowest turn hash, a hash of (resource, identity, k):
// every identity of the cohort is as likely as any other to have a given
// slot, and every node draws alike. A reservation ends at the end of its
// slot (one started in the last half of a slot runs on through the next,
// so a turn is never a sliver). A reservation that ends unused is counted
// (palisade_reservations_expired_total, Node.RecentLapses) and its waiter
// moves to the cohort of newcomers, so an identity that never acquires
// cannot keep a free resource for itself or its fresh sessions, and gets
// one slot in m on average while m identities wait.
//
// Nothing of this is a node's own history: the order is a function of
// who waits (and since which cohort), of the slot, and of the committed
// record. Only committed leases move cohorts, never a vote, which some
// members see and others do not. Two members that disagree for a moment
// (a Wait that reached one of them first, a waiter one of them dropped, a
// commit one of them has not seen yet) still agree on a slot unless the
// waiter they disagree about draws it, and agree again within a slot or
// two, since a waiter whose turn ran out unused rejoins the latest cohort
// at every node alike. A draw over the cohort's positions (k mod m) would
// instead change everyone's turn whenever m differs by one waiter; and
// counting each member's own record of lapses or unused votes would let
// disagreements feed themselves: with exactly t members up, one member's
// differing count splits every round.

// queue is the waiters of one resource at one node. Its methods are pure
// given now: the driver holds the resource's shard lock around them.
type queue struct {
	waiters []waiter
	// turn is set while a turn is under way: the turn of slot turnSlot
	// of the grid, from since until until; reserved is the session it
	// was last worked out for.
	turn     bool
	turnSlot int64
	since    time.Time
	until    time.Time
	reserved protocol.Holder
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
}

// doneSessions is how many committed sessions a queue remembers.
const doneSessions = 16

type waiter struct {
	holder protocol.Holder
	cohort uint64
	// tie orders the sessions of one identity (tie).
	tie uint64
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
}

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
// cohort, except that the identity holding the live committed lease waits
// behind that lease (its epoch's successor), whatever session it asks in.
// A vote does not count: only the members that saw it would put the voter
// behind it, and members must order waiters alike (holderLeased puts the
// holder's waiters behind its lease when the vote is committed).
func cohortFor(rec Record, id string, now time.Time) uint64 {
	c := cohort(rec, now)
	if l := rec.Lease; l.Committed && l.Active(now) && l.Holder.ID == id && l.Epoch >= c {
		c = l.Epoch + 1
	}
	return c
}

// Domains of the order's hashes.
const (
	turnDomain = "palisade/queue-turn/v1\x00"
	tieDomain  = "palisade/queue-tie/v1\x00"
)

// turnHash is identity id's draw for slot k of resource's queue: of the
// earliest cohort, the identity with the lowest draw has the slot. Every
// node computes it alike and no client chooses it (identities are
// admitted by cluster.json). The cohort is not in it: a member that has
// not seen the last commit yet numbers the cohorts one lower than the
// others, and must still order the same waiters alike.
func turnHash(resource, id string, k int64) uint64 {
	d := sha256.New()
	d.Write([]byte(turnDomain))
	d.Write(binary.AppendUvarint(nil, uint64(len(resource))))
	d.Write([]byte(resource))
	d.Write(binary.AppendUvarint(nil, uint64(len(id))))
	d.Write([]byte(id))
	d.Write(binary.BigEndian.AppendUint64(nil, uint64(k)))
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// QueueTurn is client identity id's draw for slot k of resource's queue
// (slots of ReserveFor since the Unix epoch): of the identities of the
// earliest cohort, the lowest draw has the slot. For tests and tools that
// need the order without a node.
func QueueTurn(resource, id string, k int64) uint64 { return turnHash(resource, id, k) }

// tie orders the sessions of one identity in one cohort: a hash of the
// session. A client choosing its session reorders only its own waiters.
func tie(s protocol.SessionID) uint64 {
	d := sha256.New()
	d.Write([]byte(tieDomain))
	d.Write(s[:])
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// before reports whether a is ahead of b in one identity's line: the
// earlier cohort, then tie (and, for hashes that collide, the session
// bytes, so the order is total).
func before(a, b waiter) bool {
	if a.cohort != b.cohort {
		return a.cohort < b.cohort
	}
	return sessionBefore(a, b)
}

// slot is the slot of the reservation grid that now falls in.
func slot(now time.Time, reserveFor time.Duration) int64 {
	return now.UnixNano() / int64(reserveFor)
}

// slotEnd is when slot k ends.
func slotEnd(k int64, reserveFor time.Duration) time.Time {
	return time.Unix(0, (k+1)*int64(reserveFor))
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
	q.waiters = append(q.waiters, waiter{holder: h, cohort: cohort, tie: tie(h.Session), seen: now})
	return true
}

// yield makes room in h's identity's places for h, which is not queued
// and whose identity holds perClient places already: of the sibling
// sessions that come after h in the identity's order of sessions (tie)
// and whose turn is not under way, the last leaves the queue (reported as
// evicted). So every member that sees the same sessions of an identity
// keeps the same ones, whatever order their Waits arrived in; keeping
// whichever came first left two members holding the resource for two
// different siblings, each short of t, for minutes on end (4 members, six
// processes on one key, two places each). It reorders that identity's own
// sessions only.
func (q *queue) yield(h protocol.Holder, perClient int) (evicted protocol.Holder, ok bool) {
	if q.find(h) >= 0 || q.served(h) || q.countOf(h.ID) < perClient {
		return protocol.Holder{}, false
	}
	in := waiter{holder: h, tie: tie(h.Session)}
	last := -1
	for i, w := range q.waiters {
		if w.holder.ID == h.ID && w.holder != q.reserved && sessionBefore(in, w) && (last < 0 || sessionBefore(q.waiters[last], w)) {
			last = i
		}
	}
	if last < 0 {
		return protocol.Holder{}, false
	}
	evicted = q.waiters[last].holder
	q.remove(evicted)
	return evicted, true
}

// sessionBefore orders the sessions of one identity by tie alone (and the
// session bytes, for hashes that collide): the order every member gives
// them, whatever their cohorts there.
func sessionBefore(a, b waiter) bool {
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return string(a.holder.Session[:]) < string(b.holder.Session[:])
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
// queued, no claim of its entry was looked at before, and c is one step
// earlier than its cohort in rec's numbering (stepBefore: a request that
// reached this node just after a handoff and the others just before gets
// the same place; a claim never moves a waiter up further). Any claim
// spends the entry's one look, so a waiter makes at most one claim per
// entry.
func (q *queue) checkClaim(h protocol.Holder, c uint64, rec Record) bool {
	i := q.find(h)
	if i < 0 || q.waiters[i].claimed {
		return false
	}
	q.waiters[i].claimed = true
	g := q.waiters[i].cohort
	return c > 0 && c < g && c >= stepBefore(rec, g)
}

// stepBefore is the cohort one step before cohort g: g-1, except that
// the waiters of the live or last lease (g == rec.LeaseGen) come right
// after the newcomers of the generation before it (rec.PrevGen+1). Epochs
// voted for and abandoned between two committed leases are no lease
// generation, and leave gaps in the numbering (a Wait that reached one
// member while the resource was free and the others during the next
// lease, after two split rounds, has cohorts 1 and 3).
func stepBefore(rec Record, g uint64) uint64 {
	if g == rec.LeaseGen && rec.PrevGen+1 < g {
		return rec.PrevGen + 1
	}
	return g - 1
}

// waive moves h back to cohort c if that is later than its place here
// (reporting whether it did): the waiter's claim shows that f+1 members
// put it in c at the earliest, so this member, which put it earlier (its
// Wait reached this member before a handoff and the others after), is
// the odd one out, and would hold the resource for it while the others
// do not. Nothing is verified: a waiter may always give up its own place
// (the request is its session's own, by its key), and moving later gains
// it nothing. It does not spend the entry's claim.
func (q *queue) waive(h protocol.Holder, c uint64) bool {
	i := q.find(h)
	if i < 0 || c <= q.waiters[i].cohort {
		return false
	}
	w := &q.waiters[i]
	w.cohort, w.place = c, nil
	return true
}

// moveUp puts h in cohort c, the place its verified claim shows f+1
// members gave it.
func (q *queue) moveUp(h protocol.Holder, c uint64) {
	if i := q.find(h); i >= 0 {
		w := &q.waiters[i]
		w.cohort, w.place = c, nil
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

// prune drops the waiters that neither poll nor were seen within ttl,
// and returns them. If the waiter a turn is under way for is among them,
// its turn ran out unused: it is also returned in expired, and the turn
// passes.
func (q *queue) prune(now time.Time, ttl time.Duration) (gone []protocol.Holder, expired []expiry) {
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		if w.polls == 0 && now.Sub(w.seen) > ttl {
			gone = append(gone, w.holder)
			if q.turn && w.holder == q.reserved {
				expired = append(expired, q.expiry(w))
			}
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	if q.find(q.reserved) < 0 {
		q.reserved = protocol.Holder{}
	}
	return gone, expired
}

// head returns the first waiter in slot k, if any: of the earliest
// cohort, the identity with the lowest turn hash for k (ties by
// identity), and that identity's first session (first).
func (q *queue) head(k int64) (waiter, bool) { return q.headSkipping(k, protocol.Holder{}) }

// headSkipping is head, leaving out waiter skip.
func (q *queue) headSkipping(k int64, skip protocol.Holder) (waiter, bool) {
	var (
		c        uint64
		best     string
		bestHash uint64
		found    bool
	)
	for _, w := range q.waiters {
		if w.holder != skip && (!found || w.cohort < c) {
			c, found = w.cohort, true
		}
	}
	if !found {
		return waiter{}, false
	}
	found = false
	for _, w := range q.waiters {
		if w.holder == skip || w.cohort != c || (found && w.holder.ID == best) {
			continue
		}
		h := turnHash(q.resource, w.holder.ID, k)
		if !found || h < bestHash || (h == bestHash && w.holder.ID < best) {
			best, bestHash, found = w.holder.ID, h, true
		}
	}
	return q.firstSkipping(best, skip)
}

// nextInLine reports whether h is first in line after skip, the holder of
// the live lease or vote (still queued until its lease is committed): the
// waiter the resource would be reserved for if it were free at now,
// unless the line or the slot changes first.
func (q *queue) nextInLine(h, skip protocol.Holder, now time.Time, reserveFor time.Duration) bool {
	w, ok := q.headSkipping(turnSlot(now, reserveFor), skip)
	return ok && w.holder == h
}

// turnSlot is the slot a turn that begins at now belongs to: now's slot,
// or the next one in its last half (so a turn is never a sliver).
func turnSlot(now time.Time, reserveFor time.Duration) int64 {
	k := slot(now, reserveFor)
	if now.Sub(time.Unix(0, k*int64(reserveFor))) >= reserveFor/2 {
		k++
	}
	return k
}

// reservation says whom a free resource is held for at now, and for how
// much longer. Turns are the grid's slots: a turn that begins in the first
// half of slot k is slot k's, one that begins in its last half is slot
// k+1's (so a turn is never a sliver), and it ends with its slot, at the
// same moment at every member that gives it. The slot's turn is the
// identity's that draws it (head), worked out afresh at every call over
// the waiters this member knows, and within it the resource is held for
// that identity's first session that is there (before). So a Wait that
// reaches this member late (waiters asking again around a handoff reach
// the members in different orders) moves the turn here as it does at the
// members it reached first, and two processes sharing a key are told
// alike by every member as soon as it knows both. (Keeping the turn of
// whichever waiter a member knew first split 4-member testnets 2-2 for
// whole slots.)
//
// A turn is a span of time, not a count of tries: votes taken in it and
// abandoned (a split round) leave the rest of the turn to its waiter, and
// a committed lease ends it (leased). A waiter whose turn runs out
// without its lease is listed in expired (with whether this node told it
// its turn: one never told was not in a position to use it) and moves to
// cohort newest, the newcomers' (cohort of the record now): it keeps
// waiting, but behind every earlier cohort, and takes turns with the
// newcomers. So a waiter that takes the vote and abandons it again and
// again keeps its turn to the end of the slot and no longer, and no
// earlier cohort after it (nor does a second session of its identity,
// after its own turn).
//
// A first waiter that is not there to take its turn (it neither polls nor
// was told its turn: a client that gave up, or a session served
// elsewhere) leaves the queue (dropped lists it; expired too if the turn
// was already its), and the slot goes to the next draw.
func (q *queue) reservation(now time.Time, reserveFor time.Duration, newest uint64) (h protocol.Holder, left time.Duration, dropped []protocol.Holder, expired []expiry, ok bool) {
	if q.turn && !now.Before(q.until) {
		q.turn = false
		if i := q.find(q.reserved); i >= 0 {
			expired = append(expired, q.expiry(q.waiters[i]))
			q.demote(q.reserved, newest)
		}
	}
	for {
		k := q.turnSlot
		if !q.turn {
			k = turnSlot(now, reserveFor)
		}
		w, ok := q.head(k)
		if !ok {
			q.turn, q.reserved = false, protocol.Holder{}
			return protocol.Holder{}, 0, dropped, expired, false
		}
		if !w.present(now, reserveFor) {
			if q.turn && w.holder == q.reserved {
				expired = append(expired, q.expiry(w))
			}
			q.remove(w.holder)
			dropped = append(dropped, w.holder)
			continue
		}
		if !q.turn {
			q.turn, q.turnSlot, q.since, q.until = true, k, now, slotEnd(k, reserveFor)
		}
		q.reserved = w.holder
		return w.holder, q.until.Sub(now), dropped, expired, true
	}
}

// expiry is a turn that ran out unused: whose, and whether this node told
// the waiter its turn (tell) while it lasted.
type expiry struct {
	holder protocol.Holder
	told   bool
}

// expiry is w's turn, under way, run out.
func (q *queue) expiry(w waiter) expiry {
	return expiry{holder: w.holder, told: !w.told.Before(q.since)}
}

// first is the first waiter of identity id (before), if any.
func (q *queue) first(id string) (waiter, bool) { return q.firstSkipping(id, protocol.Holder{}) }

// firstSkipping is first, leaving out waiter skip.
func (q *queue) firstSkipping(id string, skip protocol.Holder) (waiter, bool) {
	var best waiter
	found := false
	for _, w := range q.waiters {
		if w.holder.ID == id && w.holder != skip && (!found || before(w, best)) {
			best, found = w, true
		}
	}
	return best, found
}

// demote moves waiter h, whose turn ended without its lease, to cohort c
// if that is later than its own. Its entry claims no more: a claim could
// only move it back.
func (q *queue) demote(h protocol.Holder, c uint64) {
	i := q.find(h)
	if i < 0 {
		return
	}
	w := &q.waiters[i]
	w.cohort = max(w.cohort, c)
	w.place, w.claimed = nil, true
}

// leased records that a lease was committed on the resource: the turn
// under way is over (used, if the lease is its waiter's).
func (q *queue) leased() { q.turn, q.reserved = false, protocol.Holder{} }

// holderLeased puts the other waiting sessions of holder h's identity,
// whose lease at epoch was committed, behind that lease (cohort
// epoch+1): the holder's identity waits behind its own lease, as a Wait
// it makes while the lease lives does (cohortFor). Every member that
// learns the commit moves the same waiters.
func (q *queue) holderLeased(h protocol.Holder, epoch uint64) {
	for i := range q.waiters {
		if w := &q.waiters[i]; w.holder.ID == h.ID && w.holder != h && w.cohort <= epoch {
			w.cohort, w.place = epoch+1, nil
		}
	}
}

// notify wakes the long polls of the resource's waiters.
func (q *queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// idle reports whether the queue holds no waiter.
func (q *queue) idle() bool { return len(q.waiters) == 0 }
