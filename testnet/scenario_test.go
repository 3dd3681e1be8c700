package testnet

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// scenarioSeeds returns the seeds to run: PALISADE_SCENARIO_SEEDS=A-B (or
// a single seed A), else a handful.
func scenarioSeeds(t *testing.T) (seeds []int64, fromEnv bool) {
	if s := os.Getenv("PALISADE_SCENARIO_SEEDS"); s != "" {
		lo, hi, found := strings.Cut(s, "-")
		a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		b, err2 := a, error(nil)
		if found {
			b, err2 = strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		}
		if err1 != nil || err2 != nil || b < a {
			t.Fatalf("PALISADE_SCENARIO_SEEDS=%q: want A-B with A <= B", s)
		}
		for x := a; x <= b; x++ {
			seeds = append(seeds, x)
		}
		return seeds, true
	}
	switch {
	case raceEnabled():
		// Seed 3 is left out under -race: its 4 clients on one resource,
		// with both Byzantine nodes crashed so that exactly t honest nodes
		// are up, split their votes round after round (see the L2 note in
		// scenario.go); slowed down by the race detector it can take
		// 15 s to resolve.
		seeds = []int64{0, 1, 2, 4, 5}
	case testing.Short():
		seeds = []int64{0, 1, 2, 3}
	default:
		seeds = []int64{0, 1, 2, 3, 4, 5, 6, 7}
	}
	return seeds, false
}

