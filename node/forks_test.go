package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// newForkDriver runs node 1 alone (no transport: gossip to the other
// members fails and is only logged) with limits, appending the forks it
// records to a fork file as Dir.Start does; it returns the file's path.
func newForkDriver(t *testing.T, limits Limits) (nodeDriver, string) {
	t.Helper()
	lc := newLimitsCluster(t)
	path := filepath.Join(t.TempDir(), ForkFileName)
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	cfg := Config{Cluster: lc.cluster, Share: lc.shares[0], Limits: limits, OnFork: func(f protocol.Fork) {
		if err := appendFork(path, f); err != nil {
			t.Errorf("append fork: %v", err)
		}
	}}
	n, err := New(cfg, NewMemStore(), h, clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return nodeDriver{t: t, lc: lc, n: n}, path
}

// forkOf mints the two tokens of a real fork at (resource, epoch), for
// holders a and b, with the members' shares, as colluding members would.
func (d nodeDriver) forkOf(resource string, epoch uint64, a, b protocol.Holder) (protocol.Token, protocol.Token, protocol.Fork) {
	d.t.Helper()
	ta := d.token(d.lc.cluster.Statement(resource, epoch, a))
	tb := d.token(d.lc.cluster.Statement(resource, epoch, b))
	f, err := protocol.NewFork(ta, tb)
	require.NoError(d.t, err)
	require.NoError(d.t, protocol.VerifyFork(d.lc.cluster, f))
	return ta, tb, f
}

// sendFork sends f to node 1 over ProtoFork as from.
func (d nodeDriver) sendFork(from peer.ID, f protocol.Fork) protocol.Ack {
	d.t.Helper()
	b, err := f.MarshalBinary()
	require.NoError(d.t, err)
	return d.ack(from, protocol.ProtoFork, b)
}

// forkFile returns the forks in the file at path, each verified.
func (d nodeDriver) forkFile(path string) []protocol.Fork {
	d.t.Helper()
	fs, err := parseForkFile(path)
	require.NoError(d.t, err)
	for _, f := range fs {
		require.NoError(d.t, protocol.VerifyFork(d.lc.cluster, f))
	}
	return fs
}

// forksCounted is MetricForks for source, as scraped.
func forksCounted(t testing.TB, n *Node, source string) float64 {
	t.Helper()
	v, ok := metricValue(t, n, MetricForks, "source", source)
	require.True(t, ok, "%s{source=%q} is exported", MetricForks, source)
	return v
}

// TestCommitOfForkRefused: node 1 holds a's token at epoch 5 as
// certified (a's lease). b's valid token at the same epoch is a fork: its
// Commit, from b or relayed by a member, is refused with CodeFork, starts
// no lease, and the fork is recorded once (file, count, metric) however
// often it is shown.
func TestCommitOfForkRefused(t *testing.T) {
	d, path := newForkDriver(t, Limits{})
	a, b := d.lc.everything, d.lc.ordersOnly
	ha, hb := limitsHolder(a.String()), limitsHolder(b.String())
	tokA, tokB, fork := d.forkOf("orders-1", 5, ha, hb)

	require.Equal(t, protocol.CodeOK, d.commit(a, tokA).Code)
	require.Equal(t, tokA, *d.record("orders-1").Certified)

	ack := d.commit(b, tokB)
	require.Equal(t, protocol.CodeFork, ack.Code)
	require.Contains(t, ack.Message, fork.ID())
	rec := d.record("orders-1")
	require.Equal(t, ha, rec.Lease.Holder, "a's lease stays; b gets none")
	require.Equal(t, tokA, *rec.Certified)

	// Shown again, by b or relayed by a member: refused, counted once.
	member2 := peerOf(t, d.lc.cluster.File.Nodes[1].PeerID)
	require.Equal(t, protocol.CodeFork, d.commit(b, tokB).Code)
	require.Equal(t, protocol.CodeFork, d.commitReq(member2, protocol.CommitRequest{Token: tokB}).Code)
	ack = d.sendFork(member2, fork)
	require.Equal(t, protocol.CodeOK, ack.Code)
	require.Contains(t, ack.Message, "already recorded")

	require.Equal(t, 1, d.n.Forks())
	require.Equal(t, uint64(1), d.n.LimitStats().ForksKept)
	require.Equal(t, uint64(0), d.n.LimitStats().ForkChecks, "a fork the node holds is not checked again")
	require.Equal(t, 1.0, forksCounted(t, d.n, ForkSourceCommit))
	require.Equal(t, 0.0, forksCounted(t, d.n, ForkSourceRelay))
	got := d.forkFile(path)
	require.Len(t, got, 1)
	require.True(t, got[0].Equal(fork))

	// a's own token still renews its lease (no fork in it).
	require.Equal(t, protocol.CodeOK, d.commit(a, tokA).Code)
}

// TestCommitRefusesLeaseFork: a's lease at epoch 1 was committed with the
// token node 1 voted for, unchecked (the session key's fast path), so the
// node holds no certified token to prove a fork with. b's valid token at
// epoch 1 still does not replace a's lease: refused with CodeFork.
func TestCommitRefusesLeaseFork(t *testing.T) {
	d, _ := newForkDriver(t, Limits{})
	a, b := d.lc.everything, d.lc.ordersOnly
	ha, hb := limitsHolder(a.String()), limitsHolder(b.String())
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, "orders-2", 1).Kind)
	tokA, tokB, _ := d.forkOf("orders-2", 1, ha, hb)
	require.Equal(t, protocol.CodeOK, d.commit(a, tokA).Code)
	require.Nil(t, d.record("orders-2").Certified, "the fast path records no certified token")

	require.Equal(t, protocol.CodeFork, d.commit(b, tokB).Code)
	rec := d.record("orders-2")
	require.Equal(t, ha, rec.Lease.Holder)
	require.True(t, rec.Lease.Committed)
	require.Zero(t, d.n.Forks(), "no proof held: nothing recorded yet")

	// Now the node holds b's token as certified: a's token, shown again,
	// is checked and proves the fork.
	require.Equal(t, protocol.CodeFork, d.commit(a, tokA).Code)
	require.Equal(t, 1, d.n.Forks())
}

