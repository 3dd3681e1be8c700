package testnet

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// badSigFlood sends Commits and Acquire proofs carrying well-formed tokens
// whose signatures do not verify (a real signature over another
// statement), each at a new epoch so no cache can recognise them. It is
// open loop: one request per node every interval, at most inflight per
// node in progress (a tick with none free is skipped), at most perNode per
// node per run; so it costs its sender about the same whatever the nodes
// do with it.
type badSigFlood struct {
	h        host.Host
	nw       *Network
	sig      protocol.Token // a valid token; its signature is reused
	interval time.Duration
	inflight int
	perNode  int
	epoch    atomic.Uint64
	sent     atomic.Int64
}

// run floods until ctx ends or every node got perNode requests, and
// returns once all its requests have finished.
func (f *badSigFlood) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range f.nw.Members {
		wg.Add(1)
		go func(id peer.ID) {
			defer wg.Done()
			sem := make(chan struct{}, f.inflight)
			tick := time.NewTicker(f.interval)
			defer tick.Stop()
			for i := 0; i < f.perNode; {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				select {
				case sem <- struct{}{}:
				default:
					continue // the node is still busy: skip this tick
				}
				i++
				wg.Add(1)
				go func(commit bool) {
					defer wg.Done()
					defer func() { <-sem }()
					f.send(ctx, id, commit)
				}(i%2 == 0)
			}
		}(m.PeerID)
	}
	wg.Wait()
}

func (f *badSigFlood) send(ctx context.Context, id peer.ID, commit bool) {
	epoch := 1_000_000 + f.epoch.Add(1)
	bad := f.sig
	bad.Statement = f.nw.Keys.Cluster.Statement("flooded", epoch, protocol.Holder{ID: f.h.ID().String(), Session: protocol.SessionKey{7}.Session()})
	var proto string
	var req []byte
	if commit {
		proto, req = protocol.ProtoCommit, protocol.CommitRequest{Token: bad, TTL: time.Second}.Marshal()
	} else {
		proto = protocol.ProtoAcquire
		req = protocol.AcquireRequest{Cluster: f.nw.Keys.Cluster.ID, Resource: "flooded", Epoch: epoch + 1, Key: protocol.SessionKey{7}, TTL: time.Second, Proof: &bad}.Marshal()
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = transport.Call(cctx, f.h, id, proto, req, protocol.MaxFrameSize)
	f.sent.Add(1)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// floodRig is a 4-node network with an honest client (identity 0) that
// has acquired once, and a flooder's host (identity 1) connected to every
// node.
type floodRig struct {
	nw    *Network
	c     *client.Client
	h     host.Host
	ids   []peer.ID
	valid protocol.Token // a valid token, for the flood to reuse its signature
}

func newFloodRig(tb testing.TB) *floodRig {
	nw := startNet(tb, 4, 2, Options{})
	r := &floodRig{nw: nw, c: newClient(tb, nw, 0, client.Config{})}
	ctx := context.Background()
	l, err := r.c.TryAcquire(ctx, "warm-up")
	require.NoError(tb, err)
	r.valid = l.Token()
	require.NoError(tb, l.Release(ctx))
	r.acquire(tb)
	for _, m := range nw.Members {
		r.ids = append(r.ids, m.PeerID)
	}
	r.h, err = transport.NewHost(nw.Keys.Clients[1], nil, transport.NewGater(r.ids...))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = r.h.Close() })
	for _, m := range nw.Members {
		require.NoError(tb, transport.AddPeer(r.h, m.PeerID, m.Dir.Listen))
	}
	return r
}

// acquire takes and releases the honest client's lease and returns how
// long the acquire took. It must succeed.
func (r *floodRig) acquire(tb testing.TB) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang ceiling
	defer cancel()
	start := time.Now()
	l, err := r.c.TryAcquire(ctx, "honest")
	d := time.Since(start)
	require.NoError(tb, err, "an honest acquire under the flood")
	require.NoError(tb, l.Release(ctx))
	return d
}

// round runs perBlock honest acquires without a flood, then acquires
// while f floods: perBlock of them, then more until f has sent all its
// requests, unless stopFlood, which stops f after those perBlock. It
// returns once f is done, with the acquire durations.
func (r *floodRig) round(tb testing.TB, perBlock int, f *badSigFlood, stopFlood bool) (quiet, flooded []time.Duration) {
	for i := 0; i < perBlock; i++ {
		quiet = append(quiet, r.acquire(tb))
	}
	fctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() { defer close(done); f.run(fctx) }()
	time.Sleep(50 * time.Millisecond) // the flood is under way
	for {
		flooded = append(flooded, r.acquire(tb))
		if len(flooded) < perBlock {
			continue
		}
		if stopFlood {
			stop()
			<-done
			return quiet, flooded
		}
		select {
		case <-done:
			return quiet, flooded
		default:
		}
	}
}

