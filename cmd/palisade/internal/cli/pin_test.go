package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// pinKeys deals a cluster named name in a directory of its own.
func pinKeys(t *testing.T, name string) *testnet.Keys {
	t.Helper()
	keys, err := testnet.Keygen(t.TempDir(), testnet.KeygenOptions{N: 4, Name: name})
	require.NoError(t, err)
	return keys
}

// TestEveryClusterCommandTakesThePin: each command that reads a cluster
// file (--cluster) also takes --cluster-id, and so does bootstrap.
func TestEveryClusterCommandTakesThePin(t *testing.T) {
	withCluster := 0
	for name, cmd := range commands {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cfg := DefaultConfig()
		cmd.flags(fs, &cfg)
		if fs.Lookup("cluster") != nil || name == "bootstrap" {
			withCluster++
			require.NotNil(t, fs.Lookup(clusterIDFlag), "%s has no --%s", name, clusterIDFlag)
		}
	}
	// acquire, lock, release, status, agent, resource, verify, put,
	// clients, reshare, bootstrap at least.
	require.GreaterOrEqual(t, withCluster, 11)
}

// TestClusterPin: a pinned command runs on a file with the pinned ID and
// refuses any other (exit 1, naming both IDs) before it does anything; a
// pin that is the file's SHA-256 is named as such; a malformed pin is a
// usage error; PALISADE_CLUSTER_ID sets the pin like the flag.
func TestClusterPin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ours := pinKeys(t, "acme-locks")
	theirs := pinKeys(t, "acme-locks") // the same name, another group key
	require.NotEqual(t, ours.Cluster.ID, theirs.Cluster.ID)
	pin := ours.Cluster.ID.String()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(ctx, args, &out, &errb)
		return code, out.String(), errb.String()
	}

	code, out, stderr := run("clients", "list", "--cluster", ours.ClusterPath, "--cluster-id", pin)
	require.Equal(t, 0, code, stderr)
	require.NotEmpty(t, out)

	key := filepath.Join(filepath.Dir(theirs.ClusterPath), testnet.ClientKeyFileName)
	resData := filepath.Join(t.TempDir(), "res")
	for _, cmd := range [][]string{
		{"clients", "list"},
		{"status", "--identity", key},
		{"acquire", "--identity", key, "orders-db"},
		{"lock", "--identity", key, "orders-db", "--", "true"},
		{"verify", "pt3.AAAA"},
		{"resource", "--data", resData, "--listen", "127.0.0.1:0"},
		{"agent", "--identity", key, "--listen", "127.0.0.1:0"},
	} {
		args := append([]string{cmd[0], "--cluster", theirs.ClusterPath, "--cluster-id", pin}, cmd[1:]...)
		code, out, stderr := run(args...)
		require.Equal(t, ExitError, code, "%v: %s", cmd, stderr)
		require.Empty(t, out, "%v", cmd)
		require.Contains(t, stderr, "palisade: error: "+cmd[0]+": cluster file does not have the pinned cluster ID: "+theirs.ClusterPath+
			` holds cluster "acme-locks" with ID `+theirs.Cluster.ID.String()+", pinned "+pin, "%v", cmd)
		require.Contains(t, stderr, "get cluster.json from a node operator of your cluster", "%v", cmd)
	}
	_, err := os.Stat(resData)
	require.ErrorIs(t, err, os.ErrNotExist)

	raw, err := os.ReadFile(ours.ClusterPath)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	code, _, stderr = run("clients", "list", "--cluster", ours.ClusterPath, "--cluster-id", hex.EncodeToString(sum[:]))
	require.Equal(t, ExitError, code)
	require.Contains(t, stderr, "the pin is this file's SHA-256")
	require.Contains(t, stderr, "pin its cluster_id instead")

	for _, bad := range []string{"xyz", pin[:62], pin + "00"} {
		code, _, stderr = run("clients", "list", "--cluster", ours.ClusterPath, "--cluster-id", bad)
		require.Equal(t, ExitUsage, code, bad)
		require.Contains(t, stderr, "want the cluster's ID, 64 hex digits", bad)
	}

	t.Setenv(EnvVar(clusterIDFlag), theirs.Cluster.ID.String())
	code, _, stderr = run("clients", "list", "--cluster", ours.ClusterPath)
	require.Equal(t, ExitError, code)
	require.Contains(t, stderr, "pinned "+theirs.Cluster.ID.String()+" (--cluster-id or PALISADE_CLUSTER_ID)")
	code, _, stderr = run("clients", "list", "--cluster", theirs.ClusterPath)
	require.Equal(t, 0, code, stderr)
}

// TestClusterPinSurvivesClientAndAddressChanges: the pin is the cluster
// ID, so the edits an operator makes during the cluster's life (a client
// added, a node's announced address moved to a DNS name, a new era) keep
// the pinned file acceptable, while the file's hash changes.
func TestClusterPinSurvivesClientAndAddressChanges(t *testing.T) {
	keys := pinKeys(t, "acme-locks")
	before, err := os.ReadFile(keys.ClusterPath)
	require.NoError(t, err)
	f := keys.Cluster.File
	f.Clients = append(f.Clients, protocol.ClientInfo{Name: "billing", PeerID: "12D3KooWDbxn283zfwuZ73ViRSUhhfPQsJPfTYNpa2yKjWWVp2kg", Resources: []string{"billing-*"}})
	f.Nodes[1].Addrs = []string{"/dns4/node-b.example/tcp/4001"}
	f.EpochFloor = 1 << protocol.EraBits
	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, f.Save(path))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, sha256.Sum256(before), sha256.Sum256(after))
	c, err := loadPinnedCluster("status", path, keys.Cluster.ID.String())
	require.NoError(t, err)
	require.Equal(t, keys.Cluster.ID, c.ID)
	_, err = loadPinnedCluster("status", path, pinKeys(t, "acme-locks").Cluster.ID.String())
	require.ErrorIs(t, err, errClusterPin)
}

// TestCheckLoadedPin: commands that load cluster.json themselves (status,
// put, agent, clients, resource) check the pin on the value they use, so
// a file swapped in after the precheck is still refused.
func TestCheckLoadedPin(t *testing.T) {
	keys := pinKeys(t, "acme-locks")
	other := pinKeys(t, "acme-locks")
	cfg := Config{Cluster: keys.ClusterPath}
	require.NoError(t, checkLoadedPin("status", cfg, keys.Cluster))
	cfg.ClusterID = keys.Cluster.ID.String()
	require.NoError(t, checkLoadedPin("status", cfg, keys.Cluster))
	err := checkLoadedPin("status", cfg, other.Cluster)
	require.ErrorIs(t, err, errClusterPin)
	require.ErrorContains(t, err, "status: ")
	cfg.ClusterID = "not-hex"
	require.Error(t, checkLoadedPin("status", cfg, keys.Cluster))

	// The resource serves only the pinned cluster's file.
	code, _, errs := runCmd(t, "resource", "--cluster", other.ClusterPath, "--cluster-id", keys.Cluster.ID.String(), "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, keys.Cluster.ID.String())
}
