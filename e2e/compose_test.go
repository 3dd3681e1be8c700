//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// TestDockerTestnet runs the six fault scenarios, in order, on one
// testnet; a scenario that fails stops the suite (the next ones build on
// its state).
func TestDockerTestnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), suiteLimit)
	defer cancel()
	start := time.Now()
	tn := newTestnet(ctx, t)
	s := &suite{tn: tn}
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"1_healthy_and_fenced", s.healthyAndFenced},
		{"2_one_node_killed", s.oneNodeKilled},
		{"3_gc_pause", s.gcPause},
		{"4_partition", s.partition},
		{"5_restart_under_load", s.restartUnderLoad},
		{"6_down_and_up", s.downAndUp},
	}
	for _, st := range steps {
		stepStart := time.Now()
		ok := t.Run(st.name, func(t *testing.T) {
			tn.t = t
			defer func() { tn.t = nil }()
			st.fn(t)
		})
		t.Logf("%s: %v", st.name, time.Since(stepStart).Round(100*time.Millisecond))
		tn.t = t
		if !ok {
			t.Fatalf("%s failed: the later scenarios need its outcome", st.name)
		}
	}
	t.Logf("suite took %v (build, image and first start included)", time.Since(start).Round(time.Second))
}

// suite carries what scenarios hand on to later ones.
type suite struct {
	tn *testnet
	// clusterHash is the SHA-256 of cluster.json after the first start.
	clusterHash [32]byte
	// stale is the frozen client's token (scenario 3): below the barrier.
	stale protocol.Token
	// last holds the highest epoch issued per resource so far.
	last map[string]uint64
}

func (s *suite) saw(tok protocol.Token) {
	if s.last == nil {
		s.last = map[string]uint64{}
	}
	s.last[tok.Resource] = max(s.last[tok.Resource], tok.Epoch)
}

