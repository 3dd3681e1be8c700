// Package agent is the local HTTP/JSON agent behind "palisade agent": it
// lets applications in any language take Palisade locks through one Go
// client, which renews their leases for them.
//
// The API (docs/agent.md has the full reference):
//
//	POST   /v1/locks/{resource}   acquire: body {"ttl": "10s", "wait": "5s"}  201 with the lock
//	GET    /v1/locks/{id}         the lock; long-polls while it is held (?wait=30s, ?wait=0s)
//	DELETE /v1/locks/{id}         release                                     200 with the lock
//
// A lock is named by a 128-bit random ID that only the acquiring request
// learns. Its JSON carries the fencing token, which the application sends
// with every write to the resource; the resource verifies it (package
// verifier). The agent renews the lease until the lock is released, the
// cluster takes the lease away (state "lost"), or the agent stops, which
// releases every lock it holds.
//
// Every error is JSON, {"code": "busy", "message": "..."}, with a stable
// machine code and one HTTP status per code (see Code). All of the agent's
// resources are bounded: the locks it holds (Config.MaxLocks), the
// requests waiting in it (Config.MaxWaiting), the request body
// (Config.MaxBodyBytes), every wait (Config.MaxWait, Config.MaxPoll); a
// long poll ends with its request, and every goroutine the agent starts
// ends when it stops.
//
// Without a secret the agent serves only loopback clients: requests must
// name a loopback host (against DNS rebinding) and carry no Origin header
// (browsers send one, other clients do not). CheckListen refuses a
// non-loopback listener without a secret; with one (LoadSecret) every
// request needs "Authorization: Bearer SECRET", compared in constant time.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/jonboulle/clockwork"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

var log = logging.Logger("palisade/agent")

// Defaults of Config, applied to zero fields.
const (
	// DefaultMaxLocks bounds the locks an agent holds at once, acquisitions
	// in progress included.
	DefaultMaxLocks = 1024
	// DefaultMaxWaiting bounds the requests that wait at once: acquisitions
	// with a wait and long polls.
	DefaultMaxWaiting = 1024
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 4096
	// DefaultTTL is the lease length when a request names none.
	DefaultTTL = 10 * time.Second
	// DefaultMaxWait is the longest an acquisition may wait.
	DefaultMaxWait = 10 * time.Minute
	// DefaultPoll is how long a long poll waits when the request names no
	// wait; DefaultMaxPoll the longest it may ask for.
	DefaultPoll    = 5 * time.Minute
	DefaultMaxPoll = 10 * time.Minute
	// DefaultKeepEnded is how long a released or lost lock can still be
	// read, so a poller learns how it ended.
	DefaultKeepEnded = time.Minute
	// DefaultReleaseTimeout bounds one release (DELETE, or each lock at
	// shutdown).
	DefaultReleaseTimeout = 10 * time.Second
)

// Errors callers can branch on.
var (
	// ErrInsecureListen reports a listener on a non-loopback address
	// without a secret.
	ErrInsecureListen = errors.New("agent: refusing to listen on a non-loopback address without a secret (--secret-file)")
	// ErrInsecureSecret reports a secret file that group or others may
	// read.
	ErrInsecureSecret = errors.New("agent: secret file is readable by others")
	// ErrBadSecret reports a secret file whose content is too short or too
	// long.
	ErrBadSecret = errors.New("agent: bad secret")
	// ErrClosed reports an agent that has been closed.
	ErrClosed = errors.New("agent: closed")
	// ErrNoSecret reports a secret change (SetSecret) on an agent made
	// without a secret: it serves loopback only, and stays so.
	ErrNoSecret = errors.New("agent: the agent was started without a secret; restart it with one")
)

