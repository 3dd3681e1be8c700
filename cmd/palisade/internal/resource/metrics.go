package resource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-dev/palisade/internal/version"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// Metric names a resource exports on its own Prometheus registry (see
// Metrics and AdminHandler). Labels never carry keys or tokens.
const (
	// MetricAdmitted counts requests the fence admitted and the store
	// answered, by method: 2xx, or 404 for a key without a value.
	MetricAdmitted = "palisade_resource_admitted_total"
	// MetricRefused counts requests refused, by cause (see the Cause*
	// constants): nothing they asked changed the value or the barrier,
	// except outcome_unknown, whose write may have committed.
	MetricRefused = "palisade_resource_refused_total"
	// MetricForks counts the forks this resource refused and kept the
	// proof of: one per (key, epoch) at which another holder's valid token
	// came after the barrier's (verifier.ErrFork), at most
	// verifier.MaxForksPerResource per key. Any increase means more than
	// f nodes misbehaved; refused requests of forked tokens are
	// MetricRefused's cause "fork".
	MetricForks = "palisade_resource_forks_total"
	// MetricBarrierMax is a gauge: the highest barrier this resource has
	// raised or met since it started, over all keys.
	MetricBarrierMax = "palisade_resource_barrier_epoch_max"
	// MetricStoreSeconds is a histogram of the duration of one guarded
	// transaction of the barrier store: barrier check, write, commit and
	// fsync.
	MetricStoreSeconds = "palisade_resource_store_seconds"
	// MetricBuildInfo is always 1; its version label is the binary's.
	MetricBuildInfo = "palisade_build_info"
)

// The causes of MetricRefused.
const (
	CauseMissingToken   = "missing_token"     // 401: no Palisade-Token header, or several
	CauseMalformedToken = "malformed_token"   // 401: not a token's text form
	CauseWrongCluster   = "wrong_cluster"     // 401: a token of another cluster
	CauseWrongResource  = "wrong_resource"    // 401: a token for another key
	CauseBadSignature   = "invalid_signature" // 401: the signature does not verify
	CauseProof          = "proof"             // 401: proof of possession missing or wrong
	CauseStale          = "stale"             // 409: epoch below the key's barrier
	CauseFork           = "fork"              // 409: another holder's token was admitted at the epoch
	CausePrecondition   = "precondition"      // 412: If-Match or If-None-Match failed
	CauseTooLarge       = "too_large"         // 413: body above the limit
	CauseBadRequest     = "bad_request"       // 400: bad key or header
	CauseOutcomeUnknown = "outcome_unknown"   // 503 with Palisade-Outcome: unknown
	CauseUnavailable    = "unavailable"       // 503: request ended before the commit, proof quota
	CauseStore          = "store_error"       // 500: the store failed
	CauseOther          = "other"             // any other status
)

// Metrics are a resource's Prometheus collectors, on a registry of their
// own. Make them with NewMetrics, wrap the barrier store with Store before
// making the fence, and pass them to New with WithMetrics.
type Metrics struct {
	reg          *prometheus.Registry
	admitted     *prometheus.CounterVec // by method
	refused      *prometheus.CounterVec // by cause
	forks        prometheus.Counter
	storeSeconds prometheus.Histogram
	barrier      atomic.Uint64
}

// NewMetrics returns a resource's collectors on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg:      prometheus.NewRegistry(),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAdmitted, Help: "Requests the fence admitted and the store answered, by method (2xx, or 404 for a key without a value)."}, []string{"method"}),
		refused:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRefused, Help: "Requests refused, by cause (missing_token, malformed_token, wrong_cluster, wrong_resource, invalid_signature, proof, stale, fork, precondition, too_large, bad_request, outcome_unknown, unavailable, store_error, other)."}, []string{"cause"}),
		forks:    prometheus.NewCounter(prometheus.CounterOpts{Name: MetricForks, Help: "Forks refused whose proof the store kept: another holder's valid token at a key's barrier epoch, one per (key, epoch). Any increase means more than f nodes misbehaved."}),
		storeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricStoreSeconds,
			Help:    "Duration of one guarded transaction of the barrier store: barrier check, write, commit and fsync.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs .. 1.6 s
		}),
	}
	m.reg.MustRegister(
		m.admitted, m.refused, m.forks, m.storeSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricBarrierMax, Help: "Highest barrier (token epoch) this resource raised or met since it started, over all keys; 0 before the first request reached the store."},
			func() float64 { return float64(m.barrier.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricBuildInfo, Help: "Always 1; the version label is the binary's.", ConstLabels: prometheus.Labels{"version": version.String()}},
			func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Present from the start, so rates and alerts need no first event.
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		m.admitted.WithLabelValues(method)
	}
	for _, c := range []string{CauseStale, CauseFork, CauseBadSignature, CauseWrongCluster, CauseOutcomeUnknown, CauseStore} {
		m.refused.WithLabelValues(c)
	}
	return m
}

// Registry returns the registry AdminHandler serves at /metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Store wraps s so each guarded transaction is timed (MetricStoreSeconds),
// the barriers it meets raise MetricBarrierMax, and every fork it refuses
// is logged at error level (with the proof the first time, when the store
// kept it) and, when kept, counted in MetricForks. The wrapper is a
// verifier.ForkLister (failing if s is not one).
func (m *Metrics) Store(s verifier.BarrierStore) verifier.BarrierStore {
	return meteredStore{BarrierStore: s, m: m}
}

