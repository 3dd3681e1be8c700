package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	pproto "github.com/palisade-dev/palisade/protocol"
)

// Stream reuse. Opening a libp2p stream costs a multistream negotiation
// and a handler goroutine on the far side: FACTS.md measured a loopback
// round trip at 168 µs on a new stream and 34 µs on a reused one. A Pool
// keeps the streams of finished calls open, per (peer, protocol), and the
// next call to the same peer and protocol sends its frame on one of them.
// Nodes answer any number of request frames on one stream, one at a time
// (see node's handler), so a stream carries one call at a time and
// concurrent calls use several streams.
//
// Every Palisade request is idempotent (a re-sent Acquire gets the same
// vote back, Commit, Renew, Release and Abandon state an outcome), so a
// call that fails on a reused stream, which the node may have closed while
// it sat idle, is retried once on a fresh stream.

// Pool defaults.
const (
	// DefaultMaxIdle is how many idle streams a Pool keeps per peer and
	// protocol.
	DefaultMaxIdle = 16
	// DefaultIdleTimeout is how long a Pool keeps an idle stream. It is
	// below the nodes' StreamIdleTimeout, so a pooled stream is rarely
	// one the node has already closed.
	DefaultIdleTimeout = 30 * time.Second
	// StreamIdleTimeout is how long a node waits for the next request
	// frame on a stream before closing it.
	StreamIdleTimeout = time.Minute
)

// ErrPoolClosed is returned by calls on a closed Pool.
var ErrPoolClosed = errors.New("transport: stream pool closed")

type poolKey struct {
	peer  peer.ID
	proto string
}

type idleStream struct {
	s     network.Stream
	since time.Time
}

// Pool makes request/reply calls over reused streams of one host.
type Pool struct {
	h           host.Host
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   map[poolKey][]idleStream // most recently used last
	closed bool
}

// NewPool returns a pool of h's streams keeping at most maxIdle idle
// streams per peer and protocol (DefaultMaxIdle if maxIdle <= 0), each for
// at most DefaultIdleTimeout.
func NewPool(h host.Host, maxIdle int) *Pool {
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdle
	}
	return &Pool{h: h, maxIdle: maxIdle, idleTimeout: DefaultIdleTimeout, idle: map[poolKey][]idleStream{}}
}

// Call sends req on a stream of proto to p and reads one reply frame of at
// most maxReply bytes, all within ctx, like the package-level Call, but on
// a pooled stream when one is idle.
func (pl *Pool) Call(ctx context.Context, p peer.ID, proto string, req []byte, maxReply int) ([]byte, error) {
	k := poolKey{p, proto}
	if s := pl.take(k); s != nil {
		reply, err := exchange(ctx, s, proto, req, maxReply)
		if err == nil || errors.Is(err, errNoReuse) {
			pl.done(k, s, err)
			return reply, nil
		}
		_ = s.Reset()
		if ctx.Err() != nil {
			return nil, err
		}
		// The node may have closed the idle stream: once more, fresh.
	}
	s, err := pl.open(ctx, p, proto)
	if err != nil {
		return nil, err
	}
	reply, err := exchange(ctx, s, proto, req, maxReply)
	if err != nil && !errors.Is(err, errNoReuse) {
		_ = s.Reset()
		return nil, err
	}
	pl.done(k, s, err)
	return reply, nil
}

// done ends a successful call on s: back to the pool, or closed if
// exchange said it must not be reused.
func (pl *Pool) done(k poolKey, s network.Stream, err error) {
	if err != nil {
		_ = s.Close()
		return
	}
	pl.put(k, s)
}

// Close resets every idle stream; later calls fail with ErrPoolClosed.
func (pl *Pool) Close() {
	pl.mu.Lock()
	idle := pl.idle
	pl.idle, pl.closed = nil, true
	pl.mu.Unlock()
	for _, ss := range idle {
		for _, is := range ss {
			_ = is.s.Reset()
		}
	}
}

// take returns the most recently used idle stream of k, or nil; streams
// idle longer than the idle timeout are closed on the way.
func (pl *Pool) take(k poolKey) network.Stream {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ss := pl.idle[k]
	now := time.Now()
	// The oldest come first: drop the expired ones.
	i := 0
	for i < len(ss) && now.Sub(ss[i].since) > pl.idleTimeout {
		_ = ss[i].s.Close()
		i++
	}
	ss = ss[i:]
	if len(ss) == 0 {
		delete(pl.idle, k)
		return nil
	}
	s := ss[len(ss)-1].s
	ss[len(ss)-1] = idleStream{}
	if ss = ss[:len(ss)-1]; len(ss) == 0 {
		delete(pl.idle, k)
	} else {
		pl.idle[k] = ss
	}
	return s
}

// put returns a stream after a successful call, or closes it when the pool
// is closed or k has maxIdle idle streams already.
func (pl *Pool) put(k poolKey, s network.Stream) {
	_ = s.SetDeadline(time.Time{})
	pl.mu.Lock()
	if pl.closed || len(pl.idle[k]) >= pl.maxIdle {
		pl.mu.Unlock()
		_ = s.Close()
		return
	}
	pl.idle[k] = append(pl.idle[k], idleStream{s: s, since: time.Now()})
	pl.mu.Unlock()
}

func (pl *Pool) open(ctx context.Context, p peer.ID, proto string) (network.Stream, error) {
	pl.mu.Lock()
	closed := pl.closed
	pl.mu.Unlock()
	if closed {
		return nil, ErrPoolClosed
	}
	s, err := pl.h.NewStream(ctx, p, protocol.ID(proto))
	if err != nil {
		return nil, fmt.Errorf("open %s stream: %w", proto, err)
	}
	return s, nil
}

// exchange writes one request frame on s and reads one reply frame, within
// ctx. It leaves s open; on error the caller resets it.
func exchange(ctx context.Context, s network.Stream, proto string, req []byte, maxReply int) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.SetDeadline(time.Now()) })
	defer stop()
	if err := pproto.WriteFrame(s, req); err != nil {
		return nil, fmt.Errorf("send %s: %w", proto, ctxErr(ctx, err))
	}
	reply, err := pproto.ReadFrame(s, maxReply)
	if err != nil {
		return nil, fmt.Errorf("read %s reply: %w", proto, ctxErr(ctx, err))
	}
	if !stop() {
		// ctx ended as the reply arrived, and the deadline it sets may
		// land after the caller's put clears it: do not reuse s.
		return reply, errNoReuse
	}
	return reply, nil
}

// errNoReuse is exchange's signal that the reply is good but the stream
// must not go back to the pool.
var errNoReuse = errors.New("transport: stream not reusable")
