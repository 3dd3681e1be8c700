//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// Limits. Each is a hang ceiling, not a speed expectation.
const (
	// suiteLimit bounds the whole suite.
	suiteLimit = 9 * time.Minute
	// cmdLimit bounds one docker, compose or palisade command.
	cmdLimit = 2 * time.Minute
	// buildLimit bounds the go build of the static binary.
	buildLimit = 5 * time.Minute
	// firstUpLimit bounds the first start until every service is healthy
	// (the DKG runs in it).
	firstUpLimit = 3 * time.Minute
	// healthyLimit bounds later waits for health.
	healthyLimit = 90 * time.Second
	// pollEvery is how often waits look again.
	pollEvery = 500 * time.Millisecond
	// healthInterval is the compose healthchecks' interval in the suite.
	healthInterval = "2s"
)

// services are the compose file's services.
var services = []string{"node1", "node2", "node3", "node4", "resource", "client"}

// testnet is one copy of docker-compose.yml under a project of its own.
type testnet struct {
	t       *testing.T
	ctx     context.Context
	repo    string   // repository root
	bin     string   // the static binary, also in the image
	image   string   // the image the suite built
	project string   // compose project name
	data    string   // the shared host directory (PALISADE_COMPOSE_DATA)
	netPre  string   // first three octets of the network
	compose []string // "docker-compose" or "docker compose"
	env     []string // environment of every command
	cluster *protocol.Cluster
	verify  *verifier.Verifier
}

// newTestnet builds the binary and the image and prepares a project; it
// registers the cleanup that removes everything the suite makes.
func newTestnet(ctx context.Context, t *testing.T) *testnet {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	tn := &testnet{t: t, ctx: ctx, repo: repo, project: fmt.Sprintf("palisade-e2e-%d", os.Getpid())}
	tn.env = cleanEnv()
	tn.compose = composeCommand(ctx, t, tn.env)
	t.Logf("compose: %s; project %s", strings.Join(tn.compose, " "), tn.project)

	tn.bin, tn.image = buildImage(ctx, t, repo, tn.env, tn.project+":test")

	tn.data = filepath.Join(t.TempDir(), "compose-data")
	// compose-data/client is the client's own (read-write) mount: made
	// here, as the README says, so that Docker does not make it as root.
	require.NoError(t, os.MkdirAll(filepath.Join(tn.data, "client"), 0o755))
	tn.netPre = freeSubnet(t, tn)
	tn.env = append(tn.env,
		"PALISADE_COMPOSE_IMAGE="+tn.image,
		"PALISADE_COMPOSE_NET="+tn.netPre,
		"PALISADE_COMPOSE_DATA="+tn.data,
		"PALISADE_COMPOSE_HEALTH_INTERVAL="+healthInterval,
		// Set and empty: Docker publishes on free host ports, so the
		// default testnet may run beside the suite.
		"PALISADE_COMPOSE_PORT_NODE1=", "PALISADE_COMPOSE_PORT_NODE2=",
		"PALISADE_COMPOSE_PORT_NODE3=", "PALISADE_COMPOSE_PORT_NODE4=",
		"PALISADE_COMPOSE_PORT_RESOURCE=",
	)
	t.Logf("network %s.0/24, data %s", tn.netPre, tn.data)
	t.Cleanup(tn.down)
	return tn
}

