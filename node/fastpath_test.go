package node

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Tests of the one-pairing fast path (Commit and Release of the statement
// a node voted for skip the signature check) and of push handoff (the wait
// queue, Queued replies and the Wait long poll), through node 1's handlers.

// nodeDriver calls node 1's handlers as client peers do.
type nodeDriver struct {
	t  testing.TB
	lc *limitsCluster
	n  *Node
}

func (d nodeDriver) call(from peer.ID, proto string, req []byte) []byte {
	d.t.Helper()
	b, err := d.n.serve(context.Background(), proto, from, req)
	require.NoError(d.t, err)
	return b
}

func (d nodeDriver) acquire(from peer.ID, h protocol.Holder, resource string, epoch uint64) protocol.AcquireReply {
	d.t.Helper()
	req := protocol.AcquireRequest{Cluster: d.lc.cluster.ID, Resource: resource, Epoch: epoch, Key: keyOf(h), TTL: 10 * time.Second}
	r, err := protocol.UnmarshalAcquireReply(d.call(from, protocol.ProtoAcquire, req.Marshal()))
	require.NoError(d.t, err)
	return r
}

func (d nodeDriver) ack(from peer.ID, proto string, req []byte) protocol.Ack {
	d.t.Helper()
	a, err := protocol.UnmarshalAck(d.call(from, proto, req))
	require.NoError(d.t, err)
	return a
}

// commit sends a Commit of tok with its session's key, as the acquiring
// client does.
func (d nodeDriver) commit(from peer.ID, tok protocol.Token) protocol.Ack {
	return d.commitReq(from, protocol.CommitRequest{Token: tok, TTL: 10 * time.Second, Key: keyOf(tok.Holder)})
}

func (d nodeDriver) commitReq(from peer.ID, req protocol.CommitRequest) protocol.Ack {
	return d.ack(from, protocol.ProtoCommit, req.Marshal())
}

// release sends a Release of tok with its session's key, as the Lock does.
func (d nodeDriver) release(from peer.ID, tok protocol.Token) protocol.Ack {
	return d.releaseReq(from, protocol.ReleaseRequest{Token: tok, Key: keyOf(tok.Holder)})
}

func (d nodeDriver) releaseReq(from peer.ID, req protocol.ReleaseRequest) protocol.Ack {
	return d.ack(from, protocol.ProtoRelease, req.Marshal())
}

// token signs st with three shares (a valid token).
func (d nodeDriver) token(st protocol.Statement) protocol.Token {
	d.t.Helper()
	var ps []crypto.PartialSig
	for _, sh := range d.lc.shares[:3] {
		p, err := sh.Sign(st.SignedBytes())
		require.NoError(d.t, err)
		ps = append(ps, p)
	}
	sig, _, err := d.lc.cluster.Key.Combine(st.SignedBytes(), ps)
	require.NoError(d.t, err)
	return protocol.Token{Statement: st, Signature: sig}
}

// forged is tok with another (well-formed, invalid) signature.
func (d nodeDriver) forged(tok protocol.Token) protocol.Token {
	d.t.Helper()
	other := d.token(d.lc.cluster.Statement("forged", 1, tok.Holder))
	tok.Signature = other.Signature
	require.Error(d.t, d.lc.cluster.Key.Verify(tok.SignedBytes(), tok.Signature))
	return tok
}

func (d nodeDriver) record(resource string) Record {
	d.t.Helper()
	r, err := d.n.Record(context.Background(), resource)
	require.NoError(d.t, err)
	return r
}

// startNode1Clock is startNode1 on a given clock.
func (lc *limitsCluster) startNode1Clock(t testing.TB, clock clockwork.Clock) *Node {
	t.Helper()
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[0]}, NewMemStore(), h, clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// TestCommitOwnStatementSkipsPairing: the holder's Commit and Release of
// the statement the node voted for cost no pairing and record no
// certified token; anything else is checked as before.
func TestCommitOwnStatementSkipsPairing(t *testing.T) {
	lc := newLimitsCluster(t)
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1(t, NewMemStore(), Limits{}, "")}
	me := lc.everything
	h := limitsHolder(me.String())
	const res = "orders-1"

	require.Equal(t, protocol.KindVote, d.acquire(me, h, res, 1).Kind)
	tok := d.token(lc.cluster.Statement(res, 1, h))

	// The holder's own commit, valid or not: no pairing, lease started,
	// nothing recorded as certified (so Status never shows it).
	require.Equal(t, protocol.CodeOK, d.commit(me, d.forged(tok)).Code)
	require.Equal(t, protocol.CodeOK, d.commit(me, tok).Code)
	require.Zero(t, d.n.LimitStats().TokenChecks, "pairings for the holder's own statement")
	rec := d.record(res)
	require.True(t, rec.Lease.Committed)
	require.Nil(t, rec.Certified, "an unchecked token is never recorded as certified")
	st, err := protocol.UnmarshalStatusReply(d.call(me, protocol.ProtoStatus, protocol.StatusRequest{Resource: res}.Marshal()))
	require.NoError(t, err)
	require.Nil(t, st.Certified)

	// Relayed by someone else: checked once, then recorded.
	require.Equal(t, protocol.CodeOK, d.commit(lc.ordersOnly, tok).Code)
	require.EqualValues(t, 1, d.n.LimitStats().TokenChecks)
	require.Equal(t, &tok, d.record(res).Certified)
	require.Equal(t, protocol.CodeBadRequest, d.commit(lc.ordersOnly, d.forged(tok)).Code, "a relayed forgery")

	// A statement the node did not vote for is checked even from its holder.
	later := d.token(lc.cluster.Statement(res, 7, h))
	checks := d.n.LimitStats().TokenChecks
	require.Equal(t, protocol.CodeBadRequest, d.commit(me, d.forged(later)).Code)
	require.Equal(t, checks+1, d.n.LimitStats().TokenChecks)
	require.Equal(t, uint64(1), d.record(res).LastEpoch, "a forgery teaches nothing")

	// Release of the own lease: no pairing; released twice, acknowledged twice.
	checks = d.n.LimitStats().TokenChecks
	require.Equal(t, protocol.CodeOK, d.release(me, d.forged(tok)).Code)
	require.Equal(t, protocol.CodeOK, d.release(me, tok).Code, "a re-sent release")
	require.Equal(t, checks, d.n.LimitStats().TokenChecks)
	require.True(t, d.record(res).Lease.Holder.IsZero())
	require.Equal(t, protocol.CodeNoLease, d.commit(me, tok).Code, "a released lease does not come back")
}

