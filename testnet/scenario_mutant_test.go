package testnet

// Liveness mutants: faults that really break liveness, run through the
// scenario driver and oracle, to show that the load-aware liveness budget
// (scenario_liveness.go) still flags what the wall-clock bound flagged.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// starve is a liveness bug in every node: the acquisitions of one client
// identity (the victim) are dropped (the stream reset, as a node that
// lost the request would) until holdoff has passed since the workload
// started. No safety rule is touched; the victim simply never gets its
// turn, as with a node that never frees the victim's reservation.
type starve struct {
	victim  string
	start   time.Time
	holdoff time.Duration
	dropped *atomic.Int64
}

var errStarved = errors.New("testnet: mutant: acquisition dropped")

func (s *starve) Request(_ context.Context, _ *Member, proto string, from peer.ID, _ []byte) ([]byte, bool, error) {
	if proto == protocol.ProtoAcquire && from.String() == s.victim && time.Since(s.start) < s.holdoff {
		s.dropped.Add(1)
		return nil, true, errStarved
	}
	return nil, false, nil
}

func (s *starve) Reply(_ *Member, _ string, _ peer.ID, reply []byte) []byte { return reply }

// TestScenarioCatchesStarvation runs a small scenario (no Byzantine nodes,
// no faults, no resharing; 2 clients) whose nodes starve client 0, and
// checks the liveness verdict:
//
//   - held off for good, or for longer than the ceiling (bound plus the
//     capped excuse for lateness): a liveness violation for client0,
//     whatever the load, naming the bound, the lateness and the rounds,
//     and no safety violation;
//   - held off for 1.5 bounds: a violation unless the lateness measured in
//     the window excuses it (k·L above half a bound, which takes a heavily
//     loaded machine); the test checks that the verdict agrees with the
//     figures it reports.
//
// The control, the same scenario without the mutant, passes.
func TestScenarioCatchesStarvation(t *testing.T) {
	scale := 1
	if raceEnabled() {
		scale = 3
	}
	bound := time.Duration(scale) * 2 * time.Second
	const seed = 11
	base := ScenarioConfig{N: 4, Clients: 2, Resources: 1, NoByzantine: true, NoFaults: true, NoReshare: true, NoRestore: true,
		NoSharedIdentities: true, LivenessBound: bound, TimeScale: scale}
	for _, tc := range []struct {
		name    string
		holdoff time.Duration // 0: no mutant
		always  bool          // flagged whatever the load
	}{
		{"control", 0, false},
		{"held off for good", time.Hour, true},
		{"held off past the ceiling", 6 * bound, true},
		{"held off for 1.5 bounds", bound * 3 / 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			var dropped atomic.Int64
			if tc.holdoff > 0 {
				cfg.mutant = func(ids []string) Behaviour {
					return &starve{victim: ids[0], start: time.Now(), holdoff: tc.holdoff, dropped: &dropped}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(scale)*2*time.Minute)
			defer cancel()
			rep, err := runScenario(ctx, t, seed, cfg)
			b := newLivenessBudget(bound, 0)
			t.Logf("%s: dropped %d acquisitions; lateness %v, rounds %d; err %v", tc.name, dropped.Load(), rep.Lateness, rep.Rounds, err)
			if tc.holdoff == 0 {
				require.NoError(t, err)
				return
			}
			require.Positive(t, dropped.Load(), "the mutant dropped the victim's acquisitions")
			excusedEnough := b.at(rep.Lateness) >= tc.holdoff
			if !tc.always && excusedEnough {
				t.Logf("the lateness measured (%v, k=%d) excuses a %v holdoff: not flagged, as the budget says", rep.Lateness, b.k, tc.holdoff)
				require.NoError(t, err)
				return
			}
			var se *ScenarioError
			require.ErrorAs(t, err, &se, "a client starved for %v with a bound of %v must fail liveness", tc.holdoff, bound)
			require.False(t, se.Safety(), "only liveness is broken: %v", err)
			var v0 string
			for _, v := range se.Violations {
				if strings.HasPrefix(v, "liveness: client0 ") {
					v0 = v
				}
				require.False(t, strings.HasPrefix(v, "liveness: client1 "), "the other client is not starved: %v", v)
			}
			require.NotEmpty(t, v0, "client0 is named: %v", err)
			for _, want := range []string{"bound " + bound.String(), "lateness", "budget", "rounds", "past the bound"} {
				require.Contains(t, v0, want)
			}
		})
	}
}

