package testnet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memLock is an in-memory lock service with one mutex per resource and
// one token counter: what RunWorkload expects of a lock service. fixed
// non-zero makes it break fencing on purpose (every grant gets that
// token); stuck makes it never grant.
type memLock struct {
	mu     sync.Mutex
	slots  map[string]chan struct{}
	token  uint64
	fixed  uint64
	stuck  bool
	grants int
}

func (m *memLock) slot(resource string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots == nil {
		m.slots = map[string]chan struct{}{}
	}
	if m.slots[resource] == nil {
		m.slots[resource] = make(chan struct{}, 1)
		if m.stuck {
			m.slots[resource] <- struct{}{}
		}
	}
	return m.slots[resource]
}

// lockers returns n clients of m.
func (m *memLock) lockers(n int) []Locker {
	ls := make([]Locker, n)
	for i := range ls {
		ls[i] = &memLocker{m: m}
	}
	return ls
}

type memLocker struct {
	m     *memLock
	held  chan struct{}
	calls int
}

func (l *memLocker) Lock(ctx context.Context, resource string) (uint64, error) {
	s := l.m.slot(resource)
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	l.held = s
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.grants++
	l.m.token++
	if l.m.fixed != 0 {
		return l.m.fixed, nil
	}
	return l.m.token, nil
}

func (l *memLocker) Unlock(context.Context) error {
	<-l.held
	return nil
}

func (l *memLocker) Close() error { return nil }

