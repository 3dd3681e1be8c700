package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// TestReshareCommand runs "palisade reshare" for 4 old members (3 stay, 1
// leaves) and 1 new member, in process: the new group has the same cluster
// ID, an epoch floor, identical cluster.json everywhere, and the old shares
// are erased.
func TestReshareCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	old, err := testnet.DKG(ctx, filepath.Join(dir, "old"), testnet.DKGOptions{N: 4, PhaseTimeout: 20 * time.Second})
	require.NoError(t, err)

	var out, errb bytes.Buffer
	newKey := filepath.Join(dir, "new.key")
	require.Equal(t, 0, Run(ctx, []string{"identity", "--identity", newKey}, &out, &errb), errb.String())
	newID := strings.TrimSpace(out.String())

	ports, err := testnet.FreePorts(4)
	require.NoError(t, err)
	list := dkg.MemberList{Name: old.Cluster.File.Name, Clients: old.Cluster.File.Clients}
	for i, n := range old.Cluster.File.Nodes[:3] {
		list.Members = append(list.Members, dkg.Member{PeerID: n.PeerID, Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])}})
	}
	list.Members = append(list.Members, dkg.Member{PeerID: newID, Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[3])}})
	b, err := json.Marshal(list)
	require.NoError(t, err)
	members := filepath.Join(dir, "members.json")
	require.NoError(t, os.WriteFile(members, b, 0o644))

	type run struct {
		args           []string
		code           int
		stdout, stderr string
	}
	common := []string{"reshare", "--members", members, "--phase-timeout", "20s"}
	var runs []*run
	for i, d := range old.NodeDirs {
		out := filepath.Join(dir, "new", fmt.Sprintf("node%d", i+1))
		if i == 3 {
			out = filepath.Join(dir, "left")
		}
		runs = append(runs, &run{args: append(append([]string{}, common...),
			"--identity", filepath.Join(d, node.IdentityFileName), "--old-dir", d, "--dir", out)})
	}
	runs = append(runs, &run{args: append(append([]string{}, common...),
		"--identity", newKey, "--cluster", old.ClusterPath, "--dir", filepath.Join(dir, "new", "node4"))})
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o, e bytes.Buffer
			r.code = Run(ctx, r.args, &o, &e)
			r.stdout, r.stderr = o.String(), e.String()
		}()
	}
	wg.Wait()
	hashRE := regexp.MustCompile(`(?m)^cluster\.json sha256 ([0-9a-f]{64})$`)
	var hash string
	for i, r := range runs {
		require.Equal(t, 0, r.code, "run %d:\n%s", i+1, r.stderr)
		if i < 4 {
			require.Contains(t, r.stderr, "erased the old share")
			_, err := os.Stat(filepath.Join(old.NodeDirs[i], node.ShareFileName))
			require.ErrorIs(t, err, os.ErrNotExist)
		}
		if i == 3 {
			require.Contains(t, r.stdout, "left the cluster")
			continue
		}
		m := hashRE.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		if hash == "" {
			hash = m[1]
		}
		require.Equal(t, hash, m[1])
		require.Contains(t, r.stdout, "epoch_floor=281474976710656")
	}
	for i := 1; i <= 4; i++ {
		d, err := node.LoadDir(filepath.Join(dir, "new", fmt.Sprintf("node%d", i)))
		require.NoError(t, err)
		require.Equal(t, old.Cluster.ID, d.Cluster.ID)
		require.Equal(t, old.Cluster.Key.PublicKey(), d.Cluster.Key.PublicKey())
		require.Equal(t, uint64(1)<<48, d.Cluster.File.EpochFloor)
	}
	// The original cluster.json is untouched and still names the cluster.
	c, err := protocol.LoadCluster(old.ClusterPath)
	require.NoError(t, err)
	require.Equal(t, old.Cluster.ID, c.ID)
}

// TestIdentityCreatesDirectory: on a fresh machine "palisade identity"
// makes the key's directory (mode 0700) instead of failing on it.
func TestIdentityCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var", "lib", "palisade", "identity.key")
	code, out, errs := runCmd(t, "identity", "--identity", path)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `^12D3KooW\S+\n$`, out)
	st, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}
