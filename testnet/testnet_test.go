package testnet

import (
	"context"
	"fmt"
	"hash/fnv"
	mrand "math/rand"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// seedFor derives a seed from the test name and logs it, so a failing run
// can be repeated.
func seedFor(t testing.TB) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name()))
	seed := int64(h.Sum64() & 0x7fffffffffffffff)
	t.Logf("seed %d", seed)
	return seed
}

func startNet(t testing.TB, n, clients int, o Options) *Network {
	t.Helper()
	o.Keygen.N = n
	o.Keygen.Clients = clients
	if o.Keygen.Rand == nil {
		o.Keygen.Rand = mrand.New(mrand.NewSource(seedFor(t)))
	}
	nw, err := Start(t.TempDir(), o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	return nw
}

func newClient(t testing.TB, nw *Network, i int, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = uint64(i + 1)
	}
	c, err := nw.NewClient(i, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// awaitCommit waits until t members acknowledged l's Commit. The lease
// starts at the vote and the Lock commits in the background, so a test
// that reads the members' leases, or counts their commits, waits for it
// first, as a process does that leaves its lease running when it exits.
func awaitCommit(t testing.TB, l *client.Lock) {
	t.Helper()
	select {
	case <-l.Committed():
	case <-l.Lost():
		t.Fatalf("lock on %q epoch %d lost before its commit: %v", l.Token().Resource, l.Epoch(), l.Err())
	case <-time.After(testwait.HangCeiling):
		t.Fatalf("lock on %q epoch %d: no commit within %v", l.Token().Resource, l.Epoch(), testwait.HangCeiling)
	}
}

func verify(t testing.TB, nw *Network, tok protocol.Token) {
	t.Helper()
	require.NoError(t, nw.Keys.Cluster.Key.Verify(tok.SignedBytes(), tok.Signature))
}

func TestAcquireReleaseReacquire(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	ctx := context.Background()
	c1 := newClient(t, nw, 0, client.Config{})
	c2 := newClient(t, nw, 1, client.Config{})

	l1, err := c1.TryAcquire(ctx, "orders-db")
	require.NoError(t, err)
	verify(t, nw, l1.Token())
	require.Equal(t, c1.ID(), l1.Token().Holder.ID)

	_, err = c2.TryAcquire(ctx, "orders-db")
	require.ErrorIs(t, err, client.ErrBusy)
	var busy *client.BusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, l1.Token().Holder.Ref(), busy.Holder)

	require.NoError(t, l1.Release(ctx))
	l2, err := c2.TryAcquire(ctx, "orders-db")
	require.NoError(t, err)
	require.Greater(t, l2.Epoch(), l1.Epoch())
	verify(t, nw, l2.Token())
}

// TestS1ConcurrentContendingClients runs clients that all want the same
// resources at once and collects every token any of them got: never two
// holders for one (resource, epoch).
func TestS1ConcurrentContendingClients(t *testing.T) {
	const clients, rounds = 4, 5
	nw := startNet(t, 4, clients, Options{})
	resources := []string{"r/a", "r/b"}
	// Each client's goroutine sends back the tokens it got and the errors
	// it met; the test goroutine checks them.
	type clientRun struct {
		tokens []protocol.Token
		errs   []error // an acquire's (it ends the run) and releases'
	}
	runs := make(chan clientRun, clients)
	for i := 0; i < clients; i++ {
		c := newClient(t, nw, i, client.Config{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
		go func() {
			var run clientRun
			defer func() { runs <- run }()
			for r := 0; r < rounds; r++ {
				res := resources[(i+r)%len(resources)]
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				l, err := acquireWait(ctx, c, 20*time.Second, res, client.WithTTL(5*time.Second))
				cancel()
				if err != nil {
					run.errs = append(run.errs, err)
					return
				}
				run.tokens = append(run.tokens, l.Token())
				if err := l.Release(context.Background()); err != nil {
					run.errs = append(run.errs, err)
				}
			}
		}()
	}
	seen := map[string]protocol.Holder{} // resource/epoch -> holder
	tokens := 0
	for _, run := range testwait.RecvAll(t, runs, clients, rounds*20*time.Second+testwait.HangCeiling, "the clients' runs") {
		for _, err := range run.errs {
			assertNoErr(t, err)
		}
		for _, tok := range run.tokens {
			verify(t, nw, tok)
			key := fmt.Sprintf("%s/%d", tok.Resource, tok.Epoch)
			if h, ok := seen[key]; ok && h != tok.Holder {
				t.Errorf("S1 violated: %s held by %s and %s", key, h, tok.Holder)
			}
			seen[key] = tok.Holder
			tokens++
		}
	}
	require.Equal(t, clients*rounds, tokens, "every client acquired every round")
	require.Len(t, seen, clients*rounds, "every token has its own (resource, epoch)")
}

func assertNoErr(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// TestS3RestartedNodeRefusesOtherHolder: a node that voted at an epoch and
// crashed still refuses another holder at that epoch after restart.
func TestS3RestartedNodeRefusesOtherHolder(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	ctx := context.Background()
	c1 := newClient(t, nw, 0, client.Config{})
	l, err := c1.TryAcquire(ctx, "res")
	require.NoError(t, err)
	epoch := l.Epoch()

	require.NoError(t, nw.Stop(2))
	require.NoError(t, nw.Restart(2))
	rec, err := nw.Node(2).Record(ctx, "res")
	require.NoError(t, err)
	require.Equal(t, epoch, rec.VoteEpoch)
	require.Equal(t, c1.ID(), rec.VoteHolder.ID)

	// Ask the restarted node directly, as client 2, for the same epoch.
	reply := acquireDirect(t, nw, 1, 2, "res", epoch)
	require.Equal(t, protocol.KindRefuse, reply.Kind)
	require.Equal(t, protocol.CodeStale, reply.Code)
	require.Equal(t, epoch, reply.LastEpoch)
}

// TestL1WithFNodesStopped: with f nodes down an uncontended acquire works.
func TestL1WithFNodesStopped(t *testing.T) {
	for _, n := range []int{4, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			nw := startNet(t, n, 1, Options{})
			f := (n - 1) / 3
			for i := 1; i <= f; i++ {
				require.NoError(t, nw.Stop(n-i+1))
			}
			c := newClient(t, nw, 0, client.Config{RequestTimeout: time.Second})
			l, err := c.TryAcquire(context.Background(), "res")
			require.NoError(t, err)
			verify(t, nw, l.Token())
			require.NoError(t, l.Release(context.Background()))
		})
	}
}

// TestAcquireFailsWithFPlus1StoppedNamingNodes: with f+1 nodes down acquire
// fails within its deadline and names them.
func TestAcquireFailsWithFPlus1StoppedNamingNodes(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	require.NoError(t, nw.Stop(3))
	require.NoError(t, nw.Stop(4))
	c := newClient(t, nw, 0, client.Config{RequestTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.TryAcquire(ctx, "res")
	require.ErrorIs(t, err, client.ErrNotEnoughNodes)
	var qe *client.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, []int{3, 4}, qe.Failed())
	require.Contains(t, err.Error(), "node 3")
	require.Contains(t, err.Error(), "node 4")
	require.NoError(t, ctx.Err(), "failed before its deadline")
}

// TestCutOffAndDelayedNodes: f nodes cut off plus slow nodes still give
// tokens.
func TestCutOffAndDelayedNodes(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	nw.CutOff(1)
	nw.SetDelay(2, 50*time.Millisecond)
	c := newClient(t, nw, 0, client.Config{RequestTimeout: time.Second})
	l, err := c.TryAcquire(context.Background(), "res")
	require.NoError(t, err)
	verify(t, nw, l.Token())
	nw.Reconnect(1)
	nw.SetDelay(2, 0)
	require.NoError(t, l.Release(context.Background()))
}

// TestL3ReleaseExpiryRenewalFakeClock drives leases with a fake clock shared
// by nodes and clients.
func TestL3ReleaseExpiryRenewalFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	nw := startNet(t, 4, 2, Options{Clock: clock})
	ctx := context.Background()
	// Backoff between rounds sleeps on the fake clock too: at most 5 ms,
	// which tryAcquireFakeClock moves the clock by while a call runs.
	const backoff = 5 * time.Millisecond
	c1 := newClient(t, nw, 0, client.Config{Clock: clock, MinBackoff: time.Millisecond, MaxBackoff: backoff})
	c2 := newClient(t, nw, 1, client.Config{Clock: clock, MinBackoff: time.Millisecond, MaxBackoff: backoff})
	const ttl = 9 * time.Second
	try := func(c *client.Client, opts ...client.Option) (*client.Lock, error) {
		return tryAcquireFakeClock(t, clock, backoff, c, "res", opts...)
	}

	// Renewal keeps a live holder's lease: advance past several TTLs in
	// steps, letting renewals run.
	l1, err := try(c1, client.WithTTL(ttl))
	require.NoError(t, err)
	awaitCommit(t, l1)
	first := l1.Deadline()
	for i := 0; i < 6; i++ {
		require.NoError(t, clock.BlockUntilContext(ctx, 1)) // the renewal loop waits
		clock.Advance(ttl / 3)
		require.Eventually(t, func() bool { return l1.Deadline().After(first.Add(time.Duration(i) * ttl / 3)) }, 5*time.Second, time.Millisecond)
	}
	select {
	case <-l1.Lost():
		t.Fatal("a renewed lock was lost")
	default:
	}
	_, err = try(c2)
	require.ErrorIs(t, err, client.ErrBusy)

	// Release frees the resource at once.
	require.NoError(t, l1.Release(ctx))
	testwait.Recv(t, l1.Lost(), testwait.HangCeiling, "Lost of the released lock")
	require.NoError(t, l1.Err())
	l2, err := try(c2, client.WithTTL(ttl))
	require.NoError(t, err)
	awaitCommit(t, l2) // Close would cut a Commit short, and the lease to run out is the TTL's

	// A dead holder's lease frees the resource after its TTL: client 2
	// stops renewing (closed), time passes.
	require.NoError(t, c2.Close())
	testwait.Recv(t, l2.Lost(), testwait.HangCeiling, "Lost of the closed client's lock")
	_, err = try(c1)
	require.ErrorIs(t, err, client.ErrBusy, "lease still live before the TTL")
	clock.Advance(ttl + time.Second)
	l3, err := try(c1)
	require.NoError(t, err)
	require.Greater(t, l3.Epoch(), l2.Epoch())
	awaitCommit(t, l3)

	// A holder that cannot renew learns it lost the lease at its deadline.
	for i := 1; i <= 4; i++ {
		nw.CutOff(i)
	}
	require.NoError(t, clock.BlockUntilContext(ctx, 2))
	clock.Advance(ttl)
	select {
	case <-l3.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("lock not lost after its deadline passed without renewal")
	}
	require.ErrorIs(t, l3.Err(), client.ErrLost)
}

// tryAcquireFakeClock is TryAcquire of res for a client on a fake clock.
// A round that must back off (a node that has not yet seen the last
// release answers stale) sleeps on that clock, and nothing else would
// move it: while the call runs, the clock moves by step (the client's
// MaxBackoff) every 10 ms of real time. The tests' leases last seconds,
// so these steps do not bring any deadline on. The call is bounded by the
// hang ceiling in real time.
func tryAcquireFakeClock(t *testing.T, clock *clockwork.FakeClock, step time.Duration, c *client.Client, res string, opts ...client.Option) (*client.Lock, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.HangCeiling)
	defer cancel()
	type result struct {
		l   *client.Lock
		err error
	}
	out := make(chan result, 1)
	go func() {
		l, err := c.TryAcquire(ctx, res, opts...)
		out <- result{l, err}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-out:
			return r.l, r.err
		case <-tick.C:
			clock.Advance(step)
		}
	}
}

