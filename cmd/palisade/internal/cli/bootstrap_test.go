package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// syncBuffer is a bytes.Buffer a running command writes while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// bgRun is a command running in process until stopped.
type bgRun struct {
	name           string
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan struct{}
	code           int
}

// startRun runs a command line in a goroutine; the test's cleanup stops
// it.
func startRun(ctx context.Context, t *testing.T, name string, args ...string) *bgRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &bgRun{name: name, stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = Run(ctx, args, r.stdout, r.stderr)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the command and waits for it, and returns its exit status.
func (r *bgRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute", r.name)
	}
	return r.code
}

// exited reports whether the command ended on its own.
func (r *bgRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitFor polls cond every 20 ms for at most limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBootstrap runs the docker testnet's services in process, on
// loopback: node 4 publishes its peer ID and stops (its container stopped
// before the ceremony); nodes 1 to 3 start the DKG and wait for it; node 2
// is killed half-way and resumes the ceremony from its crash state; node 4
// comes back and the ceremony completes. The client's key is made by the
// client role, the cluster file allows it, the resource serves, put
// writes. A node started again reuses its keys and votes.
func TestBootstrap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	ports := freePorts(t, 7)
	nodeArgs := func(i int) []string {
		return []string{"bootstrap", "node", "--shared", shared, "--index", strconv.Itoa(i),
			"--addr", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i-1]),
			"--dir", filepath.Join(base, fmt.Sprintf("node%d", i), "node"),
			"--identity", filepath.Join(base, fmt.Sprintf("node%d", i), "identity.key"),
			"--phase-timeout", "45s", "--join-timeout", "1m"}
	}
	exists := func(p string) func() bool {
		return func() bool { _, err := os.Stat(p); return err == nil }
	}

	n4 := startRun(ctx, t, "node4", nodeArgs(4)...)
	waitUntil(t, 30*time.Second, "node4's peer file", exists(filepath.Join(shared, "peers", "node4.json")))
	require.Equal(t, 1, n4.stop(t))
	require.Contains(t, n4.stderr.String(), "waiting for peer IDs: context canceled")

	clientAdmin := fmt.Sprintf("127.0.0.1:%d", ports[4])
	cl := startRun(ctx, t, "client", "bootstrap", "client", "--shared", shared, "--admin", clientAdmin)
	n1 := startRun(ctx, t, "node1", nodeArgs(1)...)
	n2 := startRun(ctx, t, "node2", nodeArgs(2)...)
	n3 := startRun(ctx, t, "node3", nodeArgs(3)...)
	waitUntil(t, 30*time.Second, "node2's ceremony state",
		exists(filepath.Join(base, "node2", "node", dkg.StateFileName)))
	require.False(t, n2.exited(), n2.stderr.String())
	require.Equal(t, 1, n2.stop(t), "node2 killed in the keys phase")
	require.NotContains(t, n2.stdout.String(), "cluster.json sha256")
	n2 = startRun(ctx, t, "node2", nodeArgs(2)...)
	waitUntil(t, 30*time.Second, "node2 resuming", func() bool { return strings.Contains(n2.stderr.String(), "resuming ceremony") })
	n4 = startRun(ctx, t, "node4", nodeArgs(4)...)

	nodes := []*bgRun{n1, n2, n3, n4}
	hashRE := regexp.MustCompile(`(?m)^cluster\.json sha256 ([0-9a-f]{64})$`)
	var hash string
	for i, n := range nodes {
		waitUntil(t, 2*time.Minute, fmt.Sprintf("node%d's ceremony", i+1), func() bool {
			require.False(t, n.exited(), "node%d exited:\n%s", i+1, n.stderr.String())
			return hashRE.MatchString(n.stdout.String())
		})
		h := hashRE.FindStringSubmatch(n.stdout.String())[1]
		if hash == "" {
			hash = h
		}
		require.Equal(t, hash, h, "node%d", i+1)
		require.Contains(t, n.stderr.String(), "distributed key generation among 4 members (no dealer)")
		require.Contains(t, n.stdout.String(), fmt.Sprintf("node%d dir=", i+1))
		d, err := node.LoadDir(filepath.Join(base, fmt.Sprintf("node%d", i+1), "node"))
		require.NoError(t, err)
		require.Equal(t, i+1, d.Share.Index())
		_, err = os.Stat(filepath.Join(base, fmt.Sprintf("node%d", i+1), "node", dkg.StateFileName))
		require.ErrorIs(t, err, os.ErrNotExist, "node%d's crash state is erased", i+1)
	}

	// The shared directory: the member list the nodes agreed on, the
	// cluster file (identical to each node's), the client's key, allowed.
	clusterPath := filepath.Join(shared, node.ClusterFileName)
	waitUntil(t, 30*time.Second, "the shared cluster file", exists(clusterPath))
	cluster, err := protocol.LoadCluster(clusterPath)
	require.NoError(t, err)
	own, err := os.ReadFile(filepath.Join(base, "node1", "node", node.ClusterFileName))
	require.NoError(t, err)
	pub, err := os.ReadFile(clusterPath)
	require.NoError(t, err)
	require.Equal(t, own, pub)
	list, _, err := dkg.LoadMemberList(filepath.Join(shared, "members.json"))
	require.NoError(t, err)
	require.Len(t, list.Members, 4)
	for i, m := range list.Members {
		require.Equal(t, []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])}, m.Addrs)
		require.Equal(t, i+1, cluster.NodeIndex(m.PeerID))
	}
	keyPath := filepath.Join(shared, "client.key")
	key, err := transport.LoadIdentity(keyPath)
	require.NoError(t, err)
	pid, err := peer.IDFromPrivateKey(key)
	require.NoError(t, err)
	ci, ok := cluster.Client(pid.String())
	require.True(t, ok, "cluster.json must allow the client's key")
	require.Equal(t, []string{"*"}, ci.Resources)
	waitUntil(t, 30*time.Second, "client ready", func() bool { return strings.Contains(cl.stdout.String(), "ready") })
	code, body := httpGet(t, "http://"+clientAdmin+"/readyz")
	require.Equal(t, 200, code, body)

	// The resource, then a fenced write through put.
	resURL := fmt.Sprintf("http://127.0.0.1:%d", ports[5])
	resAdmin := fmt.Sprintf("127.0.0.1:%d", ports[6])
	res := startRun(ctx, t, "resource", "bootstrap", "resource", "--shared", shared, "--data", filepath.Join(base, "resource"),
		"--listen", strings.TrimPrefix(resURL, "http://"), "--admin", resAdmin)
	waitUntil(t, 30*time.Second, "resource ready", func() bool {
		require.False(t, res.exited(), res.stderr.String())
		code, _ := httpGet(t, "http://"+resAdmin+"/healthz")
		return code == 200
	})
	code, body = httpGet(t, "http://"+resAdmin+"/healthz")
	require.Equal(t, 200, code, body)
	put := func() string {
		var out, errb bytes.Buffer
		require.Equal(t, 0, Run(ctx, []string{"put", "--cluster", clusterPath, "--identity", keyPath, "--url", resURL,
			"--wait", "30s", "orders-db", "paid"}, &out, &errb), errb.String())
		return out.String()
	}
	require.Regexp(t, `^acquired orders-db epoch=1 token=pt3\.\S+\nput orders-db epoch=1 status=204\n$`, put())

	// A node started again reuses its keys and votes: no new ceremony,
	// the same cluster, and the next epoch is above the last.
	require.Equal(t, 0, n1.stop(t), n1.stderr.String())
	n1 = startRun(ctx, t, "node1", nodeArgs(1)...)
	waitUntil(t, 30*time.Second, "node1 started again", func() bool { return strings.Contains(n1.stderr.String(), "reuses its keys") })
	require.Contains(t, n1.stderr.String(), "node 1 reuses its keys and votes in "+filepath.Join(base, "node1", "node")+" (cluster "+cluster.ID.String()+")")
	require.NotContains(t, n1.stderr.String(), "distributed key generation")
	// Above the last, not necessarily the next: a round that fails while
	// node 1 comes back (a loaded machine) moves the epoch on.
	require.Regexp(t, `put orders-db epoch=([2-9]|[1-9][0-9]+) status=204\n$`, put())

	for _, r := range []*bgRun{n1, n2, n3, n4, cl, res} {
		require.Equal(t, 0, r.stop(t), "%s:\n%s", r.name, r.stderr.String())
	}

	// Node 1's volume mounted for node 2 is refused before anything runs.
	swapped := nodeArgs(2)
	for i, a := range swapped {
		swapped[i] = strings.ReplaceAll(a, filepath.Join(base, "node2"), filepath.Join(base, "node1"))
	}
	var out, errb bytes.Buffer
	require.Equal(t, 1, Run(ctx, swapped, &out, &errb))
	require.Contains(t, errb.String(), "holds node 1's keys, not node 2's")
}

