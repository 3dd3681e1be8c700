package node

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// limitsCluster is a 4-node cluster file with its secrets, for tests that
// run node 1 alone and call its handlers directly (no transport).
type limitsCluster struct {
	cluster *protocol.Cluster
	shares  []*crypto.Share
	ids     []lcrypto.PrivKey // node identities, index i-1
	// everything may touch any resource; ordersOnly only "orders-*".
	everything, ordersOnly peer.ID
	stranger               peer.ID // not in the cluster file
}

func newLimitsCluster(t testing.TB) *limitsCluster {
	t.Helper()
	rnd := rand.New(rand.NewSource(1))
	const n = 4
	_, th := crypto.FaultThreshold(n)
	gk, shares, err := crypto.Deal(rnd, n, th)
	require.NoError(t, err)
	lc := &limitsCluster{shares: shares}
	var nodes []protocol.NodeInfo
	for i := 0; i < n; i++ {
		k, err := transport.GenerateIdentity(rnd)
		require.NoError(t, err)
		pid, err := peer.IDFromPrivateKey(k)
		require.NoError(t, err)
		lc.ids = append(lc.ids, k)
		nodes = append(nodes, protocol.NodeInfo{Index: i + 1, PeerID: pid.String(), Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 1+i)}})
	}
	peerOf := func() peer.ID {
		k, err := transport.GenerateIdentity(rnd)
		require.NoError(t, err)
		pid, err := peer.IDFromPrivateKey(k)
		require.NoError(t, err)
		return pid
	}
	lc.everything, lc.ordersOnly, lc.stranger = peerOf(), peerOf(), peerOf()
	clients := []protocol.ClientInfo{
		{Name: "all", PeerID: lc.everything.String(), Resources: []string{"*"}},
		{Name: "orders", PeerID: lc.ordersOnly.String(), Resources: []string{"orders-*"}},
	}
	lc.cluster, err = protocol.NewCluster(protocol.NewClusterFile("limits-test", gk, nodes, clients))
	require.NoError(t, err)
	return lc
}

// startNode1 runs node 1 on a host without listen addresses. Evidence it
// keeps is appended to evidencePath (if set) as Dir.Start does.
func (lc *limitsCluster) startNode1(t testing.TB, store VoteStore, limits Limits, evidencePath string) *Node {
	t.Helper()
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	cfg := Config{Cluster: lc.cluster, Share: lc.shares[0], Limits: limits}
	if evidencePath != "" {
		cfg.OnEvidence = func(ev protocol.Evidence) {
			if err := appendEvidence(evidencePath, ev); err != nil {
				t.Errorf("append evidence: %v", err)
			}
		}
	}
	n, err := New(cfg, store, h, clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// loadDir1 writes node 1's directory, listening on a loopback port, and
// loads it.
func (lc *limitsCluster) loadDir1(t testing.TB) *Dir {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node1")
	require.NoError(t, WriteDir(dir, lc.cluster.File, lc.shares[0], lc.ids[0], []string{"/ip4/127.0.0.1/tcp/0"}))
	d, err := LoadDir(dir)
	require.NoError(t, err)
	return d
}

// serve calls the node's handler for proto as the stream handler does,
// through the per-peer guard.
func (n *Node) serve(ctx context.Context, proto string, from peer.ID, req []byte) ([]byte, error) {
	return n.handlers()[proto](ctx, from, req)
}

// cacheLen is the number of records the node keeps in memory.
func (n *Node) cacheLen() int { return n.LimitStats().CachedRecords }

// evidenceChecks is how many pieces of evidence had their signatures
// checked.
func (n *Node) evidenceChecks() uint64 { return n.LimitStats().EvidenceChecks }

func peerOf(t testing.TB, s string) peer.ID {
	t.Helper()
	id, err := peer.Decode(s)
	require.NoError(t, err)
	return id
}

// limitsHolder is a lock session of identity id: the one of key 7.
func limitsHolder(id string) protocol.Holder { return keyHolder(id, 7) }

// testKey is the session key numbered b.
func testKey(b byte) protocol.SessionKey { return protocol.SessionKey{0: b, 31: 0xa5} }

// keyHolder is the lock session of identity id that key b owns.
func keyHolder(id string, b byte) protocol.Holder {
	return protocol.Holder{ID: id, Session: testKey(b).Session()}
}

// keyOf returns the test key (testKey) that owns h's session, the zero key
// if none does.
func keyOf(h protocol.Holder) protocol.SessionKey {
	for b := 0; b < 256; b++ {
		if k := testKey(byte(b)); k.Session() == h.Session {
			return k
		}
	}
	return protocol.SessionKey{}
}
