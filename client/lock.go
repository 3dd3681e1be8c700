package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/palisade-dev/palisade/protocol"
)

// Lock is a held lease with its fencing token. The token is what protects
// the resource: present it with every write. The lease starts at the
// vote: Acquire returns once t votes combine, and the Lock commits the
// token in the background (Committed); the lease is then renewed in the
// background. Lost is closed when it ends (deadline passed without a
// commit or renewal, commit or renewal refused by the cluster, a token
// that does not verify, Release, or client Close).
type Lock struct {
	c     *Client
	token protocol.Token
	// key is the session's key: the proof, with every Renew and Release,
	// that this process acquired the session (issue 20).
	key protocol.SessionKey
	ttl time.Duration
	// suspects are nodes that sent invalid partials during acquisition.
	suspects []int
	// freeSlot lets this client acquire the resource again.
	freeSlot func()
	// settle commits the token of a Lock handed out at the vote (nil if
	// it was committed first); committed is closed once t members
	// acknowledged the commit.
	settle    func(context.Context) settled
	committed chan struct{}

	mu       sync.Mutex
	deadline time.Time
	err      error
	ended    bool

	lost     chan struct{}
	lostOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// margin is the part of the TTL a client gives up against clock drift
// between itself and the nodes.
func margin(ttl time.Duration) time.Duration { return ttl / 10 }

// newLock starts the Lock of tok, held until deadline unless renewed
// every ttl/3. settle, if not nil, commits the token first (grantAtVote).
func newLock(c *Client, tok protocol.Token, key protocol.SessionKey, ttl time.Duration, deadline time.Time, suspects []int, settle func(context.Context) settled) *Lock {
	ctx, cancel := context.WithCancel(c.ctx)
	l := &Lock{c: c, token: tok, key: key, ttl: ttl, suspects: suspects, settle: settle, committed: make(chan struct{}),
		deadline: deadline, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	if settle == nil {
		close(l.committed)
	}
	if !c.goFunc(func() {
		defer close(l.done)
		l.keepAlive(ctx)
	}) {
		close(l.done)
		l.markLost(ErrClosed)
	}
	return l
}

// Token is the fencing token. Present it with every write: the resource's
// verifier admits it only if it verifies and its epoch is not below the
// resource's barrier (S4), which is what keeps a paused ex-holder out.
func (l *Lock) Token() protocol.Token { return l.token }

// Suspects lists the indices of nodes that sent invalid partial signatures
// while this lock was acquired: evidence for operators that a node is
// faulty or malicious.
func (l *Lock) Suspects() []int { return append([]int(nil), l.suspects...) }

// Epoch is the token's epoch.
func (l *Lock) Epoch() uint64 { return l.token.Epoch }

// Deadline is when the lease ends unless renewed, measured on the client's
// clock, minus a safety margin of a tenth: until Committed, from when the
// Acquire was sent, by the members' vote timeout (Config.VoteTimeout);
// then from when the last successful commit or renewal was sent, by the
// TTL.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease ends.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Committed is closed once t members acknowledged the token's Commit:
// the lease then runs its TTL from when the Commit was sent, and renews.
// Until then it holds by the members' uncommitted votes (see Deadline).
// If the Commit fails, or the token does not verify (ErrBadToken), Lost
// closes instead and Committed never does.
func (l *Lock) Committed() <-chan struct{} { return l.committed }

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
		l.ended = true
		free := l.freeSlot
		l.freeSlot = nil
		l.mu.Unlock()
		close(l.lost)
		if free != nil {
			free()
		}
	})
}