// Config configures an Agent. Zero fields take the defaults above.
type Config struct {
	// Client acquires the locks; the agent does not close it. Its identity
	// is the holder of every lock taken through the agent, each with its
	// own session. Required.
	Client *client.Client
	// Secret, if set, is required of every request as "Authorization:
	// Bearer SECRET" (see LoadSecret). Without it the agent serves loopback
	// clients only.
	Secret []byte
	// MaxLocks bounds the locks held at once (DefaultMaxLocks).
	MaxLocks int
	// MaxWaiting bounds the requests waiting at once (DefaultMaxWaiting).
	MaxWaiting int
	// MaxBodyBytes bounds a request body (DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// DefaultTTL is the lease of a request that names none (DefaultTTL).
	DefaultTTL time.Duration
	// MaxWait bounds an acquisition's wait (DefaultMaxWait).
	MaxWait time.Duration
	// Poll and MaxPoll are a long poll's default and longest wait
	// (DefaultPoll, DefaultMaxPoll).
	Poll, MaxPoll time.Duration
	// KeepEnded is how long an ended lock stays readable
	// (DefaultKeepEnded).
	KeepEnded time.Duration
	// ReleaseTimeout bounds one release (DefaultReleaseTimeout).
	ReleaseTimeout time.Duration
	// Clock times polls and ended locks (default real).
	Clock clockwork.Clock
}

func (c *Config) setDefaults() error {
	if c.Client == nil {
		return errors.New("agent: Config.Client is required")
	}
	if c.Secret != nil {
		if err := checkSecret(c.Secret); err != nil {
			return err
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.MaxLocks == 0 {
		c.MaxLocks = DefaultMaxLocks
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	def(&c.DefaultTTL, DefaultTTL)
	def(&c.MaxWait, DefaultMaxWait)
	def(&c.Poll, DefaultPoll)
	def(&c.MaxPoll, DefaultMaxPoll)
	def(&c.KeepEnded, DefaultKeepEnded)
	def(&c.ReleaseTimeout, DefaultReleaseTimeout)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	switch {
	case c.MaxLocks < 0 || c.MaxWaiting < 0 || c.MaxBodyBytes < 0:
		return fmt.Errorf("agent: negative limit (MaxLocks %d, MaxWaiting %d, MaxBodyBytes %d)", c.MaxLocks, c.MaxWaiting, c.MaxBodyBytes)
	case c.DefaultTTL < 0 || c.DefaultTTL > protocol.MaxTTL:
		return fmt.Errorf("agent: DefaultTTL %v not in (0, %v]", c.DefaultTTL, protocol.MaxTTL)
	case c.MaxWait < 0 || c.Poll < 0 || c.MaxPoll < c.Poll || c.KeepEnded < 0 || c.ReleaseTimeout < 0:
		return errors.New("agent: negative duration, or Poll above MaxPoll")
	}
	return nil
}

// State is where a lock is in its life.
type State string

// The states of a lock. A held lock ends exactly once, as released or
// lost.
const (
	// Held: the agent holds the lease and renews it.
	Held State = "held"
	// Released: released by DELETE or by the agent's shutdown.
	Released State = "released"
	// Lost: the lease ended without a release (renewals refused or not
	// answered before the deadline); the token may already be fenced off.
	Lost State = "lost"
)

// Agent serves the lock API over one client. Make it with New, serve
// Handler (or call Serve), and Close it to release its locks.
type Agent struct {
	cfg     Config
	handler http.Handler

	// closing ends when Close starts: acquisitions in progress stop.
	closing     context.Context
	stopAcquire context.CancelFunc
	// ctx ends once Close has released the locks: polls return, watchers
	// stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	waiting chan struct{} // one token per waiting request

	// secret is the digest of the bearer secret requests must carry; nil
	// without one (SetSecret replaces it).
	secret  atomic.Pointer[[sha256.Size]byte]
	metrics *metrics

	mu     sync.Mutex
	closed bool
	active int               // held locks plus acquisitions in progress
	held   int               // held locks
	locks  map[string]*entry // by ID, held and recently ended
	ended  []*entry          // ended locks, oldest first
}

// entry is one lock taken through the agent.
type entry struct {
	id   string
	lock *client.Lock
	ttl  time.Duration

	// endedCh is closed when the lock leaves Held.
	endedCh chan struct{}

	// mu guards the fields below; the agent's mu is never taken inside it.
	mu        sync.Mutex
	state     State
	reason    string // why a lost lock was lost
	endedAt   time.Time
	confirmed bool // the cluster confirmed the release

	// releaseMu serialises releases of this lock.
	releaseMu sync.Mutex
}

// New returns an agent over cfg.Client.
func New(cfg Config) (*Agent, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:     cfg,
		waiting: make(chan struct{}, cfg.MaxWaiting),
		locks:   map[string]*entry{},
	}
	if cfg.Secret != nil {
		digest := sha256.Sum256(cfg.Secret)
		a.secret.Store(&digest)
	}
	a.metrics = newMetrics(func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.held
	})
	a.closing, a.stopAcquire = context.WithCancel(context.Background())
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.handler = a.routes()
	return a, nil
}

// Handler returns the HTTP handler of the API.
func (a *Agent) Handler() http.Handler { return a.handler }

// Server timeouts of Serve. There is no write timeout: a long poll writes
// only when it ends, which Config.MaxPoll bounds.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 16 << 10
	// ShutdownTimeout bounds how long Serve waits for running requests
	// once its locks are released.
	ShutdownTimeout = 10 * time.Second
)

