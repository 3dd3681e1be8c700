package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/metricstest"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Tests of the queue's defences against waiters that lie (issue 20):
// signed places and claims, the holder behind its own lease, ranks no
// client chooses, the per-identity cap and the lapse of unused
// reservations.

// TestRankIgnoresSession: two identities in one cohort are ordered alike
// whatever sessions they wait in; one identity's sessions are ordered by
// a hash of the session.
func TestRankIgnoresSession(t *testing.T) {
	first := func(a, b protocol.Holder) protocol.Holder {
		q := newQueue(stateRes)
		q.touch(a, 3, 8, 2, stateBase)
		q.touch(b, 3, 8, 2, stateBase)
		w, _ := q.head()
		return w.holder
	}
	want := "alice"
	if rank(stateRes, 3, "bob") < rank(stateRes, 3, "alice") {
		want = "bob"
	}
	for s := range 200 {
		a := protocol.Holder{ID: "alice", Session: protocol.SessionID{byte(s), 1}}
		b := protocol.Holder{ID: "bob", Session: protocol.SessionID{byte(s), 2}}
		require.Equal(t, want, first(a, b).ID, "sessions %d", s)
		require.Equal(t, want, first(b, a).ID, "sessions %d, other arrival order", s)
	}
	// Sessions of one identity: by tie, either arrival order.
	a2 := protocol.Holder{ID: "alice", Session: protocol.SessionID{9}}
	wantS := alice
	if tie(a2.Session) < tie(alice.Session) {
		wantS = a2
	}
	require.Equal(t, wantS, first(alice, a2))
	require.Equal(t, wantS, first(a2, alice))
	// The cohort is in the rank: no identity is first in every cohort.
	var flips int
	for c := uint64(1); c <= 64; c++ {
		if (rank(stateRes, c, "alice") < rank(stateRes, c, "bob")) != (rank(stateRes, 1, "alice") < rank(stateRes, 1, "bob")) {
			flips++
		}
	}
	require.Positive(t, flips)
}

// TestCohortForHolder: the identity holding the live lease, or the live
// vote, waits in the cohort after it, in any session; others wait as
// before.
func TestCohortForHolder(t *testing.T) {
	now := stateAt(time.Second)
	committed := stateCommitted() // bob... holds epoch 5
	holder := committed.Lease.Holder
	other := protocol.Holder{ID: "someone-else", Session: protocol.SessionID{1}}
	require.EqualValues(t, 5, cohortFor(committed, other.ID, now))
	require.EqualValues(t, 6, cohortFor(committed, holder.ID, now), "the holder's next session waits behind its lease")
	require.EqualValues(t, 6, cohortFor(committed, holder.ID, stateAt(time.Minute)), "lease lapsed: the next cohort, like anyone")
	pending := stateWith(committed, func(r *Record) { r.Lease = Lease{Holder: bob, Epoch: 7, Expires: stateAt(2 * time.Second)} })
	require.EqualValues(t, 6, cohortFor(pending, alice.ID, now))
	require.EqualValues(t, 8, cohortFor(pending, bob.ID, now), "behind the lease its vote starts")
}

// TestQueuePerClientCap: an identity holds at most perClient places of a
// queue; others still join.
func TestQueuePerClientCap(t *testing.T) {
	q := newQueue(stateRes)
	added := 0
	for s := range 64 {
		if q.touch(protocol.Holder{ID: "flood", Session: protocol.SessionID{byte(s), 1}}, 1, 64, 2, stateBase) {
			added++
		}
	}
	require.Equal(t, 2, added)
	require.True(t, q.touch(alice, 1, 64, 2, stateBase), "another identity still gets a place")
}

