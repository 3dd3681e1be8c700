package node

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// withClient returns a copy of the cluster whose client list also has a
// client named name with identity id and patterns.
func withClient(t testing.TB, c *protocol.Cluster, name string, id peer.ID, patterns ...string) *protocol.Cluster {
	t.Helper()
	f := c.File
	f.Clients = append(append([]protocol.ClientInfo(nil), f.Clients...), protocol.ClientInfo{Name: name, PeerID: id.String(), Resources: patterns})
	out, err := protocol.NewCluster(f)
	require.NoError(t, err)
	return out
}

// acquireReply sends an Acquire for resource at epoch from peer through
// the node's guard, as the stream handler does.
func acquireReply(t testing.TB, n *Node, lc *limitsCluster, from peer.ID, resource string, epoch uint64, session byte) protocol.AcquireReply {
	t.Helper()
	req := protocol.AcquireRequest{Cluster: lc.cluster.ID, Resource: resource, Epoch: epoch, Key: testKey(session), TTL: time.Minute}
	b, err := n.serve(context.Background(), protocol.ProtoAcquire, from, req.Marshal())
	require.NoError(t, err)
	r, err := protocol.UnmarshalAcquireReply(b)
	require.NoError(t, err)
	return r
}

// TestSetClientsSwapsUnderLoad swaps the client list back and forth while
// requests read it (run with -race): every request sees the old list or
// the new one, and once the swaps stop, the last list decides.
func TestSetClientsSwapsUnderLoad(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, NewMemStore(), Limits{}, "")
	newbie := lc.stranger
	without := lc.cluster
	with := withClient(t, lc.cluster, "newbie", newbie, "jobs/*")

	// Before: the stranger is refused as unauthorised.
	r := acquireReply(t, n, lc, newbie, "jobs/a", 1, 1)
	require.Equal(t, protocol.KindRefuse, r.Kind)
	require.Equal(t, protocol.CodeUnauthorised, r.Code)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				// A request on a fresh resource each time: the reply is a
				// vote (list with newbie) or unauthorised (without).
				req := protocol.AcquireRequest{Cluster: lc.cluster.ID, Resource: "jobs/g" + string(rune('a'+g)) + "-" + strconv.Itoa(i), Epoch: 1, Key: testKey(byte(g + 1)), TTL: time.Second}
				b, err := n.serve(ctx, protocol.ProtoAcquire, newbie, req.Marshal())
				if err != nil {
					t.Errorf("serve: %v", err)
					return
				}
				rep, err := protocol.UnmarshalAcquireReply(b)
				if err != nil {
					t.Errorf("reply: %v", err)
					return
				}
				if rep.Kind != protocol.KindVote && rep.Code != protocol.CodeUnauthorised {
					t.Errorf("reply %v %v: %s", rep.Kind, rep.Code, rep.Message)
					return
				}
				_ = n.Clients()
				_ = n.mayAccess(newbie, "jobs/x")
			}
		}()
	}
	for i := 0; i < 200; i++ {
		c := without
		if i%2 == 0 {
			c = with
		}
		_, _, err := n.SetClients(c)
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()

	// The last swap installed the list without newbie.
	r = acquireReply(t, n, lc, newbie, "jobs/after", 1, 9)
	require.Equal(t, protocol.CodeUnauthorised, r.Code)
	added, removed, err := n.SetClients(with)
	require.NoError(t, err)
	require.Len(t, added, 1)
	require.Empty(t, removed)
	require.Equal(t, "newbie", added[0].Name)
	r = acquireReply(t, n, lc, newbie, "jobs/after", 1, 9)
	require.Equal(t, protocol.KindVote, r.Kind, r.Message)
	// Its patterns apply: another resource is refused.
	r = acquireReply(t, n, lc, newbie, "orders-1", 1, 9)
	require.Equal(t, protocol.CodeUnauthorised, r.Code)
	require.Len(t, n.Clients(), 3)
}