// TestRunWorkloadCounts: the clients share the budget of cycles, every
// measured grant is counted once, warm-up cycles are not, and handoffs
// are grants that changed client.
func TestRunWorkloadCounts(t *testing.T) {
	m := &memLock{}
	r, err := RunWorkload(context.Background(), m.lockers(3), Workload{Name: "shared", Shared: true, Cycles: 4, Warmup: 2, Deadline: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 18, m.grants, "6 warm-up grants, then 12 measured")
	require.Len(t, r.Grants, 3)
	require.Equal(t, 12, r.Grants[0]+r.Grants[1]+r.Grants[2])
	require.Equal(t, 12, r.Cycles)
	require.Len(t, r.Acquire, 12)
	require.Len(t, r.Release, 12)
	require.LessOrEqual(t, len(r.Handoff), 11)
	require.Zero(t, r.Failures)
	require.Zero(t, r.Overlaps)
	require.Zero(t, r.TokenRegressions)
	require.False(t, r.Stopped)
	require.Positive(t, r.CyclesPerS)
	require.True(t, isSorted(r.Acquire) && isSorted(r.Release) && isSorted(r.Handoff))
}

// TestRunWorkloadOneClientNoHandoff: one client re-acquiring its resource
// hands nothing off.
func TestRunWorkloadOneClientNoHandoff(t *testing.T) {
	r, err := RunWorkload(context.Background(), (&memLock{}).lockers(1), Workload{Name: "one", Cycles: 5, Deadline: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, []int{5}, r.Grants)
	require.Empty(t, r.Handoff)
	require.Equal(t, 5, r.LongestRun)
}

// TestRunWorkloadTokenRegression: a service that hands out the same token
// twice fails the run with ErrExclusion.
func TestRunWorkloadTokenRegression(t *testing.T) {
	m := &memLock{fixed: 7}
	r, err := RunWorkload(context.Background(), m.lockers(1), Workload{Name: "fixed", Shared: true, Cycles: 3, Deadline: 30 * time.Second})
	require.ErrorIs(t, err, ErrExclusion)
	require.Equal(t, 2, r.TokenRegressions)
}

// TestRunWorkloadDeadline: a lock that is never granted stops the run at
// its deadline, without counting the cancelled wait as a failure.
func TestRunWorkloadDeadline(t *testing.T) {
	m := &memLock{stuck: true}
	r, err := RunWorkload(context.Background(), m.lockers(2), Workload{Name: "stuck", Shared: true, Cycles: 3, Deadline: 50 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, r.Stopped)
	require.Zero(t, r.Failures)
	require.Empty(t, r.Acquire)
	require.Equal(t, []int{0, 0}, r.Grants)
}

// failLock fails every other Lock call with errNope.
type failLock struct{ memLocker }

var errNope = errors.New("nope")

func (l *failLock) Lock(ctx context.Context, resource string) (uint64, error) {
	l.calls++
	if l.calls%2 == 0 {
		return 0, errNope
	}
	return l.memLocker.Lock(ctx, resource)
}

// TestRunWorkloadFailures: a failed Lock is counted, keeps its error, and
// uses up its cycle, so the run still ends.
func TestRunWorkloadFailures(t *testing.T) {
	l := &failLock{memLocker: memLocker{m: &memLock{}}}
	r, err := RunWorkload(context.Background(), []Locker{l}, Workload{Name: "fail", Cycles: 6, Deadline: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 3, r.Failures)
	require.Equal(t, 3, r.Cycles)
	require.ErrorIs(t, r.FirstErr, errNope)
	require.Contains(t, r.FirstErr.Error(), "client 0: lock")
}

// TestAnalyseOverlap: a grant returned before the previous holder called
// Unlock counts as an overlap; a grant to the same client is no handoff.
func TestAnalyseOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	grants := [][]Grant{
		{{Client: 0, Resource: "r", Token: 1, Granted: at(0), Released: at(10)},
			{Client: 0, Resource: "r", Token: 2, Granted: at(20), Released: at(30)}},
		{{Client: 1, Resource: "r", Token: 3, Granted: at(25), Released: at(40)}},
	}
	var r WorkloadResult
	r.Elapsed = time.Second
	r.analyse(grants)
	require.Equal(t, 1, r.Overlaps, "client 1 got r at 25 ms, client 0 unlocked at 30 ms")
	require.Zero(t, r.TokenRegressions)
	require.Equal(t, []time.Duration{-5 * time.Millisecond}, r.Handoff)
	require.Equal(t, []int{2, 1}, r.Grants)
	require.Equal(t, 2, r.LongestRun, "client 0 got r twice in a row")
	require.Equal(t, 3, r.Cycles)
}

func isSorted(d []time.Duration) bool {
	for i := 1; i < len(d); i++ {
		if d[i] < d[i-1] {
			return false
		}
	}
	return true
}

// ExampleQuantile shows the rank Quantile picks.
func ExampleQuantile() {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	fmt.Println(Quantile(d, .5), Quantile(d, .99), Quantile(nil, .5))
	// Output: 5ns 9ns 0s
}

// TestRunWorkloadOwnResources: clients on their own resources never hand
// off, and each token order is checked per resource.
func TestRunWorkloadOwnResources(t *testing.T) {
	m := &memLock{}
	r, err := RunWorkload(context.Background(), m.lockers(4), Workload{Name: "own", Cycles: 5, Warmup: 1, Deadline: 30 * time.Second})
	require.NoError(t, err)
	require.Empty(t, r.Handoff)
	require.Len(t, m.slots, 4)
	require.Equal(t, 20, r.Cycles)
}

// TestWarmFailures: warm-up goes on past a failed cycle and reports how
// many failed.
func TestWarmFailures(t *testing.T) {
	l := &failLock{memLocker: memLocker{m: &memLock{}}}
	err := Warm(context.Background(), []Locker{l}, Workload{Name: "warm", Cycles: 1, Warmup: 4})
	var we *WarmupError
	require.ErrorAs(t, err, &we)
	require.Equal(t, 2, we.Failed)
	require.Equal(t, 4, we.Cycles)
	require.ErrorIs(t, err, errNope)
	require.Equal(t, 4, l.calls, "every warm-up cycle ran")
}

// TestWarmDeadline: a warm-up that cannot get the lock ends at the
// workload's deadline, its cycles counted as failed.
func TestWarmDeadline(t *testing.T) {
	m := &memLock{stuck: true}
	err := Warm(context.Background(), m.lockers(2), Workload{Name: "stuck", Cycles: 1, Warmup: 3, Shared: true, Deadline: 50 * time.Millisecond})
	var we *WarmupError
	require.ErrorAs(t, err, &we)
	require.Equal(t, 6, we.Failed)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