// buildImage builds the static binary and, around it, the repository's
// Dockerfile as the image tag, in a context of its own, exactly as the
// README says; it registers the image's removal as a cleanup and returns
// the binary's path (the host runs it too) and the image.
func buildImage(ctx context.Context, t *testing.T, repo string, env []string, tag string) (bin, image string) {
	t.Helper()
	imgDir := t.TempDir()
	bin = filepath.Join(imgDir, "palisade")
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, buildLimit)
	defer cancel()
	build := exec.CommandContext(bctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/palisade")
	build.Dir = repo
	build.Env = append(append([]string{}, env...), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	t.Logf("built the static binary in %v", time.Since(start).Round(time.Millisecond))
	for _, f := range []string{"Dockerfile", ".dockerignore"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(imgDir, f), b, 0o644))
	}
	docker := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmdLimit)
		defer cancel()
		cmd := exec.CommandContext(cctx, "docker", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := docker("rmi", "-f", tag); err != nil {
			t.Errorf("cleanup: docker rmi %s: %v\n%s", tag, err, out)
		}
	})
	start = time.Now()
	out2, err := docker("build", "-q", "-t", tag, imgDir)
	require.NoError(t, err, "docker build:\n%s", out2)
	size, _ := docker("image", "inspect", "-f", "{{.Size}}", tag)
	n, _ := strconv.ParseInt(strings.TrimSpace(size), 10, 64)
	t.Logf("built image %s in %v: %.1f MB", tag, time.Since(start).Round(time.Millisecond), float64(n)/1e6)
	return bin, tag
}

// cleanEnv is the caller's environment without PALISADE_* and GOLOG_*
// settings that would change what the commands do.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PALISADE_") && !strings.HasPrefix(kv, "GOLOG_") {
			env = append(env, kv)
		}
	}
	return env
}

// composeCommand picks "docker compose" or docker-compose v1:
// PALISADE_E2E_COMPOSE if set, else whichever answers, "docker compose"
// first.
func composeCommand(ctx context.Context, t *testing.T, env []string) []string {
	if c := os.Getenv("PALISADE_E2E_COMPOSE"); c != "" {
		return strings.Fields(c)
	}
	for _, c := range [][]string{{"docker", "compose"}, {"docker-compose"}} {
		cmd := exec.CommandContext(ctx, c[0], append(c[1:], "version")...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Logf("%s version: %s", strings.Join(c, " "), strings.TrimSpace(string(out)))
			return c
		}
	}
	t.Fatal("neither \"docker compose\" nor docker-compose answers")
	return nil
}

// freeSubnet picks 10.78.X.0/24 overlapping no Docker network (the
// default compose file's 10.77.0.0/24 is outside that range anyway).
func freeSubnet(t *testing.T, tn *testnet) string {
	ids := strings.Fields(tn.must("docker", "network", "ls", "-q"))
	var used []*net.IPNet
	if len(ids) > 0 {
		out := tn.must("docker", append([]string{"network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}} {{end}}"}, ids...)...)
		for _, s := range strings.Fields(out) {
			if _, n, err := net.ParseCIDR(s); err == nil {
				used = append(used, n)
			}
		}
	}
	for i := range 250 {
		x := (os.Getpid()+i)%250 + 1
		_, cand, _ := net.ParseCIDR(fmt.Sprintf("10.78.%d.0/24", x))
		free := true
		for _, u := range used {
			if u.Contains(cand.IP) || cand.Contains(u.IP) {
				free = false
			}
		}
		if free {
			return fmt.Sprintf("10.78.%d", x)
		}
	}
	t.Fatal("no free /24 in 10.78.0.0/16")
	return ""
}

// run runs a command within cmdLimit and returns its stdout and error
// (stderr in the error).
func (tn *testnet) run(name string, args ...string) (string, error) {
	stdout, stderr, err := tn.runFull(cmdLimit, name, args...)
	if err != nil {
		return stdout, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return stdout, nil
}

// runFull runs a command within limit and returns both outputs.
func (tn *testnet) runFull(limit time.Duration, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tn.ctx), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = tn.env
	cmd.Dir = tn.repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must is run, failing the test on error.
func (tn *testnet) must(name string, args ...string) string {
	tn.t.Helper()
	out, err := tn.run(name, args...)
	require.NoError(tn.t, err)
	return out
}

// composeArgs is the compose command line for args, on the project.
func (tn *testnet) composeArgs(args ...string) (string, []string) {
	full := append(append(append([]string{}, tn.compose[1:]...), "-p", tn.project, "-f", filepath.Join(tn.repo, "docker-compose.yml")), args...)
	return tn.compose[0], full
}

// dc runs a compose command on the project and fails the test on error.
func (tn *testnet) dc(args ...string) string {
	tn.t.Helper()
	name, full := tn.composeArgs(args...)
	return tn.must(name, full...)
}

// containers maps each service to its container ID.
func (tn *testnet) containers() map[string]string {
	tn.t.Helper()
	out := tn.must("docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+tn.project,
		"--format", `{{.ID}} {{.Label "com.docker.compose.service"}}`)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if id, svc, ok := strings.Cut(line, " "); ok {
			m[svc] = id
		}
	}
	return m
}

