package testnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// TestJudgeFairness runs the fairness computation on synthetic logs.
func TestJudgeFairness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// wait is an honest Acquire call of client c on res-0 from ms a to b.
	wait := func(c, a, b int) fairWait {
		return fairWait{client: c, key: c, res: "res-0", ttl: time.Second, start: at(a), end: at(b), granted: true}
	}
	released := func(w fairWait, ms int) fairWait { w.released = at(ms); return w }
	registered := func(w fairWait, ms int) fairWait { w.registered = at(ms); return w }
	// sibling is wait with client key k, granted as identity id-k.
	sibling := func(c, k, a, b int) fairWait {
		w := wait(c, a, b)
		w.key, w.id = k, fmt.Sprintf("id-%d", k)
		return w
	}
	cases := []struct {
		name       string
		waits      []fairWait
		liars      []fairGrant
		spans      []fairSpan
		shared     map[int]bool
		violations int
		checked    int
		excluded   int
	}{
		{
			name: "served in order",
			// client0 holds; 1, 2, 3 queue in that order and are served so.
			waits:   []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(2, 30, 200), wait(3, 40, 300)},
			checked: 4,
		},
		{
			name: "one jump",
			// client3 starts after two handoffs that followed client2's
			// start, and is served before client2.
			waits:      []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), wait(2, 30, 400), wait(3, 160, 300)},
			checked:    5,
			violations: 1,
		},
		{
			name: "the queue's order starts at the first Wait",
			// As in "one jump", but client2's first round (slowed by
			// delayed or lying members) met the resource held only after
			// the two handoffs: it joined the queue at 155, and client3
			// may share its cohort.
			waits:   []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), registered(wait(2, 30, 400), 155), wait(3, 160, 300)},
			checked: 5,
		},
		{
			name:       "control: a first Wait before the handoffs",
			waits:      []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), registered(wait(2, 30, 400), 40), wait(3, 160, 300)},
			checked:    5,
			violations: 1,
		},
		{
			name:       "a jump across a fault window is excluded",
			waits:      []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), wait(2, 30, 400), wait(3, 160, 300)},
			spans:      []fairSpan{{from: at(350), to: at(850), why: "restart node 2"}},
			checked:    4,
			excluded:   1,
			violations: 0,
		},
		{
			name: "others served while the client waits for its own lock",
			// client1's second call waits inside its Client until its
			// first lock is released at 500: three others are served
			// meanwhile, and its wait in the queue starts at 500.
			waits: []fairWait{released(wait(1, 0, 10), 500), wait(1, 20, 600),
				wait(2, 30, 100), wait(3, 120, 200), wait(4, 220, 300)},
			checked: 5,
		},
		{
			name: "control: the same served while a waiter of its own is in the queue",
			// The first lock is another client's: client1 was in the queue
			// from 20 and three that started after it were served first.
			waits: []fairWait{released(wait(0, 0, 10), 500), wait(1, 20, 600),
				wait(2, 30, 100), wait(3, 120, 200), wait(4, 220, 300)},
			checked:    5,
			violations: 1,
		},
		{
			name: "a liar's grant is not counted",
			// The liar is granted twice while client1 waits: neither is an
			// honest grant, so client1 is within its bound (nobody ahead,
			// no honest grant before it).
			waits:   []fairWait{wait(0, 0, 10), wait(1, 20, 300)},
			liars:   []fairGrant{{res: "res-0", at: at(100), who: "liar0"}, {res: "res-0", at: at(200), who: "liar0"}},
			checked: 2,
		},
		{
			name: "liars' grants end the generation",
			// Two liar grants after client1's start close its generations:
			// client2, who starts after them and is served first, jumped.
			waits:      []fairWait{wait(0, 0, 10), wait(1, 20, 400), wait(2, 250, 300)},
			liars:      []fairGrant{{res: "res-0", at: at(100), who: "liar0"}, {res: "res-0", at: at(200), who: "liar0"}},
			checked:    3,
			violations: 1,
		},
		{
			name:  "a shared key waits one generation more",
			waits: []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), wait(2, 30, 400), wait(3, 160, 300)},
			// client2's key is shared: client3 may be in its cohort.
			shared:  map[int]bool{2: true},
			checked: 5,
		},
		{
			name: "a shared key: fair between identities",
			// client2 and client5 share key 2. client5 is served three
			// times while client2 waits: grants to their own identity,
			// which the queue orders by session hash. Of the others, only
			// client1 (waiting since before the last of them) is served
			// first.
			waits: []fairWait{released(sibling(0, 0, 0, 10), 15), sibling(2, 2, 20, 500), released(sibling(5, 2, 30, 100), 105),
				released(sibling(5, 2, 110, 200), 205), released(sibling(5, 2, 210, 300), 305), released(sibling(1, 1, 220, 400), 405)},
			shared:  map[int]bool{2: true},
			checked: 6,
		},
		{
			name: "control: other identities' grants still count",
			// The same, but client5 has a key of its own: four grants to
			// others before client2, with two of them waiting when it
			// started or soon after.
			waits: []fairWait{released(sibling(0, 0, 0, 10), 15), sibling(2, 2, 20, 500), released(sibling(5, 5, 30, 100), 105),
				released(sibling(5, 5, 110, 200), 205), released(sibling(5, 5, 210, 300), 305), released(sibling(1, 1, 220, 400), 405)},
			shared:     map[int]bool{},
			checked:    6,
			violations: 1,
		},
		{
			name: "a lease that ran out by its TTL is excluded",
			waits: func() []fairWait {
				ws := []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), wait(2, 30, 400), wait(3, 160, 300)}
				ws[1].ranOut = true
				return ws
			}(),
			checked:  2, // client0's and client1's windows end before client1's lease
			excluded: 3,
		},
		{
			name: "a wait whose session lapsed is excluded",
			// client2 jumped over as in "one jump", but its own turn had
			// run out unused at an honest node: the queue's rules, not
			// unfairness.
			waits: func() []fairWait {
				ws := []fairWait{wait(0, 0, 10), wait(1, 20, 100), wait(4, 25, 150), wait(2, 30, 400), wait(3, 160, 300)}
				ws[3].lapsed = "node 5"
				return ws
			}(),
			checked:  4,
			excluded: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judgeFairness(c.waits, c.liars, c.spans, c.shared)
			require.Len(t, v.violations, c.violations, "%v", v.violations)
			require.Equal(t, c.checked, v.checked, "checked")
			require.Equal(t, c.excluded, v.excluded, "excluded")
			for _, s := range v.violations {
				require.True(t, strings.HasPrefix(s, "fairness:"), s)
			}
		})
	}
}