// TestBootstrapErrors: bad flags and inconsistent shared directories are
// refused with a message that says what to do.
func TestBootstrapErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(ctx, args, &out, &errb)
		return code, errb.String()
	}
	node1 := []string{"bootstrap", "node", "--shared", filepath.Join(dir, "shared"), "--addr", "/ip4/127.0.0.1/tcp/1",
		"--dir", filepath.Join(dir, "n1", "node"), "--identity", filepath.Join(dir, "n1", "identity.key")}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no role", []string{"bootstrap", "--shared", dir}, "want one ROLE (node, client or resource), got 0 arguments"},
		{"bad role", []string{"bootstrap", "dealer", "--shared", dir}, `unknown ROLE "dealer"`},
		{"no shared", []string{"bootstrap", "client"}, "--shared (or PALISADE_SHARED) is required"},
		{"no index", node1, "--index 0 must be in 1..4"},
		{"too few nodes", append(append([]string{}, node1...), "--index", "1", "--nodes", "3"), "a DKG needs --nodes 4 or more, got 3"},
		{"bad addr", []string{"bootstrap", "node", "--shared", dir, "--index", "1", "--addr", "10.0.0.1:4001", "--dir", filepath.Join(dir, "x"), "--identity", filepath.Join(dir, "id.key")}, `--addr "10.0.0.1:4001"`},
		{"identity in dir", []string{"bootstrap", "node", "--shared", dir, "--index", "1", "--addr", "/ip4/127.0.0.1/tcp/1", "--dir", filepath.Join(dir, "x"), "--identity", filepath.Join(dir, "x", "id.key")}, "--identity must lie outside --dir"},
		{"resource without data", []string{"bootstrap", "resource", "--shared", dir}, "--data (or PALISADE_DATA) is required"},
		{"negative wait", []string{"bootstrap", "client", "--shared", dir, "--join-timeout", "-1s"}, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := run(tt.args...)
			require.Equal(t, ExitUsage, code)
			require.Contains(t, stderr, "palisade: error: bootstrap: ")
			require.Contains(t, stderr, tt.want)
		})
	}

	// A wait that runs out names what is missing; a malformed peer file
	// is refused outright, naming it.
	shared := filepath.Join(dir, "shared2")
	code, stderr := run("bootstrap", "node", "--shared", shared, "--index", "1", "--addr", "/ip4/127.0.0.1/tcp/1",
		"--dir", filepath.Join(dir, "n2", "node"), "--identity", filepath.Join(dir, "n2", "identity.key"), "--join-timeout", "500ms")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "palisade: error: bootstrap: after 500ms still waiting for peer IDs: node2, node3, node4, client (are their containers running?)")
	b, err := json.Marshal(dkg.Member{PeerID: "12D3KooWDbxn283zfwuZ73ViRSUhhfPQsJPfTYNpa2yKjWWVp2kg", Addrs: []string{"/ip4/127.0.0.1/tcp/2"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(shared, "peers", "node3.json"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "peers", "node2.json"), []byte(`{"peer_id": "x", "addrs": [], "extra": 1}`), 0o644))
	code, stderr = run("bootstrap", "node", "--shared", shared, "--index", "1", "--addr", "/ip4/127.0.0.1/tcp/1",
		"--dir", filepath.Join(dir, "n2", "node"), "--identity", filepath.Join(dir, "n2", "identity.key"), "--join-timeout", "5s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, filepath.Join(shared, "peers", "node2.json"))
	require.Contains(t, stderr, `unknown field "extra"`)
}

// freePorts returns n free TCP ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := testnet.FreePorts(n)
	require.NoError(t, err)
	return ports
}