// TestScenarios runs seeded scenarios (see RunScenario) and fails on any
// invariant violation: a few fixed seeds by default, or the range
// PALISADE_SCENARIO_SEEDS=A-B (for example 0-199 or 0-9999), ending with a
// summary line (shown with -v, or when a seed fails). Repeat a failing seed
// with PALISADE_SCENARIO_SEEDS=<seed>-<seed>. PALISADE_SCENARIO_PARALLEL
// sets how many run at once (default GOMAXPROCS/2, at least 1; at most
// 2×GOMAXPROCS: a scenario mostly waits on timers and loopback, and the
// liveness budget absorbs the lateness scenarios cause each other). No seed runs twice: a liveness miss is as final as a
// safety violation, and the liveness budget measures the load instead
// (scenario_liveness.go); the summary gives the lateness it absorbed.
func TestScenarios(t *testing.T) {
	seeds, fromEnv := scenarioSeeds(t)
	scale := 1
	if raceEnabled() {
		scale = 3 // the race detector slows everything down several times
	}
	par := max(1, runtime.GOMAXPROCS(0)/2)
	if s := os.Getenv("PALISADE_SCENARIO_PARALLEL"); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 {
			t.Fatalf("PALISADE_SCENARIO_PARALLEL=%q: want a positive integer", s)
		}
		par = min(p, 2*runtime.GOMAXPROCS(0))
	}

	var (
		mu                                sync.Mutex
		sum                               ScenarioReport
		ran, violations, safety, failures int
		lateness, runLateness             []time.Duration
		rounds                            []int64
		shared, reshared, relayed         int
		reshareExcused                    []int64
		restores, restoresApplied         int
		forkSeeds, forkedSeeds            int
		forks, forksRefused               int
		convicted, convictedWire          int
		liarTurnSeeds, liarTurnsMax       int
		reshareTook                       []time.Duration
		elapsed                           []time.Duration
		violating                         []int64
	)
	// Hostile clients (scenario_liars.go, in about a third of the seeds)
	// run, and the fairness bound is a verdict, unless
	// PALISADE_SCENARIO_LIARS=0 or PALISADE_SCENARIO_FAIRNESS=0 (to tell
	// a miss of the one from the other; without the verdict the fairness
	// check is logged).
	liars := os.Getenv("PALISADE_SCENARIO_LIARS") != "0"
	fairness := os.Getenv("PALISADE_SCENARIO_FAIRNESS") != "0"
	start := time.Now()
	sem := make(chan struct{}, par)
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				t.Logf("seed %d (repeat: PALISADE_SCENARIO_SEEDS=%d-%d go test -run 'TestScenarios' ./testnet)", seed, seed, seed)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(scale)*2*time.Minute)
				defer cancel()
				rep, err := runScenario(ctx, t, seed, ScenarioConfig{TimeScale: scale, NoLiars: !liars, Fairness: fairness})
				if err == nil && rep.Rounds == 0 {
					t.Errorf("seed %d: every client acquired in no round: the liveness report counts none (roundClock)", seed)
				}
				mu.Lock()
				ran++
				lateness = append(lateness, rep.Lateness)
				runLateness = append(runLateness, rep.RunLateness)
				rounds = append(rounds, rep.Rounds)
				elapsed = append(elapsed, rep.Elapsed)
				sum.Tokens += rep.Tokens
				sum.Writes += rep.Writes
				sum.StaleRefused += rep.StaleRefused
				sum.StaleAdmitted += rep.StaleAdmitted
				sum.HolderRefused += rep.HolderRefused
				sum.AcquireErrors += rep.AcquireErrors
				sum.EraTokens += rep.EraTokens
				sum.EraSent += rep.EraSent
				sum.EraRefused += rep.EraRefused
				if rep.SharedIdentity {
					shared++
				}
				if rep.Reshare != "" {
					reshared++
					reshareTook = append(reshareTook, rep.ReshareTook)
				}
				if rep.ReshareExcused {
					reshareExcused = append(reshareExcused, seed)
				}
				if rep.LiarTurns > 0 {
					liarTurnSeeds++
					liarTurnsMax = max(liarTurnsMax, rep.LiarTurns)
				}
				if rep.EraRelays > 0 {
					relayed++
				}
				if rep.Fork != "" {
					forkSeeds++
					if rep.Forks > 0 {
						forkedSeeds++
					}
				}
				forks += rep.Forks
				forksRefused += rep.ForksRefused
				convicted += rep.Convicted
				convictedWire += rep.ConvictedWire
				if rep.Restored != 0 {
					restores++
					if rep.RestoreApplied {
						restoresApplied++
					}
				}
				var se *ScenarioError
				switch {
				case errors.As(err, &se):
					violations++
					violating = append(violating, seed)
					if se.Safety() {
						safety++
					}
				case err != nil:
					failures++
				}
				mu.Unlock()
				if err != nil {
					t.Errorf("seed %d: %v", seed, err)
				}
			})
		}
	})
	sort.Slice(elapsed, func(i, j int) bool { return elapsed[i] < elapsed[j] })
	var median, slowest time.Duration
	if len(elapsed) > 0 {
		median, slowest = elapsed[len(elapsed)/2], elapsed[len(elapsed)-1]
	}
	slices.Sort(violating)
	slices.Sort(reshareExcused)
	sort.Slice(reshareTook, func(i, j int) bool { return reshareTook[i] < reshareTook[j] })
	var reshareMedian time.Duration
	if len(reshareTook) > 0 {
		reshareMedian = reshareTook[len(reshareTook)/2]
	}
	slices.Sort(lateness)
	slices.Sort(runLateness)
	slices.Sort(rounds)
	var lateMedian, lateMax, runLateMedian, runLateMax time.Duration
	var roundsMedian, roundsMax int64
	if n := len(lateness); n > 0 {
		lateMedian, lateMax = lateness[n/2], lateness[n-1]
		runLateMedian, runLateMax = runLateness[n/2], runLateness[n-1]
		roundsMedian, roundsMax = rounds[n/2], rounds[n-1]
	}
	line := fmt.Sprintf("scenarios: seeds run %d, violations %d (safety %d) %v, other failures %d, tokens %d, writes admitted %d, stale writes refused %d (admitted %d), live-holder writes refused %d, acquire errors %d, elapsed %v (per seed median %v, max %v, parallel %d); "+
		"liveness: lateness per seed median %v max %v (whole run median %v max %v), rounds to first lock median %d max %d, seeds excused liar turns %d (max %d); "+
		"shared-identity seeds=%d, reshare seeds=%d (DKG median %v; timed out or diverged after timeouts, excused by load %d %v), era-relay seeds=%d, new-era tokens=%d, relayed to honest old nodes=%d (refused other-era %d), restore-from-backup seeds=%d (applied %d); "+
		"fork seeds=%d (with a fork %d), forks made=%d, refused at fences=%d, forensics convictions=%d (with commit certificates %d)",
		ran, violations, safety, violating, failures, sum.Tokens, sum.Writes, sum.StaleRefused, sum.StaleAdmitted, sum.HolderRefused, sum.AcquireErrors,
		time.Since(start).Round(time.Millisecond), median.Round(time.Millisecond), slowest.Round(time.Millisecond), par,
		lateMedian.Round(time.Millisecond), lateMax.Round(time.Millisecond), runLateMedian.Round(time.Millisecond), runLateMax.Round(time.Millisecond), roundsMedian, roundsMax, liarTurnSeeds, liarTurnsMax,
		shared, reshared, reshareMedian.Round(time.Millisecond), len(reshareExcused), reshareExcused, relayed, sum.EraTokens, sum.EraSent, sum.EraRefused, restores, restoresApplied,
		forkSeeds, forkedSeeds, forks, forksRefused, convicted, convictedWire)
	if fromEnv {
		fmt.Println(line) // the summary line, without the file:line prefix
	} else {
		t.Log(line)
	}
}

