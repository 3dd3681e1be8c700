package testnet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// TestClockSkewBreaksLeasesNotFences: leases are timing, and clocks that
// run at different rates break them; tokens are not, and the fence keeps
// S4 whatever the clocks do (DESIGN: "safety never depends on clocks").
//
// Client A holds a lease of 30 s (it renews every 10 s, and counts its
// own deadline 27 s from the commit). With t = 3 of the 4 nodes' clocks
// running 10 times fast, A's lease ends at those nodes after 3 s, and
// client B, waiting for the resource, is granted it while A, by its own
// clock, still holds it: the leases overlap. (B has until A's first
// renewal, 7 s later, to be granted: a ceiling, not a speed bound.) B's
// write is admitted, and A's, with its older token, is refused as stale.
// With all clocks right (the control), or only f = 1 node fast, B waits
// 2 s and gets nothing while A holds: a drifting minority cannot end a
// lease.
func TestClockSkewBreaksLeasesNotFences(t *testing.T) {
	const ttl = 30 * time.Second
	for _, tc := range []struct {
		name    string
		fast    []int // nodes whose clocks run 10× fast
		overlap bool
	}{
		{"control", nil, false},
		{"f nodes fast", []int{1}, false},
		{"t nodes fast", []int{1, 2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang ceiling
			defer cancel()
			nw := startNet(t, 4, 2, Options{NodeClock: func(i int) clockwork.Clock {
				for _, f := range tc.fast {
					if f == i {
						return NewRateClock(10)
					}
				}
				return nil
			}})
			fence := verifier.NewFence(verifier.New(nw.Keys.Cluster), verifier.NewMemoryStore())
			write := func(tok protocol.Token) error {
				return fence.Admit(ctx, tok, tok.Resource, func(tx verifier.Tx) error { return tx.Put("k", []byte(tok.Holder.String())) })
			}

			a := newClient(t, nw, 0, client.Config{})
			la, err := a.TryAcquire(ctx, "orders-db", client.WithTTL(ttl))
			require.NoError(t, err)
			require.NoError(t, write(la.Token()))

			b := newClient(t, nw, 1, client.Config{})
			wait := 2 * time.Second
			if tc.overlap {
				wait = 9 * time.Second
			}
			bctx, bcancel := context.WithTimeout(ctx, wait)
			lb, err := b.Acquire(bctx, "orders-db")
			bcancel()
			got := time.Now()
			if !tc.overlap {
				require.Error(t, err, "B got the resource while A holds it")
				require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrBusy), "%v", err)
				select {
				case <-la.Lost():
					t.Fatalf("A lost its lease: %v", la.Err())
				default:
				}
				require.NoError(t, write(la.Token()), "A still writes")
				return
			}
			require.NoError(t, err)
			require.Greater(t, lb.Epoch(), la.Epoch())
			// The overlap: B holds the resource while A, by its own
			// clock, still has most of its lease left.
			require.True(t, la.Deadline().After(got), "A's lease (deadline %v) ended before B's grant", la.Deadline())
			select {
			case <-la.Lost():
				t.Fatalf("A was told its lease ended (%v): no overlap to show", la.Err())
			default:
			}
			// S4 holds all the same: B writes, and A's older token is
			// refused from then on.
			require.NoError(t, write(lb.Token()))
			require.ErrorIs(t, write(la.Token()), verifier.ErrStale)
		})
	}
}

// TestRateClock: a duration on a rate clock passes in duration/rate of
// real time, and its Now runs rate times as fast.
func TestRateClock(t *testing.T) {
	c := NewRateClock(50)
	real := time.Now()
	start := c.Now()
	<-c.After(time.Second) // 20 ms of real time
	before := time.Since(real)
	elapsed := c.Since(start)
	after := time.Since(real)
	require.GreaterOrEqual(t, elapsed, time.Second)
	require.GreaterOrEqual(t, elapsed, 50*before-time.Microsecond)
	require.LessOrEqual(t, elapsed, 50*after+time.Microsecond)
	tm := c.NewTimer(time.Hour)
	require.True(t, tm.Reset(500*time.Millisecond))
	<-tm.Chan()
	require.False(t, tm.Stop())
	require.Panics(t, func() { NewRateClock(0) })
}
