package resource

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// maxLoggedReason bounds the refusal reason a log line carries.
const maxLoggedReason = 200

// logged wraps the fenced handler so each request is counted in m (if
// not nil) and logged at info once answered: "admit" with the status for a request the fence let through
// (the handler's own 404 or 412 included), "refuse" with the status and the
// reason for one it turned away (401 without a valid token, 409 stale or
// fork, with the conflict and, for a fork, its ID; 413) or that failed. Each line has the resource, the method and the
// token's epoch and holder as the request claims them (parsed, not
// verified: a refused token may be forged).
func logged(m *Metrics, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next(rec, r)
		if m != nil {
			m.observe(r.Method, rec.status, rec.Header(), rec.reason())
		}
		kv := []any{"resource", r.PathValue("key"), "method", r.Method, "status", rec.status}
		if tok, err := protocol.ParseTokenText(r.Header.Get(verifier.HeaderToken)); err == nil {
			kv = append(kv, "epoch", tok.Epoch, "holder", tok.Holder.String())
		}
		if rec.fenced() {
			log.Infow("admit", kv...)
			return
		}
		if b := rec.Header().Get(verifier.HeaderBarrier); b != "" {
			kv = append(kv, "barrier", b)
		}
		if c := rec.Header().Get(verifier.HeaderConflict); c != "" {
			kv = append(kv, "conflict", c)
		}
		if id := rec.Header().Get(verifier.HeaderForkID); id != "" {
			kv = append(kv, "fork_id", id)
		}
		log.Infow("refuse", append(kv, "reason", rec.reason())...)
	}
}

// statusRecorder passes a response through, keeping its status and the
// start of its body (the reason of a refusal).
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	if s.status >= 400 && s.body.Len() < maxLoggedReason {
		s.body.Write(b[:min(len(b), maxLoggedReason-s.body.Len())])
	}
	return s.ResponseWriter.Write(b)
}

// fenced reports whether the fence admitted the request: it answered
// below 400, or the handler (inside the fence) answered 404 or 412.
func (s *statusRecorder) fenced() bool {
	return s.status < 400 || s.status == http.StatusNotFound || s.status == http.StatusPreconditionFailed
}

func (s *statusRecorder) reason() string {
	line, _, _ := strings.Cut(s.body.String(), "\n")
	return strings.TrimSpace(line)
}