// container is one service's container ID.
func (tn *testnet) container(svc string) string {
	tn.t.Helper()
	id := tn.containers()[svc]
	require.NotEmpty(tn.t, id, "no container for service %s", svc)
	return id
}

// network is the project's network name.
func (tn *testnet) network() string {
	tn.t.Helper()
	out := strings.Fields(tn.must("docker", "network", "ls", "--filter", "label=com.docker.compose.project="+tn.project, "--format", "{{.Name}}"))
	require.Len(tn.t, out, 1, "the project's networks")
	return out[0]
}

// waitHealthy waits until every service's container is healthy, then
// checks that "compose ps" says so too. A container that exits or that
// Docker restarts meanwhile fails the wait at once (a broken image or
// compose file), with its log.
func (tn *testnet) waitHealthy(limit time.Duration) {
	tn.t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	restarts := map[string]string{}
	var last string
	for {
		ids := tn.containers()
		var states []string
		healthy := len(ids) == len(services)
		for _, svc := range services {
			id := ids[svc]
			if id == "" {
				states = append(states, svc+"=absent")
				healthy = false
				continue
			}
			out, err := tn.run("docker", "inspect", "-f", "{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{else}}no-healthcheck{{end}} {{.RestartCount}}", id)
			st, count, _ := strings.Cut(strings.TrimSpace(out), " ")
			if err != nil {
				st = "inspect-failed"
			}
			prev, seen := restarts[svc]
			if !seen {
				restarts[svc] = count
			}
			if seen && count != prev || strings.HasPrefix(st, "exited/") || strings.HasPrefix(st, "dead/") {
				tn.t.Fatalf("%s is %s after %d restarts while waiting for health:\n%s", svc, st, atoi(count), tn.logs(svc))
			}
			states = append(states, svc+"="+st)
			healthy = healthy && st == "running/healthy"
		}
		last = strings.Join(states, " ")
		if healthy {
			break
		}
		if time.Now().After(deadline) {
			tn.t.Fatalf("not every service healthy within %v: %s", limit, last)
		}
		time.Sleep(pollEvery)
	}
	tn.t.Logf("all %d services healthy after %v", len(services), time.Since(start).Round(100*time.Millisecond))
	ps := tn.dc("ps")
	for _, svc := range services {
		found := false
		for _, line := range strings.Split(ps, "\n") {
			if strings.Contains(line, "_"+svc+"_") || strings.Contains(line, "-"+svc+"-") {
				found = true
				require.Contains(tn.t, line, "(healthy)", "compose ps for %s:\n%s", svc, ps)
			}
		}
		require.True(tn.t, found, "compose ps lists no %s:\n%s", svc, ps)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// up starts the project and loads the cluster file the nodes published.
func (tn *testnet) up(limit time.Duration) {
	tn.t.Helper()
	tn.dc("up", "-d")
	tn.waitHealthy(limit)
	var err error
	tn.cluster, err = protocol.LoadCluster(tn.path("cluster.json"))
	require.NoError(tn.t, err)
	tn.verify = verifier.New(tn.cluster)
}

// down removes the project with its volumes, and checks nothing of it is
// left. It runs as a cleanup, also after a failure.
func (tn *testnet) down() {
	t := tn.t
	if t.Failed() {
		name, args := tn.composeArgs("ps")
		ps, _ := tn.run(name, args...)
		name, args = tn.composeArgs("logs", "--no-color", "--tail", "60")
		logs, _ := tn.run(name, args...)
		t.Logf("compose ps:\n%s\ncompose logs:\n%s", ps, logs)
	}
	// A paused container cannot be stopped.
	for _, id := range strings.Fields(tn.must("docker", "ps", "-q", "--filter", "status=paused", "--filter", "label=com.docker.compose.project="+tn.project)) {
		if _, err := tn.run("docker", "unpause", id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	name, args := tn.composeArgs("down", "-v", "--remove-orphans", "-t", "5")
	if _, err := tn.run(name, args...); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	left := strings.TrimSpace(tn.must("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+tn.project))
	nets := strings.TrimSpace(tn.must("docker", "network", "ls", "-q", "--filter", "label=com.docker.compose.project="+tn.project))
	vols := strings.TrimSpace(tn.must("docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+tn.project))
	if left != "" || nets != "" || vols != "" {
		t.Errorf("cleanup left containers %q, networks %q, volumes %q", left, nets, vols)
	}
}

// path is a file in the shared host directory.
func (tn *testnet) path(name string) string { return filepath.Join(tn.data, name) }

// nodeIP is node i's address; resourceURL the resource's base URL.
func (tn *testnet) nodeIP(i int) string { return fmt.Sprintf("%s.1%d", tn.netPre, i) }
func (tn *testnet) resourceURL() string { return "http://" + tn.netPre + ".20:7070" }

// palisade runs the host binary with the testnet's cluster file and the
// client key, within limit.
func (tn *testnet) palisade(limit time.Duration, args ...string) (stdout, stderr string, err error) {
	full := append([]string{args[0], "--cluster", tn.path("cluster.json"), "--identity", tn.path("client.key")}, args[1:]...)
	return tn.runFull(limit, tn.bin, full...)
}

// acquire acquires resource from the host and returns the verified token.
func (tn *testnet) acquire(resource string, ttl, wait time.Duration) protocol.Token {
	tn.t.Helper()
	stdout, stderr, err := tn.palisade(wait+cmdLimit, "acquire", "--ttl", ttl.String(), "--wait", wait.String(), resource)
	require.NoError(tn.t, err, "acquire %s: %s", resource, stderr)
	tok, err := tn.verify.ParseAndVerify(strings.TrimSpace(stdout))
	require.NoError(tn.t, err)
	require.Equal(tn.t, resource, tok.Resource)
	return tok
}

// httpDo sends one request to the resource; tok may be nil (no token).
func (tn *testnet) httpDo(method, resource string, tok *protocol.Token, body string) (int, string) {
	tn.t.Helper()
	ctx, cancel := context.WithTimeout(tn.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, tn.resourceURL()+"/kv/"+resource, strings.NewReader(body))
	require.NoError(tn.t, err)
	if tok != nil {
		req.Header.Set(verifier.HeaderToken, tok.String())
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tn.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(tn.t, err)
	return resp.StatusCode, string(b)
}

// logs is one service's log.
func (tn *testnet) logs(svc string) string {
	tn.t.Helper()
	return tn.dc("logs", "--no-color", svc)
}

// lineReader collects a process's output lines for a test to wait on.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced on every line
	done  chan struct{} // closed at EOF
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lr.mu.Lock()
			lr.lines = append(lr.lines, sc.Text())
			close(lr.more)
			lr.more = make(chan struct{})
			lr.mu.Unlock()
		}
	}()
	return lr
}

// snapshot returns the lines so far.
func (lr *lineReader) snapshot() []string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]string(nil), lr.lines...)
}

// waitLine waits up to limit for a line that satisfies ok, and returns it.
func (lr *lineReader) waitLine(limit time.Duration, ok func(string) bool) (string, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	seen := 0
	for {
		lr.mu.Lock()
		lines, more := lr.lines, lr.more
		lr.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if ok(lines[seen]) {
				return lines[seen], nil
			}
		}
		select {
		case <-more:
		case <-lr.done:
			lr.mu.Lock()
			n := len(lr.lines)
			lr.mu.Unlock()
			if seen == n {
				return "", errors.New("output ended")
			}
		case <-timer.C:
			return "", fmt.Errorf("no such line within %v", limit)
		}
	}
}
