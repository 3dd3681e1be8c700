package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Lock is a held lease with its fencing token. The token is what protects
// the resource: present it with every write. The lease is renewed in the
// background; Lost is closed when it ends (deadline passed without a
// renewal, renewal refused by the cluster, Release, or client Close).
type Lock struct {
	c     *Client
	token protocol.Token
	ttl   time.Duration
	// suspects are nodes that sent invalid partials during acquisition.
	suspects []int

	mu       sync.Mutex
	deadline time.Time
	err      error

	lost     chan struct{}
	lostOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// margin is the part of the TTL a client gives up against clock drift
// between itself and the nodes.
func margin(ttl time.Duration) time.Duration { return ttl / 10 }

func newLock(c *Client, tok protocol.Token, ttl time.Duration, sent time.Time) *Lock {
	ctx, cancel := context.WithCancel(c.ctx)
	l := &Lock{c: c, token: tok, ttl: ttl, deadline: sent.Add(ttl - margin(ttl)), lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(l.done)
		l.keepAlive(ctx)
	}()
	return l
}

// Token is the fencing token.
func (l *Lock) Token() protocol.Token { return l.token }

// Suspects lists the indices of nodes that sent invalid partial signatures
// while this lock was acquired: evidence for operators that a node is
// faulty or malicious.
func (l *Lock) Suspects() []int { return append([]int(nil), l.suspects...) }

// Epoch is the token's epoch.
func (l *Lock) Epoch() uint64 { return l.token.Epoch }

// Deadline is when the lease ends unless renewed, measured on the client's
// clock from when the last successful commit or renewal was sent, minus a
// safety margin.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease ends.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err says why Lost was closed: an error wrapping ErrLost, ErrClosed after
// the client closed, nil after Release or while held.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Lock) markLost(err error) {
	l.lostOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.lost)
	})
}

// keepAlive renews the lease every TTL/3 and declares it lost at the
// deadline if no renewal got through.
func (l *Lock) keepAlive(ctx context.Context) {
	clock := l.c.cfg.Clock
	every := l.ttl / 3
	renew := clock.NewTimer(every)
	defer renew.Stop()
	for {
		expire := clock.NewTimer(l.Deadline().Sub(clock.Now()))
		select {
		case <-ctx.Done():
			expire.Stop()
			l.markLost(ErrClosed) // no-op after Release
			return
		case <-expire.Chan():
			l.markLost(fmt.Errorf("%w: %q epoch %d: deadline passed without renewal", ErrLost, l.token.Resource, l.token.Epoch))
			return
		case <-renew.Chan():
			expire.Stop()
			sent := clock.Now()
			req := protocol.RenewRequest{Cluster: l.token.Cluster, Resource: l.token.Resource, Epoch: l.token.Epoch, TTL: l.ttl}
			_, refusals, err := l.c.quorum(ctx, "renew", protocol.ProtoRenew, req.Marshal())
			switch {
			case err == nil:
				l.mu.Lock()
				l.deadline = sent.Add(l.ttl - margin(l.ttl))
				l.mu.Unlock()
			case refusals > l.c.f:
				// Enough nodes say the lease is gone that no quorum will renew it.
				l.markLost(fmt.Errorf("%w: %q epoch %d: %w", ErrLost, l.token.Resource, l.token.Epoch, err))
				return
			default:
				log.Warnw("renewal failed", "resource", l.token.Resource, "epoch", l.token.Epoch, "err", err)
			}
			renew.Reset(every)
		}
	}
}

// Release ends the lease at once so another client can acquire, and stops
// renewal. The token stays valid at resources until a higher epoch is
// used: releasing is about liveness, fencing is about the token.
func (l *Lock) Release(ctx context.Context) error {
	l.markLost(nil)
	l.cancel()
	<-l.done
	_, _, err := l.c.quorum(ctx, "release", protocol.ProtoRelease, protocol.ReleaseRequest{Token: l.token}.Marshal())
	if err != nil {
		return err
	}
	return nil
}
