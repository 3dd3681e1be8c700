package testnet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
)

// TestRestoreFromBackupForgetsVotes shows what the scenarios' restore
// fault does (scenarioPlan.restored): a node restarted from an old copy of
// its vote store has forgotten the votes it cast since, which is why it
// counts against f. With it the only faulty node of four, a second client
// still cannot get the resource: the other three hold the lease (S1).
func TestRestoreFromBackupForgetsVotes(t *testing.T) {
	ctx := context.Background()
	nw := startNet(t, 4, 2, Options{})
	backup, err := nw.Backup(1) // hot copy, before any vote
	require.NoError(t, err)

	c1 := newClient(t, nw, 0, client.Config{})
	l, err := c1.TryAcquire(ctx, "res", client.WithTTL(time.Minute))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rec, err := nw.Node(1).Record(ctx, "res")
		return err == nil && rec.LastEpoch == l.Epoch()
	}, 30*time.Second, 10*time.Millisecond, "node 1 voted")

	require.NoError(t, nw.Stop(1))
	cold, err := nw.Backup(1) // the file itself, node stopped
	require.NoError(t, err)
	require.NotEmpty(t, cold)
	require.NoError(t, nw.RestoreBackup(1, backup))
	require.Error(t, nw.RestoreBackup(1, backup), "a running node is not overwritten")

	rec, err := nw.Node(1).Record(ctx, "res")
	require.NoError(t, err)
	require.Zero(t, rec.LastEpoch, "the restored node forgot its vote at epoch %d", l.Epoch())
	for i := 2; i <= 4; i++ {
		rec, err := nw.Node(i).Record(ctx, "res")
		require.NoError(t, err)
		require.Equal(t, l.Epoch(), rec.LastEpoch, "node %d", i)
	}

	c2 := newClient(t, nw, 1, client.Config{})
	_, err = c2.TryAcquire(ctx, "res")
	require.ErrorIs(t, err, client.ErrBusy, "one forgetful node of four: the lease holds")
}