// runScenario runs seed with cfg, in a fresh Dir and with t's log, once:
// every verdict, liveness included, is final.
func runScenario(ctx context.Context, t *testing.T, seed int64, cfg ScenarioConfig) (ScenarioReport, error) {
	t.Helper()
	cfg.Dir, cfg.Logf = t.TempDir(), t.Logf
	rep, err := RunScenario(ctx, seed, cfg)
	t.Log(rep.String())
	return rep, err
}

// dealtToken signs (resource, epoch, holder) with the first t shares of a
// dealt key set: a valid token made outside any node.
func dealtToken(t *testing.T, keys *Keys, resource string, epoch uint64, holder string) protocol.Token {
	t.Helper()
	return sessionToken(t, keys, resource, epoch, holder, 1)
}

// sessionToken is dealtToken for the lock session number session of
// holder's identity.
func sessionToken(t *testing.T, keys *Keys, resource string, epoch uint64, holder string, session byte) protocol.Token {
	t.Helper()
	stmt := keys.Cluster.Statement(resource, epoch, protocol.Holder{ID: holder, Session: protocol.SessionID{session}})
	var ps []crypto.PartialSig
	for _, d := range keys.NodeDirs[:keys.Cluster.Key.Threshold()] {
		nd, err := node.LoadDir(d)
		require.NoError(t, err)
		p, err := nd.Share.Sign(stmt.SignedBytes())
		require.NoError(t, err)
		ps = append(ps, p)
	}
	sig, _, err := keys.Cluster.Key.Combine(stmt.SignedBytes(), ps)
	require.NoError(t, err)
	return protocol.Token{Statement: stmt, Signature: sig}
}