// turn is whose turn slot k is among holders waiting in one cohort of
// resource res (of distinct identities): the lowest turn hash for k.
func turn(res string, k int64, hs ...protocol.Holder) protocol.Holder {
	return slices.MinFunc(hs, func(a, b protocol.Holder) int {
		return cmp.Compare(turnHash(res, a.ID, k), turnHash(res, b.ID, k))
	})
}

// TestQueueOrder: the pure queue orders waiters by cohort, and the
// identities of a cohort by their turn hash for the slot; it keeps a waiter's place
// when it asks again, prunes those that stopped asking, and passes the
// reservation on at the end of its slot.
func TestQueueOrder(t *testing.T) {
	const reserveFor = time.Second
	// k0 is a slot after stateBase.
	k0 := (slot(stateBase, reserveFor)/6 + 1) * 6
	at := func(d time.Duration) time.Time { return time.Unix(0, k0*int64(reserveFor)).Add(d) }
	const res = stateRes
	q := newQueue(res)
	require.True(t, q.touch(bob, 6, 8, 2, at(0)))
	require.True(t, q.touch(alice, 5, 8, 2, at(0)), "alice waited behind an earlier lease")
	require.False(t, q.touch(bob, 9, 8, 2, at(0)), "asking again keeps the place")
	require.True(t, q.touch(carol, 6, 8, 2, at(0)))
	require.False(t, q.touch(alice2, 6, 3, 2, at(0)), "full")

	order := func() []protocol.Holder {
		c := &queue{resource: res, waiters: append([]waiter(nil), q.waiters...)}
		var out []protocol.Holder
		for {
			w, ok := c.head(0)
			if !ok {
				return out
			}
			out = append(out, w.holder)
			c.remove(w.holder)
		}
	}
	second, third := bob, carol
	if turnHash(res, carol.ID, 0) < turnHash(res, bob.ID, 0) {
		second, third = carol, bob
	}
	require.Equal(t, []protocol.Holder{alice, second, third}, order(), "cohort first, then the slot's draw")

	// The reservation: alice (polling, like everyone) has it to the end
	// of the slot.
	for i := range q.waiters {
		q.waiters[i].polls = 1
	}
	h, left, dropped, expired, ok := q.reservation(at(0), reserveFor, 6)
	require.True(t, ok)
	require.Equal(t, alice, h)
	require.Equal(t, reserveFor, left)
	require.Empty(t, dropped)
	require.Empty(t, expired)
	q.tell(h, at(0)) // her long poll is answered: free for her
	h, left, _, _, _ = q.reservation(at(400*time.Millisecond), reserveFor, 6)
	require.Equal(t, alice, h)
	require.Equal(t, 600*time.Millisecond, left)
	// She let it run out: counted as expired, she joins the newcomers'
	// cohort 6, and the turn of slot k0+1 is the draw of cohort 6's
	// three.
	h, left, dropped, expired, _ = q.reservation(at(reserveFor), reserveFor, 6)
	require.Empty(t, dropped)
	require.Equal(t, []expiry{{alice, true}}, expired)
	require.EqualValues(t, 6, q.cohortOf(alice))
	require.Equal(t, turn(res, k0+1, alice, bob, carol), h)
	require.Equal(t, reserveFor, left)
	// A later slot is the turn of the identity that draws it.
	h, left, _, _, _ = q.reservation(at(6*reserveFor), reserveFor, 6)
	first := turn(res, k0+6, alice, bob, carol)
	require.Equal(t, first, h)
	require.Equal(t, reserveFor, left)

	// A first waiter that is not there to take its turn (no poll, not
	// told its turn, not seen for pollGap) is passed over at once; one
	// told its turn keeps it while it comes for it.
	q.remove(alice)
	second, _, _, _, _ = q.reservation(at(6*reserveFor), reserveFor, 6)
	require.Equal(t, turn(res, k0+6, bob, carol), second, "alice gone: worked out afresh")
	third = bob
	if second == bob {
		third = carol
	}
	q.waiters[q.find(second)].polls = 0
	q.tell(third, at(6*reserveFor))
	q.waiters[q.find(third)].polls = 0
	h, _, dropped, expired, _ = q.reservation(at(6*reserveFor+pollGap), reserveFor, 6)
	require.Equal(t, []protocol.Holder{second}, dropped)
	require.Equal(t, []expiry{{second, false}}, expired, "its turn had started, never told")
	require.Equal(t, third, h)
	require.Equal(t, []protocol.Holder{third}, order())

	// Waiters that stopped asking leave after the TTL; polling ones stay.
	require.True(t, q.touch(alice, 50, 8, 2, at(20*time.Second)))
	q.waiters[q.find(third)].polls = 1
	gone, _ := q.prune(at(30*time.Second), 2*time.Second)
	require.Equal(t, []protocol.Holder{alice}, gone)
	require.Equal(t, []protocol.Holder{third}, order())

	// A served session (its lease committed here) leaves and is not
	// queued again by a long poll still in flight.
	require.True(t, q.committed(third))
	require.False(t, q.touch(third, 51, 8, 2, at(31*time.Second)))
	require.True(t, q.idle())
}