// healthyAndFenced: the README's start (the host makes the client key,
// then "compose up -d"); the nodes key themselves by DKG; every service
// becomes healthy; a token from the host writes, no token is refused.
func (s *suite) healthyAndFenced(t *testing.T) {
	tn := s.tn
	stdout, stderr, err := tn.runFull(cmdLimit, tn.bin, "identity", "--identity", tn.path("client.key"))
	require.NoError(t, err, stderr)
	clientID := strings.TrimSpace(stdout)

	tn.up(firstUpLimit)

	// Keys by DKG, each node's in its own container: no dealer anywhere,
	// four distinct peers at their network addresses, the host's client.
	f := tn.cluster.File
	require.Equal(t, 4, f.N)
	require.Equal(t, 3, f.T)
	for i, n := range f.Nodes {
		require.Equal(t, []string{fmt.Sprintf("/ip4/%s/tcp/400%d", tn.nodeIP(i+1), i+1)}, n.Addrs)
	}
	require.Len(t, f.Clients, 1)
	require.Equal(t, clientID, f.Clients[0].PeerID, "cluster.json must allow the client key the host made")
	peers := map[string]bool{}
	for i := 1; i <= 4; i++ {
		logs := tn.logs(fmt.Sprintf("node%d", i))
		require.Contains(t, logs, "distributed key generation among 4 members (no dealer)")
		require.Contains(t, logs, "created this node's identity /data/identity.key")
		require.NotContains(t, logs, "trusted-dealer")
		require.Regexp(t, fmt.Sprintf(`node%d dir=/data/node`, i), logs)
		peers[f.Nodes[i-1].PeerID] = true
	}
	require.Len(t, peers, 4)
	raw, err := os.ReadFile(tn.path("cluster.json"))
	require.NoError(t, err)
	s.clusterHash = sha256.Sum256(raw)
	var members struct {
		Members []struct {
			PeerID string `json:"peer_id"`
		} `json:"members"`
	}
	mraw, err := os.ReadFile(tn.path("members.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(mraw, &members))
	require.Len(t, members.Members, 4)

	// Every node's admin endpoint answers on the compose network (where
	// Prometheus would scrape it), here from the client's container; its
	// secret-guarded operations (revoke, audit) refuse a caller without
	// the node's admin.secret.
	client := tn.container("client")
	for i := 1; i <= 4; i++ {
		url := fmt.Sprintf("http://%s:9090", tn.nodeIP(i))
		out, errs, err := tn.runFull(cmdLimit, "docker", "exec", client, "/palisade", "probe", url+"/metrics")
		require.NoError(t, err, "node%d's /metrics from the client container: %s", i, errs)
		require.Contains(t, out, "200 OK", "node%d", i)
		_, errs, err = tn.runFull(cmdLimit, "docker", "exec", client, "/palisade", "probe", url+"/audit")
		require.Error(t, err, "node%d served its audit log without its admin secret", i)
		require.Regexp(t, `40[13] `, errs, "node%d", i)
		t.Logf("node%d admin: /metrics 200; /audit without the secret: %s", i, firstLine(errs))
	}

	tok := tn.acquire("orders-db", 30*time.Second, 20*time.Second)
	s.saw(tok)
	code, body := tn.httpDo("PUT", "orders-db", &tok, "paid")
	require.Equal(t, 204, code, body)
	code, body = tn.httpDo("PUT", "orders-db", nil, "forged")
	require.Equal(t, 401, code, body)
	code, body = tn.httpDo("GET", "orders-db", &tok, "")
	require.Equal(t, 200, code)
	require.Equal(t, "paid", body)
}

// oneNodeKilled: with node3 killed (SIGKILL), acquires still succeed.
func (s *suite) oneNodeKilled(t *testing.T) {
	tn := s.tn
	tn.dc("kill", "node3")
	out, err := tn.run("docker", "inspect", "-f", "{{.State.Status}}", tn.container("node3"))
	require.NoError(t, err)
	require.Equal(t, "exited", strings.TrimSpace(out))
	for _, r := range []string{"one-down-a", "one-down-b", "one-down-c"} {
		tok := tn.acquire(r, 5*time.Second, 30*time.Second)
		s.saw(tok)
		code, body := tn.httpDo("PUT", r, &tok, "written with node3 down")
		require.Equal(t, 204, code, body)
	}
	tn.dc("start", "node3")
	tn.waitHealthy(healthyLimit)
}

// pauseAtLeast is how long the GC-pause scenario keeps the client
// frozen at least: past its 2 s TTL.
const pauseAtLeast = 3 * time.Second

var (
	acquiredLine = regexp.MustCompile(`^acquired gc-pause epoch=(\d+) token=(\S+)$`)
	putLine      = regexp.MustCompile(`^put gc-pause epoch=(\d+) status=(\d+)$`)
)

// gcPause: a client in its own container holds a 2 s lease and writes
// every 250 ms; it is frozen with docker pause past its TTL; another
// client acquires and writes; after docker unpause the frozen process's
// next write is refused (409) and the value is the newer client's.
func (s *suite) gcPause(t *testing.T) {
	tn := s.tn
	cid := tn.container("client")
	ctx, cancel := context.WithTimeout(tn.ctx, 3*time.Minute)
	defer cancel()
	// The container's environment gives put its cluster, key and URL.
	cmd := exec.CommandContext(ctx, "docker", "exec", cid, "/palisade", "put",
		"--ttl", "2s", "--wait", "30s", "--every", "250ms", "--for", "2m", "gc-pause", "written by the paused client")
	cmd.Env = tn.env
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := newLineReader(stdout)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		<-lines.done // all output read before Wait closes the pipe
		waitErr = cmd.Wait()
	}()
	defer func() {
		cancel()
		<-exited
	}()

	l, err := lines.waitLine(time.Minute, acquiredLine.MatchString)
	require.NoError(t, err, "put: %s", stderr.String())
	m := acquiredLine.FindStringSubmatch(l)
	s.stale, err = tn.verify.ParseAndVerify(m[2])
	require.NoError(t, err)
	require.Equal(t, m[1], strconv.FormatUint(s.stale.Epoch, 10))
	_, err = lines.waitLine(30*time.Second, func(l string) bool { return l == fmt.Sprintf("put gc-pause epoch=%d status=204", s.stale.Epoch) })
	require.NoError(t, err, "the client never wrote: %s", stderr.String())

	tn.must("docker", "pause", cid)
	paused := time.Now()
	// A frozen process writes nothing: no line appears until unpause
	// (give lines written just before the pause time to arrive).
	time.Sleep(500 * time.Millisecond)
	before := len(lines.snapshot())

	newer := tn.acquire("gc-pause", 30*time.Second, 30*time.Second)
	require.Greater(t, newer.Epoch, s.stale.Epoch)
	code, body := tn.httpDo("PUT", "gc-pause", &newer, "written by the newer client")
	require.Equal(t, 204, code, body)
	// Its lease ran out 2 s after its last renewal, before the pause; keep
	// it frozen past a whole TTL from the pause too.
	if d := pauseAtLeast - time.Since(paused); d > 0 {
		time.Sleep(d)
	}
	require.Equal(t, before, len(lines.snapshot()), "the paused client wrote while frozen")
	frozen := time.Since(paused)
	tn.must("docker", "unpause", cid)
	t.Logf("client frozen for %v; the newer client took epoch %d over epoch %d", frozen.Round(100*time.Millisecond), newer.Epoch, s.stale.Epoch)

	refused, err := lines.waitLine(time.Minute, func(l string) bool {
		m := putLine.FindStringSubmatch(l)
		return m != nil && m[2] != "204"
	})
	require.NoError(t, err, "after unpause: %s", stderr.String())
	require.Equal(t, fmt.Sprintf("put gc-pause epoch=%d status=409", s.stale.Epoch), refused)
	select {
	case <-exited:
		var ee *exec.ExitError
		require.ErrorAs(t, waitErr, &ee)
		require.Equal(t, 1, ee.ExitCode())
	case <-time.After(time.Minute):
		t.Fatal("put did not exit after its refused write")
	}
	require.Contains(t, stderr.String(), "409 Conflict: stale token")
	code, body = tn.httpDo("GET", "gc-pause", &newer, "")
	require.Equal(t, 200, code)
	require.Equal(t, "written by the newer client", body)
	s.saw(newer)
}

// partition: node3 and node4 cut off the network; an acquire fails within
// its wait naming them; reconnected, acquires succeed again.
func (s *suite) partition(t *testing.T) {
	tn := s.tn
	netName := tn.network()
	cut := []int{3, 4}
	for _, i := range cut {
		tn.must("docker", "network", "disconnect", netName, tn.container(fmt.Sprintf("node%d", i)))
	}
	const wait = 5 * time.Second
	start := time.Now()
	stdout, stderr, err := tn.palisade(wait+cmdLimit, "acquire", "--ttl", "5s", "--wait", wait.String(), "partitioned")
	took := time.Since(start)
	require.Error(t, err, "acquire with two of four nodes cut off: %s", stdout)
	require.Empty(t, strings.TrimSpace(stdout))
	requireNotEnoughNodes(t, stderr, 3, 4)
	// Within its wait: the diagnosis after it is bounded too (a status
	// round of at most 3 s), plus process start and slack for the load.
	require.Less(t, took, wait+15*time.Second)
	t.Logf("acquire failed after %v (wait %v): %s", took.Round(100*time.Millisecond), wait, firstLine(stderr))

	// The healthchecks see it too: node1's readiness endpoint fails (only
	// 2 of 4 members reachable, t = 3), and Docker marks node1 unhealthy.
	n1 := tn.container("node1")
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := tn.run("docker", "inspect", "-f", "{{.State.Health.Status}}", n1)
		require.NoError(t, err)
		if strings.TrimSpace(st) == "unhealthy" {
			break
		}
		require.False(t, time.Now().After(deadline), "node1 still %s a minute into the partition", strings.TrimSpace(st))
		time.Sleep(pollEvery)
	}
	_, probeOut, err := tn.runFull(cmdLimit, "docker", "exec", n1, "/palisade", "probe", "http://127.0.0.1:9090/readyz")
	require.Error(t, err)
	require.Contains(t, probeOut, "2 of 4 members reachable, need t=3")
	t.Logf("node1 unhealthy: %s", firstLine(probeOut))

	for _, i := range cut {
		tn.must("docker", "network", "connect", "--ip", tn.nodeIP(i), netName, tn.container(fmt.Sprintf("node%d", i)))
	}
	tok := tn.acquire("partitioned", 5*time.Second, time.Minute)
	s.saw(tok)
	code, body := tn.httpDo("PUT", "partitioned", &tok, "after the partition healed")
	require.Equal(t, 204, code, body)
	tn.waitHealthy(healthyLimit)
}

