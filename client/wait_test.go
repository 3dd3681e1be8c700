package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestClaimOf: a claim is made of the f+1 places of the lowest cohorts
// whenever the members disagree, up (a member put the session one cohort
// later) or back (a member put it earlier than f+1 members did: its own
// place is in the claim, and the claimed cohort is later than it); none
// when every member gives the same cohort or too few gave a place.
func TestClaimOf(t *testing.T) {
	places := func(cohorts ...uint64) []protocol.SignedPlace {
		var out []protocol.SignedPlace
		for i, c := range cohorts {
			out = append(out, protocol.SignedPlace{Place: protocol.Place{Cohort: c, Member: i + 1}})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		cohorts []uint64
		want    uint64 // claimed cohort, 0 for no claim
	}{
		{"all alike", []uint64{2, 2, 2, 2}, 0},
		{"one later: move it up", []uint64{2, 2, 3, 2}, 2},
		{"one earlier: move it back", []uint64{2, 1, 2, 2}, 2},
		{"two earlier: f+1 vouch for it, the others move up", []uint64{1, 2, 1, 2}, 1},
		{"too few places", []uint64{1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := claimOf(places(tc.cohorts...), 2)
			if tc.want == 0 {
				require.Nil(t, claim)
				return
			}
			require.Len(t, claim, 2)
			require.Equal(t, tc.want, protocol.ClaimCohort(claim))
		})
	}
}

// TestWaitSplitSoon: a split wait asks again soon only if f+1 members'
// last answers hold the resource for other identities: not for a sibling
// session of our own identity, not on f answers alone (liars), not after
// such a member said free, and not against an uncommitted vote that the
// last split wait met too (a stalled contender).
func TestWaitSplitSoon(t *testing.T) {
	self := protocol.HolderRef{ID: "alice", Session: protocol.SessionHash{9}}
	reserved := func(id string) protocol.WaitReply {
		return protocol.WaitReply{Pending: true, Holder: protocol.HolderRef{ID: id, Session: protocol.SessionHash{1}}}
	}
	bobVote := protocol.WaitReply{Pending: true, LeaseEpoch: 7, Holder: protocol.HolderRef{ID: "bob", Session: protocol.SessionHash{2}}}
	bobLease := protocol.WaitReply{LeaseEpoch: 7, Left: time.Second, Holder: bobVote.Holder}
	stalled := map[contender]bool{{bobVote.Holder, 7}: true}
	for _, tc := range []struct {
		name    string
		answers map[int]protocol.WaitReply
		prev    map[contender]bool
		want    bool
	}{
		{"two members reserve for others", map[int]protocol.WaitReply{3: reserved("bob"), 4: reserved("carol")}, nil, true},
		{"one member (a liar?) alone", map[int]protocol.WaitReply{4: reserved("bob")}, nil, false},
		{"a sibling session's turn", map[int]protocol.WaitReply{3: reserved("alice"), 4: reserved("alice")}, nil, false},
		{"a sibling beside others", map[int]protocol.WaitReply{2: reserved("bob"), 3: reserved("carol"), 4: reserved("alice")}, nil, false},
		{"a contender's fresh vote and lease", map[int]protocol.WaitReply{3: bobVote, 4: bobLease}, nil, true},
		{"a stalled contender's vote", map[int]protocol.WaitReply{3: bobVote, 4: bobVote}, stalled, false},
		{"our own session is no blocker", map[int]protocol.WaitReply{3: reserved("bob"), 4: {Pending: true, Holder: self}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &waitAsks{f: 1, known: map[int]uint64{}}
			for m, wr := range tc.answers {
				a.report(m, wr)
			}
			soon, _ := a.splitSoon(self, tc.prev)
			require.Equal(t, tc.want, soon)
		})
	}
	a := &waitAsks{f: 1, known: map[int]uint64{}}
	a.report(3, reserved("bob"))
	a.report(4, bobVote)
	soon, pending := a.splitSoon(self, nil)
	require.True(t, soon)
	require.Equal(t, stalled, pending, "the votes met are passed on to the next split")
	a.report(4, protocol.WaitReply{Free: true})
	soon, _ = a.splitSoon(self, nil)
	require.False(t, soon, "member 4 said free after holding for bob")
	require.ErrorIs(t, &waitSplit{soon: true}, errWaitSplit)
}

// TestWaitLagging: a wait that holds votes gives the members that have not
// said free more time only when they lag (each showed a lease, committed
// or a vote, below our votes, whose Release has yet to reach it) and
// would make t;
// no longer than those leases would run by themselves, nor than until.
func TestWaitLagging(t *testing.T) {
	now := time.Unix(1000, 0)
	bob := protocol.HolderRef{ID: "bob", Session: protocol.SessionHash{2}}
	lease := func(epoch uint64, left time.Duration) protocol.WaitReply {
		return protocol.WaitReply{LeaseEpoch: epoch, Left: left, Holder: bob}
	}
	voted := protocol.WaitReply{Free: true, Vote: &protocol.WaitVote{Epoch: 8}}
	free := map[int]protocol.WaitReply{1: voted, 2: voted}
	for _, tc := range []struct {
		name    string
		answers map[int]protocol.WaitReply
		gone    map[int]bool
		until   time.Duration
		want    time.Duration // 0: a split
	}{
		{"the ended lease's Release is on its way", map[int]protocol.WaitReply{3: lease(7, time.Second)}, nil, 5 * time.Second, time.Second},
		{"no longer than until", map[int]protocol.WaitReply{3: lease(7, time.Second)}, nil, 300 * time.Millisecond, 300 * time.Millisecond},
		{"a lease at our votes' epoch", map[int]protocol.WaitReply{3: lease(8, time.Second)}, nil, 5 * time.Second, 0},
		{"another waiter's turn", map[int]protocol.WaitReply{3: {Pending: true, Holder: bob}}, nil, 5 * time.Second, 0},
		// The lease starts at the vote: a vote below our votes' epoch is a
		// lease the voters moved past, as a committed one is (the holder's
		// Commit had not reached the member when it answered).
		{"a vote below our votes' epoch", map[int]protocol.WaitReply{3: {Pending: true, LeaseEpoch: 7, Left: time.Second, Holder: bob}}, nil, 5 * time.Second, time.Second},
		{"a vote at our votes' epoch", map[int]protocol.WaitReply{3: {Pending: true, LeaseEpoch: 8, Left: time.Second, Holder: bob}}, nil, 5 * time.Second, 0},
		{"one lags, one holds for another", map[int]protocol.WaitReply{3: lease(7, time.Second), 4: {Pending: true, Holder: bob}}, nil, 5 * time.Second, 0},
		{"the lagging member failed", map[int]protocol.WaitReply{3: lease(7, time.Second)}, map[int]bool{3: true}, 5 * time.Second, 0},
		{"a failed member beside a lagging one", map[int]protocol.WaitReply{3: lease(7, time.Second), 4: lease(7, 2*time.Second)}, map[int]bool{4: true}, 5 * time.Second, time.Second},
		{"the lease ran out by itself", map[int]protocol.WaitReply{3: lease(7, 0)}, nil, 5 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &waitAsks{f: 1, known: map[int]uint64{}, now: func() time.Time { return now }}
			for m, wr := range tc.answers {
				a.report(m, wr)
			}
			d, ok := a.lagging(free, 3, tc.gone, now.Add(tc.until))
			require.Equal(t, tc.want > 0, ok)
			require.Equal(t, tc.want, d)
		})
	}
}
