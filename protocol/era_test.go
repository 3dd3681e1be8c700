package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	era1     = uint64(1) << EraBits
	lastEra  = uint64(0xffff) << EraBits
	maxEpoch = ^uint64(0)
)

func TestNextEpochFloor(t *testing.T) {
	require.Equal(t, 48, EraBits)
	for _, c := range []struct{ floor, want uint64 }{
		{0, era1},
		{5, era1},
		{era1 - 1, era1},
		{era1, 2 * era1},
		{era1 + 5, 1 << 49},
		{lastEra - 1, lastEra},
		{lastEra - era1, lastEra},
	} {
		got, err := NextEpochFloor(c.floor)
		require.NoError(t, err, "floor %#x", c.floor)
		require.Equal(t, c.want, got, "floor %#x", c.floor)
		require.Greater(t, got, c.floor, "floor %#x: the next floor is above", c.floor)
		require.Zero(t, got%era1)
	}
	// The last era has no next: it fails instead of wrapping to 0.
	for _, floor := range []uint64{lastEra, lastEra + 1, lastEra + era1/2, maxEpoch - 1, maxEpoch} {
		got, err := NextEpochFloor(floor)
		require.ErrorIs(t, err, ErrLastEra, "floor %#x", floor)
		require.Zero(t, got)
	}
}

func TestEraBeyondAndCeiling(t *testing.T) {
	for _, floor := range []uint64{0, era1, 7 * era1, lastEra - era1} {
		e := Era{Floor: floor}
		ceil, ok := e.Ceiling()
		require.True(t, ok)
		require.Equal(t, floor+era1, ceil)
		require.False(t, e.Beyond(floor))
		require.False(t, e.Beyond(floor+1))
		require.False(t, e.Beyond(ceil-1), "the last epoch of the era is inside it")
		require.True(t, e.Beyond(ceil), "the next floor is beyond")
		require.True(t, e.Beyond(ceil+1))
		require.True(t, e.Beyond(maxEpoch))
	}
	// The last era has no ceiling: nothing is beyond it.
	e := Era{Floor: lastEra}
	ceil, ok := e.Ceiling()
	require.False(t, ok)
	require.Zero(t, ceil)
	for _, epoch := range []uint64{0, lastEra, lastEra + 1, maxEpoch - 1, maxEpoch} {
		require.False(t, e.Beyond(epoch), "epoch %#x", epoch)
	}
}

// TestMaxEpochStepBoundsEras: the limit on max_epoch_step keeps an era far
// from being crossed by steps.
func TestMaxEpochStepBoundsEras(t *testing.T) {
	require.Equal(t, uint64(1<<16), uint64(MaxMaxEpochStep))
	require.LessOrEqual(t, uint64(DefaultMaxEpochStep), uint64(MaxMaxEpochStep))
	require.GreaterOrEqual(t, era1/MaxMaxEpochStep, uint64(1)<<32)
}
