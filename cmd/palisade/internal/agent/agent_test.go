package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/cmd/palisade/internal/agent"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier"
)

// TestMain fails the package if a goroutine outlives its test: every
// goroutine of an agent ends with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// env is a running testnet with an agent over client identity 0 of it,
// served by an httptest server.
type env struct {
	t     *testing.T
	nw    *testnet.Network
	agent *agent.Agent
	srv   *httptest.Server
	// other is a client with identity 1, another holder.
	other *client.Client
}

// start runs a 4-node testnet (clients allowed resources, "*" if none)
// and an agent with cfg over client 0.
func start(t *testing.T, cfg agent.Config, resources ...string) *env {
	t.Helper()
	nw, err := testnet.Start(t.TempDir(), testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 2, ClientResources: resources}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	c, err := nw.NewClient(0, client.Config{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	other, err := nw.NewClient(1, client.Config{Seed: 2})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	cfg.Client = c
	a, err := agent.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	// Cleanups run last-in first-out: the agent closes (releasing its
	// locks) before the server, the clients and the nodes.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return &env{t: t, nw: nw, agent: a, srv: srv, other: other}
}

// answer is one HTTP answer: status, headers and decoded JSON body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) str(k string) string {
	s, _ := a.body[k].(string)
	return s
}

func (a answer) epoch() uint64 {
	f, _ := a.body["epoch"].(float64)
	return uint64(f)
}

// do sends one request to the agent and decodes its JSON answer.
func (e *env) do(method, path, body string, hdr ...string) answer {
	e.t.Helper()
	return do(e.t, e.srv.URL, method, path, body, hdr...)
}

// do is doErr asserting, on the test goroutine, that the answer is JSON.
func do(t *testing.T, base, method, path, body string, hdr ...string) answer {
	t.Helper()
	a, err := doErr(base, method, path, body, hdr...)
	require.NoError(t, err)
	return a
}

// doErr is do without assertions, for goroutines other than the test's:
// they send its result back to the test goroutine, which asserts.
func doErr(base, method, path, body string, hdr ...string) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return a, fmt.Errorf("Content-Type %q, want application/json; body %s", ct, raw)
	}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		return a, fmt.Errorf("body %s: %w", raw, err)
	}
	return a, nil
}

// result is an answer (or the error getting it) a goroutine sends back.
type result struct {
	answer
	err error
}

// goDo sends one request from a new goroutine; its result comes back on
// the returned channel, for the test goroutine to assert.
func goDo(base, method, path, body string, hdr ...string) <-chan result {
	out := make(chan result, 1)
	go func() {
		a, err := doErr(base, method, path, body, hdr...)
		out <- result{a, err}
	}()
	return out
}

// answered is the answer a goroutine got, asserted on the test goroutine.
func answered(t *testing.T, ch <-chan result, what string) answer {
	t.Helper()
	r := testwait.Recv(t, ch, testwait.HangCeiling, what)
	require.NoError(t, r.err, what)
	return r.answer
}

// requireError checks an error answer: status, code and a message.
func requireError(t *testing.T, a answer, status int, code agent.Code) {
	t.Helper()
	require.Equal(t, status, a.status, a.raw)
	require.Equal(t, string(code), a.str("code"), a.raw)
	require.Equal(t, status, code.Status())
	require.NotEmpty(t, a.str("message"), a.raw)
}

