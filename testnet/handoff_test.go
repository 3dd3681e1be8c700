package testnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// TestFairHandoff: clients that all want one resource, each releasing and
// asking again at once, are served in turn (push handoff, DESIGN L2): the
// nodes hold a released resource for the client that waited first, so the
// client that just released, asking again, goes behind everyone who
// waited for it. No client gets three grants while another, waiting all
// along, gets none; every client completes its cycles.
func TestFairHandoff(t *testing.T) {
	const clients, cycles = 4, 6
	nw := startNet(t, 4, clients, Options{})
	var (
		mu    sync.Mutex
		order []int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := make(chan struct{})
	for i := range clients {
		c := newClient(t, nw, i, client.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range cycles {
				l, err := c.Acquire(ctx, "fair")
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("client %d release: %w", i, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("grant order: %v", order)
	require.Len(t, order, clients*cycles)
	// Until a client has finished (and stopped waiting), nobody gets a
	// third grant while another client gets none in between.
	done := map[int]int{}
	for k, c := range order {
		done[c]++
		if done[c] == cycles {
			order = order[:k+1]
			break
		}
	}
	for a := range clients {
		for b := range clients {
			if a == b {
				continue
			}
			run := 0
			for _, c := range order {
				switch c {
				case a:
					run++
					require.Less(t, run, 3, "client %d got 3 grants while client %d, waiting, got none: %v", a, b, order)
				case b:
					run = 0
				}
			}
		}
	}
}

// TestOnePairingPerToken: nodes do not check the signature of a Commit or
// Release from the holder of the statement they voted for; a node that
// did not vote checks it once. Over many cycles the nodes' pairings stay
// below one per token per non-voting node.
func TestOnePairingPerToken(t *testing.T) {
	const cycles = 10
	nw := startNet(t, 4, 1, Options{})
	c := newClient(t, nw, 0, client.Config{})
	ctx := context.Background()
	for range cycles {
		l, err := c.Acquire(ctx, "fast")
		require.NoError(t, err)
		verify(t, nw, l.Token())
		require.NoError(t, l.Release(ctx))
	}
	var checks uint64
	for i := 1; i <= 4; i++ {
		checks += nw.Node(i).LimitStats().TokenChecks
	}
	t.Logf("%d cycles: %d signature checks on the nodes", cycles, checks)
	// Each token reaches at most N - t = 1 node that did not vote.
	require.LessOrEqual(t, checks, uint64(cycles))
}

// commitDropper resets the stream of the first Commit each member it
// decorates gets from one client: the first of ids that sends one (the
// victim), and records that Commit's session.
type commitDropper struct {
	passThrough
	ids     map[string]bool
	mu      sync.Mutex
	victim  string
	dropped map[int]protocol.SessionID // member -> the session dropped
}

func (d *commitDropper) Request(_ context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	if proto != protocol.ProtoCommit || !d.ids[from.String()] {
		return nil, false, nil
	}
	r, err := protocol.UnmarshalCommitRequest(req)
	if err != nil {
		return nil, false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.victim == "" {
		d.victim = from.String()
	}
	if _, ok := d.dropped[m.Index]; ok || from.String() != d.victim {
		return nil, false, nil
	}
	d.dropped[m.Index] = r.Token.Holder.Session
	return nil, true, errors.New("commit dropped")
}

func (d *commitDropper) lost() (string, map[int]protocol.SessionID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.victim, maps.Clone(d.dropped)
}

// TestLostCommitQueuesAgain: a waiter whose turn came but whose Commit
// fewer than t members took (two of four drop its first one) releases
// the candidate's leases, and a member that took that session's Commit
// or Release queues the session no more. So the waiter goes on in a new
// session, which queues: while the next waiter, served meanwhile, holds
// the resource, every member keeps it in line beside the third waiter
// (which keeps the queue from emptying and forgetting), and it is served
// after that one. (Before, it went on in the spent session: long polls
// that no member queued, passed over by every later waiter until the
// queue emptied.)
func TestLostCommitQueuesAgain(t *testing.T) {
	nw := startNet(t, 4, 4, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := newClient(t, nw, 0, client.Config{})
	lh, err := holder.Acquire(ctx, "r")
	require.NoError(t, err)

	type result struct {
		l   *client.Lock
		err error
	}
	waiting := map[string]chan result{} // client ID -> its Acquire's result
	drop := &commitDropper{ids: map[string]bool{}, dropped: map[int]protocol.SessionID{}}
	waiters := func(k int) func() bool { return queuedAtEvery(nw, k) }
	var clients []*client.Client
	for i := 1; i <= 3; i++ {
		c := newClient(t, nw, i, client.Config{})
		drop.ids[c.ID()] = true
		clients = append(clients, c)
	}
	nw.SetBehaviour(1, drop)
	nw.SetBehaviour(2, drop)
	for i, c := range clients {
		ch := make(chan result, 1)
		waiting[c.ID()] = ch
		go func() {
			l, err := c.Acquire(ctx, "r")
			ch <- result{l, err}
		}()
		require.Eventually(t, waiters(i+1), testwait.HangCeiling, 5*time.Millisecond, "%d waiters at every member", i+1)
	}
	// next is the waiter served next; it must not be the victim.
	next := func(what string) (string, *client.Lock) {
		t.Helper()
		deadline := time.After(testwait.HangCeiling)
		for {
			for id, ch := range waiting {
				select {
				case r := <-ch:
					require.NoError(t, r.err, what)
					delete(waiting, id)
					return id, r.l
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("nobody was served %s", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	require.NoError(t, lh.Release(ctx))

	// The first waiter's turn: two members drop its Commit, so its
	// candidate fails and the next waiter is served.
	id, l := next("after the first waiter's Commit was dropped")
	victim, lost := drop.lost()
	require.NotEqual(t, victim, id, "the waiter whose Commit was dropped was served first")
	require.Len(t, lost, 2, "both members dropped the first waiter's Commit")
	require.Equal(t, lost[1], lost[2])

	// While it holds the resource, the victim waits in line at every
	// member, beside the third waiter.
	require.Eventually(t, waiters(2), testwait.HangCeiling, 5*time.Millisecond,
		"the waiter whose session %s lost its Commit must wait in line at every member beside the third while the resource is held", lost[1].Hash().String()[:8])
	require.NoError(t, l.Release(ctx))
	id, l = next("after the second waiter")
	require.NotEqual(t, victim, id, "the third waiter, in line before the victim's new session, goes first")
	require.NoError(t, l.Release(ctx))
	id, l = next("after the third waiter")
	require.Equal(t, victim, id)
	require.NotEqual(t, lost[1], l.Token().Holder.Session, "the victim goes on in a new session")
	require.NoError(t, l.Release(ctx))
}

// releaseDelayer holds every Release for delay before the honest node
// takes it: the member learns of a release late.
type releaseDelayer struct {
	passThrough
	delay time.Duration
}

func (d releaseDelayer) Request(ctx context.Context, _ *Member, proto string, _ peer.ID, _ []byte) ([]byte, bool, error) {
	if proto == protocol.ProtoRelease {
		_ = sleepCtx(ctx, d.delay)
	}
	return nil, false, nil
}

// TestWaitGivesLaggingMembersTime: when a release reaches some members
// well after others (here two of four get it 400 ms late, as on a loaded
// machine), the waiter holding the first members' votes waits for the
// late ones, whose answers showed the lease the voters moved past, and
// takes its turn from the Wait answers: no Acquire round, the next epoch.
// (With a fixed 100 ms grace it withdrew its votes as if the members
// disagreed on whose turn it was, and went on by rounds.)
func TestWaitGivesLaggingMembersTime(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder, waiter := newClient(t, nw, 0, client.Config{}), newClient(t, nw, 1, client.Config{})
	lh, err := holder.Acquire(ctx, "r")
	require.NoError(t, err)
	ch := make(chan *client.Lock, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "r")
		if err != nil {
			errs <- err
			return
		}
		ch <- l
	}()
	requireWaitersQueued(t, nw, 4, "the waiter is queued at every member")
	var acquires sync.Map // member -> Acquire requests from the waiter since the release
	nw.ObserveRequests(func(i int, proto string, from peer.ID, _ []byte) {
		if proto == protocol.ProtoAcquire && from.String() == waiter.ID() {
			n, _ := acquires.LoadOrStore(i, new(int64))
			atomic.AddInt64(n.(*int64), 1)
		}
	})
	defer nw.ObserveRequests(nil)
	nw.SetBehaviour(3, releaseDelayer{delay: 400 * time.Millisecond})
	nw.SetBehaviour(4, releaseDelayer{delay: 400 * time.Millisecond})
	require.NoError(t, lh.Release(ctx))
	var l *client.Lock
	select {
	case l = <-ch:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(testwait.HangCeiling):
		t.Fatal("the waiter was not served")
	}
	rounds := map[int]int64{}
	acquires.Range(func(k, v any) bool { rounds[k.(int)] = atomic.LoadInt64(v.(*int64)); return true })
	require.Empty(t, rounds, "the waiter's turn came from its Wait answers, without Acquire rounds")
	require.Equal(t, lh.Epoch()+1, l.Epoch())
	require.NoError(t, l.Release(ctx))
}

// waitHolder holds every Wait without a word until the test ends (past
// the node's own request timeout): a member that neither answers nor
// resets.
type waitHolder struct {
	passThrough
	done <-chan struct{}
}

func (h waitHolder) Request(_ context.Context, _ *Member, proto string, _ peer.ID, _ []byte) ([]byte, bool, error) {
	if proto != protocol.ProtoWait {
		return nil, false, nil
	}
	<-h.done
	return nil, true, errors.New("wait held")
}

// TestWaitPollsDespiteSilentMember: a waiter whose registering Wait one
// member holds without a word still long-polls the others, so it is
// there for its turn and served when the holder releases. (It waited for
// every member's answer first: the silent member held it to the client's
// request timeout, a minute here, while the others dropped a waiter that did not
// poll; in scenario seed 597 it was passed over so for half a second.)
func TestWaitPollsDespiteSilentMember(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	nw := startNet(t, 4, 2, Options{})
	nw.SetBehaviour(4, waitHolder{done: done})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := newClient(t, nw, 0, client.Config{})
	waiter := newClient(t, nw, 1, client.Config{RequestTimeout: time.Minute})
	lh, err := holder.Acquire(ctx, "r")
	require.NoError(t, err)
	var waits sync.Map // member -> Waits from the waiter
	nw.ObserveRequests(func(i int, proto string, from peer.ID, _ []byte) {
		if proto == protocol.ProtoWait && from.String() == waiter.ID() {
			n, _ := waits.LoadOrStore(i, new(int64))
			atomic.AddInt64(n.(*int64), 1)
		}
	})
	defer nw.ObserveRequests(nil)
	ch := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "r")
		if err == nil {
			err = l.Release(ctx)
		}
		ch <- err
	}()
	// Registered (one Wait) and then long-polling (a second) at each of
	// the three members that answer.
	polling := func() bool {
		for i := 1; i <= 3; i++ {
			n, ok := waits.Load(i)
			if !ok || atomic.LoadInt64(n.(*int64)) < 2 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, polling, testwait.HangCeiling, 5*time.Millisecond, "the waiter long-polls the members that answer")
	require.NoError(t, lh.Release(ctx))
	select {
	case err := <-ch:
		require.NoError(t, err)
	case <-time.After(testwait.HangCeiling):
		t.Fatal("the waiter was not served")
	}
}

// TestAbandonedWaitLeavesQueue: a waiter whose Acquire gives up (its
// context ends) takes its session out of every member's queue, where it
// would otherwise keep one of its identity's places and could be first in
// line for a turn nobody takes. The members' WaiterTTL is an hour here, so
// nothing but the leave can empty their queues; the waiter that goes on
// waiting keeps its place and is served.
func TestAbandonedWaitLeavesQueue(t *testing.T) {
	rules := node.Rules{MaxEpochStep: protocol.DefaultMaxEpochStep, VoteTimeout: 2 * time.Second, DefaultTTL: 10 * time.Second,
		MaxTTL: protocol.MaxTTL, ReserveFor: 2 * time.Second, WaiterTTL: time.Hour}
	nw := startNet(t, 4, 3, Options{Rules: rules})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := newClient(t, nw, 0, client.Config{})
	lh, err := holder.Acquire(ctx, "r")
	require.NoError(t, err)
	waiters := func(k int) func() bool { return queuedAtEvery(nw, k) }
	quitter, stayer := newClient(t, nw, 1, client.Config{}), newClient(t, nw, 2, client.Config{})
	qctx, quit := context.WithCancel(ctx)
	quitErr := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx, "r")
		quitErr <- err
	}()
	require.Eventually(t, waiters(1), testwait.HangCeiling, 5*time.Millisecond, "the quitter waits at every member")
	stayed := make(chan *client.Lock, 1)
	go func() {
		l, err := stayer.Acquire(ctx, "r")
		assert.NoError(t, err)
		stayed <- l
	}()
	require.Eventually(t, waiters(2), testwait.HangCeiling, 5*time.Millisecond, "both wait at every member")

	quit()
	select {
	case err := <-quitErr:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testwait.HangCeiling):
		t.Fatal("the quitter's Acquire did not return")
	}
	require.Eventually(t, waiters(1), testwait.HangCeiling, 5*time.Millisecond, "the quitter left every member's queue")

	require.NoError(t, lh.Release(ctx))
	select {
	case l := <-stayed:
		require.NotNil(t, l)
		require.NoError(t, l.Release(ctx))
	case <-time.After(testwait.HangCeiling):
		t.Fatal("the waiter that stayed was not served")
	}
	require.Eventually(t, waiters(0), testwait.HangCeiling, 5*time.Millisecond)
}

// queuedAtEvery reports whether every member of nw queues exactly k
// waiters in all.
func queuedAtEvery(nw *Network, k int) func() bool {
	return func() bool {
		for _, m := range nw.Members {
			if nw.Node(m.Index).QueueStats().Waiters != k {
				return false
			}
		}
		return true
	}
}