// Serve serves the API on ln until ctx ends, then closes the agent
// (releasing every lock it holds, see Close) and shuts the server down.
// It closes ln. It refuses a non-loopback ln without a secret.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	if err := CheckListen(ln.Addr(), a.cfg.Secret != nil); err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
		serveErr = fmt.Errorf("agent: serve: %w", serveErr)
	case <-ctx.Done():
	}
	// Release first, while pollers still wait: they hear "released".
	closeErr := a.Close()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if serveErr == nil {
		if err := srv.Shutdown(sctx); err != nil {
			serveErr = fmt.Errorf("agent: shut down: %w", err)
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			serveErr = errors.Join(serveErr, fmt.Errorf("agent: serve: %w", err))
		}
	}
	return errors.Join(serveErr, closeErr)
}

// closeReleases is how many releases Close runs at once.
const closeReleases = 8

// Close releases every lock the agent holds (each within
// Config.ReleaseTimeout, closeReleases at a time), refuses new acquisitions, ends
// waiting requests and stops the agent's goroutines. It does not close the
// client. A release the cluster does not confirm is reported; its lease
// runs out after its TTL.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.stopAcquire()
	var held []*entry
	for _, e := range a.locks {
		if e.currentState() == Held {
			held = append(held, e)
		}
	}
	a.mu.Unlock()

	// A few releases at a time: nodes bound the requests one peer has in
	// flight (16 by default), and renewals of the other locks still run.
	errs := make([]error, len(held))
	sem := make(chan struct{}, closeReleases)
	var wg sync.WaitGroup
	for i, e := range held {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = a.release(e, causeShutdown)
		})
	}
	wg.Wait()
	a.cancel()
	a.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent: close: %w", err)
	}
	if len(held) > 0 {
		log.Infow("released every lock", "locks", len(held))
	}
	return nil
}

// reserve counts one more lock against MaxLocks before it is acquired.
func (a *Agent) reserve() *apiError {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errShuttingDown()
	}
	if a.active >= a.cfg.MaxLocks {
		return &apiError{Code: CodeLimit, Message: fmt.Sprintf("the agent holds its maximum of %d locks; release one first", a.cfg.MaxLocks)}
	}
	a.active++
	return nil
}

// unreserve gives back a reservation whose acquisition failed.
func (a *Agent) unreserve() {
	a.mu.Lock()
	a.active--
	a.mu.Unlock()
}

