package node_test

import (
	"context"
	"errors"
	mrand "math/rand"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier"
)

// startNet runs n nodes in this process with clients client identities.
func startNet(t *testing.T, n, clients int, seed int64) *testnet.Network {
	t.Helper()
	nw, err := testnet.Start(t.TempDir(), testnet.Options{Keygen: testnet.KeygenOptions{N: n, Clients: clients, Rand: mrand.New(mrand.NewSource(seed))}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	return nw
}

// adminOf serves node i's admin API and returns its address and secret,
// as its operator would use them.
func adminOf(t *testing.T, nw *testnet.Network, i int) (addr, secret string) {
	t.Helper()
	srv := httptest.NewServer(nw.Node(i).AdminHandler())
	t.Cleanup(srv.Close)
	secret, err := node.ReadAdminSecret(filepath.Join(nw.Member(i).Dir.Path, node.AdminSecretFileName))
	require.NoError(t, err)
	return srv.URL, secret
}

// TestRevokeNeedsTOperators: with 4 nodes (t=3), client 1 holds a lock
// with a long lease. Its operators revoke it one node at a time: after 1
// and after 2 revocations client 2 is still turned away (busy), and
// "locks" no longer lists the lease once fewer than t members report it;
// after the 3rd, client 2 acquires at a higher epoch, and the resource
// fences client 1's token. Each revocation is in its node's audit log,
// which its operator reads from the running node.
func TestRevokeNeedsTOperators(t *testing.T) {
	nw := startNet(t, 4, 2, 19)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang ceiling
	defer cancel()
	c1, err := nw.NewClient(0, client.Config{Seed: 1})
	require.NoError(t, err)
	defer c1.Close()
	c2, err := nw.NewClient(1, client.Config{Seed: 2})
	require.NoError(t, err)
	defer c2.Close()

	const res = "orders-db"
	l1, err := c1.TryAcquire(ctx, res, client.WithTTL(time.Hour))
	require.NoError(t, err)
	old := l1.Token()
	// The client returns once t members committed; wait (up to the
	// ceiling) until all four hold the lease, so the counts below are
	// exact.
	for i := 1; i <= 4; i++ {
		for {
			rec, err := nw.Node(i).Record(ctx, res)
			require.NoError(t, err)
			if rec.Lease.Committed && rec.Lease.Epoch == old.Epoch {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node %d never committed the lease", i)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	page, err := c2.Locks(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, page.Leases, 1)
	require.Equal(t, res, page.Leases[0].Resource)
	require.Equal(t, old.Holder.ID, page.Leases[0].HolderID)
	require.Equal(t, old.Holder.Session.Hash(), page.Leases[0].Session)
	require.Equal(t, old.Epoch, page.Leases[0].Epoch)
	require.Equal(t, 4, page.Leases[0].Reports)

	for i := 1; i <= 3; i++ {
		addr, secret := adminOf(t, nw, i)
		rv, err := node.RevokeAt(ctx, addr, secret, res, old.Epoch)
		require.NoError(t, err, "node %d", i)
		require.Equal(t, i, rv.Node)
		require.Equal(t, old.Epoch, rv.Epoch)

		// Its operator reads the revocation from the running node.
		var revoked bool
		sum, err := node.FetchAudit(ctx, addr, secret, func(e node.AuditEntry) error {
			revoked = revoked || (e.Kind == node.AuditRevoke && e.Resource == res && e.Epoch == old.Epoch)
			return nil
		})
		require.NoError(t, err)
		require.NoError(t, sum.Err())
		require.True(t, revoked, "node %d audits the revocation", i)

		page, err := c2.Locks(ctx, "", 0)
		require.NoError(t, err)
		if 4-i >= 3 {
			require.Len(t, page.Leases, 1)
			require.Equal(t, 4-i, page.Leases[0].Reports)
		} else {
			require.Empty(t, page.Leases, "fewer than t members report it")
			require.Equal(t, 1, page.Unconfirmed)
		}
		if i < 3 {
			_, err := c2.TryAcquire(ctx, res)
			require.ErrorIs(t, err, client.ErrBusy, "after %d revocations", i)
		}
	}

	// Acquire, not TryAcquire: the nodes may hold the free resource a
	// moment for client 2's earlier, failed attempt (its waiter place).
	l2, err := c2.Acquire(ctx, res)
	require.NoError(t, err)
	require.Greater(t, l2.Epoch(), old.Epoch)

	// The resource admits the new holder and fences the old token.
	fence := verifier.NewFence(verifier.New(nw.Keys.Cluster), verifier.NewMemoryStore())
	require.NoError(t, fence.Admit(ctx, l2.Token(), res, func(verifier.Tx) error { return nil }))
	err = fence.Admit(ctx, old, res, func(verifier.Tx) error { return nil })
	require.ErrorIs(t, err, verifier.ErrStale)
	require.NoError(t, l2.Release(ctx))
}

// TestAuditOfRunningNode: the vote store of a running node is locked, so
// reading it from the directory fails with ErrStoreLocked; the admin API
// serves the same log, whole, from the open store.
func TestAuditOfRunningNode(t *testing.T) {
	nw := startNet(t, 4, 1, 20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang ceiling
	defer cancel()
	c, err := nw.NewClient(0, client.Config{Seed: 1})
	require.NoError(t, err)
	defer c.Close()
	l, err := c.TryAcquire(ctx, "jobs/a")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	dir := nw.Member(2).Dir.Path
	_, err = node.ReadAudit(dir, func(node.AuditEntry) error { return nil })
	require.True(t, errors.Is(err, node.ErrStoreLocked), "%v", err)

	addr, secret := adminOf(t, nw, 2)
	var got []node.AuditEntry
	sum, err := node.FetchAudit(ctx, addr, secret, func(e node.AuditEntry) error {
		got = append(got, e)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	// What the node's own store holds (late requests may have added
	// entries since: the fetched log is a prefix).
	want, err := nw.Node(2).Audit(ctx, 1, node.MaxAuditPage)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.GreaterOrEqual(t, len(want), len(got))
	for i := range got {
		require.Equal(t, want[i].Seq, got[i].Seq)
		require.Equal(t, want[i].Kind, got[i].Kind)
		require.Equal(t, want[i].Resource, got[i].Resource)
	}
	require.Equal(t, uint64(len(got)), sum.Sequence)
}
