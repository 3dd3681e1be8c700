package cli

import (
	"context"
	"math/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/testnet"
)

// TestLocksRevokeAudit runs the day-two commands against four running
// nodes: locks lists two leases (a page of one at a time with --limit,
// saying where the next starts), revoke ends one at node 1 with that
// node's admin secret and refuses a wrong one, and audit reads node 1's
// log (with the revocation) from the running node, where reading its
// store fails.
func TestLocksRevokeAudit(t *testing.T) {
	dir := t.TempDir()
	nw, err := testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Rand: rand.New(rand.NewSource(7))}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	cluster := filepath.Join(dir, node.ClusterFileName)
	identity := filepath.Join(dir, testnet.ClientKeyFileName)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang ceiling
	defer cancel()

	c, err := nw.NewClient(0, client.Config{Seed: 1})
	require.NoError(t, err)
	defer c.Close()
	for _, r := range []string{"orders-db", "jobs/a"} {
		_, err := c.TryAcquire(ctx, r, client.WithTTL(time.Hour))
		require.NoError(t, err)
	}
	// All four members hold both leases (the client returned after t).
	for i := 1; i <= 4; i++ {
		for _, r := range []string{"orders-db", "jobs/a"} {
			for {
				rec, err := nw.Node(i).Record(ctx, r)
				require.NoError(t, err)
				if rec.Lease.Committed {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("node %d never committed %s", i, r)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}

	code, out, errs := runCmd(t, "locks", "--cluster", cluster, "--identity", identity)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^resource=jobs/a holder=\S+ session=#[0-9a-f]{16} epoch=1 left=\S+ reported=4/4$`, out)
	require.Regexp(t, `(?m)^resource=orders-db holder=\S+ session=#[0-9a-f]{16} epoch=1 left=\S+ reported=4/4$`, out)
	require.Contains(t, out, "2 live leases (t=3 of 4 members agree); 4 of 4 members answered\n")

	code, out, errs = runCmd(t, "locks", "--cluster", cluster, "--identity", identity, "--limit", "1")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "resource=jobs/a ")
	require.NotContains(t, out, "resource=orders-db ")
	require.Contains(t, out, "more leases may follow: list them with --after jobs/a\n")
	code, out, errs = runCmd(t, "locks", "--cluster", cluster, "--identity", identity, "--after", "jobs/a")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "resource=orders-db ")
	require.Contains(t, out, "1 live lease ")

	srv := httptest.NewServer(nw.Node(1).AdminHandler())
	defer srv.Close()
	node1 := nw.Member(1).Dir.Path
	wrong := filepath.Join(t.TempDir(), "wrong.secret")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-secret\n"), 0o600))
	code, _, errs = runCmd(t, "revoke", "--admin", srv.URL, "--secret-file", wrong, "orders-db")
	require.Equal(t, ExitError, code)
	require.Contains(t, errs, "refused the admin secret")

	code, out, errs = runCmd(t, "revoke", "--admin", srv.URL, "--dir", node1, "--epoch", "1", "orders-db")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `node 1 revoked the lease on "orders-db" at epoch 1`)
	code, _, errs = runCmd(t, "revoke", "--admin", srv.URL, "--dir", node1, "orders-db")
	require.Equal(t, ExitError, code)
	require.Contains(t, errs, "no live lease")

	// One revocation: three members still agree.
	code, out, errs = runCmd(t, "locks", "--cluster", cluster, "--identity", identity, "--after", "jobs/a")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "reported=3/4")

	code, out, errs = runCmd(t, "audit", "--admin", srv.URL, "--dir", node1)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^seq=\d+ time=\S+ kind=revoke resource=orders-db epoch=1 holder=\S+ detail="operator revoke`, out)
	require.Regexp(t, `entries, sequence 1\.\.\d+ without gaps\n$`, out)

	code, _, errs = runCmd(t, "audit", "--dir", node1)
	require.Equal(t, ExitError, code)
	require.Contains(t, errs, "--admin")
}

// TestLocksRevokeHelp: both commands have help with every flag.
func TestLocksRevokeHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"locks":  {"--cluster", "--identity", "--timeout", "--after", "--limit"},
		"revoke": {"--admin", "--dir", "--secret-file", "--epoch"},
		"audit":  {"--dir", "--admin", "--secret-file"},
	} {
		code, out, _ := runCmd(t, cmd, "-h")
		require.Equal(t, 0, code)
		for _, f := range flags {
			require.Contains(t, out, f, cmd)
		}
	}
	code, _, errs := runCmd(t, "revoke", "--admin", "127.0.0.1:1", "orders-db")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "--dir")
}