// TestOracleCatchesViolations feeds the oracle the records of broken runs:
// it must name the invariant each one breaks.
func TestOracleCatchesViolations(t *testing.T) {
	keys, err := Keygen(t.TempDir(), KeygenOptions{N: 4, Clients: 2, Rand: mrand.New(mrand.NewSource(seedFor(t)))})
	require.NoError(t, err)
	p := scenarioPlan{n: 4, f: 1, t: 3, k: 2, r: 1, step: 16, byz: map[int]int{}, ops: make([][]clientOp, 2)}
	fresh := func() *oracle {
		o := newOracle(p, keys.Cluster)
		o.ids = []string{"holder-a", "holder-b"}
		o.start = time.Now()
		o.logf = t.Logf
		return o
	}
	has := func(o *oracle, prefix string) bool {
		for _, v := range o.violations {
			if strings.HasPrefix(v, prefix) {
				return true
			}
		}
		return false
	}

	// Two valid tokens for one (resource, epoch) and different holders.
	o := fresh()
	o.acquired1(0, "client0#1", 0, dealtToken(t, keys, "res-0", 5, "holder-a"))
	o.acquired1(1, "client1#1", 0, dealtToken(t, keys, "res-0", 6, "holder-b"))
	require.Empty(t, o.violations)
	o.acquired1(1, "client1#2", 0, dealtToken(t, keys, "res-0", 5, "holder-b"))
	require.True(t, has(o, "S1:"), "%v", o.violations)
	require.False(t, has(o, "S2:"), "%v", o.violations)

	// Two clients sharing one key (one identity): two Acquire calls
	// handed the same token (one session), or tokens of two sessions for
	// one (resource, epoch), are two locks at once.
	o = fresh()
	o.ids = []string{"holder-a", "holder-a"}
	same := sessionToken(t, keys, "res-0", 5, "holder-a", 1)
	o.acquired1(0, "client0#1", 0, same)
	o.acquired1(1, "client1#1", 0, same)
	require.True(t, has(o, "S1:"), "same token to two locks: %v", o.violations)
	o = fresh()
	o.ids = []string{"holder-a", "holder-a"}
	o.acquired1(0, "client0#1", 0, sessionToken(t, keys, "res-0", 5, "holder-a", 1))
	o.acquired1(1, "client1#1", 0, sessionToken(t, keys, "res-0", 6, "holder-a", 2))
	require.Empty(t, o.violations)
	o.acquired1(1, "client1#2", 0, sessionToken(t, keys, "res-0", 5, "holder-a", 3))
	require.True(t, has(o, "S1:"), "two sessions of one key at one epoch: %v", o.violations)
	// Fence writes by two lock objects at one epoch.
	o = fresh()
	o.guard(guardObs{resource: "res-0", epoch: 4, ran: true, after: 4, wrote: "client0#1"})
	o.guard(guardObs{resource: "res-0", epoch: 4, before: 4, hadBefore: true, after: 4, ran: true, prev: "client0#1", wrote: "client1#1"})
	require.True(t, has(o, "S1:"), "%v", o.violations)

	// Eras: an old-group token at the new floor, a new-group token below
	// it, and tokens of the two groups for one (resource, epoch).
	floor, err := protocol.NextEpochFloor(0)
	require.NoError(t, err)
	o = fresh()
	o.newFloor = floor
	o.acquired1(0, "client0#1", 0, dealtToken(t, keys, "res-0", floor+2, "holder-a"))
	require.True(t, has(o, "era:"), "%v", o.violations)
	o = fresh()
	o.newFloor = floor
	o.acquired1(1, "client1#1", 1, dealtToken(t, keys, "res-0", 9, "holder-b"))
	require.True(t, has(o, "era:"), "%v", o.violations)
	o = fresh()
	o.newFloor = floor
	o.acquired1(1, "client1#1", 1, dealtToken(t, keys, "res-0", floor+2, "holder-b"))
	require.Empty(t, o.violations)
	o.tokenLocked("honest old-group node 2", dealtToken(t, keys, "res-0", floor+2, "holder-a"))
	require.True(t, has(o, "S1:"), "%v", o.violations)

	// A token whose signature does not verify.
	o = fresh()
	bad := dealtToken(t, keys, "res-0", 7, "holder-a")
	bad.Epoch++
	o.acquired1(0, "client0#1", 0, bad)
	require.True(t, has(o, "S2:"), "%v", o.violations)

	// A fence that admits below its barrier, and one whose barrier falls.
	o = fresh()
	o.guard(guardObs{resource: "res-0", epoch: 4, ran: true, after: 4, wrote: "holder-a"})
	require.Empty(t, o.violations)
	o.guard(guardObs{resource: "res-0", epoch: 3, before: 4, hadBefore: true, after: 4, ran: true, prev: "holder-a", wrote: "holder-b"})
	require.True(t, has(o, "S4:"), "%v", o.violations)
	o = fresh()
	o.guard(guardObs{resource: "res-0", epoch: 4, ran: true, after: 4, wrote: "holder-a"})
	o.guard(guardObs{resource: "res-0", epoch: 2, before: 4, hadBefore: true, after: 2, ran: true, prev: "holder-a", wrote: "holder-b"})
	require.True(t, has(o, "S4:"), "%v", o.violations)
	// Two holders admitted at one epoch.
	o = fresh()
	o.guard(guardObs{resource: "res-0", epoch: 4, ran: true, after: 4, wrote: "holder-a"})
	o.guard(guardObs{resource: "res-0", epoch: 4, before: 4, hadBefore: true, after: 4, ran: true, prev: "holder-a", wrote: "holder-b"})
	require.True(t, has(o, "S1:"), "%v", o.violations)

	// Nothing acquired.
	o = fresh()
	o.tm.liveness = time.Second
	o.checkLiveness(0)
	require.True(t, has(o, "liveness:"), "%v", o.violations)

	// Both clients acquired, 3 s into a run with a 1 s bound and no
	// lateness measured (the probe is not running): past the budget, a
	// final liveness violation per client that names what was measured.
	// With the resharing's 5 s as slack it is in time.
	for _, slack := range []time.Duration{0, 5 * time.Second} {
		o = fresh()
		o.tm.liveness = time.Second
		o.start, o.lateStart = time.Now().Add(-3*time.Second), scenarioProbe.total()
		o.acquired1(0, "client0#1", 0, dealtToken(t, keys, "res-0", 5, "holder-a"))
		o.acquired1(1, "client1#1", 0, dealtToken(t, keys, "res-0", 6, "holder-b"))
		o.checkLiveness(slack)
		if slack > 0 {
			require.Empty(t, o.violations)
			continue
		}
		require.Len(t, o.violations, 2, "%v", o.violations)
		require.True(t, has(o, "liveness: client0 first acquired after 3"), "%v", o.violations)
		require.Contains(t, o.violations[1], "bound 1s + reshare slack 0s + 2×lateness 0s")
		require.Contains(t, o.violations[1], "0 rounds") // no round-counting clock here
		var se *ScenarioError
		require.ErrorAs(t, o.scenarioError(7), &se)
		require.False(t, se.Safety())
	}

	// A failed resharing: only a missed deadline is liveness; every other
	// failure is an era violation (safety).
	silent := func(member int, who ...string) error {
		return fmt.Errorf("member %d: %w", member, &dkg.QuorumError{Msg: "2 of 4 new members answered, need t=3", Silent: who})
	}
	diverged := fmt.Errorf("member 2: %w", &dkg.DivergedError{Msg: "only 2 members confirmed cluster.json hash 0102, need 3; a different hash at node3 (12D3)"})
	// The same, at a member whose deals phase had run out first.
	divergedLate := fmt.Errorf("member 2: %w", &dkg.DivergedError{Msg: "only 2 members confirmed cluster.json hash 0102, need 3; a different hash at node3 (12D3)", TimedOut: []string{"deals (missing node1 (12D3))"}})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"the run's context ran out", fmt.Errorf("reshare: member 1: dkg: interrupted in phase deals (run the same command again to resume): %w", context.DeadlineExceeded), "liveness:"},
		{"too few heard in time", fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"), silent(2, "node4"), silent(3))), "liveness:"},
		{"members disagree", fmt.Errorf("reshare: %w", diverged), "era:"},
		{"one disagrees, one timed out", fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"), diverged)), "era:"},
		{"members disagree after a phase timed out, no load", fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"), divergedLate)), "era:"},
		{"one disagrees after a timeout, another refused", fmt.Errorf("reshare: %w", errors.Join(divergedLate,
			fmt.Errorf("member 3: %w", &dkg.QuorumError{Msg: "deal not qualified", Refused: []string{"node2"}}))), "era:"},
		{"too few, one refused", fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"),
			fmt.Errorf("member 3: %w", &dkg.QuorumError{Msg: "deal not qualified", Silent: []string{"node4"}, Refused: []string{"node2"}}))), "era:"},
		{"another cluster.json", errors.New("testnet: member 2 wrote another cluster.json"), "era:"},
		{"the new group does not start", fmt.Errorf("reshare: start the new group: %w", errors.New("listen tcp 127.0.0.1:4001: bind: address already in use")), "era:"},
		{"a bad member list", fmt.Errorf("reshare: member 1: %w: this identity is not a member", dkg.ErrBadMemberList), "era:"},
		{"cancelled, not timed out", fmt.Errorf("reshare: %w", context.Canceled), "era:"},
	} {
		o = fresh()
		o.reshareFailed(tc.err, 6*time.Second, 0, 5*time.Second) // no lateness measured
		require.Len(t, o.violations, 1, tc.name)
		require.True(t, has(o, tc.want), "%s: %v", tc.name, o.violations)
		se := o.scenarioError(7)
		// Violations stay in the error when the nodes then cannot be
		// healed or read: counted as violations.
		healErr := errors.Join(errors.New("testnet: scenario seed 7: heal: restart node 2: boom"), se)
		var got *ScenarioError
		require.ErrorAs(t, healErr, &got, tc.name)
		require.Equal(t, tc.want == "era:", got.Safety(), tc.name)
	}
	require.Nil(t, fresh().scenarioError(7), "no violations, no error (not a typed nil)")

	// A resharing that ran out of time while the load took at least one
	// phase timeout, and all but one phase timeout of its time
	// (k × lateness >= both), is counted, not a violation; just below
	// either, it still fails as liveness. The load never excuses anything
	// but running out of time.
	timedOut := fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"), silent(2, "node4"), silent(3)))
	phase := 5 * time.Second
	for _, tc := range []struct {
		took, late time.Duration
		excused    bool
	}{
		{6 * time.Second, phase / scenarioLatenessK, true},                             // 5 s excused: one phase timeout
		{6 * time.Second, phase/scenarioLatenessK - time.Millisecond, false},           // just below one phase timeout
		{16 * time.Second, 11 * time.Second / scenarioLatenessK, true},                 // 11 s excused of 16 s
		{16 * time.Second, 11*time.Second/scenarioLatenessK - time.Millisecond, false}, // more than a phase left to run
	} {
		o = fresh()
		o.reshareFailed(timedOut, tc.took, tc.late, phase)
		require.Equal(t, tc.excused, o.reshareExcused, "%+v", tc)
		if tc.excused {
			require.Empty(t, o.violations)
		} else {
			require.True(t, has(o, "liveness: the resharing ran out of time (took"), "%v", o.violations)
		}
	}
	// Members that disagree are excused by the same load only when a
	// phase had timed out at one of them: with every phase complete, no
	// load explains it.
	for _, tc := range []struct {
		took, late time.Duration
		excused    bool
	}{
		{6 * time.Second, phase / scenarioLatenessK, true},
		{6 * time.Second, phase/scenarioLatenessK - time.Millisecond, false},
		{16 * time.Second, 11*time.Second/scenarioLatenessK - time.Millisecond, false},
	} {
		o = fresh()
		o.reshareFailed(fmt.Errorf("reshare: %w", errors.Join(silent(1, "node4"), divergedLate)), tc.took, tc.late, phase)
		require.Equal(t, tc.excused, o.reshareExcused, "%+v", tc)
		if tc.excused {
			require.Empty(t, o.violations)
		} else {
			require.True(t, has(o, "era: the resharing diverged after phases timed out"), "%v", o.violations)
		}
	}
	o = fresh()
	o.reshareFailed(fmt.Errorf("reshare: %w", diverged), time.Minute, time.Minute, phase)
	require.True(t, has(o, "era:"), "%v", o.violations)
	require.False(t, o.reshareExcused)
}

