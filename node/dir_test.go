package node

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	lp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// TestRunningBlockUnblock: a member admitted by the cluster file gets a
// Status answer from a node started from its directory; once the node
// blocks it, its streams fail; after Unblock it is answered again.
func TestRunningBlockUnblock(t *testing.T) {
	lc := newLimitsCluster(t)
	r, err := lc.loadDir1(t).Start(clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	member := peerOf(t, lc.cluster.File.Nodes[1].PeerID)
	h, err := transport.NewHost(lc.ids[1], nil, transport.NewGater(r.Host().ID()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.Peerstore().AddAddrs(r.Host().ID(), r.Host().Addrs(), time.Hour)

	status := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := h.NewStream(ctx, r.Host().ID(), lp2pproto.ID(protocol.ProtoStatus))
		if err != nil {
			return err
		}
		defer func() { _ = s.Reset() }()
		if err := protocol.WriteFrame(s, protocol.StatusRequest{Resource: "orders-1"}.Marshal()); err != nil {
			return err
		}
		if err := s.CloseWrite(); err != nil {
			return err
		}
		b, err := protocol.ReadFrame(s, protocol.MaxFrameSize)
		if err != nil {
			return err
		}
		_, err = protocol.UnmarshalStatusReply(b)
		return err
	}
	drop := func(p peer.ID) {
		require.NoError(t, h.Network().ClosePeer(p))
		require.NoError(t, r.Host().Network().ClosePeer(member))
	}

	require.NoError(t, status(), "an admitted member")
	r.Block(member)
	drop(r.Host().ID())
	require.Error(t, status(), "a blocked member")
	r.Unblock(member)
	require.NoError(t, status(), "unblocked")
}
