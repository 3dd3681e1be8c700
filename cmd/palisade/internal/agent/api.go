package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// PathPrefix starts every lock URL.
const PathPrefix = "/v1/locks/"

// LockInfo is the JSON of a lock, as POST, GET and DELETE return it.
type LockInfo struct {
	// ID names the lock in GET and DELETE: 32 hex digits, 128 random bits.
	ID string `json:"id"`
	// Resource is the locked resource.
	Resource string `json:"resource"`
	// Token is the fencing token's text form: send it with every write
	// (e.g. the Palisade-Token header of "palisade resource").
	Token string `json:"token"`
	// Epoch is the token's epoch, the fencing number.
	Epoch uint64 `json:"epoch"`
	// Holder is the agent's client identity, a libp2p peer ID.
	Holder string `json:"holder"`
	// Session is the lock session: 32 hex digits, one per acquisition.
	Session string `json:"session"`
	// TTL is the lease the agent renews, as a Go duration ("10s").
	TTL string `json:"ttl"`
	// State is held, released or lost.
	State State `json:"state"`
	// Reason says why a lost lock was lost.
	Reason string `json:"reason,omitempty"`
}

// acquireRequest is the optional JSON body of POST.
type acquireRequest struct {
	TTL  string `json:"ttl"`
	Wait string `json:"wait"`
}

func (a *Agent) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathPrefix+"{resource...}", a.postLock)
	mux.HandleFunc("GET "+PathPrefix+"{id}", a.getLock)
	mux.HandleFunc("DELETE "+PathPrefix+"{id}", a.deleteLock)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, PathPrefix) && r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodDelete && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeError(w, &apiError{Code: CodeMethodNotAllowed, Message: fmt.Sprintf("method %s is not allowed here", r.Method)})
			return
		}
		writeError(w, &apiError{Code: CodeNotFound, Message: fmt.Sprintf("no such lock or endpoint: %s %s", r.Method, r.URL.Path)})
	})
	return a.guard(mux)
}

// postLock acquires a lock: TryAcquire without a wait, Acquire within one.
func (a *Agent) postLock(w http.ResponseWriter, r *http.Request) {
	resource := r.PathValue("resource")
	if err := protocol.ValidateResource(resource); err != nil {
		a.refuseAcquire(w, badRequest("resource: %v", err))
		return
	}
	req, aerr := a.readAcquire(w, r)
	if aerr != nil {
		a.refuseAcquire(w, aerr)
		return
	}
	ttl, aerr := duration("ttl", req.TTL, a.cfg.DefaultTTL, protocol.MaxTTL)
	if aerr == nil && ttl == 0 {
		aerr = badRequest("ttl must be above 0")
	}
	if aerr != nil {
		a.refuseAcquire(w, aerr)
		return
	}
	wait, aerr := duration("wait", req.Wait, 0, a.cfg.MaxWait)
	if aerr != nil {
		a.refuseAcquire(w, aerr)
		return
	}
	started := a.cfg.Clock.Now()
	if aerr := a.reserve(); aerr != nil {
		a.refuseAcquire(w, aerr)
		return
	}
	if wait > 0 {
		done, aerr := a.wait()
		if aerr != nil {
			a.unreserve()
			a.refuseAcquire(w, aerr)
			return
		}
		defer done()
	}

	// The request's end, and the agent's closing, stop the acquisition.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.closing, cancel)()
	var lock *client.Lock
	var err error
	if wait > 0 {
		wctx, wcancel := context.WithTimeout(ctx, wait)
		lock, err = a.cfg.Client.Acquire(wctx, resource, client.WithTTL(ttl))
		wcancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = a.diagnose(ctx, resource, wait, err)
		}
	} else {
		lock, err = a.cfg.Client.TryAcquire(ctx, resource, client.WithTTL(ttl))
	}
	if err != nil {
		a.unreserve()
		if a.closing.Err() != nil {
			a.refuseAcquire(w, errShuttingDown())
			return
		}
		if r.Context().Err() != nil {
			a.metrics.acquires.WithLabelValues(resultAbandoned).Inc()
			log.Debugw("acquisition abandoned by its caller", "resource", resource, "err", err)
			return
		}
		a.refuseAcquire(w, classify(err, resource, wait))
		return
	}
	e, err := a.register(lock, ttl)
	if err == nil && r.Context().Err() != nil {
		// Nobody will learn the ID: release at once rather than renew a
		// lock no one can end.
		a.metrics.acquires.WithLabelValues(resultAbandoned).Inc()
		log.Infow("caller gone before it learnt the lock: releasing", "resource", resource, "epoch", lock.Epoch())
		if rerr := a.release(e, causeAbandoned); rerr != nil {
			log.Warnw("release failed", "resource", resource, "epoch", lock.Epoch(), "err", rerr)
		}
		return
	}
	if err != nil {
		a.unreserve()
		rctx, rcancel := context.WithTimeout(context.Background(), a.cfg.ReleaseTimeout)
		defer rcancel()
		if rerr := lock.Release(rctx); rerr != nil {
			log.Warnw("release after a failed registration failed", "resource", resource, "epoch", lock.Epoch(), "err", rerr)
		}
		if errors.Is(err, ErrClosed) {
			a.refuseAcquire(w, errShuttingDown())
			return
		}
		a.refuseAcquire(w, &apiError{Code: CodeInternal, Message: err.Error()})
		return
	}
	a.metrics.acquired(a.cfg.Clock.Since(started))
	log.Infow("lock acquired", "resource", resource, "epoch", lock.Epoch(), "ttl", ttl)
	w.Header().Set("Location", PathPrefix+e.id)
	writeJSON(w, http.StatusCreated, e.info())
}

