package testnet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// commitGate holds every Commit a member gets until it opens: the lease
// starts at the vote, so Acquire must return while they are held.
type commitGate struct {
	open chan struct{}
	once sync.Once
	held atomic.Int32
}

func gateCommits(t *testing.T, nw *Network) *commitGate {
	g := &commitGate{open: make(chan struct{})}
	nw.ObserveRequests(func(_ int, proto string, _ peer.ID, _ []byte) {
		if proto == protocol.ProtoCommit {
			g.held.Add(1)
			<-g.open
		}
	})
	t.Cleanup(g.release) // before the clients and nodes close
	return g
}

func (g *commitGate) release() { g.once.Do(func() { close(g.open) }) }

// gatedNet starts 4 nodes whose Commits wait for the gate, and two
// clients, a and b, with a context for the test.
func gatedNet(t *testing.T, o Options) (*Network, *commitGate, *client.Client, *client.Client, context.Context) {
	nw := startNet(t, 4, 2, o)
	gate := gateCommits(t, nw)
	a := newClient(t, nw, 0, client.Config{})
	b := newClient(t, nw, 1, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return nw, gate, a, b, ctx
}

// handledCommits counts the Commits the members answered: those that
// started a lease and those refused, for any reason.
func handledCommits(t *testing.T, nw *Network) int {
	t.Helper()
	total := 0.0
	for _, m := range nw.Members {
		mfs, err := nw.Node(m.Index).MetricsRegistry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				switch mf.GetName() {
				case node.MetricCommits:
					total += mt.GetCounter().GetValue()
				case node.MetricRefusals:
					for _, lp := range mt.GetLabel() {
						if lp.GetName() == "request" && lp.GetValue() == "commit" {
							total += mt.GetCounter().GetValue()
						}
					}
				}
			}
		}
	}
	return int(total)
}

// TestLeaseStartsAtVote (issue 20, point 6): Acquire returns once the
// votes combine, while every member holds the Commit back. Until t
// members acknowledged it, the Lock's Deadline is the members' vote
// timeout from when the Acquire went out (minus a tenth), and the votes
// keep another client out; once the Commit gets through, Committed closes
// and the Deadline moves to the TTL.
func TestLeaseStartsAtVote(t *testing.T) {
	_, gate, a, b, ctx := gatedNet(t, Options{})
	const hold = 2 * time.Second // the members' vote timeout, the client's default
	start := time.Now()
	l, err := a.TryAcquire(ctx, "vote/lease")
	returned := time.Now()
	require.NoError(t, err)
	select {
	case <-l.Committed():
		t.Fatal("committed while every member holds the Commit back")
	case <-l.Lost():
		t.Fatalf("lost: %v", l.Err())
	default:
	}
	d := l.Deadline()
	require.False(t, d.Before(start.Add(hold-hold/10)), "deadline %v is before the vote timeout from the Acquire's start", d.Sub(start))
	require.False(t, d.After(returned.Add(hold-hold/10)), "deadline %v is past the vote timeout from the Acquire's return", d.Sub(returned))

	// The votes alone hold the resource for the session: the members
	// answer busy with its uncommitted vote, t of them name one session,
	// so the client reports Busy, as for a committed lease.
	_, err = b.TryAcquire(ctx, "vote/lease")
	require.ErrorIs(t, err, client.ErrBusy)
	var be *client.BusyError
	require.ErrorAs(t, err, &be)
	require.Equal(t, l.Token().Holder.Ref(), be.Holder)

	gate.release()
	select {
	case <-l.Committed():
	case <-l.Lost():
		t.Fatalf("lost: %v", l.Err())
	case <-ctx.Done():
		t.Fatal("never committed")
	}
	require.Greater(t, l.Deadline().Sub(d), 5*time.Second, "the committed lease runs its TTL (10 s) from the Commit")
	require.NoError(t, l.Release(ctx))
	l2, err := b.TryAcquire(ctx, "vote/lease")
	require.NoError(t, err, "released at once")
	require.NoError(t, l2.Release(ctx))
}

// TestCommitNotAcknowledgedLosesLock: a Lock handed out at the vote whose
// Commit no member acknowledges is lost at its Deadline (the vote
// timeout, minus a tenth) with ErrLost, and its votes are released: the
// next client acquires at once, and the Commits that arrive late start
// no lease.
func TestCommitNotAcknowledgedLosesLock(t *testing.T) {
	rules := node.Rules{MaxEpochStep: protocol.DefaultMaxEpochStep, VoteTimeout: 500 * time.Millisecond, DefaultTTL: 10 * time.Second, MaxTTL: protocol.MaxTTL}
	nw, gate, a, b, ctx := gatedNet(t, Options{Rules: rules})
	l, err := a.TryAcquire(ctx, "vote/unacked")
	require.NoError(t, err)
	select {
	case <-l.Lost():
	case <-l.Committed():
		t.Fatal("committed while every member holds the Commit back")
	case <-ctx.Done():
		t.Fatal("never lost")
	}
	require.ErrorIs(t, l.Err(), client.ErrLost)
	require.False(t, time.Now().Before(l.Deadline()), "lost only at its deadline")

	l2, err := b.Acquire(ctx, "vote/unacked")
	require.NoError(t, err)
	sent := int(gate.held.Load())
	gate.release()
	require.Eventually(t, func() bool { return handledCommits(t, nw) >= sent }, 20*time.Second, 10*time.Millisecond)
	for _, m := range nw.Members {
		rec, err := nw.Node(m.Index).Record(ctx, "vote/unacked")
		require.NoError(t, err)
		require.NotEqual(t, l.Token().Holder, rec.Lease.Holder, "node %d: a late Commit started the lost lease", m.Index)
	}
	require.NoError(t, l2.Release(ctx))
}