// unfairQueue is a node that serves its queue unfairly, for testing the
// oracle only: while a waiter it prefers is present (it sent a Wait in the
// last unfairPresent and was not committed since), it answers the Wait of
// every other waiter itself: not free, no place. The honest node below
// then stops seeing those waiters, drops them (their reservation lapses
// unused), and serves the preferred one. Prefer later arrivals and the
// queue is LIFO; put one identity after all others and it goes last.
type unfairQueue struct {
	passThrough
	prefer func(a, b unfairWaiter) bool // a goes before b
	first  func(id string)              // called on every Wait, if set
	mu     sync.Mutex
	seen   map[string]map[protocol.SessionID]*unfairWaiter
}

type unfairWaiter struct {
	id          string
	first, last time.Time
}

// unfairPresent is how long after its last Wait an unfair node takes a
// waiter for present. At 500 ms the LIFO queue was caught on 3 and 5
// seeds of 12 (-race, two runs) once the client stopped reusing a session
// after a lost Commit, near the test's floor of 2; at 1 s on 5-7 of 12
// (four runs), and the last-served queue on 6-10.
const unfairPresent = time.Second

func lifoQueue() Behaviour {
	return &unfairQueue{prefer: func(a, b unfairWaiter) bool { return a.first.After(b.first) }}
}

