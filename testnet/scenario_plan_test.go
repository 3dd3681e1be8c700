package testnet

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScenarioPlanRestore checks the restarts from backup the generator
// draws: a backup of an honest node's store, then a crash, then a restart
// from that backup, in time order; and the fault budget counting the
// restored node as faulty from its crash to the end of the run.
func TestScenarioPlanRestore(t *testing.T) {
	const seeds = 3000
	restored := 0
	for seed := int64(0); seed < seeds; seed++ {
		p := newScenarioPlan(seed, ScenarioConfig{}, len(ScenarioBehaviours()))
		require.True(t, sort.SliceIsSorted(p.faults, func(a, b int) bool { return p.faults[a].at < p.faults[b].at }), "seed %d: faults out of order", seed)
		if p.restored == 0 {
			for _, s := range p.faults {
				require.NotContains(t, []faultKind{faultBackup, faultRestore}, s.kind, "seed %d", seed)
			}
			continue
		}
		restored++
		i := p.restored
		_, byz := p.byz[i]
		require.False(t, byz, "seed %d: a Byzantine node needs no backup to forget", seed)
		var order []faultKind
		crash := -1
		for j, s := range p.faults {
			if s.node != i {
				continue
			}
			switch s.kind {
			case faultBackup, faultRestore:
				order = append(order, s.kind)
			case faultCrash:
				if len(order) == 1 && crash < 0 {
					crash = j
				}
			}
		}
		require.Equal(t, []faultKind{faultBackup, faultRestore}, order, "seed %d: one backup, then one restore", seed)
		require.GreaterOrEqual(t, crash, 0, "seed %d: the node crashes between its backup and its restore", seed)
		require.LessOrEqual(t, p.maxFaulty(i, crash), p.f, "seed %d: the budget with node %d restored", seed, i)
		require.Contains(t, p.faulty(), i, "seed %d: the oracle treats the restored node as faulty", seed)

		none := newScenarioPlan(seed, ScenarioConfig{NoRestore: true}, len(ScenarioBehaviours()))
		require.Zero(t, none.restored)
		// The same schedule plus the backup, and a crash and a restore if
		// no planned crash could be one.
		require.Contains(t, []int{len(none.faults) + 1, len(none.faults) + 3}, len(p.faults), "seed %d", seed)
	}
	t.Logf("%d of %d seeds restart a node from a backup", restored, seeds)
	require.Greater(t, restored, seeds/20, "the generator draws restores in some seeds")
}