// TestQueueLapse: a reservation that runs out unused puts its identity
// behind the others of its cohort, in its present and future sessions,
// until a lease is committed; the record is bounded.
func TestQueueLapse(t *testing.T) {
	at := func(d time.Duration) time.Time { return stateBase.Add(d) }
	// A resource on which bob ranks ahead of alice in cohort 1.
	res := ""
	for i := 0; res == ""; i++ {
		if r := fmt.Sprintf("r-%d", i); rank(r, 1, bob.ID) < rank(r, 1, alice.ID) {
			res = r
		}
	}
	q := newQueue(res)
	bob2 := protocol.Holder{ID: bob.ID, Session: protocol.SessionID{0xb2}}
	q.touch(bob, 1, 8, 2, at(0))
	q.touch(alice, 1, 8, 2, at(0))
	for i := range q.waiters {
		q.waiters[i].polls = 1
	}
	h, _, _, _, _ := q.reservation(at(0), time.Second)
	require.Equal(t, bob, h)
	// bob's fresh session arrives while bob holds the reservation.
	q.touch(bob2, 1, 8, 2, at(time.Second/2))
	q.waiters[q.find(bob2)].polls = 1
	h, _, _, expired, _ := q.reservation(at(time.Second), time.Second)
	require.Equal(t, []protocol.Holder{bob}, expired)
	require.Equal(t, alice, h, "bob lapsed: his other session goes after alice")
	require.True(t, q.lapses(bob.ID) > 0)
	// A later cohort still goes after a lapsed identity's earlier one.
	q.touch(carol, 2, 8, 2, at(time.Second))
	q.remove(alice)
	w, _ := q.head()
	require.Equal(t, bob2, w.holder)
	// A committed lease ends the lapse; an older generation does not.
	q.leaseCommitted(4)
	require.False(t, q.lapses(bob.ID) > 0)
	q.lapse(bob.ID)
	q.leaseCommitted(4)
	require.True(t, q.lapses(bob.ID) > 0, "the same lease renewed")
	// Bounded: the oldest is forgotten.
	for i := range maxLapsed {
		q.lapse(fmt.Sprintf("id-%d", i))
	}
	require.Len(t, q.lapsed, maxLapsed)
	require.False(t, q.lapses(bob.ID) > 0)
	require.True(t, q.lapses(fmt.Sprintf("id-%d", maxLapsed-1)) > 0)
}

// TestQueueLapseCounts: when every identity of a cohort has lapsed (no
// lease committed to clear the record), one that lapsed more often goes
// after those that lapsed fewer times, whatever the ranks say: a liar
// that ranks first and lets its turn run out again and again with fresh
// sessions cannot keep the honest identities waiting (seed 140).
func TestQueueLapseCounts(t *testing.T) {
	at := func(d time.Duration) time.Time { return stateBase.Add(d) }
	liar := protocol.Holder{ID: "liar", Session: protocol.SessionID{0x11}}
	dave := protocol.Holder{ID: "dave", Session: protocol.SessionID{0xd}}
	honest := []protocol.Holder{alice, carol, dave}
	// A resource on which the liar ranks first in cohort 1.
	res := ""
	for i := 0; res == ""; i++ {
		r := fmt.Sprintf("r-%d", i)
		first := true
		for _, h := range honest {
			first = first && rank(r, 1, liar.ID) < rank(r, 1, h.ID)
		}
		if first {
			res = r
		}
	}
	q := newQueue(res)
	for _, h := range append([]protocol.Holder{liar}, honest...) {
		q.touch(h, 1, 8, 2, at(0))
	}
	for i := range q.waiters {
		q.waiters[i].polls = 1
	}
	w, _ := q.head()
	require.Equal(t, liar, w.holder, "no lapses: rank order")
	for _, h := range honest {
		q.lapse(h.ID)
	}
	w, _ = q.head()
	require.Equal(t, liar, w.holder, "the liar has not lapsed yet")
	for range 3 {
		q.lapse(liar.ID)
	}
	require.Equal(t, 3, q.lapses(liar.ID))
	w, _ = q.head()
	require.NotEqual(t, liar.ID, w.holder.ID, "the liar lapsed three times, the others once")
	for _, h := range honest {
		require.True(t, q.before(q.waiters[q.find(h)], q.waiters[q.find(liar)]), "%s goes before the liar", h.ID)
	}
	// A fresh session of the liar's queues behind them too.
	liar2 := protocol.Holder{ID: liar.ID, Session: protocol.SessionID{0x12}}
	q.touch(liar2, 1, 8, 2, at(time.Second))
	for _, h := range honest {
		require.True(t, q.before(q.waiters[q.find(h)], q.waiters[q.find(liar2)]))
	}
	// The count saturates.
	for range 2 * maxLapseCount {
		q.lapse(liar.ID)
	}
	require.Equal(t, maxLapseCount, q.lapses(liar.ID))
	// A newer committed lease clears the record: rank order again.
	q.leaseCommitted(2)
	require.Zero(t, q.lapses(liar.ID))
	w, _ = q.head()
	require.Equal(t, liar.ID, w.holder.ID)
}

