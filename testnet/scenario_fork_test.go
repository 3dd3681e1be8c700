package testnet

// Mutants of the fork kind (scenario_fork.go): a resource and a
// forensics broken on purpose, run through the scenario driver and
// oracle on pinned fork seeds, to show that the oracle's fork
// expectations catch them. The control is TestScenarioKinds' fork rows:
// the same seeds pass with the real fences and forensics.

import (
	"context"
	"errors"
	mrand "math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// forkMutantSeeds are fork seeds of N=4 (one per mode) that the mutants
// run; a mutant must be caught on at least one of them (a run in which
// the attack made no fork cannot catch it).
var forkMutantSeeds = []int64{24, 41, 55}

// equalStore is a barrier store as before issue 21: it refuses an epoch
// below the barrier (ErrStale) and admits any token at or above it, so a
// second holder at the barrier's epoch is admitted, unless refuse is set:
// then it is refused with refuse instead of verifier.ErrFork.
type equalStore struct {
	refuse   error
	mu       sync.Mutex
	barriers map[string]uint64
	holders  map[string]protocol.Holder
	data     map[string]map[string][]byte
}

func newEqualStore(refuse error) *equalStore {
	return &equalStore{refuse: refuse, barriers: map[string]uint64{}, holders: map[string]protocol.Holder{}, data: map[string]map[string][]byte{}}
}

func (s *equalStore) Barrier(_ context.Context, resource string) (uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.barriers[resource]
	return b, ok, nil
}

func (s *equalStore) Guard(_ context.Context, adm verifier.Admission, write func(verifier.Tx) error) error {
	resource, epoch := adm.Resource(), adm.Epoch()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.barriers[resource]
	if ok && epoch < b {
		return &verifier.StaleError{Resource: resource, Epoch: epoch, Barrier: b}
	}
	if ok && epoch == b && adm.Holder() != s.holders[resource] && s.refuse != nil {
		return s.refuse
	}
	if s.data[resource] == nil {
		s.data[resource] = map[string][]byte{}
	}
	if write != nil {
		if err := write(leakyTx(s.data[resource])); err != nil {
			return err
		}
	}
	if !ok || epoch > b {
		s.barriers[resource], s.holders[resource] = epoch, adm.Holder()
	}
	return nil
}

func (s *equalStore) Close() error { return nil }

// runForkMutant runs the fork seeds with cfg until the oracle reports a
// violation, and returns it; it fails the test if no seed made a fork or
// a seed failed otherwise.
func runForkMutant(t *testing.T, cfg func(seed int64) ScenarioConfig) *ScenarioError {
	t.Helper()
	scale := 1
	if raceEnabled() {
		scale = 3
	}
	for _, seed := range forkMutantSeeds {
		p := newScenarioPlan(seed, ScenarioConfig{}, len(ScenarioBehaviours()))
		require.NotNil(t, p.fork, "seed %d no longer draws a fork: pick another", seed)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(scale)*2*time.Minute)
		c := cfg(seed)
		c.TimeScale = scale
		rep, err := runScenario(ctx, t, seed, c)
		cancel()
		var se *ScenarioError
		if errors.As(err, &se) {
			return se
		}
		require.NoError(t, err)
		require.Zero(t, rep.Forks, "seed %d made a fork and the mutant was not caught", seed)
		t.Logf("seed %d made no fork; next", seed)
	}
	t.Fatal("no seed made a fork")
	return nil
}

// hasViolation reports whether se has a violation starting with prefix
// and containing every one of want.
func hasViolation(se *ScenarioError, prefix string, want ...string) bool {
	return slices.ContainsFunc(se.Violations, func(v string) bool {
		if !strings.HasPrefix(v, prefix) {
			return false
		}
		for _, w := range want {
			if !strings.Contains(v, w) {
				return false
			}
		}
		return true
	})
}