// TestSetClientsRefusesAnotherCluster: a cluster file with another group
// key, other members or another epoch floor is refused, and the node
// keeps its client list.
func TestSetClientsRefusesAnotherCluster(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, NewMemStore(), Limits{}, "")
	before := n.Clients()

	otherKey := func() *protocol.Cluster {
		gk, _, err := crypto.Deal(rand.New(rand.NewSource(99)), 4, 3)
		require.NoError(t, err)
		f := protocol.NewClusterFile(lc.cluster.File.Name, gk, lc.cluster.File.Nodes, append(lc.cluster.File.Clients, protocol.ClientInfo{Name: "x", PeerID: lc.stranger.String(), Resources: []string{"*"}}))
		c, err := protocol.NewCluster(f)
		require.NoError(t, err)
		return c
	}()
	otherMembers := func() *protocol.Cluster {
		f := lc.cluster.File
		f.Nodes = append([]protocol.NodeInfo(nil), f.Nodes...)
		f.Nodes[3].Addrs = []string{"/ip4/127.0.0.1/tcp/9999"}
		c, err := protocol.NewCluster(f)
		require.NoError(t, err)
		return c
	}()
	otherFloor := func() *protocol.Cluster {
		f := lc.cluster.File
		f.EpochFloor = 1 << protocol.EraBits
		c, err := protocol.NewCluster(f)
		require.NoError(t, err)
		return c
	}()
	for _, c := range []struct {
		name    string
		cluster *protocol.Cluster
		want    string
	}{
		{"group key", otherKey, "group key"},
		{"members", otherMembers, "members"},
		{"epoch floor", otherFloor, "epoch_floor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := n.SetClients(c.cluster)
			require.ErrorIs(t, err, ErrClusterMismatch)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, before, n.Clients())
		})
	}
	r := acquireReply(t, n, lc, lc.stranger, "orders-1", 1, 1)
	require.Equal(t, protocol.CodeUnauthorised, r.Code, "the refused file's client was not admitted")
}

// metricValue returns the value of the sample of family name whose labels
// include labels (pairs of name, value); ok is false if there is none.
func metricValue(t testing.TB, n *Node, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := n.MetricsRegistry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue samples
				}
			}
			return sampleValue(f.GetType(), m), true
		}
	}
	return 0, false
}