// TestScenarioDivergedReshare injects a resharing whose members disagree
// into a scenario run: it must fail as an era (safety) violation. The
// control, a resharing that ran out of time, is a liveness failure.
func TestScenarioDivergedReshare(t *testing.T) {
	const seed = 166 // a reshare seed (scenarioKindSeeds)
	scale := 1
	if raceEnabled() {
		scale = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(scale)*4*time.Minute)
	defer cancel()
	var calls atomic.Int32
	failWith := func(err error) reshareFunc {
		return func(context.Context, string, *Keys, DKGOptions) (*Keys, error) {
			calls.Add(1)
			return nil, err
		}
	}
	timedOut := fmt.Errorf("member 4: %w", &dkg.QuorumError{Msg: "3 of 4 new members answered, need t=3", Silent: []string{"node2"}})
	diverged := errors.Join(timedOut, fmt.Errorf("member 2: %w", &dkg.DivergedError{Msg: "only 2 members confirmed cluster.json hash 0102, need 3; a different hash at node3"}))

	rep, err := runScenario(ctx, t, seed, ScenarioConfig{TimeScale: scale, reshare: failWith(diverged)})
	require.NotEmpty(t, rep.Reshare, "seed %d reshares", seed)
	require.EqualValues(t, 1, calls.Load())
	var se *ScenarioError
	require.ErrorAs(t, err, &se)
	require.True(t, se.Safety(), "%v", err)
	require.Contains(t, err.Error(), "era: the resharing failed")
	require.Contains(t, err.Error(), dkg.ErrDiverged.Error())

	// Control: a resharing that only ran out of time is liveness.
	calls.Store(0)
	_, err = RunScenario(ctx, seed, ScenarioConfig{Dir: t.TempDir(), Logf: t.Logf, TimeScale: scale, reshare: failWith(timedOut)})
	require.EqualValues(t, 1, calls.Load())
	var lse *ScenarioError
	require.ErrorAs(t, err, &lse)
	require.False(t, lse.Safety(), "%v", err)
	require.Contains(t, err.Error(), "liveness: the resharing ran out of time")
}