// lastQueues returns the nodes of one run that all serve the same
// identity last, always: the first any of them sees waiting goes only
// when no other identity waits. (Their mirror, nodes that serve one
// identity first, is not among the mutants: a favourite that is served
// and comes back once during another's wait stays inside the one
// generation of slack the bound allows, and was caught on 0 to 6 seeds
// of 12 from run to run, too few to tell from timing.)
func lastQueues() func() Behaviour {
	var mu sync.Mutex
	last := "" // set on first sight, by any node of the run
	prefer := func(a, b unfairWaiter) bool {
		mu.Lock()
		defer mu.Unlock()
		return b.id == last && a.id != last
	}
	first := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if last == "" {
			last = id
		}
	}
	return func() Behaviour { return &unfairQueue{prefer: prefer, first: first} }
}

func (u *unfairQueue) Request(ctx context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	switch proto {
	case protocol.ProtoCommit:
		if r, err := protocol.UnmarshalCommitRequest(req); err == nil {
			u.mu.Lock()
			delete(u.seen[r.Token.Resource], r.Token.Holder.Session)
			u.mu.Unlock()
		}
	case protocol.ProtoWait:
		r, err := protocol.UnmarshalWaitRequest(req)
		if err != nil || r.Key.IsZero() {
			return nil, false, nil
		}
		now := time.Now()
		s := r.Key.Session()
		if u.first != nil {
			u.first(from.String())
		}
		u.mu.Lock()
		if u.seen == nil {
			u.seen = map[string]map[protocol.SessionID]*unfairWaiter{}
		}
		q := u.seen[r.Resource]
		if q == nil {
			q = map[protocol.SessionID]*unfairWaiter{}
			u.seen[r.Resource] = q
		}
		w := q[s]
		if w == nil {
			w = &unfairWaiter{id: from.String(), first: now}
			q[s] = w
		}
		w.last = now
		hide := false
		for other, x := range q {
			if now.Sub(x.last) > unfairPresent {
				if now.Sub(x.last) > 4*unfairPresent {
					delete(q, other)
				}
				continue
			}
			if other != s && u.prefer(*x, *w) {
				hide = true
			}
		}
		u.mu.Unlock()
		if !hide {
			return nil, false, nil
		}
		_ = sleepCtx(ctx, min(r.MaxWait, 50*time.Millisecond))
		return protocol.WaitReply{Code: protocol.CodeOK}.Marshal(), true, nil
	}
	return nil, false, nil
}

// unfairPlan pins a contended scenario: 4 clients on one resource, every
// node honest but for the queue, no faults, no resharing, no liars and
// no fork (seed 24 would draw one; the fork kind is drawn last, so the
// rest of each plan is as before), so the fairness check judges every
// wait; and a key per client, since the queue is fair between identities
// only (clients sharing a key are one to it, and the oracle judges them
// so).
var unfairPlan = ScenarioConfig{Clients: 4, Resources: 1, NoByzantine: true, NoFaults: true, NoReshare: true, NoRestore: true, NoLiars: true, NoFork: true, NoSharedIdentities: true, Fairness: true}

// unfairSeeds are the seeds of TestFairnessOracleCatchesUnfairNodes. An
// unfair queue in these tests can only hide a turn (the honest code
// underneath still decides whose turn it is), so whether a waiter is
// passed over often enough for the bound to catch depends on timing: of
// seeds 1-24, these caught unfair queues most often, each about half the
// time under -race.
var unfairSeeds = []int64{1, 2, 3, 5, 7, 9, 14, 15, 16, 17, 22, 24}

// moreUnfairSeeds are run after unfairSeeds only while a kind of unfair
// queue has not yet shown on enough of them: a loaded machine leaves a
// waiter out of the fairness check whenever it lets its turn pass, so
// there fewer seeds show an unfair queue (beside a 400-seed sweep at
// eight at a time and under -race: 1 or 2 in 20, against about one in
// two alone). Each passed with honest queues when they were chosen.
var moreUnfairSeeds = []int64{4, 6, 8, 10, 11, 12, 13, 18, 19, 20, 21, 23,
	25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48}

// honestSeeds are the seeds TestFairnessHonestQueues runs with honest
// queues: all of unfairSeeds. 14, 15 and 22 were left out while the
// oracle counted a waiter's generations from its Acquire call: they
// failed honest queues once in about 6 runs, a waiter's first Wait
// coming two handoffs after its call. It counts them from the waiter's
// first Wait now (fairWait.registered).
var honestSeeds = unfairSeeds