func sampleValue(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// TestDecisionMetrics drives one node through a vote, a busy answer, two
// kinds of refusal and a renewal, and reads each count back from its own
// registry.
func TestDecisionMetrics(t *testing.T) {
	lc := newLimitsCluster(t)
	store, err := OpenBoltStore(filepath.Join(t.TempDir(), StoreFileName))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	n := lc.startNode1(t, store, Limits{}, "")
	value := func(name string, labels ...string) float64 {
		v, _ := metricValue(t, n, name, labels...)
		return v
	}
	require.Zero(t, value(MetricVotes))

	require.Equal(t, protocol.KindVote, acquireReply(t, n, lc, lc.everything, "orders-1", 1, 1).Kind)
	require.Equal(t, protocol.KindVote, acquireReply(t, n, lc, lc.everything, "orders-1", 1, 1).Kind, "re-sent: the same vote")
	require.Equal(t, protocol.KindBusy, acquireReply(t, n, lc, lc.ordersOnly, "orders-1", 2, 2).Kind)
	require.Equal(t, protocol.CodeUnauthorised, acquireReply(t, n, lc, lc.ordersOnly, "payroll", 1, 2).Code)
	require.Equal(t, protocol.CodeUnauthorised, acquireReply(t, n, lc, lc.stranger, "orders-2", 1, 2).Code)
	require.Equal(t, protocol.KindVote, acquireReply(t, n, lc, lc.ordersOnly, "orders-2", 5, 2).Kind)
	require.Equal(t, protocol.CodeStale, acquireReply(t, n, lc, lc.everything, "orders-2", 3, 1).Code)

	require.EqualValues(t, 2, value(MetricVotes), "two votes cast; the re-sent one is not a new vote")
	require.EqualValues(t, 2, value(MetricAuditEntries, "kind", "vote"))
	require.EqualValues(t, 1, value(MetricBusy))
	require.EqualValues(t, 2, value(MetricRefusals, "request", "acquire", "code", protocol.CodeUnauthorised.String()))
	require.EqualValues(t, 1, value(MetricRefusals, "request", "acquire", "code", protocol.CodeStale.String()))
	require.GreaterOrEqual(t, value(MetricStoreCommit), 1.0, "each vote's save is a committed transaction")
	require.EqualValues(t, value(MetricStoreCommit), value(MetricStoreBatch))
	require.Zero(t, value(MetricLeasesLive), "votes are not leases")

	// A renewal of a lease this node does not have is refused.
	b, err := n.serve(context.Background(), protocol.ProtoRenew, lc.everything,
		protocol.RenewRequest{Cluster: lc.cluster.ID, Resource: "orders-1", Epoch: 1, Key: testKey(1), TTL: time.Minute}.Marshal())
	require.NoError(t, err)
	a, err := protocol.UnmarshalAck(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeNoLease, a.Code)
	require.EqualValues(t, 1, value(MetricRefusals, "request", "renew", "code", protocol.CodeNoLease.String()))
	require.EqualValues(t, 2, value(MetricClients))
	require.EqualValues(t, 4, value(MetricMembers))
	require.EqualValues(t, 3, value(MetricThreshold))
	require.EqualValues(t, 1, value(MetricMembersReachable), "no probes run: only itself")
	v, ok := metricValue(t, n, MetricBuildInfo)
	require.True(t, ok)
	require.EqualValues(t, 1, v)
}

// TestLeaseBookBounded: lapsed leases are forgotten when counted, and the
// book prunes itself as it grows.
func TestLeaseBookBounded(t *testing.T) {
	var b leaseBook
	now := time.Unix(1000, 0)
	h := protocol.Holder{ID: "c", Session: protocol.SessionID{1}}
	for i := 0; i < 10*leaseBookMin; i++ {
		rec := Record{Resource: "r" + strconv.Itoa(i), Lease: Lease{Holder: h, Epoch: 1, Expires: now.Add(time.Second), Committed: true}}
		b.note(rec, now.Add(time.Duration(i)*time.Second)) // each lapses before the next
	}
	require.LessOrEqual(t, len(b.expires), 2*leaseBookMin)
	live := Record{Resource: "live", Lease: Lease{Holder: h, Epoch: 1, Expires: now.Add(time.Hour), Committed: true}}
	b.note(live, now)
	require.Equal(t, 1, b.live(now.Add(time.Minute)), "only the live lease is left")
	b.note(Record{Resource: "live"}, now) // released
	require.Zero(t, b.live(now))
}

// TestReadAudit reads a stopped node's audit log, finds a gap in the
// middle and one at the end, and refuses politely while the store is held
// open by another store.
func TestReadAudit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFileName)
	s, err := OpenBoltStore(path)
	require.NoError(t, err)
	ctx := context.Background()
	for e := uint64(1); e <= 5; e++ {
		require.NoError(t, s.Save(ctx, Record{Resource: "r", LastEpoch: e}, AuditEntry{Kind: AuditVote, Resource: "r", Epoch: e}))
	}

	// Held open: a clear error, not a bare timeout.
	start := time.Now()
	_, err = ReadAudit(dir, func(AuditEntry) error { return nil })
	require.ErrorIs(t, err, ErrStoreLocked)
	require.ErrorContains(t, err, "stop the node")
	require.Less(t, time.Since(start), 10*time.Second)
	require.NoError(t, s.Close())

	var seqs []uint64
	sum, err := ReadAudit(dir, func(e AuditEntry) error { seqs = append(seqs, e.Seq); return nil })
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, seqs)
	require.EqualValues(t, 5, sum.Sequence)

	// Remove entries 2 and 5: a gap inside, and one at the end.
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(boltBucketAudit)
		return errors.Join(b.Delete(seqKey(2)), b.Delete(seqKey(5)))
	}))
	require.NoError(t, db.Close())
	seqs = nil
	sum, err = ReadAudit(dir, func(e AuditEntry) error { seqs = append(seqs, e.Seq); return nil })
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 3, 4}, seqs)
	require.ErrorIs(t, sum.Err(), ErrAuditBroken)
	require.Equal(t, []string{"gap: entry 2 is missing", "gap: entry 5 is missing (at the end)"}, sum.Problems)

	// No store at all.
	_, err = ReadAudit(t.TempDir(), func(AuditEntry) error { return nil })
	require.Error(t, err)
}

