package resource_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a dealt test cluster that signs real tokens.
type cluster struct {
	c *protocol.Cluster
	d *verifiertest.Dealer
}

func newCluster(seed int64, name string) *cluster {
	d := verifiertest.NewDealer(name, seed)
	return &cluster{c: d.Cluster, d: d}
}

// token is the text form of a valid token for (resource, epoch), made
// outside any node.
func (c *cluster) token(t *testing.T, resource string, epoch uint64) string {
	t.Helper()
	return c.d.Token(t, resource, epoch, "client").String()
}

// kv is a client of a resource server.
type kv struct {
	t   *testing.T
	url string
}

// do sends one request and returns the response with its body read.
func (k kv) do(method, key, token, body string, header ...string) (*http.Response, string) {
	k.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, k.url+resource.PathPrefix+key, rd)
	require.NoError(k.t, err)
	if token != "" {
		req.Header.Set(verifier.HeaderToken, token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(k.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(k.t, err)
	return resp, string(b)
}

// server starts a resource server over a bolt store in dir.
func server(t *testing.T, c *cluster, dir string, maxBody int64) (kv, *verifier.BoltStore) {
	store, err := verifier.OpenBoltStore(filepath.Join(dir, "resource.db"))
	require.NoError(t, err)
	fence := verifier.NewFence(verifier.New(c.c), store)
	fence.MaxBodyBytes = maxBody
	srv := httptest.NewServer(resource.New(fence).Handler())
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		srv.Close()
		_ = store.Close()
	})
	return kv{t: t, url: srv.URL}, store
}

func barrier(t *testing.T, s verifier.BarrierStore, resource string) uint64 {
	t.Helper()
	e, ok, err := s.Barrier(context.Background(), resource)
	require.NoError(t, err)
	require.True(t, ok)
	return e
}

func TestKV(t *testing.T) {
	c := newCluster(1, "palisade-test")
	k, store := server(t, c, t.TempDir(), 64)
	tok5, tok6, tok4 := c.token(t, "orders", 5), c.token(t, "orders", 6), c.token(t, "orders", 4)

	// 401: no token, a token for another key, another cluster's token.
	resp, body := k.do(http.MethodPut, "orders", "", "x")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	resp, body = k.do(http.MethodPut, "orders", c.token(t, "invoices", 5), "x")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	require.Contains(t, body, "another resource")
	other := newCluster(2, "other")
	resp, _ = k.do(http.MethodPut, "orders", other.token(t, "orders", 5), "x")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = k.do(http.MethodGet, "orders", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "reads are fenced too")

	// GET of a missing key: 404, and the read raises no barrier.
	resp, _ = k.do(http.MethodGet, "orders", tok5, "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	_, ok, err := store.Barrier(context.Background(), "orders")
	require.NoError(t, err)
	require.False(t, ok)

	// 204 with the version; GET returns value and version.
	resp, body = k.do(http.MethodPut, "orders", tok5, "paid")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	v1 := resp.Header.Get("ETag")
	require.Regexp(t, `^"[0-9]+"$`, v1)
	require.EqualValues(t, 5, barrier(t, store, "orders"))
	resp, body = k.do(http.MethodGet, "orders", tok5, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "paid", body)
	require.Equal(t, v1, resp.Header.Get("ETag"))

	// 409 for a stale token, with the barrier.
	resp, body = k.do(http.MethodPut, "orders", tok4, "late")
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get(verifier.HeaderBarrier))
	require.Contains(t, body, "stale token")

	// 412: a fresh token (epoch 6) with stale data leaves value and barrier.
	resp, body = k.do(http.MethodPut, "orders", tok5, "shipped", "If-Match", v1)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	v2 := resp.Header.Get("ETag")
	require.NotEqual(t, v1, v2)
	resp, body = k.do(http.MethodPut, "orders", tok6, "refunded", "If-Match", v1)
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, body)
	require.Equal(t, v2, resp.Header.Get("ETag"))
	require.EqualValues(t, 5, barrier(t, store, "orders"), "a failed precondition raised the barrier")
	resp, _ = k.do(http.MethodPut, "orders", tok6, "x", "If-None-Match", "*")
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	resp, body = k.do(http.MethodGet, "orders", tok5, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "shipped", body)

	// The holder of epoch 6 re-reads and writes; the barrier rises with it.
	resp, body = k.do(http.MethodGet, "orders", tok6, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "shipped", body)
	resp, body = k.do(http.MethodPut, "orders", tok6, "refunded", "If-Match", resp.Header.Get("ETag")+", \"999\"")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.EqualValues(t, 6, barrier(t, store, "orders"))
	resp, _ = k.do(http.MethodPut, "orders", tok5, "late")
	require.Equal(t, http.StatusConflict, resp.StatusCode)

	// 413 for a body above the bound; nothing changes.
	resp, _ = k.do(http.MethodPut, "orders", tok6, strings.Repeat("x", 65))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	resp, body = k.do(http.MethodPut, "orders", tok6, strings.Repeat("y", 64))
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)

	// 400 for bad preconditions and keys; 405 for other methods.
	resp, _ = k.do(http.MethodPut, "orders", tok6, "x", "If-Match", "W/\"1\"")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = k.do(http.MethodDelete, "orders", tok6, "", "If-None-Match", "*")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = k.do(http.MethodPut, "a%20b", tok6, "x")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = k.do(http.MethodPost, "orders", tok6, "x")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// DELETE: 412 on a version mismatch, then 204, idempotent; GET 404.
	resp, _ = k.do(http.MethodDelete, "orders", tok6, "", "If-Match", v1)
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	resp, _ = k.do(http.MethodDelete, "orders", tok6, "", "If-Match", "*")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = k.do(http.MethodDelete, "orders", tok6, "")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = k.do(http.MethodGet, "orders", tok6, "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = k.do(http.MethodPut, "orders", tok6, "again", "If-Match", "*")
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)

	// Create only: the version after a delete is new.
	resp, _ = k.do(http.MethodPut, "orders", tok6, "again", "If-None-Match", "*")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.NotContains(t, []string{v1, v2}, resp.Header.Get("ETag"))

	// Keys with slashes are resources too, independent of their prefixes.
	tokPath := c.token(t, "orders/42", 1)
	resp, body = k.do(http.MethodPut, "orders/42", tokPath, "nested")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.EqualValues(t, 1, barrier(t, store, "orders/42"))
	require.EqualValues(t, 6, barrier(t, store, "orders"))
}

