package testnet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/metricstest"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// Waiters that lie (issue 20, F1-F3). Each attack runs against a control
// without the lie, and the assertions are about outcomes: who is served
// at which handoff, how many places a node keeps, what the metric counts.
// A liar sends raw Wait requests through a client identity's own libp2p
// host; "served" for a liar's session means that at least t members told
// it the resource is free for it (it was first in line: the resource was
// reserved for it), whether or not it then acquires.

// liar is the scenario generator's liarPeer (scenario_liars.go) as a
// test uses it: its draws are deterministic per test, and a member that
// does not register a session fails the test.
type liar struct {
	*liarPeer
	t testing.TB
}

func newLiar(t testing.TB, nw *Network, ci int) *liar {
	t.Helper()
	p, err := newLiarPeer(nw, ci, seedFor(t), 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.close() })
	return &liar{liarPeer: p, t: t}
}

// register queues session k at every member (a Wait answered at once)
// and returns the members' replies by index.
func (l *liar) register(ctx context.Context, res string, k protocol.SessionKey) map[int]protocol.WaitReply {
	out := l.liarPeer.register(ctx, res, k)
	require.Len(l.t, out, len(l.nw.Members), "every member registers the session")
	return out
}

// pollUntilFree long-polls every member with session k (showing claim)
// until t members said free in one sweep, then calls served once; it
// stops when ctx ends. It runs in its own goroutine and only reports.
func (l *liar) pollUntilFree(ctx context.Context, res string, k protocol.SessionKey, claim []protocol.SignedPlace, served func()) {
	if ok, _ := l.liarPeer.pollUntilFree(ctx, res, k, claim, time.Hour); ok {
		served()
	}
}

// events is the order in which parties were served.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// index is the position of s in the log, -1 if absent.
func (e *events) index(s string) int {
	for i, x := range e.get() {
		if x == s {
			return i
		}
	}
	return -1
}

// waitersAt waits until at least k members hold at least n waiters.
func waitersAt(t testing.TB, nw *Network, k, n int, what string) {
	t.Helper()
	at := func() (c int) {
		for _, m := range nw.Members {
			if r := nw.Node(m.Index); r != nil && r.QueueStats().Waiters >= n {
				c++
			}
		}
		return c
	}
	if !assert.Eventually(t, func() bool { return at() >= k }, testwait.HangCeiling, 5*time.Millisecond, what) {
		t.Fatalf("%s: %d members hold %d waiters, want %d", what, at(), n, k)
	}
}

// expiredAt is each member's count of reservations that expired unused.
func expiredAt(t testing.TB, nw *Network) []float64 {
	var out []float64
	for _, m := range nw.Members {
		out = append(out, metricstest.Value(t, nw.Node(m.Index).MetricsRegistry(), node.MetricReservationsExpired))
	}
	return out
}

// lapsesOf is how many reservations of identity id each member recorded
// as run out unused (Node.RecentLapses).
func lapsesOf(nw *Network, id string) []int {
	var out []int
	for _, m := range nw.Members {
		k := 0
		for _, l := range nw.Node(m.Index).RecentLapses() {
			if l.ID == id {
				k++
			}
		}
		out = append(out, k)
	}
	return out
}

// acquireAsync runs c.Acquire in a goroutine; the lock (or error) comes
// back on the channel, and name is logged in ev when it is served.
func acquireAsync(ctx context.Context, c *client.Client, res, name string, ev *events) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		l, err := c.Acquire(ctx, res)
		if err == nil {
			ev.add(name)
		}
		out <- acquired{name, l, err}
	}()
	return out
}

type acquired struct {
	name string
	lock *client.Lock
	err  error
}

func TestLyingWaiters(t *testing.T) {
	t.Run("jump", func(t *testing.T) {
		for _, lie := range []string{"control", "forged", "absent", "replayed"} {
			t.Run(lie, func(t *testing.T) { lyingJump(t, lie) })
		}
	})
	t.Run("pin", func(t *testing.T) {
		for _, attack := range []bool{false, true} {
			t.Run(map[bool]string{false: "control", true: "attack"}[attack], func(t *testing.T) { lyingPin(t, attack) })
		}
	})
	t.Run("rank", func(t *testing.T) {
		for _, grind := range []bool{false, true} {
			t.Run(map[bool]string{false: "control", true: "attack"}[grind], func(t *testing.T) { lyingRank(t, grind) })
		}
	})
	t.Run("flood", func(t *testing.T) {
		for _, sessions := range []int{1, 64} {
			t.Run(fmt.Sprintf("sessions-%d", sessions), func(t *testing.T) { lyingFlood(t, sessions) })
		}
	})
}