// unfairFound is how many seeds must show each kind of unfair queue in
// TestFairnessOracleCatchesUnfairNodes.
const unfairFound = 2

// TestFairnessOracleCatchesUnfairNodes runs pinned seeds through the real
// scenario driver with every node serving its queue LIFO, or serving one
// identity last (unfairQueue): the oracle must report fairness violations
// on at least unfairFound seeds for each. Seeds run in order, unfairSeeds
// first, and a kind stops running once it has shown on unfairFound: alone
// that is after a few seeds, and on a loaded machine, where fewer seeds
// show it, moreUnfairSeeds run until it has, so load
// costs time (up to 48 seeds), not the verdict.
// TestFairnessHonestQueues runs most of the same seeds with honest queues.
func TestFairnessOracleCatchesUnfairNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	unfair := []struct {
		name string
		run  func() func() Behaviour // the nodes of one run
	}{{"LIFO", func() func() Behaviour { return lifoQueue }}, {"last", lastQueues}}
	found := make([]int, len(unfair)) // seeds with violations
	ran := make([]int, len(unfair))
	for _, seed := range append(slices.Clone(unfairSeeds), moreUnfairSeeds...) {
		if slices.Min(found) >= unfairFound {
			break
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := unfairPlan
			cfg.Logf, cfg.TimeScale = t.Logf, 1
			if raceEnabled() {
				cfg.TimeScale = 3
			}
			for i, u := range unfair {
				if found[i] >= unfairFound {
					continue
				}
				cfg.Dir, cfg.everyNode = t.TempDir(), u.run()
				_, err := RunScenario(ctx, seed, cfg)
				v := fairnessViolations(t, err)
				t.Logf("%s queues: %v", u.name, v)
				ran[i]++
				if len(v) > 0 {
					found[i]++
				}
			}
		})
	}
	// Timing decides how often an unfair queue passes a waiter over in
	// one run: about one seed in two alone, so unfairFound of the 48
	// almost surely show it even where load hides most of them.
	for i, u := range unfair {
		t.Logf("%s queues showed as unfair on %d of %d seeds run", u.name, found[i], ran[i])
		require.GreaterOrEqual(t, found[i], unfairFound, "%s queues must show as unfair", u.name)
	}
}

// TestFairnessHonestQueues runs honestSeeds, most of the seeds of
// TestFairnessOracleCatchesUnfairNodes, with honest queues: no fairness
// violation, on the first run. A waiter that let its turn pass once told
// it (its session lapsed at an honest node, however slow the machine) is
// left out by the oracle, so the verdict does not depend on load and
// nothing is retried.
func TestFairnessHonestQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	for _, seed := range honestSeeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			require.NoError(t, runPinnedScenario(t, seed, unfairPlan))
		})
	}
}

// fairnessViolations are the fairness violations of a scenario's error;
// it fails t on an error that is not a *ScenarioError.
func fairnessViolations(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var se *ScenarioError
	require.True(t, errors.As(err, &se), "%v", err)
	var out []string
	for _, v := range se.Violations {
		if strings.HasPrefix(v, "fairness:") {
			out = append(out, v)
		}
	}
	return out
}

// TestNotHolderRefusalsHonestOnly: the "ended under it" check counts the
// not-holder refusals of honest members only (seed 38: a Byzantine
// member and one honest member refused a Release as not-holder on a
// resource whose only liar never sends one).
func TestNotHolderRefusalsHonestOnly(t *testing.T) {
	notHolder := func(i int) *client.NodeError {
		return &client.NodeError{Index: i, Err: &protocol.RefusedError{Code: protocol.CodeNotHolder}}
	}
	stale := &client.NodeError{Index: 2, Err: &protocol.RefusedError{Code: protocol.CodeStale}}
	err := fmt.Errorf("client: release: %w", &client.QuorumError{Op: "release", Need: 3, Got: 1, Nodes: []*client.NodeError{notHolder(1), stale, notHolder(4)}})
	require.Equal(t, 2, notHolderRefusals(err, nil))
	require.Equal(t, 1, notHolderRefusals(err, map[int]int{4: 0}), "member 4 is Byzantine")
	require.Zero(t, notHolderRefusals(nil, nil))
}