// TestScenarioForkCatchesBrokenFence runs fork seeds over a fence whose
// store admits equal epochs of another holder (as before issue 21): the
// second victim's write is admitted, an S1 violation at the resource. A
// store that refuses it, but not with verifier.ErrFork, is a fork
// violation.
func TestScenarioForkCatchesBrokenFence(t *testing.T) {
	t.Run("admits the second holder", func(t *testing.T) {
		se := runForkMutant(t, func(int64) ScenarioConfig {
			return ScenarioConfig{newStore: func() verifier.BarrierStore { return newEqualStore(nil) }}
		})
		t.Log(se)
		require.True(t, hasViolation(se, "S1:", "admitted writes of two holders"), "%v", se)
	})
	t.Run("refuses without ErrFork", func(t *testing.T) {
		refuse := errors.New("store: conflict")
		se := runForkMutant(t, func(int64) ScenarioConfig {
			return ScenarioConfig{newStore: func() verifier.BarrierStore { return newEqualStore(refuse) }}
		})
		t.Log(se)
		require.True(t, hasViolation(se, "fork:", "want verifier.ErrFork"), "%v", se)
	})
}

// TestScenarioForkCatchesBrokenForensics runs fork seeds with a forensics
// that names an honest node besides the real culprits, and one that names
// only f of them: both are fork violations.
func TestScenarioForkCatchesBrokenForensics(t *testing.T) {
	t.Run("names an honest node", func(t *testing.T) {
		se := runForkMutant(t, func(seed int64) ScenarioConfig {
			p := newScenarioPlan(seed, ScenarioConfig{}, len(ScenarioBehaviours()))
			honest := p.fork.halfA[0]
			return ScenarioConfig{convict: func(c *protocol.Cluster, res string, epoch uint64, certs []protocol.Certificate) protocol.Verdict {
				v := protocol.Convict(c, res, epoch, certs)
				if len(v.Culprits) > 0 {
					framed := v.Culprits[0]
					framed.Node = honest
					v.Culprits = append(v.Culprits, framed)
				}
				return v
			}}
		})
		t.Log(se)
		require.True(t, hasViolation(se, "fork:", "names honest node"), "%v", se)
	})
	t.Run("names f culprits", func(t *testing.T) {
		se := runForkMutant(t, func(seed int64) ScenarioConfig {
			return ScenarioConfig{convict: func(c *protocol.Cluster, res string, epoch uint64, certs []protocol.Certificate) protocol.Verdict {
				v := protocol.Convict(c, res, epoch, certs)
				f := c.F
				v.Culprits = v.Culprits[:min(f, len(v.Culprits))]
				return v
			}}
		})
		t.Log(se)
		require.True(t, hasViolation(se, "fork:", "want at least f+1"), "%v", se)
	})
}

// TestOracleForkTolerance pins where the oracle lets S1 break: only in a
// fork seed and only between the victims' tokens, which it then keeps as
// a fork; two holders at one epoch anywhere else stay an S1 violation.
func TestOracleForkTolerance(t *testing.T) {
	keys, err := Keygen(t.TempDir(), KeygenOptions{N: 4, Clients: 2, Rand: mrand.New(mrand.NewSource(seedFor(t)))})
	require.NoError(t, err)
	base := scenarioPlan{n: 4, f: 1, t: 3, k: 2, r: 1, step: 16, byz: map[int]int{}, ops: make([][]clientOp, 2)}
	forked := base
	forked.fork = &forkPlan{mode: forkCollude, bad: []int{1, 2}, halfA: []int{3}, halfB: []int{4}}
	for _, tc := range []struct {
		name    string
		p       scenarioPlan
		victims []string
		wantS1  bool
	}{
		{"not a fork seed", base, []string{"victim-a", "victim-b"}, true},
		{"fork seed, the victims", forked, []string{"victim-a", "victim-b"}, false},
		{"fork seed, one victim and another holder", forked, []string{"victim-a"}, true},
	} {
		o := newOracle(tc.p, keys.Cluster)
		o.logf = t.Logf
		o.forkVictims(tc.victims...)
		o.forkAcquired("forkA", dealtToken(t, keys, "res-0", 5, "victim-a"))
		o.forkAcquired("forkB", dealtToken(t, keys, "res-0", 5, "victim-b"))
		gotS1 := slices.ContainsFunc(o.violations, func(v string) bool { return strings.HasPrefix(v, "S1:") })
		require.Equal(t, tc.wantS1, gotS1, "%s: %v", tc.name, o.violations)
		if !tc.wantS1 {
			require.Len(t, o.forks[resEpoch{"res-0", 5}], 2, tc.name)
		}
	}
}
