package resource_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/internal/metricstest"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// metricValue reads one series of reg (metricstest.Value).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, name, labels...)
}

// TestMetrics: every answered request is counted, admitted by method or
// refused by cause; the store's transactions are timed; the highest
// barrier met is kept; /healthz follows the store.
func TestMetrics(t *testing.T) {
	c := newCluster(7, "metrics")
	other := newCluster(8, "other")
	store, err := verifier.OpenBoltStore(filepath.Join(t.TempDir(), "resource.db"))
	require.NoError(t, err)
	m := resource.NewMetrics()
	metered := m.Store(store)
	fence := verifier.NewFence(verifier.New(c.c), metered)
	fence.MaxBodyBytes = 16
	srv := httptest.NewServer(resource.New(fence, resource.WithMetrics(m)).Handler())
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		srv.Close()
	})
	k := kv{t: t, url: srv.URL}
	reg := m.Registry()

	status := func(method, key, token, body string, header ...string) int {
		t.Helper()
		resp, _ := k.do(method, key, token, body, header...)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, status("PUT", "orders-db", c.token(t, "orders-db", 5), "paid"))
	require.Equal(t, http.StatusOK, status("GET", "orders-db", c.token(t, "orders-db", 5), ""))
	require.Equal(t, http.StatusNotFound, status("GET", "jobs", c.token(t, "jobs", 2), ""))
	require.Equal(t, http.StatusConflict, status("PUT", "orders-db", c.token(t, "orders-db", 4), "late"))
	require.Equal(t, http.StatusUnauthorized, status("PUT", "orders-db", "", "x"))
	require.Equal(t, http.StatusUnauthorized, status("PUT", "orders-db", "pt3.garbage", "x"))
	require.Equal(t, http.StatusUnauthorized, status("PUT", "orders-db", other.token(t, "orders-db", 9), "x"))
	require.Equal(t, http.StatusUnauthorized, status("PUT", "orders-db", c.token(t, "jobs", 9), "x"))
	require.Equal(t, http.StatusPreconditionFailed, status("PUT", "orders-db", c.token(t, "orders-db", 5), "x", "If-Match", `"99"`))
	require.Equal(t, http.StatusRequestEntityTooLarge, status("PUT", "orders-db", c.token(t, "orders-db", 5), "far more than sixteen bytes"))

	require.Equal(t, 1.0, metricValue(t, reg, resource.MetricAdmitted, "method", "PUT"))
	require.Equal(t, 2.0, metricValue(t, reg, resource.MetricAdmitted, "method", "GET"))
	for cause, want := range map[string]float64{
		resource.CauseStale: 1, resource.CauseMissingToken: 1, resource.CauseMalformedToken: 1,
		resource.CauseWrongCluster: 1, resource.CauseWrongResource: 1, resource.CausePrecondition: 1,
		resource.CauseTooLarge: 1, resource.CauseBadSignature: 0, resource.CauseStore: 0,
	} {
		require.Equal(t, want, metricValue(t, reg, resource.MetricRefused, "cause", cause), cause)
	}
	// Guarded transactions: the PUT, both GETs, the stale PUT and the
	// failed precondition reached the store.
	require.Equal(t, 5.0, metricValue(t, reg, resource.MetricStoreSeconds))
	require.Equal(t, 5.0, metricValue(t, reg, resource.MetricBarrierMax))

	admin := resource.AdminHandler(m, metered)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	scrape := get(resource.PathMetrics)
	require.Equal(t, http.StatusOK, scrape.Code)
	require.Contains(t, scrape.Body.String(), resource.MetricBarrierMax+" 5\n")
	require.NotContains(t, scrape.Body.String(), "orders-db")
	hz := get(resource.PathHealthz)
	require.Equal(t, http.StatusOK, hz.Code)
	require.Equal(t, "ok: store answers\n", hz.Body.String())
	require.NoError(t, store.Close())
	hz = get(resource.PathHealthz)
	require.Equal(t, http.StatusServiceUnavailable, hz.Code)
	require.Contains(t, hz.Body.String(), "closed")
	require.Equal(t, http.StatusInternalServerError, status("PUT", "orders-db", c.token(t, "orders-db", 6), "x"))
	require.Equal(t, 1.0, metricValue(t, reg, resource.MetricRefused, "cause", resource.CauseStore))
}