// register adds an acquired lock under a fresh random ID and starts
// watching it. It fails once the agent is closing; the caller then
// releases the lock.
func (a *Agent) register(lock *client.Lock, ttl time.Duration) (*entry, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	e := &entry{id: id, lock: lock, ttl: ttl, state: Held, endedCh: make(chan struct{})}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, ErrClosed
	}
	a.locks[id] = e
	a.held++
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		select {
		case <-lock.Lost():
			reason := "lease ended"
			if err := lock.Err(); err != nil {
				reason = err.Error()
			}
			a.end(e, Lost, reason)
		case <-a.ctx.Done():
		}
	}()
	return e, nil
}

// end moves a held lock to state, once; later calls do nothing.
func (a *Agent) end(e *entry, state State, reason string) bool {
	now := a.cfg.Clock.Now()
	e.mu.Lock()
	if e.state != Held {
		e.mu.Unlock()
		return false
	}
	e.state, e.reason, e.endedAt = state, reason, now
	close(e.endedCh)
	e.mu.Unlock()

	a.mu.Lock()
	a.active--
	a.held--
	a.ended = append(a.ended, e)
	a.pruneLocked(now)
	a.mu.Unlock()
	if state == Lost {
		a.metrics.lost.Inc()
		log.Warnw("lock lost", "resource", e.lock.Token().Resource, "epoch", e.lock.Epoch(), "reason", reason)
	}
	return true
}

// pruneLocked forgets ended locks older than KeepEnded, and the oldest
// ones beyond MaxLocks of them.
func (a *Agent) pruneLocked(now time.Time) {
	n := 0
	for n < len(a.ended) {
		e := a.ended[n]
		e.mu.Lock()
		old := now.Sub(e.endedAt) >= a.cfg.KeepEnded
		e.mu.Unlock()
		if !old && len(a.ended)-n <= a.cfg.MaxLocks {
			break
		}
		delete(a.locks, e.id)
		n++
	}
	a.ended = a.ended[n:]
}

// lookup returns the lock with this ID, if the agent still knows it.
func (a *Agent) lookup(id string) (*entry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked(a.cfg.Clock.Now())
	e, ok := a.locks[id]
	return e, ok
}

// release ends a lock as released (if it is still held) and releases its
// lease at the cluster, within ReleaseTimeout. A lost lock is released at
// the cluster too, in case its lease is still there; its failure is not
// an error. Releasing again after a confirmed release does nothing. cause
// labels the release in MetricReleases.
func (a *Agent) release(e *entry, cause string) error {
	e.releaseMu.Lock()
	defer e.releaseMu.Unlock()
	a.end(e, Released, "")
	e.mu.Lock()
	state, confirmed := e.state, e.confirmed
	e.mu.Unlock()
	if confirmed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ReleaseTimeout)
	defer cancel()
	err := e.lock.Release(ctx)
	if state == Released {
		a.metrics.released(cause, err)
	}
	if err == nil || state == Lost {
		e.mu.Lock()
		e.confirmed = true
		e.mu.Unlock()
		return nil
	}
	return fmt.Errorf("release %q epoch %d: %w", e.lock.Token().Resource, e.lock.Epoch(), err)
}

// wait takes a waiting slot, or reports that MaxWaiting requests already
// wait.
func (a *Agent) wait() (done func(), apiErr *apiError) {
	select {
	case a.waiting <- struct{}{}:
		return func() { <-a.waiting }, nil
	default:
		return nil, &apiError{Code: CodeLimit, Message: fmt.Sprintf("%d requests already wait in the agent", a.cfg.MaxWaiting)}
	}
}

// currentState is the entry's state.
func (e *entry) currentState() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// IDSize is the size of a lock ID in bytes: 128 random bits, shown as 32
// hex digits.
const IDSize = 16

func newID() (string, error) {
	var b [IDSize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("agent: lock ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
