package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// cmdJSONField is the script command "jsonfield FILE KEY VAR": it sets VAR
// to the value of KEY in the JSON object in FILE (strings as they are,
// other values in JSON).
func cmdJSONField(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: jsonfield FILE KEY VAR")
	}
	var obj map[string]json.RawMessage
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &obj))
	raw, ok := obj[args[1]]
	if !ok {
		ts.Fatalf("%s has no %q", args[0], args[1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	ts.Setenv(args[2], s)
}

// proc is a background palisade process whose output a test reads while
// it runs.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
}

func startProc(ctx context.Context, t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = testEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	return p
}

// waitStdout waits for a line of stdout that matches re and returns its
// first submatch.
func (p *proc) waitStdout(t *testing.T, re string, limit time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(limit)
	for {
		if m := rx.FindStringSubmatch(p.stdout.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited early:\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1], p.stdout, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %q within %v:\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1], re, limit, p.stdout, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends sig and waits for the process to exit, returning its code.
func (p *proc) stop(t *testing.T, sig os.Signal, limit time.Duration) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %v of %v:\n%s", p.cmd.Args[1], limit, sig, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// findPython returns the path of python3. Without it the test skips, or
// fails when PALISADE_REQUIRE_PYTHON is set (as .ci/run sets it).
func findPython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("PALISADE_REQUIRE_PYTHON") != "" {
			t.Fatalf("python3 is required (PALISADE_REQUIRE_PYTHON is set): %v", err)
		}
		t.Skipf("python3 not found, the Python code is not tested: %v", err)
	}
	return python
}

// pythonDir holds the Python client and its tests.
var pythonDir = filepath.Join("..", "..", "clients", "python")

// TestPythonTokenVectors runs clients/python/test_token_vectors.py: the
// token format implemented again in Python from docs/token-format.md
// alone (all but the pairing) must agree with every test vector.
func TestPythonTokenVectors(t *testing.T) {
	python := findPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "test_token_vectors.py")
	cmd.Dir = pythonDir
	cmd.Env = append(testEnv(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err)
	require.Contains(t, string(out), "Ran 1 test")
	require.Contains(t, string(out), "\nOK")
}

// TestPythonClient runs the Python client (clients/python) against a real
// testnet, "palisade resource" and "palisade agent" (with a bearer
// secret), all processes of the built binary: the example acquires
// through the agent, writes to the resource with the token, releases,
// and sees its old token fenced off; the unit tests check busy, waits,
// long polls and error codes. Then SIGTERM stops the agent while it holds
// a lock with an hour's TTL, and the lock is free at once: the agent
// released it.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a testnet")
	}
	python := findPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "tn")
	clusterFile := filepath.Join(keys, "cluster.json")
	identity := filepath.Join(keys, "client.key")

	tn := startProc(ctx, t, bin, "testnet", "--nodes", "4", "--dir", keys)
	tn.waitStdout(t, `(?m)^(ready)$`, time.Minute)
	res := startProc(ctx, t, bin, "resource", "--cluster", clusterFile, "--data", filepath.Join(dir, "res"), "--listen", "127.0.0.1:0")
	resURL := res.waitStdout(t, `listening on (http://\S+)`, 30*time.Second)
	secretFile := filepath.Join(dir, "agent.secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	ag := startProc(ctx, t, bin, "agent", "--cluster", clusterFile, "--identity", identity,
		"--listen", "127.0.0.1:0", "--secret-file", secretFile)
	agentURL := ag.waitStdout(t, `listening on (http://\S+)`, 30*time.Second)

	runPython := func(args ...string) string {
		cmd := exec.CommandContext(ctx, python, args...)
		cmd.Dir = pythonDir
		cmd.Env = append(testEnv(), "PALISADE_AGENT_URL="+agentURL, "PALISADE_RESOURCE_URL="+resURL,
			"PALISADE_SECRET_FILE="+secretFile, "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		t.Logf("python3 %s:\n%s", strings.Join(args, " "), out)
		require.NoError(t, err, "agent stderr:\n%s", ag.stderr)
		return string(out)
	}
	out := runPython("example.py", "orders-db")
	require.Regexp(t, `(?s)^acquired "orders-db" at epoch (\d+)\n`+
		`wrote "paid" with the token \(HTTP 204\)\n`+
		`read back "paid"\n`+
		`released epoch \d+\n`+
		`acquired "orders-db" at epoch \d+ and wrote "shipped"\n`+
		`the epoch-\d+ token is refused: HTTP 409\n`+
		`released epoch \d+\n$`, out)
	out = runPython("-m", "unittest", "-v", "test_palisade_agent.py")
	require.Contains(t, out, "Ran 4 tests")
	require.Contains(t, out, "\nOK")
	require.NotContains(t, out, "skipped")

	// SIGTERM releases what the agent holds: with a TTL of an hour, only
	// the release lets another holder in now.
	req, err := http.NewRequestWithContext(ctx, "POST", agentURL+"/v1/locks/held-at-exit", strings.NewReader(`{"ttl": "1h"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	require.Equal(t, 0, ag.stop(t, syscall.SIGTERM, 30*time.Second), ag.stderr.String())
	require.Contains(t, ag.stderr.String(), "released every lock")
	r := runBin(ctx, t, 30*time.Second, bin, "acquire", "--cluster", clusterFile, "--identity", identity, "held-at-exit")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, bytes.HasPrefix([]byte(r.stdout), []byte(protocol.TokenTextPrefix)), r.stdout)

	require.Equal(t, 0, res.stop(t, syscall.SIGTERM, 30*time.Second), res.stderr.String())
	require.Equal(t, 0, tn.stop(t, os.Interrupt, 30*time.Second), tn.stderr.String())
}
