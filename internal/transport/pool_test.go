package transport

import (
	"context"
	"errors"
	"io"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	pproto "github.com/palisade-dev/palisade/protocol"
)

const echoProto = "/palisade-test/echo/1.0.0"

// echoServer answers every frame on a stream with the same frame, as a
// node answers requests, and counts the streams it was opened.
type echoServer struct {
	h       host.Host
	streams atomic.Int32
	// closeAfter, if set, makes the server close each stream after that
	// many replies (as a node closes an idle stream).
	closeAfter int
}

// testPair is a server and a client identity drawn from seed.
func testPair(t testing.TB, seed int64) (sk, ck crypto.PrivKey, sid, cid peer.ID) {
	t.Helper()
	rnd := rand.New(rand.NewSource(seed))
	var err error
	sk, err = GenerateIdentity(rnd)
	require.NoError(t, err)
	ck, err = GenerateIdentity(rnd)
	require.NoError(t, err)
	sid, err = peer.IDFromPrivateKey(sk)
	require.NoError(t, err)
	cid, err = peer.IDFromPrivateKey(ck)
	require.NoError(t, err)
	return sk, ck, sid, cid
}

func newHosts(t testing.TB) (server, client host.Host) {
	t.Helper()
	sk, ck, sid, cid := testPair(t, 7)
	var err error
	server, err = NewHost(sk, []string{"/ip4/127.0.0.1/tcp/0"}, NewGater(cid))
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Close() })
	client, err = NewHost(ck, nil, NewGater(sid))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	var addrs []string
	for _, a := range server.Addrs() {
		addrs = append(addrs, a.String())
	}
	require.NoError(t, AddPeer(client, sid, addrs))
	return server, client
}

func (e *echoServer) handle(s network.Stream) {
	e.streams.Add(1)
	for n := 1; ; n++ {
		b, err := pproto.ReadFrame(s, pproto.MaxFrameSize)
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = s.Close()
			} else {
				_ = s.Reset()
			}
			return
		}
		if err := pproto.WriteFrame(s, b); err != nil {
			_ = s.Reset()
			return
		}
		if e.closeAfter > 0 && n == e.closeAfter {
			_ = s.Close()
			return
		}
	}
}

// poolFixture is an echo server (closing each stream after closeAfter
// replies, if set) and a pool of maxIdle streams to it.
func poolFixture(t testing.TB, closeAfter, maxIdle int) (context.Context, host.Host, *echoServer, *Pool) {
	t.Helper()
	server, client := newHosts(t)
	e := &echoServer{h: server, closeAfter: closeAfter}
	server.SetStreamHandler(echoProto, e.handle)
	pl := NewPool(client, maxIdle)
	t.Cleanup(pl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, server, e, pl
}

// TestPoolReusesStreams: sequential calls share one stream; concurrent
// calls use several and keep at most maxIdle of them.
func TestPoolReusesStreams(t *testing.T) {
	ctx, server, e, pl := poolFixture(t, 0, 2)
	for i := range 5 {
		msg := []byte{byte(i)}
		b, err := pl.Call(ctx, server.ID(), echoProto, msg, 16)
		require.NoError(t, err)
		require.Equal(t, msg, b)
	}
	require.EqualValues(t, 1, e.streams.Load(), "five sequential calls on one stream")

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := []byte{byte(i), 'c'}
			b, err := pl.Call(ctx, server.ID(), echoProto, msg, 16)
			if err != nil || string(b) != string(msg) {
				t.Errorf("call %d: %q, %v", i, b, err)
			}
		}()
	}
	wg.Wait()
	pl.mu.Lock()
	idle := len(pl.idle[poolKey{server.ID(), echoProto}])
	pl.mu.Unlock()
	require.LessOrEqual(t, idle, 2, "idle streams kept")
}

// TestPoolRetriesClosedStream: a stream the server closed while it sat
// idle costs the next call nothing but a fresh stream.
func TestPoolRetriesClosedStream(t *testing.T) {
	ctx, server, e, pl := poolFixture(t, 1, 4)
	for i := range 3 {
		b, err := pl.Call(ctx, server.ID(), echoProto, []byte{byte(i)}, 16)
		require.NoError(t, err, "call %d", i)
		require.Equal(t, []byte{byte(i)}, b)
	}
	require.EqualValues(t, 3, e.streams.Load(), "each call after the first found its stream closed and opened another")

	pl.Close()
	_, err := pl.Call(ctx, server.ID(), echoProto, []byte{1}, 16)
	require.ErrorIs(t, err, ErrPoolClosed)
}

// TestPoolReplyCap: a reply over the caller's cap fails the call.
func TestPoolReplyCap(t *testing.T) {
	ctx, server, _, pl := poolFixture(t, 0, 4)
	_, err := pl.Call(ctx, server.ID(), echoProto, make([]byte, 64), 16)
	require.ErrorIs(t, err, pproto.ErrFrameTooLarge)
}