// lyingJump: two honest clients wait on a lease; the first is served at
// the first handoff. During its lease the liar queues a fresh session
// (one cohort later than the second honest client) and claims the earlier
// cohort with forged signatures, too few of them, or the real places of
// another of its sessions. The second honest client, who waited all
// along, is served at the next handoff, before the liar's session.
func lyingJump(t *testing.T, lie string) {
	nw := startNet(t, 4, 4, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const res = "jump"
	hc := newClient(t, nw, 0, client.Config{})
	l := newLiar(t, nw, 2)
	f := nw.Keys.Cluster.F
	var ev events

	lk, err := hc.Acquire(ctx, res)
	require.NoError(t, err)
	// Another session of the liar queues now, in the honest waiters'
	// cohort: the members' signed places for it are real, and the liar
	// replays them later. It does not poll, so it is not there to take a
	// turn.
	places0 := l.register(ctx, res, l.key())
	w1 := acquireAsync(ctx, newClient(t, nw, 1, client.Config{}), res, "honest-1", &ev)
	w2 := acquireAsync(ctx, newClient(t, nw, 3, client.Config{}), res, "honest-2", &ev)
	waitersAt(t, nw, len(nw.Members), 3, "both honest clients queued")
	time.Sleep(300 * time.Millisecond) // the replay source stops being present (pollGap)
	require.NoError(t, lk.Release(ctx))

	// Handoff 1 serves one honest client; the other waits on its lease.
	var second <-chan acquired = w2
	var a acquired
	select {
	case a = <-w1:
	case a = <-w2:
		second = w1
	case <-ctx.Done():
		t.Fatal("no honest client served at the first handoff")
	}
	require.NoError(t, a.err)

	// The liar's fresh session queues one cohort later and lies.
	k := l.key()
	regs := l.register(ctx, res, k)
	var cohorts []uint64
	for _, r := range regs {
		cohorts = append(cohorts, r.Cohort)
	}
	want := places0[1].Cohort
	for _, c := range cohorts {
		require.Greater(t, c, want, "the liar's fresh session is in a later cohort than the honest waiter")
	}
	var claim []protocol.SignedPlace
	forged := func(n int) []protocol.SignedPlace {
		var out []protocol.SignedPlace
		for m := 1; m <= n; m++ {
			sig := make([]byte, 64)
			copy(sig, l.key().Session().String())
			out = append(out, protocol.SignedPlace{Place: protocol.Place{Cluster: nw.Keys.Cluster.ID, Resource: res, Holder: l.holder(k).Ref(), Cohort: regs[m].Cohort - 1, Member: m}, Sig: sig})
		}
		return out
	}
	switch lie {
	case "forged":
		claim = forged(f + 1)
	case "absent":
		claim = forged(f)
	case "replayed":
		for m := 1; m <= f+1; m++ {
			claim = append(claim, *places0[m].Place)
		}
	}
	go l.pollUntilFree(ctx, res, k, claim, func() { ev.add("liar") })

	time.Sleep(500 * time.Millisecond) // the liar's claims reach the members
	require.NoError(t, a.lock.Release(ctx))
	b := testwait.Recv(t, second, 30*time.Second, "the second honest client")
	require.NoError(t, b.err)
	log := ev.get()
	t.Logf("%s: served in order %v", lie, log)
	require.Equal(t, -1, indexOf(log[:ev.index(b.name)], "liar"), "the liar was served before the honest waiter: %v", log)
	require.NoError(t, b.lock.Release(ctx))
	// The liar's session is served after, in its own turn.
	require.Eventually(t, func() bool { return ev.index("liar") >= 0 }, 20*time.Second, 10*time.Millisecond, "the liar in its turn")
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// lyingPin: the liar keeps two sessions polling on a free resource and
// never acquires: each of its turns runs out. Reserved shows the liar's
// reservation while it lasts, its lapses are counted at t members at
// least, and an honest Acquire is served (the two identities take turns:
// the honest one has the next slot it draws, or the current one if it
// draws it when it starts waiting).
func lyingPin(t *testing.T, attack bool) {
	nw := startNet(t, 4, 3, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newLiar(t, nw, 2)
	const res = "pin"
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	if attack {
		for range 2 {
			go func() {
				// A fresh session each time the last one's turn came: it
				// never acquires.
				for lctx.Err() == nil {
					l.pollUntilFree(lctx, res, l.key(), nil, func() {})
				}
			}()
		}
		// The liar's session is reserved at t members.
		require.Eventually(t, func() bool {
			k := 0
			for _, m := range nw.Members {
				ref, left := nw.Node(m.Index).Reserved(res)
				if ref.ID == l.id.String() && left > 0 {
					k++
				}
			}
			return k >= nw.Keys.Cluster.File.T
		}, 20*time.Second, 5*time.Millisecond, "Reserved shows the liar's reservation")
		// Alone, the liar has every slot, and lets each run out: its
		// lapses are counted at t members at least (a hang ceiling of a
		// few slots, not a speed bound).
		require.Eventually(t, func() bool {
			lapsed := 0
			for _, k := range lapsesOf(nw, l.id.String()) {
				if k > 0 {
					lapsed++
				}
			}
			return lapsed >= nw.Keys.Cluster.File.T
		}, 30*time.Second, 10*time.Millisecond, "the liar's turns lapse, and are counted")
	}
	before, liarBefore := expiredAt(t, nw), lapsesOf(nw, l.id.String())
	// A hang ceiling: the old queue kept the honest Acquire Queued to
	// any deadline. (Turns kept by whichever waiter a member knew first
	// once held it 15 s, under two concurrent -race runs.)
	hctx, hcancel := context.WithTimeout(ctx, 40*time.Second)
	defer hcancel()
	start := time.Now()
	lk, err := newClient(t, nw, 1, client.Config{}).Acquire(hctx, res)
	require.NoError(t, err, "the honest Acquire is served")
	t.Logf("the honest Acquire was served after %v", time.Since(start).Round(time.Millisecond))

	after, liarAfter := expiredAt(t, nw), lapsesOf(nw, l.id.String())
	t.Logf("reservations expired unused per member: before %v, when the honest client was served %v; the liar's %v, then %v", before, after, liarBefore, liarAfter)
	for i := range after {
		if !attack {
			require.Zero(t, after[i])
		}
	}
	// Served within hctx, where the attack on the old queue kept it
	// Queued to its deadline. How many of the liar's turns it waited out
	// is the queue's unit tests' to say (TestQueueUnusedTurn: about one
	// turn in two).
	require.NoError(t, lk.Release(ctx))
	if attack {
		total := 0.0
		for _, v := range expiredAt(t, nw) {
			total += v
		}
		require.Positive(t, total, "the metric counts the liar's lapses")
	}
}

// oldRank is the rank the queue used to give a session (a hash of
// resource, identity and session): what a grinding holder optimises.
func oldRank(resource string, h protocol.Holder) uint64 {
	d := sha256.New()
	d.Write([]byte(resource))
	d.Write([]byte{0})
	d.Write([]byte(h.ID))
	d.Write(h.Session[:])
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// lyingRank: the holder grinds session keys for the best rank (attack)
// or draws one (control) and starts waiting with it before it releases.
// Both clients that waited on its lease are served before the holder's
// next session.
func lyingRank(t *testing.T, grind bool) {
	nw := startNet(t, 4, 3, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const res = "rank"
	hc := newClient(t, nw, 0, client.Config{})
	l := newLiar(t, nw, 0) // the holder's own identity
	var ev events
	lk, err := hc.Acquire(ctx, res)
	require.NoError(t, err)
	w1 := acquireAsync(ctx, newClient(t, nw, 1, client.Config{}), res, "honest-1", &ev)
	w2 := acquireAsync(ctx, newClient(t, nw, 2, client.Config{}), res, "honest-2", &ev)
	waitersAt(t, nw, len(nw.Members), 2, "both honest clients queued")

	k := l.key()
	if grind {
		best := oldRank(res, l.holder(k))
		for range 2000 {
			if c := l.key(); oldRank(res, l.holder(c)) < best {
				k, best = c, oldRank(res, l.holder(c))
			}
		}
		t.Logf("ground rank %016x", best)
	}
	go l.pollUntilFree(ctx, res, k, nil, func() { ev.add("holder-next") })
	waitersAt(t, nw, len(nw.Members), 3, "the holder's next session queued")
	require.NoError(t, lk.Release(ctx))
	for range 2 {
		var a acquired
		select {
		case a = <-w1:
		case a = <-w2:
		case <-ctx.Done():
			t.Fatal("honest clients not served")
		}
		require.NoError(t, a.err)
		require.NoError(t, a.lock.Release(ctx))
	}
	require.Eventually(t, func() bool { return ev.index("holder-next") >= 0 }, 20*time.Second, 10*time.Millisecond, "the holder's next session in its turn")
	log := ev.get()
	t.Logf("served in order %v", log)
	require.Equal(t, []string{"holder-next"}, log[2:], "every waiter on the holder's lease first: %v", log)
}

// lyingFlood: one identity opens sessions waiting on one resource; each
// member keeps at most WaitersPerClientPerResource of them, and an honest
// waiter still gets a place at every member and is served.
func lyingFlood(t *testing.T, sessions int) {
	nw := startNet(t, 4, 3, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const res = "flood"
	lk, err := newClient(t, nw, 0, client.Config{}).Acquire(ctx, res)
	require.NoError(t, err)
	l := newLiar(t, nw, 2)
	for range sessions {
		l.register(ctx, res, l.key())
	}
	kept := min(sessions, node.DefaultLimits.WaitersPerClientPerResource)
	for _, m := range nw.Members {
		require.Equal(t, kept, nw.Node(m.Index).QueueStats().Waiters, "member %d keeps the liar's sessions up to the cap", m.Index)
	}
	var ev events
	w := acquireAsync(ctx, newClient(t, nw, 1, client.Config{}), res, "honest", &ev)
	waitersAt(t, nw, len(nw.Members), kept+1, "the honest waiter has a place at every member")
	require.NoError(t, lk.Release(ctx))
	a := testwait.Recv(t, w, 30*time.Second, "the honest waiter")
	require.NoError(t, a.err)
	require.NoError(t, a.lock.Release(ctx))
}
