package cli

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/testnet"
)

// TestNodesAnnounceDNSNamesAndListenApart: the cluster file announces
// each node as /dns4/localhost/tcp/PORT, which nobody can bind; with
// --listen each node binds an IP address instead, and members and
// clients dial the announced names (the libp2p host resolves them): a
// client acquires. Without --listen, a node whose node.json listens on a
// DNS name says what to do.
func TestNodesAnnounceDNSNamesAndListenApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ports := freePorts(t, 4)
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, fmt.Sprintf("/dns4/localhost/tcp/%d", p))
	}
	dir := t.TempDir()
	keys, err := testnet.Keygen(dir, testnet.KeygenOptions{N: 4, Addrs: addrs})
	require.NoError(t, err)
	require.Equal(t, addrs[0], keys.Cluster.File.Nodes[0].Addrs[0])

	var out, errb bytes.Buffer
	require.Equal(t, ExitError, Run(ctx, []string{"node", "--dir", keys.NodeDirs[0]}, &out, &errb))
	require.Contains(t, errb.String(), "listens on "+addrs[0]+", a DNS name, which can be announced (cluster.json) but not bound: give --listen")

	errb.Reset()
	require.Equal(t, ExitUsage, Run(ctx, []string{"node", "--dir", keys.NodeDirs[0], "--listen", addrs[0]}, &out, &errb))
	require.Contains(t, errb.String(), "a DNS name can be announced, not listened on")
	errb.Reset()
	require.Equal(t, ExitUsage, Run(ctx, []string{"node", "--dir", keys.NodeDirs[0], "--listen", "0.0.0.0:4001"}, &out, &errb))
	require.Contains(t, errb.String(), `--listen "0.0.0.0:4001"`)

	for i, d := range keys.NodeDirs {
		args := []string{"node", "--dir", d}
		if i == 3 {
			t.Setenv(EnvVar("listen"), fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])) // the variable, for one
		} else {
			args = append(args, "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i]))
		}
		r := startRun(ctx, t, fmt.Sprintf("node%d", i+1), args...)
		waitUntil(t, 30*time.Second, fmt.Sprintf("node%d listening", i+1), func() bool {
			require.False(t, r.exited(), r.stderr.String())
			return portOpen(ports[i])
		})
	}
	out.Reset()
	errb.Reset()
	require.Equal(t, 0, Run(ctx, []string{"acquire", "--cluster", keys.ClusterPath, "--identity", filepath.Join(dir, testnet.ClientKeyFileName),
		"--wait", "30s", "orders-db"}, &out, &errb), errb.String())
	require.True(t, strings.HasPrefix(out.String(), "pt3."), out.String())
}

// TestDKGListenApartFromAnnounced: dkg --listen writes node.json's listen
// addresses (and the ceremony binds them); a member that announces a DNS
// name and gives no --listen is told to; a DNS --listen is refused.
func TestDKGListenApartFromAnnounced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ports := freePorts(t, 4)
	list := dkg.MemberList{Name: "acme-locks"}
	var idPaths []string
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprintf("op%d.key", i+1))
		k, err := transport.GenerateIdentity(crand.Reader)
		require.NoError(t, err)
		require.NoError(t, transport.SaveIdentity(p, k))
		pid, err := peer.IDFromPrivateKey(k)
		require.NoError(t, err)
		list.Members = append(list.Members, dkg.Member{PeerID: pid.String(), Addrs: []string{fmt.Sprintf("/dns4/localhost/tcp/%d", ports[i])}})
		idPaths = append(idPaths, p)
	}
	b, err := json.Marshal(list)
	require.NoError(t, err)
	members := filepath.Join(dir, "members.json")
	require.NoError(t, os.WriteFile(members, b, 0o644))
	args := func(i int) []string {
		return []string{"dkg", "--members", members, "--identity", idPaths[i], "--dir", filepath.Join(dir, fmt.Sprintf("node%d", i+1)), "--phase-timeout", "45s"}
	}
	var out, errb bytes.Buffer
	require.Equal(t, ExitUsage, Run(ctx, args(0), &out, &errb))
	require.Contains(t, errb.String(), fmt.Sprintf("this member announces /dns4/localhost/tcp/%d in %s, a DNS name, which others dial but this host cannot listen on: give --listen (or PALISADE_LISTEN)", ports[0], members))
	errb.Reset()
	require.Equal(t, ExitUsage, Run(ctx, append(args(0), "--listen", "/dns4/localhost/tcp/1"), &out, &errb))
	require.Contains(t, errb.String(), "a DNS name can be announced, not listened on")

	var runs []*bgRun
	for i := range 4 {
		runs = append(runs, startRun(ctx, t, fmt.Sprintf("dkg%d", i+1), append(args(i), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i]))...))
	}
	for i, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			t.Fatalf("dkg%d did not end", i+1)
		}
		require.Equal(t, 0, r.code, r.stderr.String())
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d", i+1), "node.json"))
		require.NoError(t, err)
		require.Contains(t, string(raw), fmt.Sprintf(`"/ip4/127.0.0.1/tcp/%d"`, ports[i]))
		raw, err = os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d", i+1), "cluster.json"))
		require.NoError(t, err)
		require.Contains(t, string(raw), fmt.Sprintf(`"/dns4/localhost/tcp/%d"`, ports[0]))
	}
}

// portOpen reports whether something accepts TCP connections on
// 127.0.0.1:port.
func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
