package client

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// Tests of how long a failed round listens (voteRound.collect): long
// enough to say why it failed, never for a node that stays silent.

func TestBallotDecided(t *testing.T) {
	held := busyReply{AcquireReply: protocol.AcquireReply{Kind: protocol.KindBusy, Holder: bob.Ref(), LeaseEpoch: 6, Left: time.Second}}
	hard := &NodeError{Index: 1}
	tests := []struct {
		name string
		b    ballot
		want bool
	}{
		{"nothing yet", ballot{}, false},
		{"one held, one stale", ballot{busy: []busyReply{held}, stale: []uint64{9}}, false},
		{"f+1 held", ballot{busy: []busyReply{held, held}}, true},
		{"f+1 pending votes are a split, still open", ballot{busy: []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}}, false},
		{"t pending votes for one session hold the lock", ballot{busy: []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}}, true},
		{"t pending votes at two epochs are a split", ballot{busy: []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second), pendingBusy(bob, 10, time.Second)}}, false},
		{"one commit and t-1 pending votes of one session hold the lock", ballot{busy: []busyReply{busyOf(bob, 9, false), pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}}, true},
		{"f+1 stale", ballot{stale: []uint64{9, 9}}, true},
		{"f+1 hard", ballot{hard: []*NodeError{hard, hard}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.b.decided(1, 3))
		})
	}
}

// collectRound is a vote round of a 4-node client (f = 1) fed by hand.
func collectRound(clock clockwork.Clock, silent ...int) (*voteRound, chan reply) {
	c := &Client{
		cfg:     Config{Clock: clock, RequestTimeout: 5 * time.Second},
		members: []member{{index: 1}, {index: 2}, {index: 3}, {index: 4}},
		f:       1, t: 3,
		silent: map[int]bool{},
	}
	for _, idx := range silent {
		c.silent[idx] = true
	}
	ch := make(chan reply, 4)
	b := &ballot{epoch: 2}
	return c.newVoteRound(ch, protocol.Statement{Resource: planRes, Epoch: 2}, b, map[int]protocol.SignedVote{}), ch
}

// collectAsync runs r.collect in a goroutine and delivers its token.
func collectAsync(r *voteRound) <-chan *protocol.Token {
	out := make(chan *protocol.Token, 1)
	go func() { out <- r.collect(context.Background(), false) }()
	return out
}

func acquireReply(m int, ar protocol.AcquireReply) reply {
	return reply{m: member{index: m}, b: ar.Marshal()}
}

func busyHeld(left time.Duration) protocol.AcquireReply {
	return protocol.AcquireReply{Kind: protocol.KindBusy, Holder: bob.Ref(), LeaseEpoch: 1, Left: left}
}

// undecidedRound starts collecting a round whose first replies, a busy
// node and a stale one, leave it failed but undecided, and returns once
// collect waits on its grace timer (not returning yet).
func undecidedRound(t *testing.T) (*voteRound, chan reply, *clockwork.FakeClock, <-chan *protocol.Token) {
	clock := clockwork.NewFakeClock()
	r, ch := collectRound(clock)
	ch <- acquireReply(3, busyHeld(28*time.Second))
	ch <- acquireReply(4, refusal(protocol.CodeStale, 2))
	done := collectAsync(r)
	require.NoError(t, clock.BlockUntilContext(context.Background(), 1))
	return r, ch, clock, done
}

// TestCollectWaitsToSayWhy is the round that made "palisade acquire"
// report an outage for a held resource: a busy node and a stale one answer
// first, so the round cannot succeed, but only the later answers show a
// lease on more than f nodes.
func TestCollectWaitsToSayWhy(t *testing.T) {
	r, ch, _, done := undecidedRound(t)
	ch <- acquireReply(1, busyHeld(28*time.Second))
	require.Nil(t, <-done, "no token")
	require.True(t, r.b.decided(1, 3))
	p := testPlanner(1, true)
	var be *BusyError
	require.ErrorAs(t, p.outcome(r.b, len(r.votes)), &be, "two of four nodes hold a lease: held, not an outage")
}

// TestCollectGraceEnds: a failed round whose other members never answer
// gives up after its grace, not after RequestTimeout.
func TestCollectGraceEnds(t *testing.T) {
	r, _, clock, done := undecidedRound(t)
	clock.Advance(minGrace)
	require.Nil(t, <-done, "no token")
	require.Equal(t, 2, r.got)
}

// TestCollectNoGraceWhenDecidedOrSilent: a round whose replies already say
// why it failed, or whose missing members were silent last time, ends at
// once (no timer).
func TestCollectNoGraceWhenDecidedOrSilent(t *testing.T) {
	t.Run("decided", func(t *testing.T) {
		r, ch := collectRound(clockwork.NewFakeClock())
		ch <- acquireReply(3, busyHeld(time.Second))
		ch <- acquireReply(4, busyHeld(time.Second))
		require.Nil(t, r.collect(context.Background(), false))
		require.Equal(t, 2, r.got)
	})
	t.Run("the rest were silent", func(t *testing.T) {
		r, ch := collectRound(clockwork.NewFakeClock(), 1, 2, 4)
		ch <- acquireReply(3, busyHeld(time.Second))
		require.Nil(t, r.collect(context.Background(), false))
		require.Equal(t, 1, r.got)
	})
}

// TestOutcomeVotesOfOneSessionAreBusy: t members naming one other
// session at one epoch, whether they saw its Commit or only voted (its
// Commit on its way), make a BusyError naming it: its votes combine, so
// it holds the lock. Fewer members with uncommitted votes are a split,
// retried above.
func TestOutcomeVotesOfOneSessionAreBusy(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy []busyReply
	}{
		{"t uncommitted", []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}},
		{"one committed, t-1 uncommitted", []busyReply{busyOf(bob, 9, false), pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlanner(1, true)
			var be *BusyError
			require.ErrorAs(t, p.outcome(&ballot{epoch: 10, busy: tc.busy}, 0), &be)
			require.Equal(t, bob.Ref(), be.Holder)
			require.Equal(t, uint64(9), be.Epoch)
		})
	}
	p := testPlanner(1, true)
	b := &ballot{epoch: 10, busy: []busyReply{pendingBusy(bob, 9, time.Second), pendingBusy(bob, 9, time.Second)}}
	var retry errRetry
	require.ErrorAs(t, p.outcome(b, 1), &retry, "f+1 uncommitted votes beside our vote: a split")
}

// busyOf is a member's Busy reply naming holder at epoch, committed
// unless pending.
func busyOf(holder protocol.Holder, epoch uint64, pending bool) busyReply {
	return busyReply{AcquireReply: protocol.AcquireReply{Kind: protocol.KindBusy, Holder: holder.Ref(), LeaseEpoch: epoch, Left: time.Second, Pending: pending}}
}