func TestUnauthorisedClientRefused(t *testing.T) {
	nw := startNet(t, 4, 1, Options{Keygen: KeygenOptions{ClientResources: []string{"orders/*"}}})
	c := newClient(t, nw, 0, client.Config{})
	_, err := c.TryAcquire(context.Background(), "payments/1")
	require.ErrorIs(t, err, client.ErrRefused)
	var re *protocol.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, protocol.CodeUnauthorised, re.Code)
	l, err := c.TryAcquire(context.Background(), "orders/1")
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
}

// acquireDirect sends one Acquire as client identity ci straight to node
// ni, bypassing the client's algorithm.
// directKey is the session key acquireDirect sends on behalf of client ci;
// directSession the session it owns.
func directKey(ci int) protocol.SessionKey { return protocol.SessionKey{0xd1, byte(ci)} }

func directSession(ci int) protocol.SessionID { return directKey(ci).Session() }

func acquireDirect(t *testing.T, nw *Network, ci, ni int, resource string, epoch uint64) protocol.AcquireReply {
	t.Helper()
	return acquireDirectAs(t, nw, ci, ni, resource, epoch, directKey(ci))
}

// acquireDirectAs is acquireDirect in the lock session of client ci that
// key owns.
func acquireDirectAs(t *testing.T, nw *Network, ci, ni int, resource string, epoch uint64, key protocol.SessionKey) protocol.AcquireReply {
	t.Helper()
	var ids []peer.ID
	for _, m := range nw.Members {
		ids = append(ids, m.PeerID)
	}
	h, err := transport.NewHost(nw.Keys.Clients[ci], nil, transport.NewGater(ids...))
	require.NoError(t, err)
	defer h.Close()
	m := nw.Member(ni)
	require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	req := protocol.AcquireRequest{Cluster: nw.Keys.Cluster.ID, Resource: resource, Epoch: epoch, Key: key, TTL: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := transport.Call(ctx, h, m.PeerID, protocol.ProtoAcquire, req.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	reply, err := protocol.UnmarshalAcquireReply(b)
	require.NoError(t, err)
	return reply
}

// TestBadPartialsStillYieldTokenAndNodeIsNamed: node 1 answers every vote
// with a well-formed partial over the wrong message. The optimistic combine
// fails, the client checks partials one by one, drops node 1's, uses
// another node's vote and names node 1.
func TestBadPartialsStillYieldTokenAndNodeIsNamed(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	share := nw.Member(1).Dir.Share
	nw.SetReplyFilter(1, func(proto string, b []byte) []byte {
		if proto != protocol.ProtoAcquire {
			return b
		}
		r, err := protocol.UnmarshalAcquireReply(b)
		if err != nil || r.Kind != protocol.KindVote {
			return b
		}
		bad, err := share.Sign([]byte("not the statement"))
		if err != nil {
			return b
		}
		r.Partial = bad
		return r.Marshal()
	})
	// Make node 1 answer first so its partial is among the first t.
	nw.SetDelay(4, 300*time.Millisecond)
	c := newClient(t, nw, 0, client.Config{})
	for i := 0; i < 3; i++ {
		l, err := c.TryAcquire(context.Background(), fmt.Sprintf("res-%d", i))
		require.NoError(t, err)
		verify(t, nw, l.Token())
		require.Equal(t, []int{1}, l.Suspects())
		require.NoError(t, l.Release(context.Background()))
	}
}

// TestTamperedTokenRefusedByNodes: a commit or release carrying a token
// whose fields were changed after signing is refused.
func TestTamperedTokenRefusedByNodes(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	c := newClient(t, nw, 0, client.Config{})
	l, err := c.TryAcquire(context.Background(), "res")
	require.NoError(t, err)
	tok := l.Token()
	for name, mut := range map[string]func(*protocol.Token){
		"epoch":    func(t *protocol.Token) { t.Epoch++ },
		"resource": func(t *protocol.Token) { t.Resource = "other" },
		"holder":   func(t *protocol.Token) { t.Holder.ID = "someone-else" },
	} {
		bad := tok
		mut(&bad)
		require.Error(t, nw.Keys.Cluster.Key.Verify(bad.SignedBytes(), bad.Signature), name)
	}
	require.NoError(t, l.Release(context.Background()))
}

// BenchmarkAcquireN4 measures an uncontended acquire (status, votes with
// one fsync each, combine, commit) and release on a 4-node in-process
// cluster over loopback TCP.
func BenchmarkAcquireN4(b *testing.B) {
	nw := startNet(b, 4, 1, Options{})
	c := newClient(b, nw, 0, client.Config{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := c.TryAcquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestStrangerRefusedByGater: a libp2p host whose peer ID is neither a
// member nor a configured client cannot open a stream to a node, even if
// it speaks the protocol.
func TestStrangerRefusedByGater(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	stranger, err := transport.GenerateIdentity(mrand.New(mrand.NewSource(99)))
	require.NoError(t, err)
	m := nw.Member(1)
	h, err := transport.NewHost(stranger, nil, transport.NewGater(m.PeerID))
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = transport.Call(ctx, h, m.PeerID, protocol.ProtoStatus, protocol.StatusRequest{Resource: "res"}.Marshal(), protocol.MaxFrameSize)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "refused promptly, not by timeout")

	// The same request from the configured client identity is answered.
	h2, err := transport.NewHost(nw.Keys.Clients[0], nil, transport.NewGater(m.PeerID))
	require.NoError(t, err)
	defer h2.Close()
	require.NoError(t, transport.AddPeer(h2, m.PeerID, m.Dir.Listen))
	b, err := transport.Call(ctx, h2, m.PeerID, protocol.ProtoStatus, protocol.StatusRequest{Resource: "res"}.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	_, err = protocol.UnmarshalStatusReply(b)
	require.NoError(t, err)
}

// TestOversizedFrameRefused: a request frame announcing more than the cap
// is reset without the node reading it, and the node keeps serving.
func TestOversizedFrameRefused(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	m := nw.Member(1)
	h, err := transport.NewHost(nw.Keys.Clients[0], nil, transport.NewGater(m.PeerID))
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = transport.Call(ctx, h, m.PeerID, protocol.ProtoStatus, make([]byte, protocol.MaxFrameSize+1), protocol.MaxFrameSize)
	require.ErrorIs(t, err, protocol.ErrFrameTooLarge, "the sender refuses to write it")

	s, err := h.NewStream(ctx, m.PeerID, protocol.ProtoStatus)
	require.NoError(t, err)
	_, err = s.Write([]byte{0xff, 0xff, 0xff, 0x7f}) // announces ~256 MiB
	require.NoError(t, err)
	_, err = protocol.ReadFrame(s, protocol.MaxFrameSize)
	require.Error(t, err, "the node resets the stream instead of answering")
	_ = s.Reset()

	b, err := transport.Call(ctx, h, m.PeerID, protocol.ProtoStatus, protocol.StatusRequest{Resource: "res"}.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	_, err = protocol.UnmarshalStatusReply(b)
	require.NoError(t, err)
}

// TestBenchSmall runs the benchmark command's code on a few cycles and
// checks that it measured something (speed is never asserted).
func TestBenchSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Bench(ctx, BenchOptions{Nodes: 4, Clients: 2, Acquires: 3, Contended: true, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Len(t, r.Acquire, 6)
	require.Zero(t, r.Failures)
	require.LessOrEqual(t, r.Acquire[0], r.Acquire[5])
	require.Equal(t, 6, r.Grants[0]+r.Grants[1])
	var out strings.Builder
	r.Print(&out)
	for _, line := range []string{"acquire  p50=", "release  p50=", "acquire+release cycles/s", "handoffs ", "grants per client min="} {
		require.Contains(t, out.String(), line)
	}
}

// TestSameClientTwoAcquiresExclusive: the holder identity is the unit of
// exclusion, so two Acquires of one client on one resource must not both
// get a Lock (they would carry the very same token).
func TestSameClientTwoAcquiresExclusive(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	c := newClient(t, nw, 0, client.Config{})
	ctx := context.Background()
	type attempt struct {
		l   *client.Lock
		err error
	}
	const tries = 8
	attempts := make(chan attempt, tries)
	for range tries {
		go func() {
			l, err := c.TryAcquire(ctx, "res")
			attempts <- attempt{l, err}
		}()
	}
	var got *client.Lock
	for _, a := range testwait.RecvAll(t, attempts, tries, testwait.HangCeiling, "the TryAcquires") {
		if a.err == nil {
			require.Nil(t, got, "two Locks for one client and resource")
			got = a.l
			continue
		}
		require.ErrorIs(t, a.err, client.ErrHeldLocally)
		require.ErrorIs(t, a.err, client.ErrBusy)
	}
	require.NotNil(t, got)

	// Waiting mode queues behind the held lock and gets a higher epoch.
	next := make(chan attempt, 1)
	go func() {
		l, err := acquireWait(ctx, c, 10*time.Second, "res")
		next <- attempt{l, err}
	}()
	// This client holds the resource, so its second Acquire waits for the
	// client's own slot for it, asking no node anything until got is
	// released: no node queues a waiter here. Release only once the
	// Acquire waits there, so the test exercises the wait.
	require.Eventually(t, func() bool { return c.WaitingLocally() == 1 }, testwait.HangCeiling, time.Millisecond, "the waiting Acquire")
	require.NoError(t, got.Release(ctx))
	n := testwait.Recv(t, next, testwait.HangCeiling, "the waiting Acquire")
	assertNoErr(t, n.err)
	l2 := n.l
	require.NotNil(t, l2)
	require.Greater(t, l2.Epoch(), got.Epoch())
	require.NoError(t, l2.Release(ctx))
}

// TestLostOnTimeWhileRenewalHangs: when every node stops answering, the
// lock reports loss at its deadline, not after the hung renewal's timeout.
func TestLostOnTimeWhileRenewalHangs(t *testing.T) {
	clock := clockwork.NewFakeClock()
	nw := startNet(t, 4, 1, Options{Clock: clock})
	ctx := context.Background()
	const backoff = 5 * time.Millisecond
	c := newClient(t, nw, 0, client.Config{Clock: clock, RequestTimeout: 30 * time.Second, MinBackoff: time.Millisecond, MaxBackoff: backoff})
	const ttl = 9 * time.Second
	l, err := tryAcquireFakeClock(t, clock, backoff, c, "res", client.WithTTL(ttl))
	require.NoError(t, err)
	for i := 1; i <= 4; i++ {
		nw.SetDelay(i, time.Minute) // hang, in real time
	}
	require.NoError(t, clock.BlockUntilContext(ctx, 2)) // renew + expire timers
	clock.Advance(ttl / 3)                              // renewal starts and hangs
	clock.Advance(ttl)                                  // past the deadline
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not close at the deadline while a renewal hung")
	}
	require.ErrorIs(t, l.Err(), client.ErrLost)
	for i := 1; i <= 4; i++ {
		nw.SetDelay(i, 0)
	}
}
