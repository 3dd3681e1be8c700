package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// TestProcessesDKG runs "palisade dkg" as 4 separate processes on
// 127.0.0.1: each operator makes its identity with "palisade identity",
// all get the same member list, every process prints the same cluster.json
// hash, the nodes start from the directories it wrote, and a token verifies.
func TestProcessesDKG(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	dir := t.TempDir()
	const n = 4

	peerID := func(key string) string {
		r := runBin(ctx, t, 30*time.Second, bin, "identity", "--identity", key)
		require.Equal(t, 0, r.code, r.stderr)
		id := strings.TrimSpace(r.stdout)
		require.True(t, strings.HasPrefix(id, "12D3KooW"), "stdout %q", r.stdout)
		// Running it again prints the same peer ID and keeps the file.
		again := runBin(ctx, t, 30*time.Second, bin, "identity", "--identity", key)
		require.Equal(t, r.stdout, again.stdout)
		return id
	}
	ports, err := testnet.FreePorts(n)
	require.NoError(t, err)
	list := dkg.MemberList{Name: "acme-locks"}
	for i := range n {
		id := peerID(filepath.Join(dir, fmt.Sprintf("op%d.key", i+1)))
		list.Members = append(list.Members, dkg.Member{PeerID: id, Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])}})
	}
	clientKey := filepath.Join(dir, "client.key")
	list.Clients = []protocol.ClientInfo{{Name: "app", PeerID: peerID(clientKey), Resources: []string{"orders-*"}}}
	b, err := json.MarshalIndent(list, "", "  ")
	require.NoError(t, err)
	members := filepath.Join(dir, "members.json")
	require.NoError(t, os.WriteFile(members, b, 0o644))

	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runDKGProc(ctx, t, bin, "dkg", "--members", members, "--identity", filepath.Join(dir, fmt.Sprintf("op%d.key", i+1)),
				"--dir", filepath.Join(dir, fmt.Sprintf("node%d", i+1)), "--phase-timeout", "20s")
		}()
	}
	wg.Wait()
	hashRE := regexp.MustCompile(`(?m)^cluster\.json sha256 ([0-9a-f]{64})$`)
	var hash string
	for i, r := range results {
		require.Equal(t, 0, r.code, "member %d:\n%s", i+1, r.stderr)
		require.Contains(t, r.stderr, "dkg: phase deals")
		require.NotContains(t, r.stderr, "trusted-dealer")
		m := hashRE.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, "member %d stdout %q", i+1, r.stdout)
		if hash == "" {
			hash = m[1]
		}
		require.Equal(t, hash, m[1], "member %d printed another cluster.json hash", i+1)
		require.Contains(t, r.stdout, fmt.Sprintf("node%d dir=", i+1))
	}
	clusterFile := filepath.Join(dir, "node1", "cluster.json")
	raw, err := os.ReadFile(clusterFile)
	require.NoError(t, err)
	for i := 2; i <= n; i++ {
		other, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d", i), "cluster.json"))
		require.NoError(t, err)
		require.Equal(t, raw, other)
	}
	cluster, err := protocol.LoadCluster(clusterFile)
	require.NoError(t, err)
	require.Equal(t, 3, cluster.File.T)

	nodes := make([]*nodeProc, n)
	for i := range nodes {
		nodes[i] = startNodeProc(ctx, t, bin, filepath.Join(dir, fmt.Sprintf("node%d", i+1)))
	}
	for i, p := range nodes {
		p.waitListening(t, cluster.File.Nodes[i].Addrs[0], 30*time.Second)
	}
	r := runBin(ctx, t, 40*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", clientKey, "--wait", "10s", "orders-db")
	require.Equal(t, 0, r.code, r.stderr)
	token := strings.TrimSpace(r.stdout)
	r = runBin(ctx, t, 30*time.Second, bin, "verify", "--cluster", clusterFile, token)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^resource=orders-db epoch=1 holder=12D3KooW\S+ session=[0-9a-f]{32}\n$`, r.stdout)
}

// runDKGProc runs one ceremony command and returns its result; unlike
// runBin it does not fail the test on a non-zero exit.
func runDKGProc(ctx context.Context, t *testing.T, bin string, args ...string) result {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testEnv()
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		r.code = -1
		if cmd.ProcessState != nil {
			r.code = cmd.ProcessState.ExitCode()
		}
	}
	return r
}