// TestBarrierMaxAfterRestart: a restarted resource learns its barrier
// from the first request that meets it, even a refused (stale) one.
func TestBarrierMaxAfterRestart(t *testing.T) {
	c := newCluster(9, "restart")
	dir := t.TempDir()
	k, store := server(t, c, dir, 0)
	resp, _ := k.do("PUT", "orders-db", c.token(t, "orders-db", 40), "v")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.NoError(t, store.Close())

	reopened, err := verifier.OpenBoltStore(filepath.Join(dir, "resource.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reopened.Close()) })
	m := resource.NewMetrics()
	srv := httptest.NewServer(resource.New(verifier.NewFence(verifier.New(c.c), m.Store(reopened)), resource.WithMetrics(m)).Handler())
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		srv.Close()
	})
	require.Equal(t, 0.0, metricValue(t, m.Registry(), resource.MetricBarrierMax))
	resp, _ = kv{t: t, url: srv.URL}.do("PUT", "orders-db", c.token(t, "orders-db", 3), "stale")
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, 40.0, metricValue(t, m.Registry(), resource.MetricBarrierMax))
}

// TestFork: a second holder's token at the barrier epoch is refused with
// the fork code, its write never lands, the store keeps the proof, the
// log carries it once, and the metrics count the fork and its refusals.
func TestFork(t *testing.T) {
	logs := captureLogs(t, "palisade/resource")
	c := newCluster(11, "fork")
	store, err := verifier.OpenBoltStore(filepath.Join(t.TempDir(), "resource.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	m := resource.NewMetrics()
	metered := m.Store(store)
	srv := httptest.NewServer(resource.New(verifier.NewFence(verifier.New(c.c), metered), resource.WithMetrics(m)).Handler())
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		srv.Close()
	})
	k := kv{t: t, url: srv.URL}
	alice, bob := c.d.Token(t, "orders-db", 5, "alice"), c.d.Token(t, "orders-db", 5, "bob")
	fork, err := protocol.NewFork(alice, bob)
	require.NoError(t, err)

	resp, body := k.do(http.MethodPut, "orders-db", alice.String(), "alice")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	for range 2 {
		resp, body = k.do(http.MethodPut, "orders-db", bob.String(), "bob")
		require.Equal(t, http.StatusConflict, resp.StatusCode, body)
		require.Equal(t, verifier.ConflictFork, resp.Header.Get(verifier.HeaderConflict))
		require.Equal(t, fork.ID(), resp.Header.Get(verifier.HeaderForkID))
		require.Equal(t, "5", resp.Header.Get(verifier.HeaderBarrier))
		require.Contains(t, body, "fork")
		require.NotContains(t, body, alice.String()[len(alice.String())-40:], "alice's token must not reach bob")
	}
	resp, body = k.do(http.MethodGet, "orders-db", alice.String(), "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "alice", body, "bob's write never landed")

	// The stale 409 keeps its own code.
	resp, _ = k.do(http.MethodPut, "orders-db", c.d.Token(t, "orders-db", 4, "carol").String(), "late")
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, verifier.ConflictStale, resp.Header.Get(verifier.HeaderConflict))

	reg := m.Registry()
	require.Equal(t, 2.0, metricValue(t, reg, resource.MetricRefused, "cause", resource.CauseFork))
	require.Equal(t, 1.0, metricValue(t, reg, resource.MetricRefused, "cause", resource.CauseStale))
	require.Equal(t, 1.0, metricValue(t, reg, resource.MetricForks))

	kept, err := metered.(verifier.ForkLister).Forks(context.Background(), "orders-db")
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.NoError(t, protocol.VerifyFork(c.c, kept[0]))
	require.True(t, kept[0].Equal(fork))

	var lines []map[string]any
	require.Eventually(t, func() bool {
		lines = logs.find("fork: two valid tokens for one epoch, more than f nodes misbehaved; the second holder is refused")
		return len(lines) == 2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, fork.String(), lines[0]["fork"], "the first refusal logs the proof")
	require.NotContains(t, lines[1], "fork", "later ones name it by ID")
	for _, l := range lines {
		require.Equal(t, "error", l["level"])
		require.Equal(t, fork.ID(), l["fork_id"])
		require.Equal(t, bob.Holder.String(), l["refused_holder"])
		require.Equal(t, alice.Holder.String(), l["barrier_holder"])
	}
	require.Eventually(t, func() bool {
		for _, l := range logs.find("refuse") {
			if l["conflict"] == "fork" && l["fork_id"] == fork.ID() {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
}