// TestBootstrapPlantedClusterRefused is the attack of issue 19: whoever
// can write the shared directory plants a cluster.json of a cluster they
// dealt themselves, and mints a token at epoch 2^62 with its key; a
// resource that took that file would admit the token and raise its
// barrier past every honest writer's epoch for good. With the cluster ID
// pinned (PALISADE_CLUSTER_ID), bootstrap refuses the planted file: the
// resource does not serve until the real file is there, then refuses the
// attacker's token (401) and admits the cluster's own; a planted file
// found at a restart is refused again, naming both IDs. The client role
// refuses it the same way, and a node refuses keys of another cluster,
// or to run a new ceremony, when pinned.
func TestBootstrapPlantedClusterRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	require.NoError(t, os.MkdirAll(shared, 0o755))
	genuine := verifiertest.NewDealer("palisade-testnet", 1)
	attacker := verifiertest.NewDealer("palisade-testnet", 2) // same name, its own key
	require.NotEqual(t, genuine.Cluster.ID, attacker.Cluster.ID)
	pin := genuine.Cluster.ID.String()
	plant := func(d *verifiertest.Dealer) {
		t.Helper()
		b, err := json.MarshalIndent(d.Cluster.File, "", "  ")
		require.NoError(t, err)
		require.NoError(t, writeShared(shared, node.ClusterFileName, append(b, '\n'), 0o644))
	}
	const attackEpoch = uint64(1) << 62
	forged := attacker.Token(t, "orders-db", attackEpoch, "12D3KooWAttacker")
	ports := freePorts(t, 2)
	resURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	resAdmin := fmt.Sprintf("127.0.0.1:%d", ports[1])
	resArgs := func(joinTimeout string) []string {
		return []string{"bootstrap", "resource", "--shared", shared, "--data", filepath.Join(base, "resource"),
			"--listen", strings.TrimPrefix(resURL, "http://"), "--admin", resAdmin, "--join-timeout", joinTimeout}
	}
	put := func(tok protocol.Token) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, resURL+"/kv/orders-db", strings.NewReader("written"))
		require.NoError(t, err)
		req.Header.Set("Palisade-Token", tok.String())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	refusal := shared + "/cluster.json holds cluster \"palisade-testnet\" with ID " + attacker.Cluster.ID.String() + ", pinned " + pin

	// The planted file: a pinned resource never takes it.
	plant(attacker)
	t.Setenv(EnvVar(clusterIDFlag), pin)
	var out, errb bytes.Buffer
	require.Equal(t, ExitError, Run(ctx, resArgs("1s"), &out, &errb))
	require.Contains(t, errb.String(), "still waiting for the cluster file: "+shared+"/cluster.json (the one there is REFUSED: "+refusal)
	require.NotContains(t, out.String(), "listening")
	code, _ := put(forged)
	require.Equal(t, 0, code, "nothing serves")

	res := startRun(ctx, t, "resource", resArgs("1m")...)
	time.Sleep(2 * bootstrapPoll) // it has looked at the planted file
	require.False(t, res.exited(), res.stderr.String())
	code, _ = httpGet(t, "http://"+resAdmin+"/healthz")
	require.Equal(t, 0, code, "the resource must not serve on the planted file")

	// The nodes publish the real file: the resource takes it, refuses
	// the forged token and admits the cluster's own.
	plant(genuine)
	waitUntil(t, 30*time.Second, "resource ready", func() bool {
		require.False(t, res.exited(), res.stderr.String())
		code, _ := httpGet(t, "http://"+resAdmin+"/healthz")
		return code == 200
	})
	code, body := put(forged)
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = put(genuine.Token(t, "orders-db", 1, "12D3KooWHonest"))
	require.Equal(t, http.StatusNoContent, code, body)

	// Planted again while it runs: nothing changes; at a restart it is
	// refused again.
	plant(attacker)
	code, body = put(forged)
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = put(genuine.Token(t, "orders-db", 2, "12D3KooWHonest"))
	require.Equal(t, http.StatusNoContent, code, body)
	require.Equal(t, 0, res.stop(t), res.stderr.String())
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitError, Run(ctx, resArgs("500ms"), &out, &errb))
	require.Contains(t, errb.String(), "REFUSED: "+refusal)

	// "palisade resource" run by hand with the pin refuses it outright.
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitError, Run(ctx, []string{"resource", "--cluster", filepath.Join(shared, node.ClusterFileName), "--data", filepath.Join(base, "resource"),
		"--listen", strings.TrimPrefix(resURL, "http://")}, &out, &errb))
	require.Contains(t, errb.String(), "palisade: error: resource: cluster file does not have the pinned cluster ID: "+refusal)

	// The client role: the same refusal.
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitError, Run(ctx, []string{"bootstrap", "client", "--shared", shared, "--join-timeout", "500ms"}, &out, &errb))
	require.Contains(t, errb.String(), "REFUSED: "+refusal)
	require.NotContains(t, out.String(), "ready")
	// It wrote only into its own directory.
	_, err := os.Stat(filepath.Join(shared, "client", "client.json"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(shared, "peers", "client.json"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A pinned node: keys of another cluster are refused, and so is a
	// new ceremony.
	keys, err := testnet.Keygen(t.TempDir(), testnet.KeygenOptions{N: 4})
	require.NoError(t, err)
	nodeArgs := func(dir string) []string {
		return []string{"bootstrap", "node", "--shared", shared, "--index", "1", "--addr", "/ip4/127.0.0.1/tcp/1",
			"--dir", dir, "--identity", filepath.Join(base, "id1.key"), "--join-timeout", "500ms"}
	}
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitError, Run(ctx, nodeArgs(keys.NodeDirs[0]), &out, &errb))
	require.Contains(t, errb.String(), "cluster file does not have the pinned cluster ID: "+keys.NodeDirs[0]+" holds the keys of cluster \"palisade-testnet\" with ID "+keys.Cluster.ID.String()+", pinned "+pin)
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitError, Run(ctx, nodeArgs(filepath.Join(base, "empty", "node")), &out, &errb))
	require.Contains(t, errb.String(), "holds no keys, and a new DKG would make a new cluster, not the pinned "+pin)
	_, err = os.Stat(filepath.Join(base, "id1.key"))
	require.ErrorIs(t, err, os.ErrNotExist, "no identity made")

	// A malformed pin is a usage error.
	t.Setenv(EnvVar(clusterIDFlag), "not-hex")
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitUsage, Run(ctx, resArgs("500ms"), &out, &errb))
	require.Contains(t, errb.String(), "want the cluster's ID, 64 hex digits")
}