// TestQueueClaim: a waiter another node put one cohort earlier moves up
// here when it claims it, and no further; each queue entry has its claim
// looked at once, whatever it asked for.
func TestQueueClaim(t *testing.T) {
	q := newQueue(stateRes)
	q.touch(alice, 8, 8, 2, stateBase)
	q.touch(bob, 8, 8, 2, stateBase)
	require.False(t, q.checkClaim(alice, 6, Record{}), "more than one cohort up: refused")
	require.False(t, q.checkClaim(alice, 7, Record{}), "and that was alice's one claim")
	require.EqualValues(t, 8, q.cohortOf(alice))
	require.False(t, q.checkClaim(bob, 9, Record{}), "a claim never moves a waiter back")
	q.remove(bob)
	q.touch(bob, 8, 8, 2, stateBase)
	require.True(t, q.checkClaim(bob, 7, Record{}), "a new entry has a claim of its own")
	q.moveUp(bob, 7)
	require.EqualValues(t, 7, q.cohortOf(bob))
	require.False(t, q.checkClaim(bob, 6, Record{}))
	require.False(t, q.checkClaim(carol, 7, Record{}), "not queued")
	require.Zero(t, q.cohortOf(carol))

	// Epochs abandoned between two leases leave gaps: with lease 8
	// committed after lease 5, the step before cohort 8 is 6 (the
	// newcomers while the resource was free), and no earlier.
	rec := Record{LeaseGen: 8, PrevGen: 5}
	require.EqualValues(t, 6, stepBefore(rec, 8))
	require.EqualValues(t, 8, stepBefore(rec, 9))
	require.EqualValues(t, 4, stepBefore(rec, 5))
	for _, tc := range []struct {
		c  uint64
		ok bool
	}{{5, false}, {6, true}, {7, true}, {8, false}} {
		q := newQueue(stateRes)
		q.touch(alice, 8, 8, 2, stateBase)
		require.Equal(t, tc.ok, q.checkClaim(alice, tc.c, rec), "claim of %d from 8", tc.c)
	}
}

