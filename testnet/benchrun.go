package testnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palisade-dev/palisade/client"
)

// Locker is one client of a lock service as the benchmarks drive it: it
// holds at most one lock at a time. Palisade's implementation is
// Network.NewLocker; the side-by-side benchmark (module bench) adds etcd's.
type Locker interface {
	// Lock waits until the client holds resource, or ctx ends, and
	// returns the lock's fencing token (Palisade's epoch, etcd's revision).
	Lock(ctx context.Context, resource string) (token uint64, err error)
	// Unlock releases the lock the last Lock returned.
	Unlock(ctx context.Context) error
	// Close ends the client's session and connections.
	Close() error
}

// BenchTTL is the lease length of every benchmark lock, Palisade's and
// etcd's (its session TTL) alike.
const BenchTTL = 10 * time.Second

// benchClientConfig is the client configuration of the benchmarks: short
// backoffs, so a contended run measures the protocol more than the pause.
func benchClientConfig() client.Config {
	return client.Config{MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond, DefaultTTL: BenchTTL}
}

// NewLocker returns a Locker over a new client with identity i (0-based)
// and the benchmarks' client settings (backoff 1 to 50 ms, lease TTL
// BenchTTL).
func (nw *Network) NewLocker(i int) (Locker, error) {
	c, err := nw.NewClient(i, benchClientConfig())
	if err != nil {
		return nil, err
	}
	return &clientLocker{c: c}, nil
}

