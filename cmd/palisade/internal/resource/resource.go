// Package resource is the reference fenced resource behind "palisade
// resource": a small HTTP key-value store that admits a request only with a
// valid Palisade token for the key, whose epoch is not below the key's
// barrier. It is what the demo and the docker testnet write to, and an
// example of embedding package verifier.
//
// The API, one resource per key (the resource name is the key):
//
//	PUT    /kv/{key}  store the body          204, ETag: "VERSION"
//	GET    /kv/{key}  read the value          200 with the body and ETag, 404 if absent
//	DELETE /kv/{key}  delete (idempotent)     204
//
// Every request carries its token in the Palisade-Token header and goes
// through verifier.Fence.Middleware: 401 without a valid token for the key,
// 409 (with the barrier in Palisade-Barrier and "Palisade-Conflict: stale")
// if its epoch is below the key's barrier, 409 with "Palisade-Conflict:
// fork" and the fork's ID in Palisade-Fork-ID if another holder's token
// was admitted at its epoch (a fork: more than f nodes misbehaved; the
// proof is kept in the store, logged at error level and counted in
// palisade_resource_forks_total), 413 if the body is larger than the
// limit. A request with a
// higher epoch raises the barrier in the same bbolt transaction as its
// write. Values are versioned (verifier.PutIfVersion): PUT and DELETE honour
// If-Match: "VERSION" (or *), and PUT honours If-None-Match: * (create
// only), answering 412 with the current ETag when the version differs. A
// refused or failed request changes neither the value nor the barrier,
// with one exception: a 503 with "Palisade-Outcome: unknown" means the
// store could not confirm the commit, so the write may have been applied.
// A client that disconnects before the commit stops the write; one that
// disconnects during the commit does not.
package resource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	logging "github.com/ipfs/go-log/v2"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

var log = logging.Logger("palisade/resource")

// valueKey is the Tx key that holds a resource's value.
const valueKey = "value"

// PathPrefix starts every key's URL path.
const PathPrefix = "/kv/"

// Server timeouts. The fence buffers a body before it opens the
// transaction, so a slow client holds a connection, not the store.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = time.Minute
	WriteTimeout      = time.Minute
	IdleTimeout       = 2 * time.Minute
	// ShutdownTimeout bounds how long Serve waits for running requests
	// after its context ends.
	ShutdownTimeout = 10 * time.Second
)

// Server serves the fenced key-value API over a fence. It does not own the
// fence's store.
type Server struct {
	handler http.Handler
	metrics *Metrics
}

// Option configures a Server.
type Option func(*Server)

// WithMetrics counts every answered request in m (MetricAdmitted,
// MetricRefused). For the store's metrics, make the fence over m.Store's
// wrapper of the barrier store.
func WithMetrics(m *Metrics) Option { return func(s *Server) { s.metrics = m } }

// New returns a server over fence. Set fence.MaxBodyBytes before to bound
// values (default verifier.DefaultMaxBodyBytes).
func New(fence *verifier.Fence, opts ...Option) *Server {
	s := &Server{}
	for _, o := range opts {
		o(s)
	}
	fenced := fence.Middleware(func(r *http.Request) string { return r.PathValue("key") }, http.HandlerFunc(s.serveKV))
	check := func(w http.ResponseWriter, r *http.Request) {
		if err := protocol.ValidateResource(r.PathValue("key")); err != nil {
			http.Error(w, fmt.Sprintf("bad key: %v", err), http.StatusBadRequest)
			return
		}
		fenced.ServeHTTP(w, r)
	}
	mux := http.NewServeMux()
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		mux.HandleFunc(m+" "+PathPrefix+"{key...}", logged(s.metrics, check))
	}
	s.handler = mux
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves the API on ln until ctx ends, then shuts down gracefully:
// it stops accepting, waits up to ShutdownTimeout for running requests,
// and returns. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		// Requests do not inherit ctx: its end starts the graceful
		// shutdown, which lets running requests finish.
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("resource: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("resource: shut down: %w", err)
	}
	return nil
}

