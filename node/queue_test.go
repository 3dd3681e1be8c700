package node

import (
	"fmt"
	"sort"
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
// signed places and claims, the holder behind its own lease, an order no
// client chooses, the per-identity cap, and turns drawn on a grid of slots
// every member shares.

// resWhere is the first resource named prefix-0, prefix-1, ... for which
// ok holds: tests pick a resource on which the slots' draws fall a given
// way.
func resWhere(prefix string, ok func(res string) bool) string {
	for i := 0; ; i++ {
		if r := fmt.Sprintf("%s-%d", prefix, i); ok(r) {
			return r
		}
	}
}

// draws reports whether, on resource res, identity a's turn hash is below
// b's in slot k.
func draws(res string, k int64, a, b string) bool {
	return turnHash(res, a, k) < turnHash(res, b, k)
}

// TestTurnIgnoresSession: two identities in one cohort are ordered alike
// whatever sessions they wait in (in each slot: by their turn hashes);
// one identity's sessions are ordered by a hash of the session.
func TestTurnIgnoresSession(t *testing.T) {
	first := func(k int64, a, b protocol.Holder) protocol.Holder {
		q := newQueue(stateRes)
		q.touch(a, 3, 8, 2, stateBase)
		q.touch(b, 3, 8, 2, stateBase)
		w, _ := q.head(k)
		return w.holder
	}
	for k := range int64(8) {
		want := "alice"
		if draws(stateRes, k, "bob", "alice") {
			want = "bob"
		}
		for s := range 64 {
			a := protocol.Holder{ID: "alice", Session: protocol.SessionID{byte(s), 1}}
			b := protocol.Holder{ID: "bob", Session: protocol.SessionID{byte(s), 2}}
			require.Equal(t, want, first(k, a, b).ID, "slot %d, sessions %d", k, s)
			require.Equal(t, want, first(k, b, a).ID, "slot %d, sessions %d, other arrival order", k, s)
		}
	}
	// Sessions of one identity: by tie, either arrival order.
	a2 := protocol.Holder{ID: "alice", Session: protocol.SessionID{9}}
	wantS := alice
	if tie(a2.Session) < tie(alice.Session) {
		wantS = a2
	}
	require.Equal(t, wantS, first(0, alice, a2))
	require.Equal(t, wantS, first(0, a2, alice))
	// The cohort is not in the draw: a member that numbers the cohorts
	// one lower (it has not seen the last commit) orders alike.
	q1, q2 := newQueue(stateRes), newQueue(stateRes)
	q1.touch(alice, 1, 8, 2, stateBase)
	q1.touch(bob, 1, 8, 2, stateBase)
	q2.touch(alice, 2, 8, 2, stateBase)
	q2.touch(bob, 2, 8, 2, stateBase)
	for k := range int64(16) {
		w1, _ := q1.head(k)
		w2, _ := q2.head(k)
		require.Equal(t, w1.holder, w2.holder, "slot %d", k)
	}
}

// TestCohortForHolder: the identity holding the live committed lease
// waits in the cohort after it, in any session; others wait as before. A
// vote moves nobody: only the members that saw it could.
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
	require.EqualValues(t, 6, cohortFor(pending, bob.ID, now), "a vote moves nobody")
}