// TestBadSignatureFloodBoundsPairings: an admitted client floods every node
// with Commits and Acquire proofs whose signatures do not verify, while
// another client acquires and releases. Each such token used to cost a
// node a pairing check (about 3 ms), unlimited; now a peer's failed checks
// come out of a per-peer budget (node.Limits BadSigBurst and BadSigRate).
// What is counted, on every node, over the whole run:
//
//   - pairings spent on bad signatures (LimitStats.BadTokens; the
//     flooder's tokens are the only ones that fail) are at most
//     BadSigBurst + MaxInflightPerPeer (checks already running when the
//     budget ran out) + BadSigRate per second of the run, although the
//     flood sent the node many more;
//   - all its pairings (palisade_signature_checks_total) are at most those
//     plus one per honest token (a valid token is checked once, then
//     cached): the flood causes no other pairing;
//   - the flood outran the budget: the node refused some bad tokens
//     unchecked (ThrottledTokens), so the bound is the budget's doing, and
//     no more bad tokens were judged than were sent.
//
// And every honest acquire during the flood succeeds. The flood is a fixed
// number of requests whatever the machine's speed (a slow run only raises
// the BadSigRate term of the bound); latencies are logged for context
// only, and nothing is asserted about time (BenchmarkBadSignatureFlood
// reports the flooded/quiet ratio).
func TestBadSignatureFloodBoundsPairings(t *testing.T) {
	r := newFloodRig(t)
	cfg := node.Config{Cluster: r.nw.Keys.Cluster, Share: r.nw.Member(1).Dir.Share}
	require.NoError(t, cfg.Validate()) // the defaults the members run with
	lim := cfg.Limits
	type counts struct {
		node.LimitStats
		pairings float64
	}
	snapshot := func() []counts {
		var out []counts
		for _, m := range r.nw.Members {
			n := r.nw.Node(m.Index)
			out = append(out, counts{n.LimitStats(), scrape(t, n)[node.MetricSignatureChecks]})
		}
		return out
	}

	const rounds, perBlock, perNode = 4, 5, 40
	before := snapshot()
	start := time.Now()
	var quiet, flooded []time.Duration
	// One flood for every round: its epochs keep rising, so no token is
	// sent twice.
	f := &badSigFlood{h: r.h, nw: r.nw, sig: r.valid, interval: 10 * time.Millisecond, inflight: 8, perNode: perNode}
	for i := 0; i < rounds; i++ {
		q, fl := r.round(t, perBlock, f, false)
		quiet, flooded = append(quiet, q...), append(flooded, fl...)
	}
	elapsed := time.Since(start)
	after := snapshot()
	sent := f.sent.Load()
	require.EqualValues(t, rounds*perNode*len(r.ids), sent, "flood requests sent")

	honestTokens := len(quiet) + len(flooded)
	maxBad := uint64(lim.BadSigBurst+cfg.MaxInflightPerPeer) + uint64(math.Ceil(elapsed.Seconds()*lim.BadSigRate))
	t.Logf("%d rounds in %v: %d bad-signature requests (%d per node), %d honest acquires; median acquire quiet %v, flooded %v",
		rounds, elapsed.Round(time.Millisecond), sent, rounds*perNode, honestTokens, median(quiet), median(flooded))
	for i := range after {
		a, b := after[i], before[i]
		bad, throttled, cachedBad := a.BadTokens-b.BadTokens, a.ThrottledTokens-b.ThrottledTokens, a.CachedBadTokens-b.CachedBadTokens
		pairings := uint64(a.pairings - b.pairings)
		t.Logf("node %d: %d pairings, %d on bad signatures (bound %d), %d bad tokens refused unchecked, %d as seen before", i+1, pairings, bad, maxBad, throttled, cachedBad)
		require.LessOrEqual(t, bad, maxBad, "node %d: pairings spent on one peer's bad signatures", i+1)
		require.LessOrEqual(t, pairings, bad+uint64(honestTokens)+1, "node %d: pairings in all", i+1)
		require.Positive(t, throttled, "node %d: the flood did not outrun the budget", i+1)
		require.LessOrEqual(t, bad+throttled+cachedBad, uint64(rounds*perNode), "node %d: bad tokens judged", i+1)
	}
}

// BenchmarkBadSignatureFlood reports how much one peer's flood of
// bad-signature requests slows another client's acquires: the median
// acquire under the flood over the median without it (flooded/quiet).
// Flood and quiet blocks alternate, so a change in the machine's
// background load hits both alike. It asserts nothing about the figure.
func BenchmarkBadSignatureFlood(b *testing.B) {
	r := newFloodRig(b)
	ctx := context.Background()
	// Size the flood to this machine: what it would cost if every request
	// were as cheap as a Status (transport, framing, decoding) is about
	// floodShare of one core. Whatever it costs beyond that is the nodes'
	// signature checks. A loaded run gets a proportionally slower flood.
	floodShare := 0.08
	if raceEnabled() {
		// The race detector makes a request's transport about 6x dearer
		// but a pairing only about 2x: the same share would test nothing.
		floodShare = 0.15
	}
	var calib []time.Duration
	for i := 0; i < 100; i++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		_, err := transport.Call(cctx, r.h, r.ids[i%len(r.ids)], protocol.ProtoStatus, protocol.StatusRequest{Resource: "calibrate"}.Marshal(), protocol.MaxFrameSize)
		calib = append(calib, time.Since(start))
		cancel()
		require.NoError(b, err)
	}
	interval := time.Duration(float64(median(calib)) * float64(len(r.ids)) / floodShare)

	const perBlock = 5
	var quiet, flooded []time.Duration
	b.ResetTimer()
	f := &badSigFlood{h: r.h, nw: r.nw, sig: r.valid, interval: interval, inflight: 8, perNode: 1000}
	for i := 0; i < b.N; i++ {
		q, fl := r.round(b, perBlock, f, true)
		quiet, flooded = append(quiet, q...), append(flooded, fl...)
		time.Sleep(200 * time.Millisecond) // let the nodes drain
	}
	b.StopTimer()
	b.ReportMetric(float64(median(flooded))/float64(median(quiet)), "flooded/quiet")
}
