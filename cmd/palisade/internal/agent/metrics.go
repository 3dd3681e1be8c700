package agent

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-dev/palisade/internal/version"
)

// Metric names an agent exports on its own Prometheus registry (see
// Agent.AdminHandler). Labels never carry resource names, lock IDs or
// tokens: the set of series stays small, and nothing secret is scraped.
const (
	// MetricLocksHeld is a gauge: the locks the agent holds and renews.
	MetricLocksHeld = "palisade_agent_locks_held"
	// MetricAcquires counts acquisitions (POST) by result: "acquired",
	// "abandoned" (the caller left before it learnt the lock, which was
	// released at once) or the error code of the answer (busy,
	// not_enough_nodes, refused, limit, bad_request, ...).
	MetricAcquires = "palisade_agent_acquires_total"
	// MetricAcquireSeconds is a histogram of the time successful
	// acquisitions took, their waits included.
	MetricAcquireSeconds = "palisade_agent_acquire_seconds"
	// MetricReleases counts releases at the cluster by cause ("request":
	// DELETE; "shutdown": the agent stopping; "abandoned": see
	// MetricAcquires) and result ("confirmed" by 2f+1 nodes, or
	// "unconfirmed": the lease then ends by its TTL).
	MetricReleases = "palisade_agent_releases_total"
	// MetricLocksLost counts locks lost while held: their renewals did not
	// get through before the lease ran out.
	MetricLocksLost = "palisade_agent_locks_lost_total"
	// MetricDenied counts requests turned away before routing, by code:
	// unauthorised (no or wrong bearer secret) or forbidden (a browser,
	// or a host name that is not loopback).
	MetricDenied = "palisade_agent_requests_denied_total"
	// MetricBuildInfo is always 1; its version label is the binary's.
	MetricBuildInfo = "palisade_build_info"
)

// Label values of MetricAcquires and MetricReleases besides the error
// codes.
const (
	resultAcquired    = "acquired"
	resultAbandoned   = "abandoned"
	resultConfirmed   = "confirmed"
	resultUnconfirmed = "unconfirmed"

	causeRequest   = "request"
	causeShutdown  = "shutdown"
	causeAbandoned = "abandoned"
)

// metrics are an agent's Prometheus collectors, on a registry of its own.
type metrics struct {
	reg            *prometheus.Registry
	acquires       *prometheus.CounterVec // by result
	acquireSeconds prometheus.Histogram
	releases       *prometheus.CounterVec // by cause and result
	lost           prometheus.Counter
	denied         *prometheus.CounterVec // by code
}

// newMetrics builds the agent's collectors; held reads the held locks at
// scrape time.
func newMetrics(held func() int) *metrics {
	m := &metrics{
		reg:      prometheus.NewRegistry(),
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAcquires, Help: "Acquisitions (POST /v1/locks/RESOURCE) by result: acquired, abandoned (the caller left first; released at once), or the error code answered."}, []string{"result"}),
		acquireSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricAcquireSeconds,
			Help:    "Time successful acquisitions took, their waits included.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 18), // 1 ms .. 131 s
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricReleases, Help: "Releases at the cluster by cause (request, shutdown, abandoned) and result (confirmed by 2f+1 nodes, or unconfirmed: the lease ends by its TTL)."}, []string{"cause", "result"}),
		lost:     prometheus.NewCounter(prometheus.CounterOpts{Name: MetricLocksLost, Help: "Locks lost while held: their renewals did not reach 2f+1 nodes before the lease ran out."}),
		denied:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDenied, Help: "Requests turned away before routing, by code: unauthorised (bearer secret) or forbidden (browser, or a host that is not loopback)."}, []string{"code"}),
	}
	m.reg.MustRegister(
		m.acquires, m.acquireSeconds, m.releases, m.lost, m.denied,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricLocksHeld, Help: "Locks the agent holds and renews."},
			func() float64 { return float64(held()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricBuildInfo, Help: "Always 1; the version label is the binary's.", ConstLabels: prometheus.Labels{"version": version.String()}},
			func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Present from the start, so rates and alerts need no first event.
	for _, r := range []string{resultAcquired, string(CodeBusy), string(CodeNotEnoughNodes), string(CodeRefused)} {
		m.acquires.WithLabelValues(r)
	}
	for _, c := range []string{causeRequest, causeShutdown} {
		m.releases.WithLabelValues(c, resultConfirmed)
		m.releases.WithLabelValues(c, resultUnconfirmed)
	}
	for _, c := range []Code{CodeUnauthorised, CodeForbidden} {
		m.denied.WithLabelValues(string(c))
	}
	return m
}

// acquired counts one successful acquisition that took d.
func (m *metrics) acquired(d time.Duration) {
	m.acquires.WithLabelValues(resultAcquired).Inc()
	m.acquireSeconds.Observe(d.Seconds())
}

// released counts one release at the cluster.
func (m *metrics) released(cause string, err error) {
	result := resultConfirmed
	if err != nil {
		result = resultUnconfirmed
	}
	m.releases.WithLabelValues(cause, result).Inc()
}

// Admin endpoint paths (AdminHandler).
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
)

// AdminHandler returns the agent's admin HTTP API, for operators and
// monitoring on an address apart from the lock API's:
//
//	GET /metrics  Prometheus metrics of this agent (its own registry; see the Metric* names)
//	GET /healthz  200 "ok: N locks held" while the agent serves, 503 once it is closing
//
// It serves nothing that changes the agent and nothing secret (no lock
// IDs, tokens or resource names), so it needs no bearer secret.
func (a *Agent) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		closed, held := a.closed, a.held
		a.mu.Unlock()
		if closed {
			http.Error(w, "closing: releasing its locks", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok: %d locks held\n", held)
	})
	return mux
}

// MetricsRegistry returns the agent's own Prometheus registry: what
// AdminHandler serves at /metrics.
func (a *Agent) MetricsRegistry() *prometheus.Registry { return a.metrics.reg }