// TestCohort: a waiter behind a live committed lease waits for that lease's
// generation; once no committed lease is live, for the next one.
func TestCohort(t *testing.T) {
	now := stateAt(time.Second)
	require.EqualValues(t, 5, cohort(stateCommitted(), now))
	require.EqualValues(t, 6, cohort(stateCommitted(), stateAt(time.Minute)), "the lease lapsed")
	require.EqualValues(t, 1, cohort(Record{Resource: stateRes}, now))
	pending := stateWith(stateCommitted(), func(r *Record) { r.Lease = Lease{Holder: bob, Epoch: 6, Expires: stateAt(2 * time.Second)} })
	require.EqualValues(t, 6, cohort(pending, now), "an uncommitted vote does not start a generation")
}

// TestWaitAndQueuedHandoff: a waiter's long poll returns when the holder
// releases; the free resource is then reserved for it (others get Queued,
// including the holder that just released), and after ReserveFor unused
// it passes on.
func TestWaitAndQueuedHandoff(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly
	ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 9)
	const res = "orders-2"
	// A long poll runs in its own goroutine, which only sends its outcome
	// back: the assertions run here, on the test goroutine.
	type polledReply struct {
		r   protocol.WaitReply
		err error
	}
	waitOn := func(res string, from peer.ID, h protocol.Holder) <-chan polledReply {
		out := make(chan polledReply, 1)
		go func() {
			req := protocol.WaitRequest{Cluster: lc.cluster.ID, Resource: res, Key: keyOf(h), MaxWait: 3 * time.Second}
			b, err := d.n.serve(context.Background(), protocol.ProtoWait, from, req.Marshal())
			var r protocol.WaitReply
			if err == nil {
				r, err = protocol.UnmarshalWaitReply(b)
			}
			out <- polledReply{r, err}
		}()
		return out
	}
	wait := func(from peer.ID, h protocol.Holder) <-chan polledReply { return waitOn(res, from, h) }
	// answered is the poll's reply, asserted here; testwait.HangCeiling only stops
	// a poll that never returns from hanging the test.
	answered := func(polled <-chan polledReply) protocol.WaitReply {
		t.Helper()
		p := testwait.Recv(t, polled, testwait.HangCeiling, "the Wait long poll")
		require.NoError(t, p.err)
		return p.r
	}

	// Nobody holds a resource: the poll says free at once (and holds it
	// for the waiter: a's Acquire there is queued).
	r := answered(waitOn("orders-other", b, hb))
	require.True(t, r.Free)
	require.Equal(t, protocol.KindQueued, d.acquire(a, ha, "orders-other", 1).Kind)

	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	tok := d.token(lc.cluster.Statement(res, 1, ha))
	require.Equal(t, protocol.CodeOK, d.commit(a, tok).Code)

	// b waits; its poll is held while a's lease lives.
	polled := wait(b, hb)
	require.Eventually(t, func() bool { return d.n.QueueStats().Waiters == 2 }, 5*time.Second, time.Millisecond)
	select {
	case p := <-polled:
		t.Fatalf("poll answered while the lease lives: %+v (err %v)", p.r, p.err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
	r = answered(polled)
	require.True(t, r.Free, "the release wakes the waiter")
	require.EqualValues(t, 1, r.LastEpoch)

	// The free resource is b's for ReserveFor: a, asking again, is queued.
	q := d.acquire(a, keyHolder(a.String(), 8), res, 2)
	require.Equal(t, protocol.KindQueued, q.Kind)
	require.Equal(t, hb.Ref(), q.Holder)
	require.Equal(t, uint64(1), d.record(res).LastEpoch, "a queued request uses no epoch")
	require.Equal(t, protocol.KindVote, d.acquire(b, hb, res, 2).Kind, "the first waiter gets the vote")
	tokB := d.token(lc.cluster.Statement(res, 2, hb))
	require.Equal(t, protocol.CodeOK, d.commit(b, tokB).Code)
	require.Equal(t, 1, d.n.QueueStats().Waiters, "a committed lease leaves the queue (b still waits on orders-other)")
	require.Equal(t, protocol.CodeOK, d.release(b, tokB).Code)

	// A waiter that does not come for its turn loses it after ReserveFor.
	hc := keyHolder(b.String(), 10)
	r = answered(wait(b, hc))
	require.True(t, r.Free)
	ha2 := keyHolder(a.String(), 11)
	require.Equal(t, protocol.KindQueued, d.acquire(a, ha2, res, 3).Kind)
	clock.Advance(d.n.cfg.Rules.ReserveFor)
	require.Equal(t, protocol.KindVote, d.acquire(a, ha2, res, 3).Kind)
}

// TestWaitersBounded: what waiters make a node keep is bounded per
// resource and per client identity, and a waiter that stops asking is
// forgotten.
func TestWaitersBounded(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[0], Limits: Limits{WaitersPerResource: 3, WaitersPerClient: 5, WaitersPerClientPerResource: 10}}, NewMemStore(), h, clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	d := nodeDriver{t: t, lc: lc, n: n}
	a := lc.everything
	holder := limitsHolder(a.String())
	require.Equal(t, protocol.KindVote, d.acquire(a, holder, "r-0", 1).Kind)

	// 10 sessions wait on r-0 (held by a): 3 are queued.
	poll := func(res string, s byte) {
		req := protocol.WaitRequest{Cluster: lc.cluster.ID, Resource: res, Key: protocol.SessionKey{s}, MaxWait: 0}
		d.call(a, protocol.ProtoWait, req.Marshal())
	}
	for s := byte(1); s <= 10; s++ {
		poll("r-0", s)
	}
	require.Equal(t, 3, n.QueueStats().Waiters)
	// Other resources: a's identity may keep 5 waiters in all.
	for i := 1; i <= 4; i++ {
		poll(string(rune('a'+i))+"-res", byte(20+i))
	}
	require.Equal(t, 5, n.QueueStats().Waiters)
	// They stopped asking: a sweep forgets them all.
	clock.Advance(n.cfg.Rules.WaiterTTL + time.Second)
	n.sweepQueues()
	require.Equal(t, QueueStats{}, n.QueueStats())
	require.Zero(t, n.waiterTotal.Load())
	require.Zero(t, n.waiterCount(a.String()).Load())
}
