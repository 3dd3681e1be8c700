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
			o := r.Acquire(rec, "alice", e, 0, nil, stateAt(0))
			require.Equal(t, protocol.KindRefuse, o.Kind, "epoch %d", e)
			require.Equal(t, protocol.CodeStale, o.Code)
			require.Equal(t, floor, o.Next.LastEpoch)
		}
		o := r.Acquire(rec, "alice", floor+r.MaxEpochStep+1, 0, nil, stateAt(0))
		require.Equal(t, protocol.CodeTooFar, o.Code, "the step window starts at the floor")
		o = r.Acquire(rec, "alice", floor+1, 0, nil, stateAt(0))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.Equal(t, floor+1, o.Next.LastEpoch)
		require.Equal(t, floor, r.Status(rec, stateAt(0)).LastEpoch)
	}
	// Above the floor nothing changes.
	above := Record{Resource: stateRes, LastEpoch: floor + 5}
	require.Equal(t, floor+5, r.Status(above, stateAt(0)).LastEpoch)
	o := r.Acquire(above, "bob", floor+5, 0, nil, stateAt(time.Second))
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
		old := stateTok(e, "alice")
		for name, o := range map[string]Outcome{
			"commit by holder":     r.Commit(fresh, "alice", old, 0, stateAt(0)),
			"commit by non-holder": r.Commit(fresh, "bob", old, 0, stateAt(0)),
			"release":              r.Release(fresh, old, stateAt(0)),
		} {
			require.Equal(t, protocol.KindRefuse, o.Kind, "%s at epoch %d", name, e)
			require.Equal(t, protocol.CodeStale, o.Code, name)
			require.Contains(t, o.Message, "epoch floor", name)
			require.False(t, o.Changed, name)
			require.Nil(t, o.Next.Certified, name)
			require.Equal(t, floor, o.Next.LastEpoch, name)
			require.Empty(t, o.Next.Lease.Holder, name)
		}
		o := r.Acquire(fresh, "bob", floor+1, 0, &old, stateAt(0))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.Nil(t, o.Next.Certified, "an earlier-era proof is not recorded")
	}
	// The first token of the new era commits as usual.
	o := r.Commit(fresh, "alice", stateTok(floor+1, "alice"), 0, stateAt(0))
	require.Equal(t, protocol.ReplyKind(0), o.Kind)
	require.True(t, o.Next.Lease.Committed)
	require.Equal(t, floor+1, o.Next.LastEpoch)
	// Without a floor nothing is from an earlier era.
	o = stateRules.Commit(fresh, "alice", stateTok(3, "alice"), 0, stateAt(0))
	require.True(t, o.Next.Lease.Committed)
}