// refuseAcquire answers a failed acquisition with e and counts it by its
// code.
func (a *Agent) refuseAcquire(w http.ResponseWriter, e *apiError) {
	a.metrics.acquires.WithLabelValues(string(e.Code)).Inc()
	writeError(w, e)
}

// diagnoseTimeout bounds the status round of diagnose.
const diagnoseTimeout = 3 * time.Second

// diagnose explains an acquisition whose wait ran out. The client's error
// then describes its last round, which the deadline itself may have cut
// short, so one more status round tells who holds the resource or which
// nodes do not answer.
func (a *Agent) diagnose(ctx context.Context, resource string, wait time.Duration, err error) error {
	var be *client.BusyError
	if errors.As(err, &be) || errors.Is(err, client.ErrRefused) {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	sts, serr := a.cfg.Client.Status(sctx, resource)
	if serr != nil {
		return fmt.Errorf("%q not acquired within the wait of %v, and then %w", resource, wait, serr)
	}
	for _, s := range sts {
		if !s.Holder.IsZero() && s.LeaseLeft > 0 {
			return &client.BusyError{Resource: resource, Holder: s.Holder, Epoch: s.LeaseEpoch, Left: s.LeaseLeft, Nodes: []int{s.Index}}
		}
	}
	return fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
}

// readAcquire reads POST's optional JSON body, at most MaxBodyBytes.
func (a *Agent) readAcquire(w http.ResponseWriter, r *http.Request) (acquireRequest, *apiError) {
	var req acquireRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return req, &apiError{Code: CodeTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", a.cfg.MaxBodyBytes)}
	case err != nil:
		return req, badRequest("read body: %v", err)
	case len(strings.TrimSpace(string(body))) == 0:
		return req, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, badRequest("body: want a JSON object with optional \"ttl\" and \"wait\" (Go durations such as \"10s\"): %v", err)
	}
	if dec.More() {
		return req, badRequest("body: trailing data after the JSON object")
	}
	return req, nil
}

// duration parses a Go duration ("1.5s", "300ms"); empty is def. It must
// not be negative nor above max.
func duration(name, s string, def, max time.Duration) (time.Duration, *apiError) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badRequest("%s: %v (want a Go duration such as \"10s\" or \"250ms\")", name, err)
	}
	if d < 0 || d > max {
		return 0, badRequest("%s %v must be between 0 and %v", name, d, max)
	}
	return d, nil
}

// getLock reports a lock; while it is held it waits (long-polls) up to
// ?wait for it to end, or until the request or the agent ends.
func (a *Agent) getLock(w http.ResponseWriter, r *http.Request) {
	e, aerr := a.find(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "wait" {
			writeError(w, badRequest("unknown parameter %q (only wait)", k))
			return
		}
	}
	wait, aerr := duration("wait", q.Get("wait"), a.cfg.Poll, a.cfg.MaxPoll)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if wait > 0 && e.currentState() == Held {
		done, aerr := a.wait()
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		defer done()
		timer := a.cfg.Clock.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-e.endedCh:
		case <-timer.Chan():
		case <-r.Context().Done():
			return // nobody to answer
		case <-a.ctx.Done():
		}
	}
	writeJSON(w, http.StatusOK, e.info())
}

