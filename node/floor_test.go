package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestEpochFloor: after a resharing, a node treats every resource's last
// epoch as at least the cluster's epoch floor: it never votes at or below
// it, reports it in Status, and the MaxEpochStep window starts there.
func TestEpochFloor(t *testing.T) {
	const floor = uint64(1) << 48
	r := stateRules
	r.EpochFloor = floor
	fresh := Record{Resource: stateRes}
	old := Record{Resource: stateRes, LastEpoch: 7} // voted in the old era

	for _, rec := range []Record{fresh, old} {
		for _, e := range []uint64{1, 8, floor - 1, floor} {
			o := r.Acquire(rec, alice, e, 0, nil, stateAt(0))
			require.Equal(t, protocol.KindRefuse, o.Kind, "epoch %d", e)
			require.Equal(t, protocol.CodeStale, o.Code)
			require.Equal(t, floor, o.Next.LastEpoch)
		}
		o := r.Acquire(rec, alice, floor+r.MaxEpochStep+1, 0, nil, stateAt(0))
		require.Equal(t, protocol.CodeTooFar, o.Code, "the step window starts at the floor")
		o = r.Acquire(rec, alice, floor+1, 0, nil, stateAt(0))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.Equal(t, floor+1, o.Next.LastEpoch)
		require.Equal(t, floor, r.Status(rec, stateAt(0)).LastEpoch)
	}
	// Above the floor nothing changes.
	above := Record{Resource: stateRes, LastEpoch: floor + 5}
	require.Equal(t, floor+5, r.Status(above, stateAt(0)).LastEpoch)
	o := r.Acquire(above, bob, floor+5, 0, nil, stateAt(time.Second))
	require.Equal(t, protocol.CodeStale, o.Code)
	// No floor: the old behaviour.
	require.Equal(t, uint64(7), stateRules.Status(old, stateAt(0)).LastEpoch)
}

// TestEpochFloorRefusesEarlierEraTokens: a token at or below the floor was
// signed by the group before the resharing (same group key). The new group
// refuses it in Commit and Release, so an old-era holder cannot start a
// lease that holds off new-era holders, and ignores it as an Acquire
// proof; the refusal reports the floor as the last epoch.
func TestEpochFloorRefusesEarlierEraTokens(t *testing.T) {
	const floor = uint64(1) << 48
	r := stateRules
	r.EpochFloor = floor
	fresh := Record{Resource: stateRes}
	for _, e := range []uint64{1, floor - 1, floor} {
		old := stateTok(e, alice)
		for name, o := range map[string]Outcome{
			"commit by holder":     r.Commit(fresh, alice.ID, old, ownerShown, 0, stateAt(0)),
			"commit by non-holder": r.Commit(fresh, bob.ID, old, ownerShown, 0, stateAt(0)),
			"release":              r.Release(fresh, old, ownerShown, stateAt(0)),
		} {
			require.Equal(t, protocol.KindRefuse, o.Kind, "%s at epoch %d", name, e)
			require.Equal(t, protocol.CodeStale, o.Code, name)
			require.Contains(t, o.Message, "epoch floor", name)
			require.False(t, o.Changed, name)
			require.Nil(t, o.Next.Certified, name)
			require.Equal(t, floor, o.Next.LastEpoch, name)
			require.Empty(t, o.Next.Lease.Holder, name)
		}
		o := r.Acquire(fresh, bob, floor+1, 0, &old, stateAt(0))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.Nil(t, o.Next.Certified, "an earlier-era proof is not recorded")
	}
	// The first token of the new era commits as usual.
	o := r.Commit(fresh, alice.ID, stateTok(floor+1, alice), ownerShown, 0, stateAt(0))
	require.Equal(t, protocol.ReplyKind(0), o.Kind)
	require.True(t, o.Next.Lease.Committed)
	require.Equal(t, floor+1, o.Next.LastEpoch)
	// Without a floor nothing is from an earlier era.
	o = stateRules.Commit(fresh, alice.ID, stateTok(3, alice), ownerShown, 0, stateAt(0))
	require.True(t, o.Next.Lease.Committed)
}

// TestEraCeiling: a node of the era that starts at floor F never votes at
// or above the next era's floor, and learns nothing from there: an Acquire
// proof, a Commit or a Release of a token, or f+1 signed votes at or above
// it are refused with CodeOtherEra ("stop it") and leave the record as it
// was. Before this rule an old group left running after a resharing caught
// up into the new era from a relayed token and issued a second token at a
// new-era epoch (issue 10, item 2).
func TestEraCeiling(t *testing.T) {
	for _, floor := range []uint64{0, 1 << protocol.EraBits, 7 << protocol.EraBits} {
		r := stateRules
		r.EpochFloor = floor
		ceiling, ok := protocol.Era{Floor: floor}.Ceiling()
		require.True(t, ok)
		// Just below the ceiling is still this era.
		below := Record{Resource: stateRes, LastEpoch: ceiling - 3}
		o := r.Acquire(below, alice, ceiling-1, 0, nil, stateAt(0))
		require.Equal(t, protocol.KindVote, o.Kind, "floor %d", floor)

		for _, e := range []uint64{ceiling, ceiling + 1, ceiling + r.MaxEpochStep, ^uint64(0)} {
			newEra := stateTok(e, bob)
			refused := map[string]Outcome{
				"acquire":            r.Acquire(below, alice, e, 0, nil, stateAt(0)),
				"acquire with proof": r.Acquire(below, alice, ceiling-2, 0, &newEra, stateAt(0)),
				"commit by holder":   r.Commit(below, bob.ID, newEra, ownerShown, 0, stateAt(0)),
				"commit relayed":     r.Commit(below, alice.ID, newEra, ownerShown, 0, stateAt(0)),
				"release":            r.Release(below, newEra, ownerShown, stateAt(0)),
				"seen votes":         r.SeeVotes(below, e, stateAt(0)),
			}
			for name, o := range refused {
				require.Equal(t, protocol.KindRefuse, o.Kind, "%s at epoch %d, floor %d", name, e, floor)
				require.Equal(t, protocol.CodeOtherEra, o.Code, name)
				require.Contains(t, o.Message, "stop it", name)
				require.False(t, o.Changed, name)
				require.Empty(t, o.Audit, name)
				require.Equal(t, ceiling-3, o.Next.LastEpoch, name)
				require.Nil(t, o.Next.Certified, name)
				require.Zero(t, o.Next.Seen, name)
			}
		}
	}
	// The last era has no ceiling: the whole uint64 range above its floor
	// is its own.
	r := stateRules
	r.EpochFloor = 0xffff << protocol.EraBits
	o := r.Acquire(Record{Resource: stateRes, LastEpoch: ^uint64(0) - 1}, alice, ^uint64(0), 0, nil, stateAt(0))
	require.Equal(t, protocol.KindVote, o.Kind)
}