// TestAcquirePollRelease walks one lock through its life: acquired with
// a token that verifies, read at once, long-polled until DELETE releases
// it, and released at the cluster (another holder takes it at once,
// though its TTL is an hour).
func TestAcquirePollRelease(t *testing.T) {
	e := start(t, agent.Config{})
	a := e.do("POST", "/v1/locks/orders-db", `{"ttl": "1h"}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	id := a.str("id")
	require.Regexp(t, `^[0-9a-f]{32}$`, id)
	require.Equal(t, "/v1/locks/"+id, a.header.Get("Location"))
	require.Equal(t, "orders-db", a.str("resource"))
	require.Equal(t, "held", a.str("state"))
	require.Equal(t, "1h0m0s", a.str("ttl"))
	require.Equal(t, "no-store", a.header.Get("Cache-Control"))

	// The token is a real one, for this resource and epoch, held by the
	// agent's identity in the session the answer names.
	tok, err := verifier.New(e.nw.Keys.Cluster).ParseAndVerify(a.str("token"))
	require.NoError(t, err)
	require.Equal(t, "orders-db", tok.Resource)
	require.Equal(t, a.epoch(), tok.Epoch)
	require.Equal(t, a.str("holder"), tok.Holder.ID)
	require.Equal(t, a.str("session"), tok.Holder.Session.String())

	// ?wait=0s answers at once.
	g := e.do("GET", "/v1/locks/"+id+"?wait=0s", "")
	require.Equal(t, http.StatusOK, g.status, g.raw)
	require.Equal(t, "held", g.str("state"))
	require.Equal(t, a.str("token"), g.str("token"))

	// A long poll waits until the lock ends.
	polled := goDo(e.srv.URL, "GET", "/v1/locks/"+id+"?wait=1m", "")
	select {
	case p := <-polled:
		t.Fatalf("the long poll answered while the lock was held: %s (err %v)", p.raw, p.err)
	case <-time.After(200 * time.Millisecond):
	}
	d := e.do("DELETE", "/v1/locks/"+id, "")
	require.Equal(t, http.StatusOK, d.status, d.raw)
	require.Equal(t, "released", d.str("state"))
	p := answered(t, polled, "the long poll did not end with the release")
	require.Equal(t, http.StatusOK, p.status, p.raw)
	require.Equal(t, "released", p.str("state"))

	// Released at the cluster: another holder acquires now, not in an hour.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock, err := e.other.TryAcquire(ctx, "orders-db")
	require.NoError(t, err)
	require.Greater(t, lock.Epoch(), tok.Epoch)
	require.NoError(t, lock.Release(ctx))

	// DELETE again is harmless; the ended lock stays readable.
	d = e.do("DELETE", "/v1/locks/"+id, "")
	require.Equal(t, http.StatusOK, d.status, d.raw)
	require.Equal(t, "released", d.str("state"))
	g = e.do("GET", "/v1/locks/"+id, "")
	require.Equal(t, "released", g.str("state"))
}

// TestResourceWithSlash: resource names may contain '/', escaped or not.
func TestResourceWithSlash(t *testing.T) {
	e := start(t, agent.Config{})
	for _, path := range []string{"/v1/locks/bucket/photos", "/v1/locks/bucket%2Fphotos"} {
		a := e.do("POST", path, "")
		require.Equal(t, http.StatusCreated, a.status, a.raw)
		require.Equal(t, "bucket/photos", a.str("resource"))
		require.Equal(t, "10s", a.str("ttl"), "the default TTL")
		require.Equal(t, http.StatusOK, e.do("DELETE", "/v1/locks/"+a.str("id"), "").status)
	}
}

// TestBusy: a resource another holder has is busy (409, naming the
// holder, with Retry-After), so is one this agent already holds; with a
// wait, the acquisition waits for the release; a wait that runs out is
// busy too.
func TestBusy(t *testing.T) {
	e := start(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other, err := e.other.TryAcquire(ctx, "orders-db", client.WithTTL(time.Hour))
	require.NoError(t, err)

	a := e.do("POST", "/v1/locks/orders-db", "")
	requireError(t, a, http.StatusConflict, agent.CodeBusy)
	require.Equal(t, other.Token().Holder.ID, a.str("holder"))
	require.Equal(t, other.Token().Holder.Ref().Session.String(), a.str("session"), "the session's hash: replies never show its ID")
	require.Equal(t, other.Epoch(), a.epoch())
	require.NotEmpty(t, a.str("left"))
	require.NotEmpty(t, a.header.Get("Retry-After"))

	a = e.do("POST", "/v1/locks/orders-db", `{"wait": "300ms"}`)
	requireError(t, a, http.StatusConflict, agent.CodeBusy)

	// A waiting acquisition gets the lock once the holder releases.
	got := goDo(e.srv.URL, "POST", "/v1/locks/orders-db", `{"wait": "1m"}`)
	select {
	case r := <-got:
		t.Fatalf("acquired while held: %s (err %v)", r.raw, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, other.Release(ctx))
	r := testwait.Recv(t, got, 50*time.Second, "the waiting acquisition did not end")
	require.NoError(t, r.err)
	a = r.answer
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	require.Greater(t, a.epoch(), other.Epoch())

	// The agent holds it now: another lock of the same agent is busy.
	b := e.do("POST", "/v1/locks/orders-db", "")
	requireError(t, b, http.StatusConflict, agent.CodeBusy)
	require.Contains(t, b.str("message"), "through this agent")
}

// TestNotEnoughNodes: with two of four nodes down, acquiring fails with
// not_enough_nodes (503) and names them.
func TestNotEnoughNodes(t *testing.T) {
	e := start(t, agent.Config{})
	require.NoError(t, e.nw.Stop(3))
	require.NoError(t, e.nw.Stop(4))
	a := e.do("POST", "/v1/locks/orders-db", "")
	requireError(t, a, http.StatusServiceUnavailable, agent.CodeNotEnoughNodes)
	require.Equal(t, []any{3.0, 4.0}, a.body["nodes"])
}

// TestRefused: a resource outside the identity's patterns is refused
// (403) by the cluster.
func TestRefused(t *testing.T) {
	e := start(t, agent.Config{}, "orders-*")
	a := e.do("POST", "/v1/locks/payroll", "")
	requireError(t, a, http.StatusForbidden, agent.CodeRefused)
	require.NotEmpty(t, a.body["nodes"])
	a = e.do("POST", "/v1/locks/orders-db", "")
	require.Equal(t, http.StatusCreated, a.status, a.raw)
}

// TestLost: a lock whose renewals fail is lost at its deadline; a long
// poll ends with the state and the reason.
func TestLost(t *testing.T) {
	e := start(t, agent.Config{})
	a := e.do("POST", "/v1/locks/orders-db", `{"ttl": "1s"}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	require.NoError(t, e.nw.Stop(3))
	require.NoError(t, e.nw.Stop(4))
	p := e.do("GET", "/v1/locks/"+a.str("id")+"?wait=30s", "")
	require.Equal(t, http.StatusOK, p.status, p.raw)
	require.Equal(t, "lost", p.str("state"))
	require.Contains(t, p.str("reason"), "lease lost")
	// A lost lock frees its place: DELETE reports it as lost.
	d := e.do("DELETE", "/v1/locks/"+a.str("id"), "")
	require.Equal(t, http.StatusOK, d.status, d.raw)
	require.Equal(t, "lost", d.str("state"))
}

// TestBadRequests: malformed input gets the matching code and status.
func TestBadRequests(t *testing.T) {
	e := start(t, agent.Config{MaxBodyBytes: 64})
	long := strings.Repeat("r", 257)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     agent.Code
	}{
		{"control character", "POST", "/v1/locks/a%01b", "", 400, agent.CodeBadRequest},
		{"empty resource", "POST", "/v1/locks/", "", 400, agent.CodeBadRequest},
		{"long resource", "POST", "/v1/locks/" + long, "", 400, agent.CodeBadRequest},
		{"not JSON", "POST", "/v1/locks/r", "ttl=1s", 400, agent.CodeBadRequest},
		{"unknown field", "POST", "/v1/locks/r", `{"tll": "1s"}`, 400, agent.CodeBadRequest},
		{"trailing data", "POST", "/v1/locks/r", `{} {}`, 400, agent.CodeBadRequest},
		{"bad duration", "POST", "/v1/locks/r", `{"ttl": "10"}`, 400, agent.CodeBadRequest},
		{"zero ttl", "POST", "/v1/locks/r", `{"ttl": "0s"}`, 400, agent.CodeBadRequest},
		{"negative wait", "POST", "/v1/locks/r", `{"wait": "-1s"}`, 400, agent.CodeBadRequest},
		{"ttl above the maximum", "POST", "/v1/locks/r", `{"ttl": "2h"}`, 400, agent.CodeBadRequest},
		{"wait above the maximum", "POST", "/v1/locks/r", `{"wait": "11m"}`, 400, agent.CodeBadRequest},
		{"body too large", "POST", "/v1/locks/r", `{"ttl": "` + strings.Repeat("1", 80) + `s"}`, 413, agent.CodeTooLarge},
		{"unknown lock", "GET", "/v1/locks/00112233445566778899aabbccddeeff", "", 404, agent.CodeNotFound},
		{"not an ID", "GET", "/v1/locks/orders-db", "", 404, agent.CodeNotFound},
		{"unknown lock deleted", "DELETE", "/v1/locks/00112233445566778899aabbccddeeff", "", 404, agent.CodeNotFound},
		{"unknown endpoint", "GET", "/v2/locks", "", 404, agent.CodeNotFound},
		{"wrong method", "PUT", "/v1/locks/r", "", 405, agent.CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, e.do(tc.method, tc.path, tc.body), tc.status, tc.code)
		})
	}
	// Parameters of a known lock.
	a := e.do("POST", "/v1/locks/r", "")
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	requireError(t, e.do("GET", "/v1/locks/"+a.str("id")+"?wiat=1s", ""), 400, agent.CodeBadRequest)
	requireError(t, e.do("GET", "/v1/locks/"+a.str("id")+"?wait=1h", ""), 400, agent.CodeBadRequest)
}