// serveKV runs inside the guarded transaction of an admitted request. An
// answer of 400 or more rolls the transaction back.
func (s *Server) serveKV(w http.ResponseWriter, r *http.Request) {
	tx, ok := verifier.TxFromContext(r.Context())
	if !ok {
		http.Error(w, "no guarded transaction", http.StatusInternalServerError)
		return
	}
	tok, _ := verifier.TokenFromContext(r.Context())
	key := r.PathValue("key")
	value, current, err := verifier.GetVersioned(tx, valueKey)
	if err != nil {
		log.Errorw("read failed", "resource", key, "error", err)
		http.Error(w, "store failed", http.StatusInternalServerError)
		return
	}
	pre, err := parsePreconditions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !pre.hold(current) {
		preconditionFailed(w, key, current)
		return
	}

	switch r.Method {
	case http.MethodGet:
		if current == verifier.NoVersion {
			http.Error(w, fmt.Sprintf("no value for %q", key), http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", etag(current))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(value)))
		_, _ = w.Write(value)
	case http.MethodPut:
		body, err := io.ReadAll(r.Body) // buffered by the fence, bounded
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		version, err := verifier.PutIfVersion(tx, valueKey, body, current)
		if err != nil {
			log.Errorw("write failed", "resource", key, "error", err)
			http.Error(w, "store failed", http.StatusInternalServerError)
			return
		}
		log.Debugw("put", "resource", key, "epoch", tok.Epoch, "version", version, "bytes", len(body))
		w.Header().Set("ETag", etag(version))
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		if err := verifier.DeleteIfVersion(tx, valueKey, current); err != nil {
			log.Errorw("delete failed", "resource", key, "error", err)
			http.Error(w, "store failed", http.StatusInternalServerError)
			return
		}
		log.Debugw("delete", "resource", key, "epoch", tok.Epoch, "version", current)
		w.WriteHeader(http.StatusNoContent)
	}
}

// preconditions are a request's If-Match and If-None-Match headers.
type preconditions struct {
	match     []uint64 // If-Match versions; nil if absent
	matchAny  bool     // If-Match: *
	noneMatch bool     // If-None-Match: *
}

// hold reports whether the preconditions hold for a value at version
// (verifier.NoVersion if absent).
func (p preconditions) hold(version uint64) bool {
	if p.noneMatch && version != verifier.NoVersion {
		return false
	}
	if p.matchAny && version == verifier.NoVersion {
		return false
	}
	if p.match != nil {
		for _, v := range p.match {
			if v == version {
				return true
			}
		}
		return false
	}
	return true
}

// parsePreconditions reads If-Match ("VERSION", a list of them, or *) and
// If-None-Match (only *).
func parsePreconditions(r *http.Request) (preconditions, error) {
	var p preconditions
	if vals := r.Header.Values("If-Match"); len(vals) > 0 {
		p.match = []uint64{}
		for _, val := range vals {
			for _, t := range strings.Split(val, ",") {
				t = strings.TrimSpace(t)
				if t == "*" {
					p.matchAny = true
					continue
				}
				v, err := parseETag(t)
				if err != nil {
					return p, err
				}
				p.match = append(p.match, v)
			}
		}
		if p.matchAny && len(p.match) == 0 {
			p.match = nil
		}
	}
	if vals := r.Header.Values("If-None-Match"); len(vals) > 0 {
		if len(vals) != 1 || strings.TrimSpace(vals[0]) != "*" {
			return p, errors.New("If-None-Match: only * is supported")
		}
		if r.Method != http.MethodPut {
			return p, errors.New("If-None-Match: only on PUT")
		}
		p.noneMatch = true
	}
	return p, nil
}

// etag is the entity tag of a version.
func etag(version uint64) string { return `"` + strconv.FormatUint(version, 10) + `"` }

// parseETag parses "VERSION" (quotes optional; weak tags are refused).
func parseETag(t string) (uint64, error) {
	s := strings.TrimSuffix(strings.TrimPrefix(t, `"`), `"`)
	if len(s) == 0 || len(s) > 20 || (strings.HasPrefix(t, `"`) != strings.HasSuffix(t, `"`)) {
		return 0, fmt.Errorf("If-Match: bad entity tag %q", t)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == verifier.NoVersion || v == verifier.AnyVersion {
		return 0, fmt.Errorf("If-Match: bad entity tag %q", t)
	}
	return v, nil
}

func preconditionFailed(w http.ResponseWriter, key string, current uint64) {
	if current != verifier.NoVersion {
		w.Header().Set("ETag", etag(current))
		http.Error(w, fmt.Sprintf("precondition failed: %q is at version %d", key, current), http.StatusPreconditionFailed)
		return
	}
	http.Error(w, fmt.Sprintf("precondition failed: %q has no value", key), http.StatusPreconditionFailed)
}