// TestAcquireProofFork: an Acquire whose proof forks the certified token
// records the fork (and is otherwise served as before).
func TestAcquireProofFork(t *testing.T) {
	d, path := newForkDriver(t, Limits{})
	a, b := d.lc.everything, d.lc.ordersOnly
	ha, hb := limitsHolder(a.String()), limitsHolder(b.String())
	tokA, tokB, fork := d.forkOf("orders-3", 4, ha, hb)
	require.Equal(t, protocol.CodeOK, d.commit(a, tokA).Code)
	require.Equal(t, protocol.CodeOK, d.release(a, tokA).Code)

	req := protocol.AcquireRequest{Cluster: d.lc.cluster.ID, Resource: "orders-3", Epoch: 5, Key: keyOf(hb), TTL: 10 * time.Second, Proof: &tokB}
	r, err := protocol.UnmarshalAcquireReply(d.call(b, protocol.ProtoAcquire, req.Marshal()))
	require.NoError(t, err)
	require.Equal(t, protocol.KindVote, r.Kind)
	require.Equal(t, 1, d.n.Forks())
	require.Equal(t, 1.0, forksCounted(t, d.n, ForkSourceProof))
	got := d.forkFile(path)
	require.Len(t, got, 1)
	require.True(t, got[0].Equal(fork))
}

// TestForgedForkCostsBudget: a fork whose signature does not verify is
// refused, recorded nowhere, and charged to its sender's budget of failed
// checks; once the budget is spent the sender's forks are refused
// unchecked, while another peer's real fork is still checked and kept.
func TestForgedForkCostsBudget(t *testing.T) {
	d, path := newForkDriver(t, Limits{BadSigBurst: 2, BadSigRate: 1e-6})
	a, b := d.lc.everything, d.lc.ordersOnly
	ha, hb := limitsHolder(a.String()), limitsHolder(b.String())
	tokA, tokB, real := d.forkOf("orders-4", 3, ha, hb)
	forged, err := protocol.NewFork(tokA, d.forged(tokB))
	require.NoError(t, err)

	for i := 0; i < 2; i++ {
		ack := d.sendFork(b, forged)
		require.Equal(t, protocol.CodeBadRequest, ack.Code)
		require.Contains(t, ack.Message, "fork does not verify")
	}
	require.Equal(t, uint64(2), d.n.LimitStats().ForkChecks)
	ack := d.sendFork(b, forged)
	require.Equal(t, protocol.CodeBadRequest, ack.Code)
	require.Contains(t, ack.Message, "too many bad signatures")
	require.Equal(t, protocol.CodeBadRequest, d.sendFork(b, real).Code, "the sender's budget is spent")
	require.Equal(t, uint64(2), d.n.LimitStats().ForkChecks, "no check once the budget is spent")
	require.Zero(t, d.n.Forks())

	require.Equal(t, protocol.CodeOK, d.sendFork(a, real).Code)
	require.Equal(t, 1, d.n.Forks())
	require.Equal(t, 1.0, forksCounted(t, d.n, ForkSourceGossip))
	require.Len(t, d.forkFile(path), 1)

	// Not a fork at all, or of another cluster: refused before any check.
	b2, err := real.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, protocol.CodeBadRequest, d.ack(a, protocol.ProtoFork, b2[:len(b2)-1]).Code)
	require.Equal(t, uint64(3), d.n.LimitStats().ForkChecks)
}

