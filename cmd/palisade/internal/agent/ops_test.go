package agent_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/cmd/palisade/internal/agent"
	"github.com/palisade-dev/palisade/internal/metricstest"
	"github.com/palisade-dev/palisade/protocol"
)

// metricValue reads one series of reg (metricstest.Value).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, name, labels...)
}

// admin answers one GET of the agent's admin API.
func admin(a *agent.Agent, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	a.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// TestAdminMetricsAndSecret: the admin API counts acquisitions by result,
// releases by cause, denied requests and held locks, and says healthy
// until the agent closes; SetSecret replaces the bearer secret for the
// next request and keeps the locks.
func TestAdminMetricsAndSecret(t *testing.T) {
	secret, next := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	e := start(t, agent.Config{Secret: []byte(secret)})
	reg := e.agent.MetricsRegistry()
	auth := func(s string) []string { return []string{"Authorization", "Bearer " + s} }

	held := e.do("POST", "/v1/locks/orders-db", `{"ttl": "1h"}`, auth(secret)...)
	require.Equal(t, http.StatusCreated, held.status, held.raw)
	requireError(t, e.do("POST", "/v1/locks/orders-db", "", auth(secret)...), http.StatusConflict, agent.CodeBusy)
	requireError(t, e.do("POST", "/v1/locks/orders-db", `{"ttl": "soon"}`, auth(secret)...), http.StatusBadRequest, agent.CodeBadRequest)
	requireError(t, e.do("GET", "/v1/locks/"+held.str("id"), ""), http.StatusUnauthorized, agent.CodeUnauthorised)
	short := e.do("POST", "/v1/locks/jobs", `{"ttl": "1h"}`, auth(secret)...)
	require.Equal(t, http.StatusCreated, short.status, short.raw)
	require.Equal(t, http.StatusOK, e.do("DELETE", "/v1/locks/"+short.str("id"), "", auth(secret)...).status)

	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricLocksHeld))
	require.Equal(t, 2.0, metricValue(t, reg, agent.MetricAcquires, "result", "acquired"))
	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricAcquires, "result", "busy"))
	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricAcquires, "result", "bad_request"))
	require.Equal(t, 2.0, metricValue(t, reg, agent.MetricAcquireSeconds))
	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricReleases, "cause", "request", "result", "confirmed"))
	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricDenied, "code", "unauthorised"))
	require.Equal(t, 0.0, metricValue(t, reg, agent.MetricLocksLost))

	// The scrape names no lock, token or resource.
	scrape := admin(e.agent, agent.PathMetrics)
	require.Equal(t, http.StatusOK, scrape.Code)
	require.Contains(t, scrape.Body.String(), agent.MetricLocksHeld+" 1\n")
	for _, secretish := range []string{held.str("id"), held.str("token"), "orders-db", secret} {
		require.NotContains(t, scrape.Body.String(), secretish)
	}
	hz := admin(e.agent, agent.PathHealthz)
	require.Equal(t, http.StatusOK, hz.Code)
	require.Equal(t, "ok: 1 locks held\n", hz.Body.String())

	// A new secret applies to the next request; the lock stays held.
	require.NoError(t, e.agent.SetSecret([]byte(next)))
	requireError(t, e.do("GET", "/v1/locks/"+held.str("id")+"?wait=0s", "", auth(secret)...), http.StatusUnauthorized, agent.CodeUnauthorised)
	got := e.do("GET", "/v1/locks/"+held.str("id")+"?wait=0s", "", auth(next)...)
	require.Equal(t, http.StatusOK, got.status, got.raw)
	require.Equal(t, "held", got.str("state"))
	require.ErrorIs(t, e.agent.SetSecret([]byte("short")), agent.ErrBadSecret)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/locks/"+held.str("id")+"?wait=0s", "", auth(next)...).status, "a refused secret keeps the current one")

	// Close releases the lock (cause shutdown) and health turns 503.
	require.NoError(t, e.agent.Close())
	require.Equal(t, 0.0, metricValue(t, reg, agent.MetricLocksHeld))
	require.Equal(t, 1.0, metricValue(t, reg, agent.MetricReleases, "cause", "shutdown", "result", "confirmed"))
	require.Equal(t, http.StatusServiceUnavailable, admin(e.agent, agent.PathHealthz).Code)
}

// TestSetSecretNeedsSecret: an agent started without a secret serves
// loopback only and cannot be given one.
func TestSetSecretNeedsSecret(t *testing.T) {
	a, err := agent.New(agent.Config{Client: &client.Client{}})
	require.NoError(t, err)
	require.ErrorIs(t, a.SetSecret([]byte("0123456789abcdef0123456789abcdef")), agent.ErrNoSecret)
	require.NoError(t, a.Close())
}

// TestNotAdmitted: an identity this agent's cluster file lists but the
// nodes' files do not is refused (403 refused), not reported as an outage
// (503 not_enough_nodes): the nodes drop its connections.
func TestNotAdmitted(t *testing.T) {
	e := start(t, agent.Config{})
	id, err := client.GenerateIdentity()
	require.NoError(t, err)
	self, err := client.HolderID(id)
	require.NoError(t, err)
	f := e.nw.Keys.Cluster.File
	f.Clients = append(slices.Clone(f.Clients), protocol.ClientInfo{Name: "stranger", PeerID: self, Resources: []string{"*"}})
	listed, err := protocol.NewCluster(f)
	require.NoError(t, err)
	c, err := client.New(client.Config{Cluster: listed, Identity: id})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	a, err := agent.New(agent.Config{Client: c})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)

	got := do(t, srv.URL, "POST", "/v1/locks/orders-db", "")
	requireError(t, got, http.StatusForbidden, agent.CodeRefused)
	require.True(t, strings.Contains(got.str("message"), "do not admit the agent's identity"), got.raw)
	require.Equal(t, []any{1.0, 2.0, 3.0, 4.0}, got.body["nodes"])
	require.Equal(t, 1.0, metricValue(t, a.MetricsRegistry(), agent.MetricAcquires, "result", "refused"))
}