// TestRestartKeepsBarrier: the barrier and the data live in the bolt file.
func TestRestartKeepsBarrier(t *testing.T) {
	c := newCluster(1, "palisade-test")
	dir := t.TempDir()
	store, err := verifier.OpenBoltStore(filepath.Join(dir, "resource.db"))
	require.NoError(t, err)
	h := resource.New(verifier.NewFence(verifier.New(c.c), store)).Handler()
	put := func(h http.Handler, epoch uint64, body string) int {
		req := httptest.NewRequest(http.MethodPut, "/kv/orders", bytes.NewBufferString(body))
		req.Header.Set(verifier.HeaderToken, c.token(t, "orders", epoch))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusNoContent, put(h, 7, "v7"))
	require.NoError(t, store.Close())

	store, err = verifier.OpenBoltStore(filepath.Join(dir, "resource.db"))
	require.NoError(t, err)
	defer store.Close()
	h = resource.New(verifier.NewFence(verifier.New(c.c), store)).Handler()
	require.Equal(t, http.StatusConflict, put(h, 6, "v6"))
	req := httptest.NewRequest(http.MethodGet, "/kv/orders", nil)
	req.Header.Set(verifier.HeaderToken, c.token(t, "orders", 7))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "v7", rec.Body.String())
}

// TestServeShutsDownOnCancel: Serve answers until its context ends, then
// returns nil with the listener closed.
func TestServeShutsDownOnCancel(t *testing.T) {
	c := newCluster(1, "palisade-test")
	store := verifier.NewMemoryStore()
	defer store.Close()
	srv := resource.New(verifier.NewFence(verifier.New(c.c), store))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	k := kv{t: t, url: "http://" + ln.Addr().String()}
	resp, body := k.do(http.MethodPut, "orders", c.token(t, "orders", 1), "x")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	http.DefaultClient.CloseIdleConnections()

	cancel()
	require.NoError(t, <-done)
	_, err = net.Dial("tcp", ln.Addr().String())
	require.Error(t, err, "the listener must be closed")
}