// TestForkBounds: forks kept are bounded per resource and in all; those
// over a cap are acknowledged, not checked, not kept.
func TestForkBounds(t *testing.T) {
	d, path := newForkDriver(t, Limits{ForksPerResource: 1, Forks: 2})
	a := d.lc.everything
	h := func(s byte) protocol.Holder { return keyHolder(a.String(), s) }
	_, _, r1 := d.forkOf("orders-b1", 1, h(1), h(2))
	_, _, r1b := d.forkOf("orders-b1", 2, h(1), h(2))
	_, _, r2 := d.forkOf("orders-b2", 1, h(1), h(2))
	_, _, r3 := d.forkOf("orders-b3", 1, h(1), h(2))

	require.Equal(t, protocol.CodeOK, d.sendFork(a, r1).Code)
	ack := d.sendFork(a, r1b)
	require.Equal(t, protocol.CodeOK, ack.Code)
	require.Contains(t, ack.Message, "not kept")
	require.Equal(t, protocol.CodeOK, d.sendFork(a, r2).Code)
	require.Equal(t, protocol.CodeOK, d.sendFork(a, r3).Code)
	require.Contains(t, d.sendFork(a, r1).Message, "already recorded")

	st := d.n.LimitStats()
	require.Equal(t, uint64(2), st.ForkChecks)
	require.Equal(t, uint64(2), st.ForksKept)
	require.Equal(t, uint64(2), st.ForksDropped)
	require.Equal(t, 2, d.n.Forks())
	require.Len(t, d.forkFile(path), 2)
	recorded, ok := metricValue(t, d.n, MetricForksRecorded)
	require.True(t, ok)
	require.Equal(t, 2.0, recorded)

	// A node restarted on the same fork file has no more room.
	d2, _ := newForkDriver(t, Limits{ForksPerResource: 1, Forks: 2})
	prior, err := parseForkFile(path)
	require.NoError(t, err)
	d2.n.seedForks(prior)
	require.Equal(t, 2, d2.n.Forks())
}

// TestForkFile checks the fork file: each fork a line, read back and
// verified; a line that does not parse or verify is an error.
func TestForkFile(t *testing.T) {
	d, _ := newForkDriver(t, Limits{})
	dir := filepath.Join(t.TempDir(), "node1")
	require.NoError(t, WriteDir(dir, d.lc.cluster.File, d.lc.shares[0], d.lc.ids[0], nil))
	fs, err := ReadForks(dir)
	require.NoError(t, err)
	require.Empty(t, fs)

	a := d.lc.everything
	tokA, tokB, fork := d.forkOf("orders-f", 2, keyHolder(a.String(), 1), keyHolder(a.String(), 2))
	require.NoError(t, appendFork(filepath.Join(dir, ForkFileName), fork))
	fs, err = ReadForks(dir)
	require.NoError(t, err)
	require.Len(t, fs, 1)
	require.True(t, fs[0].Equal(fork))

	forged, err := protocol.NewFork(tokA, d.forged(tokB))
	require.NoError(t, err)
	require.NoError(t, appendFork(filepath.Join(dir, ForkFileName), forged))
	_, err = ReadForks(dir)
	require.ErrorIs(t, err, protocol.ErrBadFork)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ForkFileName), []byte(`{"a":"01"}`+"\n"), 0o644))
	_, err = ReadForks(dir)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "fork line 1"))
}

// TestForkGossip runs four members on loopback: a fork shown to node 1
// reaches the other three, each of which verifies and records it once,
// although every member passes it on to the others.
func TestForkGossip(t *testing.T) {
	lc := newLimitsCluster(t)
	ids := make([]peer.ID, len(lc.ids))
	for i, k := range lc.ids {
		id, err := peer.IDFromPrivateKey(k)
		require.NoError(t, err)
		ids[i] = id
	}
	nodes := make([]*Node, len(lc.ids))
	for i, k := range lc.ids {
		h, err := transport.NewHost(k, []string{"/ip4/127.0.0.1/tcp/0"}, transport.NewGater(append([]peer.ID{lc.everything}, ids...)...))
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[i]}, NewMemStore(), h, clockwork.NewRealClock())
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
	}
	for _, n := range nodes {
		for _, m := range nodes {
			if n != m {
				var addrs []string
				for _, a := range m.Host().Addrs() {
					addrs = append(addrs, a.String())
				}
				require.NoError(t, transport.AddPeer(n.Host(), m.Host().ID(), addrs))
			}
		}
	}
	d := nodeDriver{t: t, lc: lc, n: nodes[0]}
	a := lc.everything
	_, _, fork := d.forkOf("orders-g", 7, keyHolder(a.String(), 1), keyHolder(a.String(), 2))
	require.Equal(t, protocol.CodeOK, d.sendFork(a, fork).Code)

	// Gossip runs over real streams: wait (bounded) for it to settle.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range nodes {
		for n.Forks() < 1 {
			select {
			case <-ctx.Done():
				t.Fatalf("node %d never recorded the fork", n.Index())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	// Closing waits for every node's gossip calls to end; then the counts
	// are final.
	for _, n := range nodes {
		require.NoError(t, n.Close())
	}
	for i, n := range nodes {
		st := n.LimitStats()
		require.Equal(t, uint64(1), st.ForksKept, "node %d", i+1)
		require.Equal(t, 1, n.Forks(), "node %d", i+1)
		require.Equal(t, 1.0, forksCounted(t, n, ForkSourceGossip), "node %d", i+1)
		require.LessOrEqual(t, st.ForkChecks, uint64(len(nodes)-1), "node %d: each fork is checked at most once per sender", i+1)
	}
}