// restartUnderLoad: clients on the host contend for two resources while
// node2 is killed (SIGKILL) and started again. No node signed two votes
// for one (resource, epoch): every token verifies, epochs are distinct per
// resource, and no node and no client holds evidence.
func (s *suite) restartUnderLoad(t *testing.T) {
	tn := s.tn
	id, err := client.LoadIdentity(tn.path("client.key"))
	require.NoError(t, err)
	resources := []string{"load-a", "load-b"}
	const workers = 4
	ctx, stop := context.WithCancel(tn.ctx)
	defer stop()
	var (
		mu       sync.Mutex
		tokens   []protocol.Token
		failures []string
		clients  []*client.Client
		wg       sync.WaitGroup
	)
	for w := range workers {
		c, err := client.New(client.Config{Cluster: tn.cluster, Identity: id})
		require.NoError(t, err)
		clients = append(clients, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				r := resources[(w+i)%len(resources)]
				actx, cancel := context.WithTimeout(ctx, 15*time.Second)
				lock, err := c.Acquire(actx, r, client.WithTTL(3*time.Second))
				cancel()
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				tokens = append(tokens, lock.Token())
				mu.Unlock()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_ = lock.Release(rctx) // a failed release only leaves the lease to its TTL
				cancel()
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens)
	}
	waitCount := func(n int, limit time.Duration) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for count() < n {
			require.False(t, time.Now().After(deadline), "only %d tokens within %v", count(), limit)
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitCount(10, time.Minute)
	tn.dc("kill", "-s", "SIGKILL", "node2")
	atKill := count()
	waitCount(atKill+10, time.Minute) // the other three keep issuing
	tn.dc("start", "node2")
	tn.waitHealthy(healthyLimit)
	atBack := count()
	waitCount(atBack+10, time.Minute)
	stop()
	wg.Wait()
	t.Logf("%d tokens: %d before the kill, %d while node2 was down, %d after it was back; %d failed attempts",
		len(tokens), atKill, atBack-atKill, len(tokens)-atBack, len(failures))

	byResource := map[string]map[uint64]protocol.Token{}
	for _, tok := range tokens {
		require.NoError(t, tn.verify.Verify(tok))
		if byResource[tok.Resource] == nil {
			byResource[tok.Resource] = map[uint64]protocol.Token{}
		}
		if prev, dup := byResource[tok.Resource][tok.Epoch]; dup {
			t.Fatalf("two tokens for %s at epoch %d: holders %s and %s", tok.Resource, tok.Epoch, prev.Holder, tok.Holder)
		}
		byResource[tok.Resource][tok.Epoch] = tok
		s.saw(tok)
	}
	for _, c := range clients {
		require.Empty(t, c.Evidence(), "a client saw a node equivocate")
	}
	for i := 1; i <= 4; i++ {
		out := tn.must("docker", "exec", tn.container(fmt.Sprintf("node%d", i)), "/palisade", "evidence", "--dir", "/data/node")
		require.Equal(t, "no evidence", strings.TrimSpace(out), "node%d", i)
	}
	for _, r := range resources {
		epochs := make([]uint64, 0, len(byResource[r]))
		for e := range byResource[r] {
			epochs = append(epochs, e)
		}
		slices.Sort(epochs)
		require.NotEmpty(t, epochs, r)
		t.Logf("%s: %d distinct epochs %d..%d", r, len(epochs), epochs[0], epochs[len(epochs)-1])
	}
}

// downAndUp: docker-compose down, then up: the keys and votes are reused,
// the resource still refuses the stale token, epochs continue above the
// last one issued.
func (s *suite) downAndUp(t *testing.T) {
	tn := s.tn
	tn.dc("down", "-t", "10")
	require.Empty(t, tn.containers())
	tn.up(healthyLimit)

	raw, err := os.ReadFile(tn.path("cluster.json"))
	require.NoError(t, err)
	require.Equal(t, s.clusterHash, sha256.Sum256(raw), "cluster.json changed: the keys were not reused")
	for i := 1; i <= 4; i++ {
		logs := tn.logs(fmt.Sprintf("node%d", i))
		require.Contains(t, logs, fmt.Sprintf("node %d reuses its keys and votes in /data/node", i))
		require.NotContains(t, logs, "distributed key generation")
	}

	code, body := tn.httpDo("PUT", "gc-pause", &s.stale, "written with the stale token")
	require.Equal(t, 409, code, body)
	require.Contains(t, body, "stale token")
	for r, last := range s.last {
		tok := tn.acquire(r, 5*time.Second, 30*time.Second)
		require.Greater(t, tok.Epoch, last, "%s: epoch after down and up", r)
		code, body := tn.httpDo("PUT", r, &tok, "after down and up")
		require.Equal(t, 204, code, body)
	}
	code, body = tn.httpDo("PUT", "gc-pause", &s.stale, "written with the stale token")
	require.Equal(t, 409, code, body)
}

// requireNotEnoughNodes checks that acquire's error says too few nodes
// answered (3 of 4 needed) and names exactly the failed ones. It accepts
// both the current wording ("3 of 4 nodes are needed; nodes 3, 4 failed
// or did not answer") and the one branch i13-cli brings ("not enough
// nodes: 3 of 4 needed, 2 usable answers (node 3: timed out; node 4:
// timed out)").
func requireNotEnoughNodes(t *testing.T, stderr string, failed ...int) {
	t.Helper()
	line := firstLine(stderr)
	require.True(t, strings.HasPrefix(line, "palisade: error: "), stderr)
	names := make([]string, len(failed))
	for i, n := range failed {
		names[i] = strconv.Itoa(n)
	}
	old := fmt.Sprintf("3 of 4 nodes are needed; nodes %s failed or did not answer", strings.Join(names, ", "))
	if strings.Contains(line, old) {
		return
	}
	require.Contains(t, line, "not enough nodes: 3 of 4 needed", stderr)
	for i := 1; i <= 4; i++ {
		if slices.Contains(failed, i) {
			require.Contains(t, line, fmt.Sprintf("node %d: ", i), stderr)
		} else {
			require.NotContains(t, line, fmt.Sprintf("node %d: ", i), stderr)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a process to write while a test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