// TestReadyNeedsProbes: a node that runs no probes is alive but not ready;
// a closed node is neither.
func TestReadyNeedsProbes(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, NewMemStore(), Limits{}, "")
	err := n.Ready(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	require.ErrorContains(t, err, "probes are not running")
	require.Error(t, n.StartProbing(0, time.Second))
	// Its members are not there: probes fail at once (no addresses).
	require.NoError(t, n.StartProbing(time.Hour, time.Second))
	require.Eventually(t, func() bool {
		for _, m := range n.Reachability().Members {
			if !m.Self && !m.Probed {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	err = n.Ready(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	require.ErrorContains(t, err, "1 of 4 members reachable, need t=3")
	require.NoError(t, n.Close())
	require.ErrorIs(t, n.Ready(context.Background()), ErrClosed)
	require.Zero(t, n.Reachability().Reachable)
}

// TestReloadCluster: a running node re-reads its directory's cluster.json:
// an added client may connect and acquire, a removed one may not, and a
// file with another group key is refused with the old list kept. Each
// outcome is counted.
func TestReloadCluster(t *testing.T) {
	lc := newLimitsCluster(t)
	d := lc.loadDir1(t)
	r, err := d.Start(clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	path := filepath.Join(d.Path, ClusterFileName)
	reloads := func(result string) float64 {
		v, _ := metricValue(t, r.Node, MetricReloads, "result", result)
		return v
	}
	require.False(t, r.gater.Allowed(lc.stranger))

	with := withClient(t, lc.cluster, "newbie", lc.stranger, "jobs/*")
	require.NoError(t, with.File.Save(path))
	rep, err := r.ReloadCluster()
	require.NoError(t, err)
	require.Equal(t, 3, rep.Clients)
	require.Len(t, rep.Added, 1)
	require.True(t, r.gater.Allowed(lc.stranger), "the new client may connect")
	require.True(t, r.mayAcquire(lc.stranger, "jobs/1"))
	require.EqualValues(t, 1, reloads("applied"))

	gk, _, err := crypto.Deal(rand.New(rand.NewSource(7)), 4, 3)
	require.NoError(t, err)
	other := protocol.NewClusterFile(lc.cluster.File.Name, gk, lc.cluster.File.Nodes, nil)
	require.NoError(t, other.Save(path))
	_, err = r.ReloadCluster()
	require.ErrorIs(t, err, ErrClusterMismatch)
	require.ErrorContains(t, err, "group key")
	require.True(t, r.mayAcquire(lc.stranger, "jobs/1"), "old configuration kept")
	require.EqualValues(t, 1, reloads("refused"))

	require.NoError(t, lc.cluster.File.Save(path)) // newbie removed again
	rep, err = r.ReloadCluster()
	require.NoError(t, err)
	require.Len(t, rep.Removed, 1)
	require.False(t, r.gater.Allowed(lc.stranger))
	require.False(t, r.mayAcquire(lc.stranger, "jobs/1"))
	require.EqualValues(t, 2, reloads("applied"))

	require.NoError(t, os.WriteFile(path, []byte("{"), 0o644))
	_, err = r.ReloadCluster()
	require.ErrorIs(t, err, protocol.ErrBadClusterFile)
	require.EqualValues(t, 2, reloads("refused"))
}
