package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// TestProcessesSharedKeyExclude: replicas of one service often share one
// client key. Six "palisade acquire" processes started at once with the
// same client.key contend for one resource: each gets its own lock session
// and they acquire in turn, at six distinct epochs. While one of them holds
// a 30 s lease, another acquire with the same key is busy. On e7342e7 four
// of six printed the identical epoch-2 token, and the second acquire
// succeeded at once (issue 10, item 1).
func TestProcessesSharedKeyExclude(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	keys := filepath.Join(t.TempDir(), "keys")
	clusterFile := filepath.Join(keys, "cluster.json")
	identity := filepath.Join(keys, "client.key")
	r := runBin(ctx, t, 30*time.Second, bin, "keygen", "--nodes", "4", "--dir", keys)
	require.Equal(t, 0, r.code, r.stderr)
	cluster, err := protocol.LoadCluster(clusterFile)
	require.NoError(t, err)
	for i := range 4 {
		p := startNodeProc(ctx, t, bin, filepath.Join(keys, "node"+string(rune('1'+i))))
		p.waitListening(t, cluster.File.Nodes[i].Addrs[0], 30*time.Second)
	}

	const procs = 6
	results := make([]result, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			results[i] = runBin(ctx, t, 90*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity,
				"--ttl", "1s", "--wait", "60s", "shared-res")
		})
	}
	wg.Wait()
	v := verifier.New(cluster)
	epochs := map[uint64]int{}
	sessions := map[protocol.SessionID]int{}
	var holderID string
	for i, r := range results {
		require.Equal(t, 0, r.code, "process %d: %s", i, r.stderr)
		tok, err := v.ParseAndVerify(strings.TrimSpace(r.stdout))
		require.NoError(t, err, "process %d", i)
		require.Equal(t, "shared-res", tok.Resource)
		if holderID == "" {
			holderID = tok.Holder.ID
		}
		require.Equal(t, holderID, tok.Holder.ID, "one client key")
		epochs[tok.Epoch]++
		sessions[tok.Holder.Session]++
	}
	require.Len(t, epochs, procs, "six distinct epochs: %v", epochs)
	require.Len(t, sessions, procs, "six distinct lock sessions")

	// A 30 s lease; another acquire with the same key is busy, at once
	// without --wait and at its --wait bound with one.
	r = runBin(ctx, t, 30*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity, "--ttl", "30s", "orders-db")
	require.Equal(t, 0, r.code, r.stderr)
	first, err := v.ParseAndVerify(strings.TrimSpace(r.stdout))
	require.NoError(t, err)
	r = runBin(ctx, t, 30*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity, "orders-db")
	require.NotEqual(t, 0, r.code, "a second process with the same key acquired a held lock: %s", r.stdout)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "is held by")
	r = runBin(ctx, t, 30*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity, "--wait", "2s", "orders-db")
	require.NotEqual(t, 0, r.code, "acquired within 2 s a lock held for 30 s: %s", r.stdout)
	require.Empty(t, r.stdout)
	t.Logf("first holder %s at epoch %d; the same key was refused twice", first.Holder.Short(), first.Epoch)
}