// TestHolderLeasedMovesSiblings: when bob's lease at epoch 4 is
// committed, bob's other waiting sessions move behind it (cohort 5) at
// every member that learns the commit, whatever cohort each had given
// them; other identities and later cohorts stay.
func TestHolderLeasedMovesSiblings(t *testing.T) {
	bob2 := protocol.Holder{ID: bob.ID, Session: protocol.SessionID{0xb2}}
	bob3 := protocol.Holder{ID: bob.ID, Session: protocol.SessionID{0xb3}}
	q := newQueue(stateRes)
	q.touch(bob, 4, 8, 3, stateBase)
	q.touch(bob2, 3, 8, 3, stateBase)
	q.touch(bob3, 7, 8, 3, stateBase)
	q.touch(alice, 4, 8, 3, stateBase)
	q.holderLeased(bob, 4)
	require.EqualValues(t, 5, q.cohortOf(bob2), "behind the lease")
	require.EqualValues(t, 7, q.cohortOf(bob3), "a later cohort stays")
	require.EqualValues(t, 4, q.cohortOf(alice), "another identity stays")
	require.EqualValues(t, 4, q.cohortOf(bob), "the lease's own session leaves by committed, not here")
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

// gridAt is a time d into slot k of a grid of reserveFor.
func gridAt(k int64, reserveFor, d time.Duration) time.Time {
	return time.Unix(0, k*int64(reserveFor)).Add(d)
}

// gridStart is a slot after stateBase whose number is a multiple of 12.
func gridStart(reserveFor time.Duration) int64 {
	return (slot(stateBase, reserveFor)/12 + 1) * 12
}

// polling makes every waiter of q poll (present, as honest waiters are).
func polling(q *queue) {
	for i := range q.waiters {
		q.waiters[i].polls = 1
	}
}

// TestQueueTakesTurns: the identities of the first cohort take turns, one
// slot each, drawn by their turn hashes: over many slots each gets about
// its share; a later cohort waits until the earlier one is served; how
// many sessions an identity has does not buy it more turns.
func TestQueueTakesTurns(t *testing.T) {
	const reserveFor = time.Second
	const slots = 300
	k0 := gridStart(reserveFor)
	dave := protocol.Holder{ID: "dave", Session: protocol.SessionID{0xd}}
	q := newQueue(stateRes)
	for _, h := range []protocol.Holder{alice, alice2, bob, carol} {
		q.touch(h, 4, 8, 2, stateBase)
	}
	q.touch(dave, 5, 8, 2, stateBase)
	turns := map[string]int{}
	wantS := alice
	if tie(alice2.Session) < tie(alice.Session) {
		wantS = alice2
	}
	for i := range int64(slots) {
		w, ok := q.head(k0 + i)
		require.True(t, ok)
		require.Equal(t, turn(stateRes, k0+i, alice, bob, carol).ID, w.holder.ID, "slot %d", i)
		require.EqualValues(t, 4, w.cohort, "dave's later cohort waits")
		if w.holder.ID == alice.ID {
			require.Equal(t, wantS, w.holder, "alice's two sessions: one turn, for the first by tie")
		}
		turns[w.holder.ID]++
	}
	t.Logf("turns in %d slots: %v", slots, turns)
	for _, id := range []string{alice.ID, bob.ID, carol.ID} {
		// 100 expected; the draws are fixed, so this is exact, and far
		// from the edges of a fair draw (sd 8).
		require.InDelta(t, slots/3, turns[id], 40, "%s's share", id)
	}
}

// TestQueueDrawToleratesMissingWaiter: member a knows carol's Wait and
// member b does not yet (or dropped her). They still agree on every slot
// carol does not draw: the other identities' draws do not depend on how
// many wait. (A draw by position, k mod m, changes with m, and the two
// would disagree on most slots.)
func TestQueueDrawToleratesMissingWaiter(t *testing.T) {
	a, b := newQueue(stateRes), newQueue(stateRes)
	for _, h := range []protocol.Holder{alice, bob, carol} {
		a.touch(h, 2, 8, 2, stateBase)
	}
	for _, h := range []protocol.Holder{alice, bob} {
		b.touch(h, 2, 8, 2, stateBase)
	}
	carolSlots := 0
	for k := range int64(300) {
		wa, _ := a.head(k)
		wb, _ := b.head(k)
		if wa.holder == carol {
			carolSlots++
			continue
		}
		require.Equal(t, wa.holder, wb.holder, "slot %d", k)
	}
	t.Logf("carol drew %d of 300 slots, the only ones a and b differ on", carolSlots)
}

// TestQueueUnusedTurn: an identity that never acquires has its turn to
// the slot's end, however many votes it takes and abandons meanwhile, and
// loses it then (counted as expired); then it and its fresh sessions wait
// in the newcomers' cohort, and get about one turn in m while others wait. A
// turn that begins in the last half of a slot is the next slot's, so no
// turn is a sliver.
func TestQueueUnusedTurn(t *testing.T) {
	const reserveFor = time.Second
	k0 := gridStart(reserveFor)
	at := func(i int64, d time.Duration) time.Time { return gridAt(k0+i, reserveFor, d) }
	liar := protocol.Holder{ID: "liar", Session: protocol.SessionID{0x11}}
	// A resource on which the liar draws slot k0 and alice slot k0+1.
	res := resWhere("r", func(r string) bool {
		return draws(r, k0, liar.ID, alice.ID) && draws(r, k0+1, alice.ID, liar.ID)
	})
	// The liar waited behind lease 1 (cohort 1); alice came after it
	// ended (cohort 2, the newcomers').
	start := func() *queue {
		q := newQueue(res)
		q.touch(liar, 1, 8, 2, at(0, 0))
		q.touch(alice, 2, 8, 2, at(0, 0))
		polling(q)
		h, left, _, expired, _ := q.reservation(at(0, 0), reserveFor, 2)
		require.Equal(t, liar, h, "the earlier cohort first")
		require.Equal(t, reserveFor, left)
		require.Empty(t, expired)
		q.tell(h, at(0, 0)) // its poll is answered: free for it
		return q
	}

	// The liar lets its turn run out: it moves to cohort 2 beside alice;
	// with a fresh session too, the turns alternate.
	q := start()
	h, _, dropped, expired, _ := q.reservation(at(1, 0), reserveFor, 2)
	require.Equal(t, []expiry{{liar, true}}, expired)
	require.Empty(t, dropped)
	require.EqualValues(t, 2, q.cohortOf(liar))
	require.Equal(t, alice, h, "slot k0+1: alice's draw")
	liar2 := protocol.Holder{ID: liar.ID, Session: protocol.SessionID{0x12}}
	q.touch(liar2, 2, 8, 2, at(1, 10*time.Millisecond))
	polling(q)
	turns := map[string]int{}
	for i := int64(2); i < 202; i++ {
		w, _ := q.head(k0 + i)
		turns[w.holder.ID]++
	}
	t.Logf("turns in 200 slots: %v", turns)
	require.InDelta(t, 100, turns[liar.ID], 30, "about one turn in two, fresh session or not")

	// The liar takes the vote and abandons it, again and again: the rest
	// of the turn is still its, to the end of the slot and no longer;
	// then it has lost its earlier cohort.
	q = start()
	for _, d := range []time.Duration{100, 600, 900} {
		// (a vote held the resource; it was abandoned)
		h, left, _, expired, _ := q.reservation(at(0, d*time.Millisecond), reserveFor, 2)
		require.Equal(t, liar, h)
		require.Equal(t, reserveFor-d*time.Millisecond, left)
		require.Empty(t, expired)
		require.EqualValues(t, 1, q.cohortOf(liar))
	}
	h, _, _, expired, _ = q.reservation(at(1, 0), reserveFor, 2)
	require.Equal(t, []expiry{{liar, true}}, expired)
	require.EqualValues(t, 2, q.cohortOf(liar))
	require.Equal(t, alice, h)
	// A committed lease ends the turn, used: no move.
	q = start()
	q.leased()
	q.committed(liar)
	h, _, _, expired, _ = q.reservation(at(0, 100*time.Millisecond), reserveFor, 2)
	require.Empty(t, expired)
	require.Equal(t, alice, h)
	// A turn that begins in the last half of a slot is the next slot's.
	q = newQueue(res)
	q.touch(liar, 2, 8, 2, at(0, 0))
	q.touch(alice, 2, 8, 2, at(0, 0))
	polling(q)
	h, left, _, _, _ := q.reservation(at(0, 600*time.Millisecond), reserveFor, 2)
	require.Equal(t, alice, h, "slot k0+1's turn: alice's draw")
	require.Equal(t, reserveFor+400*time.Millisecond, left)
}

// TestQueueOrderConverges: two members that disagree on whom a free
// resource is reserved for (a Wait reached one of them late) agree again
// within two slots, and then for good, while both waiters keep polling and
// neither can use a turn the other member does not give it. This is seed 140's setup with
// exactly t members up, where one member's disagreement splits every
// round: an order kept from each member's own history of lapses could
// swap the two waiters at the two members slot after slot.
func TestQueueOrderConverges(t *testing.T) {
	const reserveFor = time.Second
	k0 := gridStart(reserveFor)
	at := func(i int64, d time.Duration) time.Time { return gridAt(k0+i, reserveFor, d) }
	w1 := protocol.Holder{ID: "w1", Session: protocol.SessionID{1}}
	w2 := protocol.Holder{ID: "w2", Session: protocol.SessionID{2}}
	a, b := newQueue(stateRes), newQueue(stateRes)
	// Both waited behind lease 3. At member a, w2's Wait arrived after the
	// resource became free; at member b, w1's did.
	a.touch(w1, 3, 8, 2, at(0, 0))
	b.touch(w2, 3, 8, 2, at(0, 0))
	polling(a)
	polling(b)
	ha, _, _, _, _ := a.reservation(at(0, 0), reserveFor, 4)
	hb, _, _, _, _ := b.reservation(at(0, 0), reserveFor, 4)
	require.NotEqual(t, ha, hb, "they disagree in slot 0")
	// Each member answers the waiter it holds the resource for: its
	// long poll says free.
	a.tell(ha, at(0, 0))
	b.tell(hb, at(0, 0))
	a.touch(w2, 4, 8, 2, at(0, 5*time.Millisecond))
	b.touch(w1, 4, 8, 2, at(0, 5*time.Millisecond))
	polling(a)
	polling(b)
	agreed := -1
	for i := int64(1); i < 12; i++ {
		// Nobody acquires: every turn runs out at the slot's end.
		ha, _, _, _, _ = a.reservation(at(i, 2*time.Millisecond), reserveFor, 4)
		hb, _, _, _, _ = b.reservation(at(i, 2*time.Millisecond), reserveFor, 4)
		a.tell(ha, at(i, 2*time.Millisecond))
		b.tell(hb, at(i, 2*time.Millisecond))
		if ha == hb && agreed < 0 {
			agreed = int(i)
		}
		if agreed >= 0 {
			require.Equal(t, ha, hb, "slot %d: once agreed, they stay agreed", i)
		}
	}
	require.True(t, agreed >= 1 && agreed <= 2, "agreed in slot %d", agreed)
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

	// A claim of a later cohort than this node gave (its Wait reached
	// this node just before a handoff and the others after): the waiter
	// gives up its place here, unverified, since moving back gains it
	// nothing; and it keeps its one claim to move up.
	k, h = session()
	require.EqualValues(t, 2, d.waitNow(b, res, k, nil).Cohort)
	later := []protocol.SignedPlace{forge(lc.placeBy(t, 2, res, h, 3)), forge(lc.placeBy(t, 3, res, h, 3))}
	r = d.waitNow(b, res, k, later)
	require.EqualValues(t, 3, r.Cohort, "moved back to the claimed cohort")
	require.EqualValues(t, 3, r.Place.Cohort)
	up := []protocol.SignedPlace{lc.placeBy(t, 2, res, h, 2), lc.placeBy(t, 3, res, h, 2)}
	require.EqualValues(t, 2, d.waitNow(b, res, k, up).Cohort, "the entry's claim to move up is not spent")
}

// TestHolderWaitsBehindOwnLease: the holder's identity, waiting in a new
// session while its lease lives, or since before the commit, is put
// behind that lease's waiters, and the release serves them first. A vote
// alone moves nobody.
func TestHolderWaitsBehindOwnLease(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly
	const res = "orders-own"
	ha := limitsHolder(a.String())
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	// A pending vote moves nobody: members that did not see it would
	// not move a's next session.
	require.EqualValues(t, 1, d.waitNow(a, res, testKey(1), nil).Cohort)
	require.EqualValues(t, 1, d.waitNow(b, res, testKey(2), nil).Cohort)
	tok := d.token(lc.cluster.Statement(res, 1, ha))
	require.Equal(t, protocol.CodeOK, d.commit(a, tok).Code)
	require.EqualValues(t, 2, d.waitNow(a, res, testKey(1), nil).Cohort, "committed: a's waiting session is behind the lease")
	require.EqualValues(t, 2, d.waitNow(a, res, testKey(3), nil).Cohort, "and so is a new one")
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

// gridNode starts node 1 of a new cluster on a fake clock at the start
// of reservation slot k.
func gridNode(t *testing.T) (*limitsCluster, nodeDriver, *clockwork.FakeClock, int64) {
	t.Helper()
	lc := newLimitsCluster(t)
	reserveFor := DefaultRules(lc.cluster).ReserveFor
	k := gridStart(reserveFor)
	clock := clockwork.NewFakeClockAt(gridAt(k, reserveFor, 0))
	return lc, nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}, clock, k
}

// TestReservationLapse: a reservation that runs out unused is counted,
// logged and shown by Reserved while it lasts, and the next slot is the
// next identity's turn, not the fresh session's of the one that let its
// turn run out.
func TestReservationLapse(t *testing.T) {
	lc, d, clock, k := gridNode(t)
	a, b := lc.everything, lc.ordersOnly
	// A resource on which b draws the first slot and a the next.
	res := resWhere("orders", func(r string) bool {
		return draws(r, k, b.String(), a.String()) && draws(r, k+1, a.String(), b.String())
	})
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
	require.False(t, r.Free, "the next slot is a's turn, not b's fresh session's")
	require.Equal(t, ha.Ref(), r.Holder)
	ref, _ = d.n.Reserved(res)
	require.Equal(t, ha.Ref(), ref)
	// a acquires and commits: nothing is reserved while the lease lives.
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	require.Equal(t, protocol.CodeOK, d.commit(a, d.token(lc.cluster.Statement(res, 1, ha))).Code)
	ref, left = d.n.Reserved(res)
	require.True(t, ref.IsZero())
	require.Zero(t, left)
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

// TestQueueLateSessionAgrees: two processes share alice's key. Member a
// worked out the turn before the Wait of alice's second session reached
// it, member b after: as soon as a has it too, both give the turn to the
// same session, within the same slot. Another identity that starts
// waiting meanwhile in the same cohort moves the turn only if it draws
// the slot, at both members alike; one in a later cohort does not.
func TestQueueLateSessionAgrees(t *testing.T) {
	const reserveFor = time.Second
	k := gridStart(reserveFor)
	now := gridAt(k, reserveFor, 0)
	for _, bobDraws := range []bool{false, true} {
		res := resWhere("late", func(r string) bool { return draws(r, k, bob.ID, alice.ID) == bobDraws })
		a, b := newQueue(res), newQueue(res)
		a.touch(alice, 1, 8, 2, now)
		b.touch(alice, 1, 8, 2, now)
		b.touch(alice2, 1, 8, 2, now)
		polling(a)
		polling(b)
		ha, _, _, _, _ := a.reservation(now, reserveFor, 1)
		require.Equal(t, alice, ha)
		a.touch(alice2, 1, 8, 2, now.Add(5*time.Millisecond))
		polling(a)
		ha, la, _, _, _ := a.reservation(now.Add(10*time.Millisecond), reserveFor, 1)
		hb, lb, _, _, _ := b.reservation(now.Add(10*time.Millisecond), reserveFor, 1)
		require.Equal(t, hb, ha)
		require.Equal(t, lb, la, "the same turn, to the end of the slot")
		want := ha
		if bobDraws {
			want = bob
		}
		for _, q := range []*queue{a, b} {
			q.touch(carol, 2, 8, 2, now.Add(15*time.Millisecond))
			q.touch(bob, 1, 8, 2, now.Add(20*time.Millisecond))
			polling(q)
			h, left, _, _, _ := q.reservation(now.Add(30*time.Millisecond), reserveFor, 1)
			require.Equal(t, want, h, "bob draws the slot: %v", bobDraws)
			require.Equal(t, reserveFor-30*time.Millisecond, left, "still slot k's turn")
		}
	}
}

// TestQueueLateWaitsAgree: the resource is released while the waiters'
// Waits are still on their way (they were in an Acquire round during the
// short lease), so member a hears from w1 first and member b from w2
// first, and each tells its first waiter the resource is free. As soon as
// both Waits reached both members, they hold it for the same waiter, in
// the same slot, to the same end. (Turns kept by whichever waiter a member
// knew first split a 4-member testnet 2-2 for whole slots, in
// TestFairHandoff under load.)
func TestQueueLateWaitsAgree(t *testing.T) {
	const reserveFor = 2 * time.Second
	k := gridStart(reserveFor)
	at := func(d time.Duration) time.Time { return gridAt(k, reserveFor, d) }
	w1 := protocol.Holder{ID: "w1", Session: protocol.SessionID{1}}
	w2 := protocol.Holder{ID: "w2", Session: protocol.SessionID{2}}
	a, b := newQueue(stateRes), newQueue(stateRes)
	a.touch(w1, 2, 8, 2, at(100*time.Millisecond))
	b.touch(w2, 2, 8, 2, at(100*time.Millisecond))
	polling(a)
	polling(b)
	ha, _, _, _, _ := a.reservation(at(100*time.Millisecond), reserveFor, 2)
	hb, _, _, _, _ := b.reservation(at(100*time.Millisecond), reserveFor, 2)
	require.NotEqual(t, ha, hb, "each tells the waiter it heard from")
	a.tell(ha, at(100*time.Millisecond))
	b.tell(hb, at(100*time.Millisecond))
	a.touch(w2, 2, 8, 2, at(104*time.Millisecond))
	b.touch(w1, 2, 8, 2, at(104*time.Millisecond))
	polling(a)
	polling(b)
	ha, la, _, ea, _ := a.reservation(at(105*time.Millisecond), reserveFor, 2)
	hb, lb, _, eb, _ := b.reservation(at(105*time.Millisecond), reserveFor, 2)
	require.Equal(t, ha, hb, "agreed within the slot")
	require.Equal(t, turn(stateRes, k, w1, w2), ha, "the slot's draw")
	require.Equal(t, la, lb)
	require.Empty(t, ea, "a turn handed on is not a lapse")
	require.Empty(t, eb)
}

// TestQueuePruneCountsTurn: a waiter that goes away and is pruned while
// its turn is under way has let its turn run out unused: prune says so,
// and whether it was told its turn, and the turn passes. (Turns can last
// longer than WaiterTTL: a liar's sessions, told their turn and gone,
// were pruned and nothing was counted.)
func TestQueuePruneCountsTurn(t *testing.T) {
	const reserveFor = 2 * time.Second
	k0 := gridStart(reserveFor)
	at := func(d time.Duration) time.Time { return gridAt(k0, reserveFor, d) }
	for _, told := range []bool{true, false} {
		q := newQueue(stateRes)
		q.touch(bob, 1, 8, 2, at(0))
		q.touch(alice, 1, 8, 2, at(0))
		polling(q)
		h, _, _, _, _ := q.reservation(at(1500*time.Millisecond), reserveFor, 1)
		if told {
			q.tell(h, at(1500*time.Millisecond))
		}
		q.waiters[q.find(h)].polls = 0
		gone, expired := q.prune(at(3600*time.Millisecond), reserveFor)
		require.Equal(t, []protocol.Holder{h}, gone)
		require.Equal(t, []expiry{{h, told}}, expired)
		next, _, _, _, _ := q.reservation(at(3600*time.Millisecond), reserveFor, 1)
		require.NotEqual(t, h, next, "the turn passed")
	}
}

// TestQueueYieldKeepsSameSiblings: with two places per identity, two
// members that see three sessions of one key arrive in different orders
// keep the same two, the first two in the identity's order of sessions;
// a session later in that order takes no place, and the sibling whose
// turn is under way keeps its place.
func TestQueueYieldKeepsSameSiblings(t *testing.T) {
	sib := make([]protocol.Holder, 3)
	for i := range sib {
		sib[i] = protocol.Holder{ID: bob.ID, Session: protocol.SessionID{byte(0x40 + i)}}
	}
	sort.Slice(sib, func(i, j int) bool {
		return sessionBefore(waiter{holder: sib[i], tie: tie(sib[i].Session)}, waiter{holder: sib[j], tie: tie(sib[j].Session)})
	})
	join := func(q *queue, h protocol.Holder) {
		q.yield(h, 2)
		q.touch(h, 3, 8, 2, stateBase)
	}
	kept := func(q *queue) []protocol.Holder {
		var out []protocol.Holder
		for _, h := range sib {
			if q.find(h) >= 0 {
				out = append(out, h)
			}
		}
		return out
	}
	a, b := newQueue(stateRes), newQueue(stateRes)
	for _, i := range []int{2, 1, 0} {
		join(a, sib[i])
	}
	for _, i := range []int{0, 2, 1} {
		join(b, sib[i])
	}
	require.Equal(t, sib[:2], kept(a))
	require.Equal(t, kept(a), kept(b), "the same two places at both members")
	_, ok := a.yield(sib[2], 2)
	require.False(t, ok, "a session later in the order takes no place")

	c := newQueue(stateRes)
	join(c, sib[2])
	join(c, sib[1])
	c.reserved = sib[2]
	_, ok = c.yield(sib[0], 2)
	require.True(t, ok, "sib[1] gives its place up: sib[2]'s turn is under way")
	require.GreaterOrEqual(t, c.find(sib[2]), 0, "the reserved sibling keeps its place")
	require.Less(t, c.find(sib[1]), 0)
}

// TestWaiterLeaves: an Abandon at epoch 0 takes the session its key owns
// out of the queue for good, and the next waiter has the rest of the turn
// at once; nobody else (another key of the same identity, or the same key
// from another identity) can take the session out. A session that left is
// not a lapse.
func TestWaiterLeaves(t *testing.T) {
	lc, d, _, k := gridNode(t)
	reserveFor := d.n.cfg.Rules.ReserveFor
	a, b := lc.everything, lc.ordersOnly
	res := resWhere("orders", func(r string) bool { return draws(r, k, b.String(), a.String()) })
	hb, ha := keyHolder(b.String(), 1), keyHolder(a.String(), 3)
	require.True(t, d.waitNow(b, res, testKey(1), nil).Free)
	require.False(t, d.waitNow(a, res, testKey(3), nil).Free)
	leave := func(from peer.ID, key protocol.SessionKey) protocol.Ack {
		return d.ack(from, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: res, Key: key}.Marshal())
	}
	// Neither a sibling session of b's identity nor b's key sent by a
	// names b's waiting session.
	require.Equal(t, protocol.CodeOK, leave(b, testKey(9)).Code)
	require.Equal(t, protocol.CodeOK, leave(a, testKey(1)).Code)
	ref, _ := d.n.Reserved(res)
	require.Equal(t, hb.Ref(), ref, "b's session is still first")

	require.Equal(t, protocol.CodeOK, leave(b, testKey(1)).Code)
	ref, left := d.n.Reserved(res)
	require.Equal(t, ha.Ref(), ref, "a has the rest of the turn")
	require.Less(t, left, reserveFor+1)
	require.True(t, d.waitNow(a, res, testKey(3), nil).Free)
	r := d.waitNow(b, res, testKey(1), nil)
	require.Nil(t, r.Place, "a session that left is not queued again")
	require.False(t, r.Free)
	require.Zero(t, metricstest.Value(t, d.n.MetricsRegistry(), MetricReservationsExpired))
	require.Empty(t, d.n.RecentLapses())
	// Leaving twice, or a queue that does not exist, is no error.
	require.Equal(t, protocol.CodeOK, leave(b, testKey(1)).Code)
	require.Equal(t, protocol.CodeOK, d.ack(b, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: "orders-none", Key: testKey(1)}.Marshal()).Code)
}