// leakyStore is a broken barrier store: it admits every epoch and sets the
// barrier to the last one written (no epoch >= barrier check, no max).
type leakyStore struct {
	mu       sync.Mutex
	barriers map[string]uint64
	data     map[string]map[string][]byte
}

func (s *leakyStore) Barrier(_ context.Context, resource string) (uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.barriers[resource]
	return b, ok, nil
}

func (s *leakyStore) Guard(_ context.Context, adm verifier.Admission, write func(verifier.Tx) error) error {
	resource := adm.Resource()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data[resource] == nil {
		s.data[resource] = map[string][]byte{}
	}
	if write != nil {
		if err := write(leakyTx(s.data[resource])); err != nil {
			return err
		}
	}
	s.barriers[resource] = adm.Epoch()
	return nil
}

func (s *leakyStore) Close() error { return nil }

type leakyTx map[string][]byte

func (t leakyTx) Get(k string) ([]byte, bool, error) { v, ok := t[k]; return v, ok, nil }
func (t leakyTx) Put(k string, v []byte) error       { t[k] = append([]byte{}, v...); return nil }
func (t leakyTx) Delete(k string) error              { delete(t, k); return nil }

// TestScenarioCatchesBrokenFence runs real scenarios over a fence whose
// store forgets the barrier check: the stale writes of kept tokens must
// show up as S4 violations.
func TestScenarioCatchesBrokenFence(t *testing.T) {
	for _, seed := range []int64{3, 18, 25} { // seeds with refused stale writes
		rep, err := RunScenario(context.Background(), seed, ScenarioConfig{
			Dir: t.TempDir(), Logf: t.Logf, NoFaults: true, NoByzantine: true,
			newStore: func() verifier.BarrierStore {
				return &leakyStore{barriers: map[string]uint64{}, data: map[string]map[string][]byte{}}
			},
		})
		t.Log(rep)
		if errors.Is(err, ErrViolation) {
			t.Log(err)
			require.Contains(t, err.Error(), "S4:")
			return
		}
		require.NoError(t, err)
	}
	t.Fatal("no scenario caught the broken fence")
}
