package client

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

func pendingBusy(holder protocol.Holder, epoch uint64, left time.Duration) busyReply {
	return busyReply{AcquireReply: protocol.AcquireReply{Kind: protocol.KindBusy, Holder: holder.Ref(), LeaseEpoch: epoch, Left: left, Pending: true}}
}

// The contenders of these tests: lock sessions of two identities.
var (
	alice = protocol.Holder{ID: "alice", Session: protocol.SessionID{0xa1}}
	bob   = protocol.Holder{ID: "bob", Session: protocol.SessionID{0xb1}}
)

func TestTallyMostVotesGoesFirst(t *testing.T) {
	tests := []struct {
		name  string
		votes int
		busy  []busyReply
		want  splitRole
	}{
		{"more votes than the rival", 3, []busyReply{pendingBusy(bob, 7, time.Second), pendingBusy(bob, 7, time.Second)}, splitFirst},
		{"fewer votes than the rival", 1, []busyReply{pendingBusy(bob, 7, time.Second), pendingBusy(bob, 7, time.Second)}, splitLater},
		{"no votes, a rival with one", 0, []busyReply{pendingBusy(bob, 7, time.Second)}, splitLater},
		{"committed leases are not contenders", 1, []busyReply{
			{AcquireReply: protocol.AcquireReply{Kind: protocol.KindBusy, Holder: bob.Ref(), LeaseEpoch: 6, Left: time.Second}},
			{AcquireReply: protocol.AcquireReply{Kind: protocol.KindBusy, Holder: bob.Ref(), LeaseEpoch: 6, Left: time.Second}},
		}, splitFirst},
		{"nothing to order: stale refusals only", 0, nil, splitNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := planner{holder: alice}
			rs.tally("res", 7, tt.votes, tt.busy)
			require.Equal(t, tt.want, rs.split)
		})
	}
}

// TestTallyTieAgreed: two contenders with equal votes, each seeing the
// other's as busy, agree that exactly one of them goes first, and which one
// changes with the epoch (no client always wins ties).
func TestTallyTieAgreed(t *testing.T) { checkTieAgreed(t, alice, bob) }

// checkTieAgreed runs TestTallyTieAgreed's check for contenders x and y.
func checkTieAgreed(t *testing.T, x, y protocol.Holder) {
	t.Helper()
	firsts := map[protocol.Holder]int{}
	for epoch := uint64(1); epoch <= 64; epoch++ {
		a, b := planner{holder: x}, planner{holder: y}
		a.tally("res", epoch, 2, []busyReply{pendingBusy(y, epoch, time.Second), pendingBusy(y, epoch, time.Second)})
		b.tally("res", epoch, 2, []busyReply{pendingBusy(x, epoch, time.Second), pendingBusy(x, epoch, time.Second)})
		require.NotEqual(t, a.split, b.split, "epoch %d", epoch)
		require.Contains(t, []splitRole{splitFirst, splitLater}, a.split)
		if a.split == splitFirst {
			firsts[x]++
		} else {
			firsts[y]++
		}
	}
	require.Greater(t, firsts[x], 0)
	require.Greater(t, firsts[y], 0)
}

// TestTallyStuckVotes: a rival whose votes at one epoch are met in two
// rounds in a row has stopped; we wait for the shortest time its votes have
// left instead of retrying against them.
func TestTallyStuckVotes(t *testing.T) {
	rs := planner{holder: alice}
	rs.tally("res", 7, 2, []busyReply{pendingBusy(bob, 6, 900*time.Millisecond)})
	require.Equal(t, splitFirst, rs.split, "a rival at an older epoch with fewer votes")
	rs.tally("res", 8, 1, []busyReply{pendingBusy(bob, 6, 700*time.Millisecond), pendingBusy(bob, 6, 500*time.Millisecond)})
	require.Equal(t, splitStuck, rs.split)
	require.Equal(t, 500*time.Millisecond, rs.stuckLeft)
	// A new round of the rival (another epoch) is a live contender again.
	rs.tally("res", 9, 1, []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)})
	require.Equal(t, splitLater, rs.split)
	require.Zero(t, rs.stuckLeft)
}

// TestLearnSplitHintIsOneShot: a split round hints one above the stale
// refusals; a round at a hinted epoch that fewer than f+1 nodes voted for
// (a liar's hint: honest nodes refuse it as too far) changes neither the
// floor nor the hint, so the next round starts where the honest nodes are.
func TestLearnSplitHintIsOneShot(t *testing.T) {
	const f = 2
	huge := uint64(math.MaxUint64 - 5)

	rs := planner{holder: alice}
	rs.learnSplit(f, 7, 4, []uint64{huge})
	require.Equal(t, uint64(8), rs.floor, "our votes used epoch 7")
	require.Equal(t, huge+1, rs.hint)

	// The next round is the hinted one; honest nodes refuse it as too far.
	rs.hint, rs.hinted = 0, true
	rs.learnSplit(f, huge+1, 0, []uint64{huge, 7})
	require.Equal(t, uint64(8), rs.floor, "a liar's hint is never kept as a floor")
	require.Zero(t, rs.hint, "a hinted round gives no new hint")

	// A hinted round that more than f nodes voted for: an honest node took
	// the epoch, so later rounds start above it.
	rs.learnSplit(f, 40, f+1, []uint64{50})
	require.Equal(t, uint64(41), rs.floor)
	require.Zero(t, rs.hint)

	// A refusal at the top of the range gives no hint that wraps to 0.
	rs = planner{}
	rs.learnSplit(f, 3, 1, []uint64{math.MaxUint64})
	require.Zero(t, rs.hint)
	require.Equal(t, uint64(4), rs.floor)
}

func TestRefusalConsistent(t *testing.T) {
	refusal := func(code protocol.Code, last uint64) protocol.AcquireReply {
		return protocol.AcquireReply{Kind: protocol.KindRefuse, Code: code, LastEpoch: last}
	}
	require.True(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeStale, 9), 9))
	require.True(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeStale, 12), 9))
	require.False(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeStale, 8), 9), "stale below our epoch")
	require.True(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeTooFar, 8), 9))
	require.False(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeTooFar, 9), 9), "too far while at our epoch")
	require.False(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeTooFar, math.MaxUint64-5), 9), "too far while far above it")
	require.True(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeUnauthorised, 0), 9))
	// No node of our era has a last epoch at or above the next era's
	// floor: a stale refusal there is a lie (it would hint an epoch every
	// honest node refuses).
	ceiling := uint64(1) << protocol.EraBits
	require.False(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeStale, ceiling), 9), "stale in a later era")
	require.True(t, refusalConsistent(protocol.Era{Floor: 0}, refusal(protocol.CodeStale, ceiling-1), 9))
	require.True(t, refusalConsistent(protocol.Era{Floor: ceiling}, refusal(protocol.CodeStale, 2*ceiling-1), ceiling+1))
	require.False(t, refusalConsistent(protocol.Era{Floor: ceiling}, refusal(protocol.CodeStale, 2*ceiling), ceiling+1))
}

// TestTallySessionsOfOneIdentity: two processes sharing one client key
// are two contenders. Each sees the other's uncommitted votes as a rival's
// (not its own), and they agree which one goes first.
func TestTallySessionsOfOneIdentity(t *testing.T) {
	checkTieAgreed(t, alice, protocol.Holder{ID: alice.ID, Session: protocol.SessionID{0xa2}})
}
