package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/cmd/palisade/internal/cli"
	"github.com/palisade-dev/palisade/protocol"
)

// TestMain lets testscript run this test binary as the palisade command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"palisade": cli.Main, "ptest": ptestMain})
}

// TestScript runs the CLI scripts in testdata/script.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":  cmdWaitFile,
			"freeport":  cmdFreePort,
			"jsonfield": cmdJSONField,
			"retry":     cmdRetry,
			"hup":       cmdHup,
			"term":      cmdTerm,
			"envfile":   cmdEnvFile,
		},
		Setup: func(e *testscript.Env) error {
			// Logs at their defaults whatever the caller's environment.
			e.Setenv("GOLOG_LOG_LEVEL", "")
			return nil
		},
	})
}

// cmdWaitFile is the script command "waitfile PATH": it waits up to 30s for
// PATH to exist, for files a background command writes.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not appear within 30s", args[0])
		}
	}
}

// TestDemo runs the demo in process: every step must behave.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cli.Run(ctx, []string{"demo"}, &stdout, &stderr)
	t.Logf("demo took %v:\n%s", time.Since(start).Round(time.Millisecond), stdout.String())
	require.Equal(t, 0, code, "stderr:\n%s", stderr.String())
	require.Equal(t, 7, strings.Count(stdout.String(), "✓"))
	require.NotContains(t, stdout.String(), "✗")
	require.Contains(t, stdout.String(), "stale")
	require.Contains(t, stderr.String(), "trusted-dealer")
}

// buildBinary builds palisade into a temporary directory.
func buildBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "palisade")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// testEnv is the environment of the processes a test starts: the caller's,
// without PALISADE_* and GOLOG_* settings that would change their
// behaviour.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, cli.EnvPrefix) && !strings.HasPrefix(kv, "GOLOG_") {
			env = append(env, kv)
		}
	}
	return env
}

// result is a finished palisade command.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runBin runs one palisade command to completion within limit.
func runBin(ctx context.Context, t *testing.T, limit time.Duration, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("palisade %s: %v (after %v)\nstderr:\n%s", shorten(args), err, r.took, r.stderr)
	}
	t.Logf("palisade %s: exit %d in %v", shorten(args), r.code, r.took.Round(time.Millisecond))
	return r
}

// shorten joins args for a log line, cutting long ones (tokens, paths).
func shorten(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 24 {
			a = a[:10] + "…" + a[len(a)-10:]
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// lockedBuffer is a bytes.Buffer safe for a process to write while a test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// nodeProc is a running "palisade node" process.
type nodeProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

func startNodeProc(ctx context.Context, t *testing.T, bin, dir string) *nodeProc {
	t.Helper()
	p := &nodeProc{stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, "node", "--dir", dir)
	p.cmd.Env = testEnv()
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *nodeProc) kill(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("node process %d did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// waitListening waits until the node logs that it listens and accepts TCP
// connections on addr (a /ip4/…/tcp/… multiaddr).
func (p *nodeProc) waitListening(t *testing.T, addr string, limit time.Duration) {
	t.Helper()
	parts := strings.Split(addr, "/")
	require.Len(t, parts, 5, "address %q", addr)
	hostport := net.JoinHostPort(parts[2], parts[4])
	deadline := time.Now().Add(limit)
	for {
		if strings.Contains(p.stderr.String(), "listening on") {
			if c, err := net.DialTimeout("tcp", hostport, time.Second); err == nil {
				_ = c.Close()
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("node exited early:\n%s", p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node did not listen on %s within %v:\n%s", hostport, limit, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessesKillOneThenTwo runs 4 nodes as processes of the built
// binary: tokens are issued and verify; with one node killed they still
// are; with two killed (more than f = 1) acquire fails within its --wait
// bound and names the dead nodes.
func TestProcessesKillOneThenTwo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	clusterFile := filepath.Join(keys, "cluster.json")
	identity := filepath.Join(keys, "client.key")

	r := runBin(ctx, t, 30*time.Second, bin, "keygen", "--nodes", "4", "--dir", keys)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "trusted-dealer")
	cluster, err := protocol.LoadCluster(clusterFile)
	require.NoError(t, err)

	nodes := make([]*nodeProc, 4)
	for i := range nodes {
		nodes[i] = startNodeProc(ctx, t, bin, filepath.Join(keys, "node"+string(rune('1'+i))))
	}
	for i, p := range nodes {
		p.waitListening(t, cluster.File.Nodes[i].Addrs[0], 30*time.Second)
	}

	acquire := func(wait time.Duration) result {
		return runBin(ctx, t, wait+30*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity,
			"--ttl", "5s", "--wait", wait.String(), "orders-db")
	}
	verify := func(cluster, token string) result {
		return runBin(ctx, t, 30*time.Second, bin, "verify", "--cluster", cluster, token)
	}

	// All four up: a token is issued and verifies.
	r = acquire(10 * time.Second)
	require.Equal(t, 0, r.code, r.stderr)
	token := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(token, protocol.TokenTextPrefix), "stdout %q", r.stdout)
	r = verify(clusterFile, token)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^resource=orders-db epoch=1 holder=12D3KooW\S+ session=[0-9a-f]{32}\n$`, r.stdout)

	// A token with a changed epoch no longer verifies.
	tok, err := protocol.ParseTokenText(token)
	require.NoError(t, err)
	tok.Epoch++
	r = verify(clusterFile, tok.String())
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "palisade: error: token rejected: invalid token signature")
	// Another cluster refuses it.
	other := filepath.Join(dir, "other")
	require.Equal(t, 0, runBin(ctx, t, 30*time.Second, bin, "keygen", "--nodes", "4", "--dir", other).code)
	r = verify(filepath.Join(other, "cluster.json"), token)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "token for another cluster")

	// One node killed: f = 1 is tolerated. The first acquire's process
	// exited without releasing, so its 5 s lease still runs: this one,
	// another lock session of the same key, waits for it (within --wait)
	// and gets a later epoch.
	nodes[3].kill(t)
	r = acquire(10 * time.Second)
	require.Equal(t, 0, r.code, r.stderr)
	second, err := protocol.ParseTokenText(strings.TrimSpace(r.stdout))
	require.NoError(t, err)
	require.Greater(t, second.Epoch, uint64(1), "an epoch after the first lease (epoch 1)")
	require.NotEqual(t, tok.Holder.Session, second.Holder.Session)
	r = verify(clusterFile, second.String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "resource=orders-db ")

	// Two killed: no quorum; acquire gives up within --wait, exits 4 (not
	// enough nodes) and names the dead nodes, one short reason each.
	nodes[2].kill(t)
	const wait = 3 * time.Second
	r = acquire(wait)
	require.Equal(t, 4, r.code, "stdout %q", r.stdout)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "palisade: error: acquire \"orders-db\": gave up after --wait 3s: not enough nodes: 3 of 4 needed")
	// The dead nodes are named with their reason; on a loaded machine the
	// live ones' last answers may have timed out too, and are then named
	// before them.
	require.Regexp(t, `[(;] ?node 3: connection refused; node 4: connection refused\)`, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line:\n%s", r.stderr)
	require.Less(t, r.took, wait+10*time.Second, "acquire overran its --wait bound")
	require.GreaterOrEqual(t, r.took, wait, "acquire gave up before its --wait bound")

	// The two survivors stop cleanly on SIGTERM.
	for _, p := range nodes[:2] {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for i, p := range nodes[:2] {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("node %d did not stop on SIGTERM", i+1)
		}
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.stderr.String())
		require.Contains(t, p.stderr.String(), "stopped")
	}
}
