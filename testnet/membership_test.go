package testnet

import (
	"context"
	mrand "math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// TestFloodDoesNotStarveOtherClient: client 2 opens 150 streams per node
// that never finish their request (holding every stream it is allowed);
// the nodes bound its open streams (96 per peer, node.Config's default
// MaxStreamsPerPeer) and reset the rest, and client 1 still acquires
// promptly.
func TestFloodDoesNotStarveOtherClient(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	var ids []peer.ID
	for _, m := range nw.Members {
		ids = append(ids, m.PeerID)
	}
	h, err := transport.NewHost(nw.Keys.Clients[1], nil, transport.NewGater(ids...))
	require.NoError(t, err)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var refused, held atomic.Int64
	var wg sync.WaitGroup
	for _, m := range nw.Members {
		require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
		for k := 0; k < 150; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := h.NewStream(ctx, m.PeerID, protocol.ProtoAcquire)
				if err != nil {
					refused.Add(1)
					return
				}
				defer s.Reset()
				stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
				defer stop()
				// Announce a frame and never send it: the node waits for it.
				if _, err := s.Write([]byte{0x40}); err != nil {
					refused.Add(1)
					return
				}
				buf := make([]byte, 1)
				if _, err := s.Read(buf); err != nil && ctx.Err() == nil {
					refused.Add(1) // reset by the node: over its per-peer bound
					return
				}
				held.Add(1)
			}()
		}
	}
	// Let the flood take its slots, then acquire as the other client.
	require.Eventually(t, func() bool { return refused.Load() >= 4*(150-96) }, 10*time.Second, 10*time.Millisecond,
		"nodes must reset the flood beyond 96 open streams per peer (refused %d)", refused.Load())
	c := newClient(t, nw, 0, client.Config{RequestTimeout: 2 * time.Second})
	start := time.Now()
	l, err := c.TryAcquire(ctx, "res")
	require.NoError(t, err)
	t.Logf("acquired in %v during the flood; %d flood streams refused", time.Since(start), refused.Load())
	require.NoError(t, l.Release(ctx))
	cancel()
	wg.Wait()
}

// TestWrongClusterRefused: a request or token for another cluster is
// refused by nodes and clients alike, even with a valid signature there.
func TestWrongClusterRefused(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	other := startNet(t, 4, 1, Options{Keygen: KeygenOptions{Name: "other", Rand: mrand.New(mrand.NewSource(7))}})
	ctx := context.Background()
	oc := newClient(t, other, 0, client.Config{})
	l, err := oc.TryAcquire(ctx, "res")
	require.NoError(t, err)
	foreign := l.Token()
	require.NoError(t, other.Keys.Cluster.Key.Verify(foreign.SignedBytes(), foreign.Signature))
	require.Error(t, nw.Keys.Cluster.Key.Verify(foreign.SignedBytes(), foreign.Signature))

	// Our nodes refuse to commit it, or to take it as proof.
	m := nw.Member(1)
	h, err := transport.NewHost(nw.Keys.Clients[0], nil, transport.NewGater(m.PeerID))
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := transport.Call(cctx, h, m.PeerID, protocol.ProtoCommit, protocol.CommitRequest{Token: foreign, TTL: time.Second}.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	a, err := protocol.UnmarshalAck(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeBadRequest, a.Code)

	req := protocol.AcquireRequest{Cluster: foreign.Cluster, Resource: "res", Epoch: 1, Key: directKey(0), TTL: time.Second}
	b, err = transport.Call(cctx, h, m.PeerID, protocol.ProtoAcquire, req.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	r, err := protocol.UnmarshalAcquireReply(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeWrongCluster, r.Code)

	req = protocol.AcquireRequest{Cluster: nw.Keys.Cluster.ID, Resource: "res", Epoch: 1, Key: directKey(0), TTL: time.Second, Proof: &foreign}
	b, err = transport.Call(cctx, h, m.PeerID, protocol.ProtoAcquire, req.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	r, err = protocol.UnmarshalAcquireReply(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeBadRequest, r.Code)
	require.NoError(t, l.Release(ctx))
}