// NewLockers returns k Lockers (NewLocker with identities 0 to k-1); on
// error it closes those it made.
func (nw *Network) NewLockers(k int) ([]Locker, error) {
	ls := make([]Locker, 0, k)
	for i := range k {
		l, err := nw.NewLocker(i)
		if err != nil {
			return nil, errors.Join(err, CloseLockers(ls))
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// CloseLockers closes every locker and returns their errors joined.
func CloseLockers(ls []Locker) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// clientLocker is the Palisade Locker: one client.Client and its lock.
type clientLocker struct {
	c *client.Client
	l *client.Lock
}

func (p *clientLocker) Lock(ctx context.Context, resource string) (uint64, error) {
	l, err := p.c.Acquire(ctx, resource)
	if err != nil {
		return 0, err
	}
	p.l = l
	return l.Epoch(), nil
}

func (p *clientLocker) Unlock(ctx context.Context) error {
	if p.l == nil {
		return errors.New("testnet: unlock without a lock")
	}
	l := p.l
	p.l = nil
	return l.Release(ctx)
}

func (p *clientLocker) Close() error { return p.c.Close() }

// Workload is what RunWorkload makes its lockers do.
type Workload struct {
	// Name labels the workload and prefixes its resource names, so runs
	// on one cluster do not share resources.
	Name string
	// Shared puts every client on one resource; otherwise each client has
	// its own.
	Shared bool
	// Cycles is the number of measured acquire+release cycles per client.
	// The workload runs len(lockers)*Cycles cycles in all, drawn from one
	// budget, so a client that wins more often does more of them: the
	// spread of grants per client measures fairness.
	Cycles int
	// Warmup is the number of cycles each client runs, on the workload's
	// resources, before the measurement starts; they are not counted.
	Warmup int
	// Deadline bounds the warm-up and, again, the measured phase (0: one
	// minute). A run that hits it stops and reports what completed, with
	// Stopped set.
	Deadline time.Duration
}

// AcquireTimeout bounds one Lock call of a workload; a call that runs out
// counts as a failure.
const AcquireTimeout = 30 * time.Second

// Grant is one measured acquisition.
type Grant struct {
	// Client is the index of the locker that got it.
	Client int
	// Resource is the resource name.
	Resource string
	// Token is the fencing token.
	Token uint64
	// Granted is when Lock returned; Released when Unlock was called.
	Granted, Released time.Time
	// Acquire and Release are the durations of the Lock and Unlock calls.
	Acquire, Release time.Duration
	// ReleaseErr is Unlock's error.
	ReleaseErr error
}

// WorkloadResult is what RunWorkload measured.
type WorkloadResult struct {
	Workload Workload
	// Clients is the number of lockers.
	Clients int
	// Acquire holds the duration of each successful Lock call, sorted. In
	// a shared run it is the wait for the lock, queueing included.
	Acquire []time.Duration
	// Release holds the duration of each successful Unlock call, sorted.
	Release []time.Duration
	// Handoff holds, for each grant that went to another client than the
	// one before on the same resource, the time from the previous
	// holder's Unlock call to this grant: how long the resource stood
	// free, release included. Sorted.
	Handoff []time.Duration
	// Grants counts the successful Lock calls of each client.
	Grants []int
	// Cycles counts the completed cycles (Lock and Unlock both succeeded).
	Cycles int
	// Failures counts failed Lock and Unlock calls; FirstErr is the
	// first of them to end (nil with none).
	Failures int
	FirstErr error
	// Elapsed is the measured phase's wall time; CyclesPerS and
	// HandoffsPerS are Cycles and len(Handoff) over it.
	Elapsed                  time.Duration
	CyclesPerS, HandoffsPerS float64
	// LongestRun is the most consecutive grants of one resource to one
	// client: with a FIFO queue it is 1 once several clients wait.
	LongestRun int
	// Stopped says the run hit its deadline.
	Stopped bool
	// Overlaps counts grants that Lock returned before the previous
	// holder of the resource had called Unlock: mutual exclusion broken.
	// TokenRegressions counts grants whose token was not above the
	// previous grant's on the same resource: fencing broken. Both must be
	// zero. They are sanity checks, not proofs: a client unlocks at once,
	// so an overlap shows only if a grant comes before that.
	Overlaps, TokenRegressions int
}

// ErrExclusion is returned by RunWorkload when two clients held one
// resource at once or a later grant's token was not higher.
var ErrExclusion = errors.New("testnet: lock exclusion or token order broken")

// RunWorkload runs w with one client per locker: Warm, then Measure. It
// returns ErrExclusion (with the result) if the grants show two holders
// at once or tokens out of order.
func RunWorkload(ctx context.Context, lockers []Locker, w Workload) (WorkloadResult, error) {
	if err := Warm(ctx, lockers, w); err != nil {
		return WorkloadResult{}, err
	}
	return Measure(ctx, lockers, w)
}

// check validates w for len(lockers) clients.
func (w Workload) check(clients int) error {
	if clients == 0 || w.Cycles < 1 || w.Warmup < 0 {
		return fmt.Errorf("testnet: workload %q: need lockers and Cycles >= 1", w.Name)
	}
	return nil
}

// deadline is w.Deadline, one minute if unset.
func (w Workload) deadline() time.Duration {
	if w.Deadline <= 0 {
		return time.Minute
	}
	return w.Deadline
}

// resource is client i's resource in w.
func (w Workload) resource(i int) string {
	if w.Shared {
		return "bench-" + w.Name
	}
	return fmt.Sprintf("bench-%s-%d", w.Name, i)
}

// Warm runs w.Warmup cycles per client, all clients at once, on the
// workload's resources (connections, sessions and per-resource state
// are set up before Measure), within w.Deadline. A client whose cycle
// fails goes on with the next; Warm then returns a *WarmupError (cycles
// the deadline cut off count as failed), and the caller decides whether
// to measure anyway.
func Warm(ctx context.Context, lockers []Locker, w Workload) error {
	if err := w.check(len(lockers)); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, w.deadline())
	defer cancel()
	failed := make([]int, len(lockers))
	errs := make([]error, len(lockers))
	_ = forEachLocker(lockers, func(i int, l Locker) error {
		for range w.Warmup {
			if wctx.Err() != nil {
				failed[i]++
				continue
			}
			_, err := lockOnce(wctx, l, w.resource(i))
			if err == nil {
				err = unlockOnce(ctx, l)
			}
			if err != nil {
				failed[i]++
				if errs[i] == nil {
					errs[i] = fmt.Errorf("client %d: %w", i, err)
				}
			}
		}
		return nil
	})
	if ctx.Err() != nil {
		return fmt.Errorf("testnet: workload %q: warm-up: %w", w.Name, ctx.Err())
	}
	we := &WarmupError{Workload: w.Name, Cycles: w.Warmup * len(lockers)}
	for i := range lockers {
		we.Failed += failed[i]
		if we.First == nil {
			we.First = errs[i]
		}
	}
	if we.Failed > 0 {
		return we
	}
	return nil
}

// WarmupError says how many warm-up cycles failed, and the first error.
type WarmupError struct {
	Workload       string
	Failed, Cycles int
	First          error
}

func (e *WarmupError) Error() string {
	return fmt.Sprintf("testnet: workload %q: warm-up: %d of %d cycles failed, one with: %v", e.Workload, e.Failed, e.Cycles, e.First)
}

// Unwrap returns the first failure.
func (e *WarmupError) Unwrap() error { return e.First }

// Measure runs the measured phase of w: Cycles*len(lockers) cycles drawn
// from one budget, each client looping Lock, Unlock on its resource. Its
// loops are bounded by the budget, by w.Deadline and by ctx. A failed
// Lock or Unlock is counted and the client goes on. It returns
// ErrExclusion (with the result) if the grants show two holders at once
// or tokens out of order.
func Measure(ctx context.Context, lockers []Locker, w Workload) (WorkloadResult, error) {
	if err := w.check(len(lockers)); err != nil {
		return WorkloadResult{}, err
	}
	w.Deadline = w.deadline()
	mctx, cancel := context.WithTimeout(ctx, w.Deadline)
	defer cancel()
	budget := atomic.Int64{}
	budget.Store(int64(w.Cycles * len(lockers)))
	grants := make([][]Grant, len(lockers))
	failures := make([]int, len(lockers))
	var firstErr error
	var errOnce sync.Once
	fail := func(i int, err error) {
		failures[i]++
		errOnce.Do(func() { firstErr = err })
	}
	start := time.Now()
	_ = forEachLocker(lockers, func(i int, l Locker) error {
		for budget.Add(-1) >= 0 && mctx.Err() == nil {
			t0 := time.Now()
			token, err := lockOnce(mctx, l, w.resource(i))
			t1 := time.Now()
			if err != nil {
				if mctx.Err() == nil {
					fail(i, fmt.Errorf("client %d: lock: %w", i, err))
				}
				continue
			}
			// Unlock under ctx, not mctx: a lock won just before the
			// deadline is still released, and its cycle counted.
			u := time.Now()
			err = unlockOnce(ctx, l)
			t2 := time.Now()
			grants[i] = append(grants[i], Grant{Client: i, Resource: w.resource(i), Token: token,
				Granted: t1, Released: u, Acquire: t1.Sub(t0), Release: t2.Sub(u), ReleaseErr: err})
			if err != nil {
				fail(i, fmt.Errorf("client %d: unlock: %w", i, err))
			}
		}
		return nil
	})
	r := WorkloadResult{Workload: w, Clients: len(lockers), Elapsed: time.Since(start), Stopped: mctx.Err() != nil && ctx.Err() == nil, FirstErr: firstErr}
	for i := range lockers {
		r.Failures += failures[i]
	}
	r.analyse(grants)
	if ctx.Err() != nil {
		return r, fmt.Errorf("testnet: workload %q: %w", w.Name, ctx.Err())
	}
	if r.Overlaps > 0 || r.TokenRegressions > 0 {
		return r, fmt.Errorf("testnet: workload %q: %d overlapping grants, %d tokens out of order: %w", w.Name, r.Overlaps, r.TokenRegressions, ErrExclusion)
	}
	return r, nil
}

// analyse fills r's latencies, counts and checks from each client's grants.
func (r *WorkloadResult) analyse(grants [][]Grant) {
	r.Grants = make([]int, len(grants))
	byResource := map[string][]Grant{}
	for i, gs := range grants {
		r.Grants[i] = len(gs)
		for _, g := range gs {
			r.Acquire = append(r.Acquire, g.Acquire)
			if g.ReleaseErr == nil {
				r.Release = append(r.Release, g.Release)
				r.Cycles++
			}
			byResource[g.Resource] = append(byResource[g.Resource], g)
		}
	}
	for _, gs := range byResource {
		slices.SortFunc(gs, func(a, b Grant) int { return a.Granted.Compare(b.Granted) })
		run := 1
		r.LongestRun = max(r.LongestRun, run)
		for k := 1; k < len(gs); k++ {
			prev, g := gs[k-1], gs[k]
			// Lock returned before the previous holder even began to
			// unlock: both held the resource at that moment.
			if g.Granted.Before(prev.Released) {
				r.Overlaps++
			}
			if g.Token <= prev.Token {
				r.TokenRegressions++
			}
			if g.Client != prev.Client {
				r.Handoff = append(r.Handoff, g.Granted.Sub(prev.Released))
				run = 0
			}
			run++
			r.LongestRun = max(r.LongestRun, run)
		}
	}
	slices.Sort(r.Acquire)
	slices.Sort(r.Release)
	slices.Sort(r.Handoff)
	if s := r.Elapsed.Seconds(); s > 0 {
		r.CyclesPerS = float64(r.Cycles) / s
		r.HandoffsPerS = float64(len(r.Handoff)) / s
	}
}

// lockOnce is one Lock bounded by AcquireTimeout.
func lockOnce(ctx context.Context, l Locker, resource string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, AcquireTimeout)
	defer cancel()
	return l.Lock(ctx, resource)
}

// unlockOnce is one Unlock bounded by AcquireTimeout.
func unlockOnce(ctx context.Context, l Locker) error {
	ctx, cancel := context.WithTimeout(ctx, AcquireTimeout)
	defer cancel()
	return l.Unlock(ctx)
}

// forEachLocker runs f for every locker, each in its own goroutine, waits
// for all of them and returns their errors joined.
func forEachLocker(lockers []Locker, f func(i int, l Locker) error) error {
	errs := make([]error, len(lockers))
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Go(func() { errs[i] = f(i, l) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