// A waiter that keeps taking the vote and never the lease (abandoning it,
// or letting it time out) spends its turn: after maxUncommittedVotes its
// reservation counts as unused, and the next waiter's turn comes.
func TestQueueVotesNeverCommitted(t *testing.T) {
	at := func(d time.Duration) time.Time { return stateBase.Add(d) }
	res := ""
	for i := 0; res == ""; i++ {
		if r := fmt.Sprintf("r-%d", i); rank(r, 1, bob.ID) < rank(r, 1, alice.ID) {
			res = r
		}
	}
	q := newQueue(res)
	q.touch(bob, 1, 8, 2, at(0))
	q.touch(alice, 1, 8, 2, at(0))
	for i := range q.waiters {
		q.waiters[i].polls = 1
	}
	for v := range maxUncommittedVotes {
		h, _, _, expired, _ := q.reservation(at(time.Duration(v)*time.Millisecond), time.Second)
		require.Equal(t, bob, h, "vote %d: an honest split round keeps the turn", v)
		require.Empty(t, expired)
		q.voted(bob)
		q.busy()
	}
	h, _, _, expired, _ := q.reservation(at(10*time.Millisecond), time.Second)
	require.Equal(t, []protocol.Holder{bob}, expired)
	require.Equal(t, alice, h)
	require.True(t, q.lapses(bob.ID) > 0)
	q.voted(carol) // not queued: nothing to count
	require.Equal(t, -1, q.find(carol))
}

// startNode1Limits is node 1 on clock with limits.
func (lc *limitsCluster) startNode1Limits(t testing.TB, clock clockwork.Clock, limits Limits) *Node {
	t.Helper()
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[0], Limits: limits}, NewMemStore(), h, clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// waitNow sends a Wait answered at once (MaxWait 0) with claim.
func (d nodeDriver) waitNow(from peer.ID, res string, key protocol.SessionKey, claim []protocol.SignedPlace) protocol.WaitReply {
	d.t.Helper()
	req := protocol.WaitRequest{Cluster: d.lc.cluster.ID, Resource: res, Key: key, Claim: claim}
	r, err := protocol.UnmarshalWaitReply(d.call(from, protocol.ProtoWait, req.Marshal()))
	require.NoError(d.t, err)
	return r
}

// placeBy is member m's place for h on res in cohort c, signed with its
// identity key.
func (lc *limitsCluster) placeBy(t testing.TB, m int, res string, h protocol.Holder, c uint64) protocol.SignedPlace {
	t.Helper()
	sp, err := protocol.SignPlace(lc.ids[m-1], protocol.Place{Cluster: lc.cluster.ID, Resource: res, Holder: h.Ref(), Cohort: c, Member: m})
	require.NoError(t, err)
	return sp
}