// TestLivenessVerdict pins the liveness budget's arithmetic: bound plus
// slack plus k·L plus the liars' turns, each excuse capped, every
// measured figure in the message.
func TestLivenessVerdict(t *testing.T) {
	const s = time.Second
	b := newLivenessBudget(5*s, 0)
	require.Equal(t, 25*s, b.ceiling(), "bound plus a cap of four bounds")
	for _, tc := range []struct {
		name   string
		slack  time.Duration
		w      livenessWindow
		flag   bool
		within []string
	}{
		{"in time", 0, livenessWindow{acquired: true, took: 2 * s, late: 0, rounds: 3}, false, nil},
		{"on the bound", 0, livenessWindow{acquired: true, took: 5 * s, rounds: 3}, false, nil},
		{"late, no lateness", 0, livenessWindow{acquired: true, took: 5*s + 100*time.Millisecond, late: 20 * time.Millisecond, rounds: 4}, true,
			[]string{"client3 first acquired after 5.1s", "100ms past the bound", "60ms past its budget", "bound 5s", "lateness 20ms", "budget 5.04s", "4 rounds"}},
		{"late, excused by lateness", 0, livenessWindow{acquired: true, took: 7 * s, late: 1500 * time.Millisecond, rounds: 9}, false, nil},
		{"late, more than k·L", 0, livenessWindow{acquired: true, took: 9 * s, late: 1500 * time.Millisecond, rounds: 9}, true,
			[]string{"4s past the bound", "1s past its budget", "2×lateness 1.5s (excused 3s, cap 20s) = budget 8s; 9 rounds"}},
		{"past the ceiling, however late", 0, livenessWindow{acquired: true, took: 26 * s, late: 25 * s, rounds: 40}, true,
			[]string{"21s past the bound", "1s past its budget", "excused 20s, cap 20s"}},
		{"resharing slack", 2 * s, livenessWindow{acquired: true, took: 6 * s, rounds: 3}, false, nil},
		{"liars' turns", 0, livenessWindow{acquired: true, took: 6 * s, rounds: 5, liarTurns: 4}, false, nil},
		{"more than the liars' turns", 0, livenessWindow{acquired: true, took: 6*s + 300*time.Millisecond, rounds: 5, liarTurns: 4}, true,
			[]string{"+ 4 liar turns (excused 1.2s) = budget 6.2s", "100ms past its budget"}},
		{"liars' turns capped", 0, livenessWindow{acquired: true, took: 15*s + time.Millisecond, rounds: 50, liarTurns: 1000}, true,
			[]string{"1000 liar turns (excused 10s) = budget 15s"}},
		{"never acquired", 0, livenessWindow{took: 5*s + 10*time.Millisecond, late: 5 * time.Millisecond, rounds: 61}, true,
			[]string{"client3 never acquired (2 ops): gave up after 5.01s, 10ms past the bound", "61 rounds"}},
		{"never acquired, even in time", 0, livenessWindow{took: 2 * s, rounds: 1}, true, []string{"never acquired"}},
	} {
		b := newLivenessBudget(5*s, tc.slack)
		v := b.judge(3, 2, tc.w)
		require.Equal(t, tc.flag, v != "", "%s: %q", tc.name, v)
		if v != "" {
			require.True(t, strings.HasPrefix(v, "liveness: "), tc.name)
		}
		for _, want := range tc.within {
			require.Contains(t, v, want, tc.name)
		}
	}
}

// TestScenarioCatchesOverlongVoteLease: honest clients that take the
// members' vote timeout for ten times what it is hand out Locks whose
// Deadline, until the Commit is acknowledged, runs past what the members'
// votes hold. The oracle flags every such Lock as a lease violation, not
// a safety one (fencing does not depend on leases); the control, the
// same scenario with the members' vote timeout, passes. A run judges the
// oracle only if some Locks were handed out before their commit: on a
// loaded machine a seed's clients may all have waited (a Wait answer's
// vote commits first), so seeds run in turn, up to overlongSeeds, until
// one does; a run without such Locks must pass.
func TestScenarioCatchesOverlongVoteLease(t *testing.T) {
	base := ScenarioConfig{N: 4, Clients: 2, Resources: 1, NoByzantine: true, NoFaults: true, NoReshare: true, NoRestore: true,
		NoSharedIdentities: true}
	for _, tc := range []struct {
		name string
		vt   time.Duration // the clients' VoteTimeout; 0: the members'
	}{
		{"control", 0},
		{"ten times the members'", 10 * scenarioVoteTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.clientVoteTimeout = tc.vt
			judged := false
			for seed := int64(11); seed < 11+overlongSeeds && !judged; seed++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				rep, err := runScenario(ctx, t, seed, cfg)
				cancel()
				if tc.vt == 0 || rep.AtVote == 0 {
					require.NoError(t, err, "seed %d: %d Locks handed out before their commit", seed, rep.AtVote)
					judged = rep.AtVote > 0
					continue
				}
				judged = true
				var se *ScenarioError
				require.ErrorAs(t, err, &se)
				require.False(t, se.Safety(), "a lease's timing is not safety: %v", err)
				require.NotEmpty(t, se.Violations)
				for _, v := range se.Violations {
					require.True(t, strings.HasPrefix(v, "lease: ") && strings.Contains(v, "handed out before its commit"), "only the lease is flagged: %v", v)
				}
			}
			require.True(t, judged, "no seed of %d handed out a Lock before its commit", overlongSeeds)
		})
	}
}

// overlongSeeds bounds the seeds TestScenarioCatchesOverlongVoteLease
// runs for each case. Alone its first seed hands out Locks before their
// commit; beside a full race run it once did not.
const overlongSeeds = 8