// TestReleaseOvertakesCommit: a Lock released while its Commit is still
// on the way ends the session's votes at once (the next client acquires
// at once), and every member refuses the Commit that arrives after the
// Release, the members that did not vote included (they record the
// release of a token they check), so that no lease nobody renews holds
// the resource for its TTL.
func TestReleaseOvertakesCommit(t *testing.T) {
	nw, gate, a, b, ctx := gatedNet(t, Options{})
	l, err := a.TryAcquire(ctx, "vote/overtaken")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx), "the votes are released without their Commit")
	l2, err := b.TryAcquire(ctx, "vote/overtaken")
	require.NoError(t, err, "free at once")

	sent := int(gate.held.Load())
	require.Positive(t, sent)
	gate.release()
	require.Eventually(t, func() bool { return handledCommits(t, nw) >= sent }, 20*time.Second, 10*time.Millisecond)
	for _, m := range nw.Members {
		rec, err := nw.Node(m.Index).Record(ctx, "vote/overtaken")
		require.NoError(t, err)
		require.NotEqual(t, l.Token().Holder, rec.Lease.Holder, "node %d: a Commit after the Release started a lease", m.Index)
		require.GreaterOrEqual(t, rec.Released, l.Epoch(), "node %d: the release is remembered", m.Index)
	}
	// b's lease was not disturbed by the late Commits.
	require.NoError(t, l2.Release(ctx))
}

// TestResentAcquireCannotPin: a client that takes t votes and, instead of
// committing, re-sends the same Acquire again and again (each re-send
// starts its vote's lease again) holds the resource at most twice the
// vote timeout: once its vote is VoteTimeout old every member refuses the
// re-send as stale, the leases run out, and an honest Acquire started
// while the liar keeps re-sending is served above the liar's epoch. In
// the control the liar sends its Acquire once.
func TestResentAcquireCannotPin(t *testing.T) {
	for _, resend := range []bool{false, true} {
		t.Run(map[bool]string{false: "control", true: "resend"}[resend], func(t *testing.T) { resentAcquire(t, resend) })
	}
}

func resentAcquire(t *testing.T, resend bool) {
	const vt = 300 * time.Millisecond
	rules := node.Rules{MaxEpochStep: protocol.DefaultMaxEpochStep, VoteTimeout: vt, DefaultTTL: 10 * time.Second, MaxTTL: protocol.MaxTTL}
	nw := startNet(t, 4, 3, Options{Rules: rules})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newLiar(t, nw, 2)
	const res = "vote/resent"
	k := l.key()
	require.GreaterOrEqual(t, l.acquireRaw(ctx, res, k, 1), nw.Keys.Cluster.File.T, "the liar takes t votes at epoch 1")
	voted := time.Now()

	// The liar re-sends its Acquire every vt/4 until the honest client is
	// served, or for a hang ceiling of 100 vote timeouts; it counts the
	// members' answers by kind.
	var mu sync.Mutex
	kinds := map[protocol.ReplyKind]int{}
	var staleAfter int // stale answers to re-sends made once the vote was vt old
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !resend {
			return
		}
		req := protocol.AcquireRequest{Cluster: nw.Keys.Cluster.ID, Resource: res, Epoch: 1, Key: k, TTL: time.Second}.Marshal()
		for i := 0; i < 400 && lctx.Err() == nil; i++ {
			old := time.Since(voted) >= vt
			var wg sync.WaitGroup
			for _, m := range nw.Members {
				wg.Go(func() {
					b, err := l.call(lctx, m.Index, protocol.ProtoAcquire, req, 0)
					if err != nil {
						return
					}
					r, err := protocol.UnmarshalAcquireReply(b)
					if err != nil {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					kinds[r.Kind]++
					if old && r.Kind == protocol.KindRefuse && r.Code == protocol.CodeStale {
						staleAfter++
					}
				})
			}
			wg.Wait()
			_ = sleepCtx(lctx, vt/4)
		}
	}()

	c := newClient(t, nw, 1, client.Config{})
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second) // a hang ceiling
	defer hcancel()
	lk, err := c.Acquire(hctx, res)
	servedAt := time.Since(voted)
	lcancel()
	<-done
	require.NoError(t, err, "the honest Acquire is served while the liar re-sends")
	require.Greater(t, lk.Token().Epoch, uint64(1), "above the liar's epoch")
	mu.Lock()
	t.Logf("honest client served %v after the liar's vote (vote timeout %v); the liar's re-sends were answered %v, %d of them stale once the vote was %v old",
		servedAt.Round(time.Millisecond), vt, kinds, staleAfter, vt)
	if resend {
		require.Positive(t, kinds[protocol.KindVote], "re-sends within the vote timeout get the vote again")
		require.GreaterOrEqual(t, staleAfter, nw.Keys.Cluster.File.T, "re-sends past the vote timeout are refused as stale")
	}
	mu.Unlock()
	require.NoError(t, lk.Release(ctx))
}