// TestWaitClaim: a waiter moves up one cohort only with f+1 valid places
// of distinct members for this very session; a bad claim is refused and is
// the entry's last; signatures beyond f+1 are not verified. Every reply
// carries the node's own signed place.
func TestWaitClaim(t *testing.T) {
	lc := newLimitsCluster(t) // N=4, f=1: a claim needs 2 places
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Limits(t, clock, Limits{WaitersPerClientPerResource: 32})}
	a, b := lc.everything, lc.ordersOnly
	const res = "orders-claim"
	// A lease of generation 1 comes and goes: new waiters are in cohort 2.
	ha := limitsHolder(a.String())
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	tok := d.token(lc.cluster.Statement(res, 1, ha))
	require.Equal(t, protocol.CodeOK, d.commit(a, tok).Code)
	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)

	next := byte(100)
	session := func() (protocol.SessionKey, protocol.Holder) {
		next++
		return testKey(next), keyHolder(b.String(), next)
	}
	forge := func(p protocol.SignedPlace) protocol.SignedPlace {
		p.Sig = append([]byte(nil), p.Sig...)
		p.Sig[3] ^= 1
		return p
	}
	// Registration: cohort 2, with the node's signed place.
	k, h := session()
	r := d.waitNow(b, res, k, nil)
	require.EqualValues(t, 2, r.Cohort)
	require.NotNil(t, r.Place)
	require.NoError(t, protocol.VerifyPlace(lc.cluster, *r.Place))
	require.Equal(t, protocol.Place{Cluster: lc.cluster.ID, Resource: res, Holder: h.Ref(), Cohort: 2, Member: 1}, r.Place.Place)

	for _, tc := range []struct {
		name  string
		claim func(h, other protocol.Holder) []protocol.SignedPlace
		want  uint64
	}{
		{"f+1 valid places", func(h, _ protocol.Holder) []protocol.SignedPlace {
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 1), lc.placeBy(t, 3, res, h, 1)}
		}, 1},
		{"a forged extra place is not verified", func(h, _ protocol.Holder) []protocol.SignedPlace {
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 1), lc.placeBy(t, 3, res, h, 1), forge(lc.placeBy(t, 4, res, h, 1))}
		}, 1},
		{"a forged signature", func(h, _ protocol.Holder) []protocol.SignedPlace {
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 1), forge(lc.placeBy(t, 3, res, h, 1))}
		}, 2},
		{"one member only", func(h, _ protocol.Holder) []protocol.SignedPlace {
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 1)}
		}, 2},
		{"places of another session", func(_, other protocol.Holder) []protocol.SignedPlace {
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, other, 1), lc.placeBy(t, 3, res, other, 1)}
		}, 2},
		{"signed by members under other indices", func(h, _ protocol.Holder) []protocol.SignedPlace {
			p2, p3 := lc.placeBy(t, 2, res, h, 1), lc.placeBy(t, 3, res, h, 1)
			p2.Member, p3.Member = 3, 4
			return []protocol.SignedPlace{p2, p3}
		}, 2},
		{"two cohorts up", func(h, _ protocol.Holder) []protocol.SignedPlace {
			// cohort 0 cannot be signed for; claim 1 from an entry at 3
			// is tested in TestQueueClaim. Here: a claim of the cohort
			// it already has moves nothing.
			return []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 2), lc.placeBy(t, 3, res, h, 2)}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, h := session()
			_, other := session()
			require.EqualValues(t, 2, d.waitNow(b, res, k, nil).Cohort)
			r := d.waitNow(b, res, k, tc.claim(h, other))
			require.Equal(t, protocol.CodeOK, r.Code)
			require.Equal(t, tc.want, r.Cohort)
			require.NoError(t, protocol.VerifyPlace(lc.cluster, *r.Place))
			require.Equal(t, tc.want, r.Place.Cohort, "the node signs the place it gives now")
			// The entry's claim is spent: a good claim now moves nothing.
			c := max(tc.want-1, 1)
			good := []protocol.SignedPlace{lc.placeBy(t, 2, res, h, c), lc.placeBy(t, 3, res, h, c)}
			require.Equal(t, tc.want, d.waitNow(b, res, k, good).Cohort, "one claim per queue entry")
		})
	}

	// A claim naming one member twice is malformed.
	k, h = session()
	p := lc.placeBy(t, 2, res, h, 1)
	r = d.waitNow(b, res, k, []protocol.SignedPlace{p, p})
	require.Equal(t, protocol.CodeBadRequest, r.Code)
}

// TestHolderWaitsBehindOwnLease: the holder's identity, waiting in a new
// session while its lease (or vote) lives, is put behind that lease's
// waiters, and the release serves them first.
func TestHolderWaitsBehindOwnLease(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly
	const res = "orders-own"
	ha := limitsHolder(a.String())
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	// A pending vote: a's next session goes behind it.
	require.EqualValues(t, 2, d.waitNow(a, res, testKey(1), nil).Cohort)
	require.EqualValues(t, 1, d.waitNow(b, res, testKey(2), nil).Cohort)
	tok := d.token(lc.cluster.Statement(res, 1, ha))
	require.Equal(t, protocol.CodeOK, d.commit(a, tok).Code)
	require.EqualValues(t, 2, d.waitNow(a, res, testKey(3), nil).Cohort, "committed: still behind")
	require.EqualValues(t, 1, d.waitNow(b, res, testKey(4), nil).Cohort)
	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
	r2, r4 := d.waitNow(b, res, testKey(2), nil), d.waitNow(b, res, testKey(4), nil)
	require.True(t, r2.Free != r4.Free, "one of b's sessions, which waited on the lease, is first")
	first := keyHolder(b.String(), 2)
	if r4.Free {
		first = keyHolder(b.String(), 4)
	}
	for _, k := range []byte{1, 3} {
		r := d.waitNow(a, res, testKey(k), nil)
		require.False(t, r.Free)
		require.Equal(t, first.Ref(), r.Holder, "replies name the reserved waiter by reference")
	}
}

