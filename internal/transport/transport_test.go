package transport

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/stretchr/testify/require"

	pproto "github.com/palisade-dev/palisade/protocol"
)

// TestRedialsRestartedPeerAtOnce stops a server, lets the client's dial
// to it fail, and starts it again on the same address: the next dial goes
// through at once. With libp2p's default backoff (5 s after a failure) it
// was refused with swarm.ErrDialBackoff.
func TestRedialsRestartedPeerAtOnce(t *testing.T) {
	sk, ck, sid, cid := testPair(t, 11)

	server, err := NewHost(sk, []string{"/ip4/127.0.0.1/tcp/0"}, NewGater(cid))
	require.NoError(t, err)
	addr := server.Addrs()[0].String()
	require.NoError(t, server.Close())

	client, err := NewHost(ck, nil, NewGater(sid))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, AddPeer(client, sid, []string{addr}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = Call(ctx, client, sid, echoProto, []byte("x"), pproto.MaxFrameSize)
	require.Error(t, err, "the server is down")

	server, err = NewHost(sk, []string{addr}, NewGater(cid))
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Close() })
	e := &echoServer{h: server}
	server.SetStreamHandler(echoProto, e.handle)

	_, err = client.Network().DialPeer(ctx, sid)
	require.NoError(t, err, "no dial backoff")
	require.Zero(t, swarm.BackoffBase)
	reply, err := Call(ctx, client, sid, echoProto, []byte("x"), pproto.MaxFrameSize)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), reply)
}