// seen raises the highest barrier seen to epoch.
func (m *Metrics) seen(epoch uint64) {
	for {
		cur := m.barrier.Load()
		if epoch <= cur || m.barrier.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// observe counts one answered request: its method, the status the client
// got, and the start of the refusal's body (its reason).
func (m *Metrics) observe(method string, status int, header http.Header, reason string) {
	if status < 400 || status == http.StatusNotFound {
		m.admitted.WithLabelValues(method).Inc()
		return
	}
	m.refused.WithLabelValues(refusalCause(status, header, reason)).Inc()
}

// refusalCause names why a request was refused, from its status and, for
// 401, the reason the fence gave (verifier's Middleware texts).
func refusalCause(status int, header http.Header, reason string) string {
	switch status {
	case http.StatusUnauthorized:
		switch {
		case strings.Contains(reason, verifier.HeaderToken+" header"):
			return CauseMissingToken
		case strings.Contains(reason, "malformed token"):
			return CauseMalformedToken
		case strings.Contains(reason, "another cluster"):
			return CauseWrongCluster
		case strings.Contains(reason, "another resource"):
			return CauseWrongResource
		case strings.Contains(reason, "proof of possession"), strings.Contains(reason, pop.HeaderProof), strings.Contains(reason, "peer ID"):
			return CauseProof
		}
		return CauseBadSignature
	case http.StatusConflict:
		if header.Get(verifier.HeaderConflict) == verifier.ConflictFork {
			return CauseFork
		}
		return CauseStale
	case http.StatusPreconditionFailed:
		return CausePrecondition
	case http.StatusRequestEntityTooLarge:
		return CauseTooLarge
	case http.StatusBadRequest:
		return CauseBadRequest
	case http.StatusServiceUnavailable:
		if header.Get(verifier.HeaderOutcome) == verifier.OutcomeUnknown {
			return CauseOutcomeUnknown
		}
		return CauseUnavailable
	case http.StatusInternalServerError:
		return CauseStore
	}
	return CauseOther
}

// meteredStore is a BarrierStore seen through Metrics.
type meteredStore struct {
	verifier.BarrierStore
	m *Metrics
}

// Guard implements verifier.BarrierStore: it times the transaction and
// notes the barrier it met or raised.
func (s meteredStore) Guard(ctx context.Context, adm verifier.Admission, write func(tx verifier.Tx) error) error {
	start := time.Now()
	err := s.BarrierStore.Guard(ctx, adm, write)
	s.m.storeSeconds.Observe(time.Since(start).Seconds())
	var (
		stale *verifier.StaleError
		fork  *verifier.ForkError
	)
	switch {
	case err == nil:
		s.m.seen(adm.Epoch())
	case errors.As(err, &stale):
		s.m.seen(stale.Barrier)
	case errors.As(err, &fork):
		s.m.seen(fork.Fork.Epoch())
		logFork(fork)
		if fork.Kept {
			s.m.forks.Inc()
		}
	}
	return err
}

// logFork logs a refused fork at error level. The first refusal at a
// (key, epoch), whose proof the store kept, logs the proof itself
// (protocol.Fork's text form) for the operators; later ones name it by
// its ID.
func logFork(fork *verifier.ForkError) {
	kv := []any{"resource", fork.Fork.Resource(), "epoch", fork.Fork.Epoch(),
		"barrier_holder", fork.Barrier.String(), "refused_holder", fork.Refused.String(), "fork_id", fork.Fork.ID()}
	if fork.Kept {
		kv = append(kv, "fork", fork.Fork.String())
	}
	log.Errorw("fork: two valid tokens for one epoch, more than f nodes misbehaved; the second holder is refused", kv...)
}

// errNoForkRecords is the answer of a store that keeps no fork records.
var errNoForkRecords = errors.New("resource: the barrier store keeps no fork records")

// Forks implements verifier.ForkLister if the wrapped store does.
func (s meteredStore) Forks(ctx context.Context, resource string) ([]protocol.Fork, error) {
	fl, ok := s.BarrierStore.(verifier.ForkLister)
	if !ok {
		return nil, errNoForkRecords
	}
	return fl.Forks(ctx, resource)
}

// Barrier implements verifier.BarrierStore and notes the barrier read.
func (s meteredStore) Barrier(ctx context.Context, resource string) (uint64, bool, error) {
	epoch, ok, err := s.BarrierStore.Barrier(ctx, resource)
	if err == nil && ok {
		s.m.seen(epoch)
	}
	return epoch, ok, err
}

// Admin endpoint paths (AdminHandler).
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
)

// HealthTimeout bounds the store read of a /healthz request.
const HealthTimeout = 2 * time.Second

// healthKey is the key /healthz reads the barrier of: a name no token can
// carry (it has a space), so no client can make it slow or change it.
const healthKey = "palisade healthz"

// AdminHandler returns the resource's admin HTTP API, for operators and
// monitoring on an address apart from the fenced API's:
//
//	GET /metrics  Prometheus metrics of this resource (m's registry; see the Metric* names)
//	GET /healthz  200 "ok: store answers" while the barrier store answers a read
//	              within HealthTimeout, else 503 with the store's error
//
// It serves nothing that changes the resource and nothing secret (no
// fork proofs: they hold tokens, which are bearer credentials).
func AdminHandler(m *Metrics, store verifier.BarrierStore) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), HealthTimeout)
		defer cancel()
		if _, _, err := store.Barrier(ctx, healthKey); err != nil {
			http.Error(w, fmt.Sprintf("store does not answer: %v", err), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok: store answers")
	})
	return mux
}
