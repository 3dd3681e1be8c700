package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// TestReleaseByToken: a token whose Lock went away with its client (as
// with "palisade acquire", which exits holding the lease) is released by
// another client of the same identity, and the resource is free at once;
// releasing it again is refused, and so is a release by another identity.
func TestReleaseByToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nw, err := testnet.Start(t.TempDir(), testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 2}})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw.Close()) }()
	newClient := func(id client.Identity) *client.Client {
		c, err := client.New(client.Config{Cluster: nw.Keys.Cluster, Identity: id})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	owner, other := nw.Keys.Clients[0], nw.Keys.Clients[1]

	// The first process: acquires with a long lease, for release by token
	// (as palisade acquire does), and goes away without releasing.
	first := newClient(owner)
	lock, err := first.Acquire(ctx, "orders-db", client.WithTTL(time.Minute), client.WithTokenRelease())
	require.NoError(t, err)
	select { // the lease outlives the process only once committed
	case <-lock.Committed():
	case <-lock.Lost():
		t.Fatalf("lost before its commit: %v", lock.Err())
	}
	tok := lock.Token()
	require.NoError(t, first.Close())

	// Another identity may not release it, and nothing is sent.
	err = newClient(other).Release(ctx, tok)
	require.ErrorIs(t, err, client.ErrNotHolder)
	// Neither may a token of another cluster.
	foreign := tok
	foreign.Cluster = protocol.ClusterID{1}
	require.ErrorIs(t, newClient(owner).Release(ctx, foreign), client.ErrNotHolder)

	// While the lease runs, a new session is turned away...
	second := newClient(owner)
	_, err = second.TryAcquire(ctx, "orders-db")
	require.ErrorIs(t, err, client.ErrBusy)
	// ...until the holder identity releases the token.
	require.NoError(t, second.Release(ctx, tok))
	l2, err := second.TryAcquire(ctx, "orders-db")
	require.NoError(t, err, "the released resource is free at once, not after the minute's TTL")
	require.Greater(t, l2.Epoch(), tok.Epoch)
	// A Lock acquired without WithTokenRelease ends only by that Lock:
	// the token alone is refused, even from the holder identity.
	var refused *client.RefusedError
	require.ErrorAs(t, newClient(owner).Release(ctx, l2.Token()), &refused)
	require.NoError(t, l2.Release(ctx))

	// The released lease is gone: a second release is refused by every
	// node as "not the holder", which retrying cannot fix.
	err = second.Release(ctx, tok)
	var re *client.RefusedError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, client.ErrRefused)
	require.Greater(t, len(re.Nodes), nw.Keys.Cluster.F)
	for _, n := range re.Nodes {
		var pe *protocol.RefusedError
		require.True(t, errors.As(n, &pe), "node %d: %v", n.Index, n.Err)
		require.Equal(t, protocol.CodeNotHolder, pe.Code)
	}
}
