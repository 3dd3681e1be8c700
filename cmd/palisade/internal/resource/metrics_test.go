package resource_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/internal/metricstest"
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