// deleteLock releases a lock. Its renewal stops at once; the answer says
// whether the cluster confirmed the release (else the lease runs out
// within its TTL; DELETE again to retry).
func (a *Agent) deleteLock(w http.ResponseWriter, r *http.Request) {
	e, aerr := a.find(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if err := a.release(e, causeRequest); err != nil {
		aerr := classify(err, e.lock.Token().Resource, 0)
		aerr.Message = fmt.Sprintf("renewal stopped, but the cluster did not confirm the release; the lease runs out within its TTL (%v); DELETE again to retry: %s", e.ttl, aerr.Message)
		writeError(w, aerr)
		return
	}
	log.Infow("lock released", "resource", e.lock.Token().Resource, "epoch", e.lock.Epoch())
	writeJSON(w, http.StatusOK, e.info())
}

// find looks up the lock named in the path.
func (a *Agent) find(r *http.Request) (*entry, *apiError) {
	id := r.PathValue("id")
	if e, ok := a.lookup(id); ok {
		return e, nil
	}
	return nil, &apiError{Code: CodeNotFound, Message: fmt.Sprintf("no lock %q (unknown, or ended more than %v ago)", truncate(id, 2*IDSize), a.cfg.KeepEnded)}
}

func (e *entry) info() LockInfo {
	tok := e.lock.Token()
	e.mu.Lock()
	defer e.mu.Unlock()
	return LockInfo{
		ID: e.id, Resource: tok.Resource, Token: tok.String(), Epoch: tok.Epoch,
		Holder: tok.Holder.ID, Session: tok.Holder.Session.String(),
		TTL: e.ttl.String(), State: e.state, Reason: e.reason,
	}
}

// classify turns an acquisition's or release's error into the API's error.
func classify(err error, resource string, wait time.Duration) *apiError {
	var be *client.BusyError
	var qe *client.QuorumError
	var re *client.RefusedError
	switch {
	case errors.As(err, &be):
		left := max(be.Left, 0)
		return &apiError{Code: CodeBusy, Message: err.Error(), Holder: be.Holder.ID, Session: be.Holder.Session.String(),
			Epoch: be.Epoch, Left: left.Round(time.Millisecond).String(), retryAfter: left}
	case errors.Is(err, client.ErrHeldLocally):
		return &apiError{Code: CodeBusy, Message: fmt.Sprintf("%q is held, or being acquired, through this agent by another lock: %v", resource, err)}
	case errors.Is(err, client.ErrBusy):
		return &apiError{Code: CodeBusy, Message: err.Error()}
	case errors.As(err, &re):
		return &apiError{Code: CodeRefused, Message: err.Error(), Nodes: nodeIndices(re.Nodes)}
	case client.NotAdmitted(err):
		// More than f nodes drop the agent's connections: their
		// cluster.json does not list its identity. Not an outage.
		errors.As(err, &qe)
		return &apiError{Code: CodeRefused, Message: "the nodes do not admit the agent's identity as a client (they drop its connections): add it to every node's cluster.json and send the nodes SIGHUP: " + err.Error(), Nodes: qe.Failed()}
	case errors.As(err, &qe):
		return &apiError{Code: CodeNotEnoughNodes, Message: err.Error(), Nodes: qe.Failed()}
	case errors.Is(err, client.ErrRefused):
		return &apiError{Code: CodeRefused, Message: err.Error()}
	case errors.Is(err, client.ErrNotEnoughNodes):
		return &apiError{Code: CodeNotEnoughNodes, Message: err.Error()}
	case errors.Is(err, protocol.ErrInvalidField):
		return badRequest("%v", err)
	case errors.Is(err, client.ErrClosed):
		return errShuttingDown()
	case errors.Is(err, context.DeadlineExceeded):
		// The wait ran out and diagnose found nodes but no holder: the
		// resource was taken meanwhile, or contenders kept splitting the
		// votes.
		return &apiError{Code: CodeBusy, Message: fmt.Sprintf("%q not acquired within the wait of %v: %v", resource, wait, err)}
	}
	return &apiError{Code: CodeInternal, Message: err.Error()}
}

func nodeIndices(ns []*client.NodeError) []int {
	out := make([]int, 0, len(ns))
	for _, n := range ns {
		out = append(out, n.Index)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// writeJSON writes v with status. Answers carry tokens: never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"internal","message":"encoding the answer failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.retryAfter+time.Second-1)/time.Second), 10))
	}
	writeJSON(w, e.Code.Status(), e)
}