// keepAlive renews the lease every TTL/3 and declares it lost at the
// deadline if no renewal got through. The deadline timer stays armed while
// a renewal is in flight, so Lost closes on time even if nodes hang.
func (l *Lock) keepAlive(ctx context.Context) {
	clock := l.c.cfg.Clock
	every := max(l.ttl/3, time.Millisecond)
	type renewal struct {
		sent     time.Time
		left     time.Duration
		refusals int
		err      error
	}
	var inflight chan renewal // nil while no renewal runs
	var stop context.CancelFunc = func() {}
	defer func() { stop() }()
	renew := clock.NewTimer(every)
	defer renew.Stop()
	expire := clock.NewTimer(l.Deadline().Sub(clock.Now()))
	defer expire.Stop()
	lostAt := func() {
		l.markLost(fmt.Errorf("%w: %q epoch %d: deadline passed without renewal", ErrLost, l.token.Resource, l.token.Epoch))
	}
	if l.settle != nil && !l.awaitCommit(ctx, expire) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			l.markLost(ErrClosed) // no-op after Release
			return
		case <-expire.Chan():
			lostAt()
			return
		case <-renew.Chan():
			sent := clock.Now()
			rctx, cancel := context.WithCancel(ctx)
			stop = cancel
			ch := make(chan renewal, 1)
			inflight = ch
			req := protocol.RenewRequest{Cluster: l.token.Cluster, Resource: l.token.Resource, Epoch: l.token.Epoch, Key: l.key, TTL: l.ttl}
			if !l.c.goFunc(func() {
				_, refusals, left, err := l.c.quorum(rctx, "renew", protocol.ProtoRenew, req.Marshal())
				ch <- renewal{sent: sent, left: left, refusals: refusals, err: err}
			}) {
				l.markLost(ErrClosed)
				return
			}
		case r := <-inflight:
			inflight = nil
			stop()
			switch {
			case r.err == nil:
				l.extend(r.sent, r.left, expire)
			case r.refusals > l.c.f:
				// Enough nodes say the lease is gone that no quorum will renew it.
				l.markLost(fmt.Errorf("%w: %q epoch %d: %w", ErrLost, l.token.Resource, l.token.Epoch, r.err))
				return
			default:
				log.Warnw("renewal failed", "resource", l.token.Resource, "epoch", l.token.Epoch, "err", r.err)
			}
			renew.Reset(every)
		}
	}
}

// awaitCommit runs the Commit of a Lock handed out at the vote (settle)
// and waits for it with the vote's deadline armed. It reports whether the
// lease goes on; if not, the Lock is lost, and what the Commit started is
// released. Close and the vote's deadline cut the Commit short. Release
// does not wait for it: the Release goes out at once, and a member the
// Commit reaches after it refuses the Commit (Released); the Commit's
// calls run out in the background rather than reset their streams.
func (l *Lock) awaitCommit(ctx context.Context, expire clockwork.Timer) bool {
	sctx, cancel := context.WithCancel(l.c.ctx)
	ch := make(chan settled, 1)
	if !l.c.goFunc(func() {
		defer cancel()
		ch <- l.settle(sctx)
	}) {
		cancel()
		l.markLost(ErrClosed)
		return false
	}
	select {
	case <-ctx.Done():
		l.markLost(ErrClosed) // no-op after Release
		return false
	case <-expire.Chan():
		cancel()
		l.c.releaseLater(l.token, l.key)
		l.markLost(fmt.Errorf("%w: %q epoch %d: the commit was not acknowledged within the vote timeout", ErrLost, l.token.Resource, l.token.Epoch))
		return false
	case s := <-ch:
		if s.err != nil {
			l.c.releaseLater(l.token, l.key) // under way before Lost says so
			l.markLost(s.err)
			return false
		}
		l.extend(s.sent, s.left, expire)
		close(l.committed)
		return true
	}
}

// extend moves the Deadline after a commit or renewal sent at sent that
// the members granted left for (the Lock's TTL if not shorter), and
// re-arms expire.
func (l *Lock) extend(sent time.Time, left time.Duration, expire clockwork.Timer) {
	ttl := l.ttl
	if left > 0 && left < ttl {
		ttl = left
	}
	l.mu.Lock()
	l.deadline = sent.Add(ttl - margin(ttl))
	l.mu.Unlock()
	expire.Reset(l.Deadline().Sub(l.c.cfg.Clock.Now()))
}

// Release ends the lease at once so another client can acquire, and stops
// renewal. The token stays valid at resources until a higher epoch is
// used: releasing is about liveness, fencing is about the token.
func (l *Lock) Release(ctx context.Context) error {
	l.markLost(nil)
	l.cancel()
	<-l.done
	if _, _, _, err := l.c.quorum(ctx, "release", protocol.ProtoRelease, protocol.ReleaseRequest{Token: l.token, Key: l.key}.Marshal()); err != nil {
		return err
	}
	return nil
}

// setFreeSlot installs the function that lets the client acquire the
// resource again once this lock ends; if it already ended, it runs now.
func (l *Lock) setFreeSlot(f func()) {
	l.mu.Lock()
	ended := l.ended
	if !ended {
		l.freeSlot = f
	}
	l.mu.Unlock()
	if ended {
		f()
	}
}