// TestReservationLapse: a reservation that runs out unused is counted,
// logged and shown by Reserved while it lasts, and the identity's fresh
// session goes behind the waiter that was next.
func TestReservationLapse(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly
	// A resource on which b ranks ahead of a in cohort 1.
	res := ""
	for i := 0; res == ""; i++ {
		if r := fmt.Sprintf("orders-%d", i); rank(r, 1, b.String()) < rank(r, 1, a.String()) {
			res = r
		}
	}
	expired := func() float64 {
		return metricstest.Value(t, d.n.MetricsRegistry(), MetricReservationsExpired)
	}
	require.Zero(t, expired())
	hb1, ha := keyHolder(b.String(), 1), keyHolder(a.String(), 3)
	require.True(t, d.waitNow(b, res, testKey(1), nil).Free)
	require.False(t, d.waitNow(a, res, testKey(3), nil).Free)
	ref, left := d.n.Reserved(res)
	require.Equal(t, hb1.Ref(), ref)
	require.Equal(t, d.n.cfg.Rules.ReserveFor, left)
	// Status shows the free resource as reserved, naming the waiter by
	// its session's hash.
	st, err := protocol.UnmarshalStatusReply(d.call(a, protocol.ProtoStatus, protocol.StatusRequest{Resource: res}.Marshal()))
	require.NoError(t, err)
	require.True(t, st.Holder.IsZero())
	require.Equal(t, hb1.Ref(), st.Reserved)
	require.Equal(t, d.n.cfg.Rules.ReserveFor, st.ReservedLeft)
	// b's first session never acquires; its second one waits as well.
	require.False(t, d.waitNow(b, res, testKey(2), nil).Free)
	clock.Advance(d.n.cfg.Rules.ReserveFor)
	require.True(t, d.waitNow(a, res, testKey(3), nil).Free, "b's reservation ran out")
	require.EqualValues(t, 1, expired())
	r := d.waitNow(b, res, testKey(2), nil)
	require.False(t, r.Free, "b lapsed: its fresh session is not next")
	require.Equal(t, ha.Ref(), r.Holder)
	ref, _ = d.n.Reserved(res)
	require.Equal(t, ha.Ref(), ref)
	// a acquires and commits: the lapse ends, and nothing is reserved
	// while the lease lives.
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	require.Equal(t, protocol.CodeOK, d.commit(a, d.token(lc.cluster.Statement(res, 1, ha))).Code)
	ref, left = d.n.Reserved(res)
	require.True(t, ref.IsZero())
	require.Zero(t, left)
	sh := d.n.shard(res)
	sh.mu.Lock()
	lapsed := sh.queues[res].lapses(b.String()) > 0
	sh.mu.Unlock()
	require.False(t, lapsed)
}

// TestRecentLapsesBounded: a node remembers its last recentLapses lapses,
// oldest first, and forgets the oldest beyond that.
func TestRecentLapsesBounded(t *testing.T) {
	var r lapseRing
	require.Empty(t, r.list())
	at := func(i int) time.Time { return stateBase.Add(time.Duration(i) * time.Millisecond) }
	for i := range 3 {
		r.add(Lapse{Resource: "r", ID: fmt.Sprintf("id-%d", i), At: at(i)})
	}
	got := r.list()
	require.Len(t, got, 3)
	require.Equal(t, "id-0", got[0].ID)
	require.Equal(t, "id-2", got[2].ID)
	for i := 3; i < 2*recentLapses+5; i++ {
		r.add(Lapse{Resource: "r", ID: fmt.Sprintf("id-%d", i), At: at(i)})
	}
	got = r.list()
	require.Len(t, got, recentLapses)
	require.Equal(t, fmt.Sprintf("id-%d", recentLapses+5), got[0].ID, "the oldest are forgotten")
	require.Equal(t, fmt.Sprintf("id-%d", 2*recentLapses+4), got[recentLapses-1].ID)
	for i := 1; i < len(got); i++ {
		require.True(t, got[i-1].At.Before(got[i].At), "oldest first")
	}
	got[0].ID = "changed"
	require.NotEqual(t, "changed", r.list()[0].ID, "a copy")
}