// TestLimits: the agent holds at most MaxLocks locks and lets at most
// MaxWaiting requests wait; both free up again.
func TestLimits(t *testing.T) {
	e := start(t, agent.Config{MaxLocks: 2, MaxWaiting: 1})
	a1 := e.do("POST", "/v1/locks/r1", "")
	require.Equal(t, http.StatusCreated, a1.status, a1.raw)
	a2 := e.do("POST", "/v1/locks/r2", "")
	require.Equal(t, http.StatusCreated, a2.status, a2.raw)
	requireError(t, e.do("POST", "/v1/locks/r3", ""), http.StatusTooManyRequests, agent.CodeLimit)

	// One poll waits; a second one is refused.
	polled := make(chan result, 1)
	go func() {
		for {
			// Until it gets the slot, the checks below may hold it.
			a, err := doErr(e.srv.URL, "GET", "/v1/locks/"+a1.str("id")+"?wait=1m", "")
			if err != nil || a.status != http.StatusTooManyRequests {
				polled <- result{a, err}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// The second poll is refused once the first one waits. (Polled here,
	// not in require.Eventually, whose condition runs on another
	// goroutine: do asserts.)
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Until the first poll waits, this one gets the slot for 50ms.
		a := e.do("GET", "/v1/locks/"+a2.str("id")+"?wait=50ms", "")
		if a.status == http.StatusTooManyRequests && a.str("code") == string(agent.CodeLimit) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second waiting poll was never refused: last answer %d %s", a.status, a.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}

	require.Equal(t, http.StatusOK, e.do("DELETE", "/v1/locks/"+a1.str("id"), "").status)
	require.Equal(t, "released", answered(t, polled, "the waiting poll").str("state"))
	a3 := e.do("POST", "/v1/locks/r3", "")
	require.Equal(t, http.StatusCreated, a3.status, a3.raw)
}

// TestCloseReleasesEveryLock: closing the agent releases its locks at the
// cluster (others acquire at once, though the TTL is an hour), ends long
// polls with "released", and refuses new acquisitions.
func TestCloseReleasesEveryLock(t *testing.T) {
	e := start(t, agent.Config{})
	resources := []string{"a", "b", "c"}
	var ids []string
	for _, r := range resources {
		a := e.do("POST", "/v1/locks/"+r, `{"ttl": "1h"}`)
		require.Equal(t, http.StatusCreated, a.status, a.raw)
		ids = append(ids, a.str("id"))
	}
	polled := goDo(e.srv.URL, "GET", "/v1/locks/"+ids[0]+"?wait=1m", "")
	time.Sleep(100 * time.Millisecond) // let the poll start waiting (either order passes)

	require.NoError(t, e.agent.Close())
	require.Equal(t, "released", answered(t, polled, "the long poll").str("state"))
	requireError(t, e.do("POST", "/v1/locks/d", ""), http.StatusServiceUnavailable, agent.CodeShuttingDown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range resources {
		lock, err := e.other.TryAcquire(ctx, r)
		require.NoError(t, err, r)
		require.NoError(t, lock.Release(ctx))
	}
}

// TestServe: Serve refuses a non-loopback listener without a secret, and
// on its context's end releases every lock and returns.
func TestServe(t *testing.T) {
	e := start(t, agent.Config{})
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	require.ErrorIs(t, e.agent.Serve(context.Background(), ln), agent.ErrInsecureListen)

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.agent.Serve(ctx, ln) }()
	a := do(t, "http://"+ln.Addr().String(), "POST", "/v1/locks/orders-db", `{"ttl": "1h"}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	cancel()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	lock, err := e.other.TryAcquire(actx, "orders-db")
	require.NoError(t, err, "released at shutdown")
	require.NoError(t, lock.Release(actx))
}

// TestAuth: with a secret, every request needs it; without one, only
// loopback host names are served; browsers never are.
func TestAuth(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	e := start(t, agent.Config{Secret: []byte(secret)})
	id := "/v1/locks/00112233445566778899aabbccddeeff"
	a := e.do("GET", id, "")
	requireError(t, a, http.StatusUnauthorized, agent.CodeUnauthorised)
	require.Equal(t, `Bearer realm="palisade-agent"`, a.header.Get("WWW-Authenticate"))
	requireError(t, e.do("GET", id, "", "Authorization", "Bearer "+secret[:31]), 401, agent.CodeUnauthorised)
	requireError(t, e.do("GET", id, "", "Authorization", "Bearer "+secret+"x"), 401, agent.CodeUnauthorised)
	requireError(t, e.do("GET", id, "", "Authorization", secret), 401, agent.CodeUnauthorised)
	// The right secret passes, whatever the host name.
	requireError(t, e.do("GET", id, "", "Authorization", "Bearer "+secret, "Host", "agent.example:7071"), 404, agent.CodeNotFound)
	requireError(t, e.do("GET", id, "", "Authorization", "Bearer "+secret, "Origin", "https://evil.example"), 403, agent.CodeForbidden)

	open, err := agent.New(agent.Config{Client: nil})
	require.Error(t, err, "a client is required")
	require.Nil(t, open)
	_, err = agent.New(agent.Config{Client: &client.Client{}, Secret: []byte("short")})
	require.ErrorIs(t, err, agent.ErrBadSecret)
}

// TestLoopbackOnly: without a secret, a request naming another host (a
// DNS-rebinding page) or coming from a browser is forbidden.
func TestLoopbackOnly(t *testing.T) {
	e := start(t, agent.Config{})
	id := "/v1/locks/00112233445566778899aabbccddeeff"
	for _, host := range []string{"127.0.0.1:7071", "localhost:7071", "LOCALHOST", "[::1]:7071", "127.0.0.2"} {
		requireError(t, e.do("GET", id, "", "Host", host), 404, agent.CodeNotFound)
	}
	for _, host := range []string{"evil.example:7071", "localhost.evil.example", "10.0.0.1:7071", "0.0.0.0"} {
		requireError(t, e.do("GET", id, "", "Host", host), 403, agent.CodeForbidden)
	}
	requireError(t, e.do("POST", "/v1/locks/r", "", "Origin", "http://127.0.0.1:8000"), 403, agent.CodeForbidden)
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		secret bool
		ok     bool
	}{
		{"127.0.0.1:7071", false, true},
		{"[::1]:7071", false, true},
		{"0.0.0.0:7071", false, false},
		{"[::]:7071", false, false},
		{"10.1.2.3:7071", false, false},
		{"10.1.2.3:7071", true, true},
		{"0.0.0.0:7071", true, true},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.addr)
		require.NoError(t, err)
		err = agent.CheckListen(addr, tc.secret)
		if tc.ok {
			require.NoError(t, err, tc.addr)
		} else {
			require.ErrorIs(t, err, agent.ErrInsecureListen, tc.addr)
		}
	}
}

func TestCheckListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		secret bool
		ok     bool
	}{
		{"127.0.0.1:7071", false, true},
		{"[::1]:0", false, true},
		{"localhost:7071", false, true},
		{"0.0.0.0:7071", false, false},
		{":7071", false, false},
		{"[::]:7071", false, false},
		{"192.168.1.5:7071", false, false},
		{":7071", true, true},
	} {
		err := agent.CheckListenAddr(tc.addr, tc.secret)
		if tc.ok {
			require.NoError(t, err, tc.addr)
		} else {
			require.ErrorIs(t, err, agent.ErrInsecureListen, tc.addr)
		}
	}
	require.Error(t, agent.CheckListenAddr("127.0.0.1", false), "no port")
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	s, err := agent.LoadSecret(write("ok", "0123456789abcdef0123\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123", string(s), "surrounding white space trimmed")
	_, err = agent.LoadSecret(write("open", "0123456789abcdef0123\n", 0o644))
	require.ErrorIs(t, err, agent.ErrInsecureSecret)
	require.Contains(t, err.Error(), "want 0600")
	_, err = agent.LoadSecret(write("short", "0123456789\n", 0o600))
	require.ErrorIs(t, err, agent.ErrBadSecret)
	_, err = agent.LoadSecret(write("long", strings.Repeat("x", agent.MaxSecretLen+1), 0o600))
	require.ErrorIs(t, err, agent.ErrBadSecret)
	_, err = agent.LoadSecret(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
