package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

func pendingBusy(holder string, epoch uint64, left time.Duration) protocol.AcquireReply {
	return protocol.AcquireReply{Kind: protocol.KindBusy, Holder: holder, LeaseEpoch: epoch, Left: left, Pending: true}
}

func TestTallyMostVotesGoesFirst(t *testing.T) {
	tests := []struct {
		name  string
		votes int
		busy  []protocol.AcquireReply
		want  splitRole
	}{
		{"more votes than the rival", 3, []protocol.AcquireReply{pendingBusy("bob", 7, time.Second), pendingBusy("bob", 7, time.Second)}, splitFirst},
		{"fewer votes than the rival", 1, []protocol.AcquireReply{pendingBusy("bob", 7, time.Second), pendingBusy("bob", 7, time.Second)}, splitLater},
		{"no votes, a rival with one", 0, []protocol.AcquireReply{pendingBusy("bob", 7, time.Second)}, splitLater},
		{"committed leases are not contenders", 1, []protocol.AcquireReply{
			{Kind: protocol.KindBusy, Holder: "bob", LeaseEpoch: 6, Left: time.Second},
			{Kind: protocol.KindBusy, Holder: "bob", LeaseEpoch: 6, Left: time.Second},
		}, splitFirst},
		{"nothing to order: stale refusals only", 0, nil, splitNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs round
			rs.tally("alice", "res", 7, tt.votes, tt.busy)
			require.Equal(t, tt.want, rs.split)
		})
	}
}

// TestTallyTieAgreed: two contenders with equal votes, each seeing the
// other's as busy, agree that exactly one of them goes first, and which one
// changes with the epoch (no client always wins ties).
func TestTallyTieAgreed(t *testing.T) {
	firsts := map[string]int{}
	for epoch := uint64(1); epoch <= 64; epoch++ {
		var a, b round
		a.tally("alice", "res", epoch, 2, []protocol.AcquireReply{pendingBusy("bob", epoch, time.Second), pendingBusy("bob", epoch, time.Second)})
		b.tally("bob", "res", epoch, 2, []protocol.AcquireReply{pendingBusy("alice", epoch, time.Second), pendingBusy("alice", epoch, time.Second)})
		require.NotEqual(t, a.split, b.split, "epoch %d", epoch)
		require.Contains(t, []splitRole{splitFirst, splitLater}, a.split)
		if a.split == splitFirst {
			firsts["alice"]++
		} else {
			firsts["bob"]++
		}
	}
	require.Greater(t, firsts["alice"], 0)
	require.Greater(t, firsts["bob"], 0)
}

// TestTallyStuckVotes: a rival whose votes at one epoch are met in two
// rounds in a row has stopped; we wait for the shortest time its votes have
// left instead of retrying against them.
func TestTallyStuckVotes(t *testing.T) {
	var rs round
	rs.tally("alice", "res", 7, 1, []protocol.AcquireReply{pendingBusy("bob", 6, 900*time.Millisecond)})
	require.Equal(t, splitFirst, rs.split, "a rival at an older epoch with fewer votes")
	rs.tally("alice", "res", 8, 1, []protocol.AcquireReply{pendingBusy("bob", 6, 700*time.Millisecond), pendingBusy("bob", 6, 500*time.Millisecond)})
	require.Equal(t, splitStuck, rs.split)
	require.Equal(t, 500*time.Millisecond, rs.stuckLeft)
	// A new round of the rival (another epoch) is a live contender again.
	rs.tally("alice", "res", 9, 1, []protocol.AcquireReply{pendingBusy("bob", 9, time.Second), pendingBusy("bob", 9, time.Second)})
	require.Equal(t, splitLater, rs.split)
	require.Zero(t, rs.stuckLeft)
}
