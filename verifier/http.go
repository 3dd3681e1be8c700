package verifier

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// HTTP header names.
const (
	// HeaderToken carries the token's text form (protocol.Token.String) in a
	// request.
	HeaderToken = pop.HeaderToken
	// HeaderBarrier carries the resource's barrier in a 409 response to a
	// stale token or a fork.
	HeaderBarrier = "Palisade-Barrier"
	// HeaderConflict says why a 409 response refused the token:
	// ConflictStale or ConflictFork.
	HeaderConflict = "Palisade-Conflict"
	// ConflictStale is HeaderConflict's value for a stale token
	// (ErrStale): a newer holder has been admitted.
	ConflictStale = "stale"
	// ConflictFork is HeaderConflict's value for a fork (ErrFork):
	// another holder's valid token was admitted at the same epoch.
	ConflictFork = "fork"
	// HeaderForkID names the fork (protocol.Fork.ID) in a 409 response
	// with HeaderConflict set to ConflictFork. The proof itself is not
	// sent: it holds the barrier holder's token, which the refused client
	// could otherwise present in that holder's place. It is in the
	// *ForkError, and in the store's fork records (ForkLister).
	HeaderForkID = "Palisade-Fork-ID"
	// HeaderOutcome is set to OutcomeUnknown in the 503 response to a
	// request whose guarded write may or may not have committed
	// (ErrOutcomeUnknown).
	HeaderOutcome = "Palisade-Outcome"
	// OutcomeUnknown is the value of HeaderOutcome when the write's outcome
	// is unknown.
	OutcomeUnknown = "unknown"
)

// DefaultMaxBodyBytes is the default bound on a request body Middleware
// buffers.
const DefaultMaxBodyBytes = 1 << 20

type ctxKey int

const (
	txKey ctxKey = iota
	tokenKey
)

// TxFromContext returns the guarded transaction of a request that
// Fence.Middleware admitted. It is valid only until the handler returns.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey).(Tx)
	return tx, ok
}

// TokenFromContext returns the verified token of a request that
// Fence.Middleware admitted.
func TokenFromContext(ctx context.Context) (protocol.Token, bool) {
	tok, ok := ctx.Value(tokenKey).(protocol.Token)
	return tok, ok
}

// errHandlerFailed aborts the guarded transaction of a handler that answered
// with an error status.
var errHandlerFailed = errors.New("verifier: handler answered with an error status")

// Middleware fences next. For each request it reads the token from the
// HeaderToken header and the resource from resourceOf, and:
//
//   - answers 401 with a short text reason if the header is missing or
//     repeated, or the token is malformed, invalid, for another cluster or
//     for another resource (VerifyFor; an empty resource matches no token);
//   - in proof mode (RequireProof), also reads the holder's proof from the
//     pop.HeaderProof header and applies Verifier.VerifyRequest to the
//     request's method, raw target and body; it answers 401 with the
//     reason if the proof is missing, malformed, from another key, for
//     another request or token, outside the time window or replayed, 409
//     (as below) if the token is stale, before the proof's nonce is
//     recorded, and 503 with Retry-After if the holder's quota in the
//     replay record or the record itself is full;
//   - answers 413 if the body is larger than MaxBodyBytes. The body is read
//     into memory after the token is verified and before the transaction
//     opens, so a slow client never holds the store's write lock;
//   - answers 409 with the epoch and barrier in the body, the barrier in
//     HeaderBarrier and HeaderConflict set to ConflictStale if the token
//     is stale;
//   - answers 409 with HeaderConflict set to ConflictFork, the barrier in
//     HeaderBarrier and the fork's ID in HeaderForkID if another holder's
//     token was admitted at the token's epoch (ErrFork): the request's
//     handler does not run, and the proof (which holds the other
//     holder's token) is not sent; the store keeps it (ForkLister);
//   - otherwise runs next inside BarrierStore.Guard, with the transaction
//     and the token in the request context (TxFromContext,
//     TokenFromContext), and records its response. A status of 400 or more
//     aborts the transaction, leaving barrier and data unchanged; anything
//     else commits the writes and the barrier raise together. Only then is
//     the recorded response sent, so a client never sees success for a
//     write that did not commit. A store failure answers 500.
//   - The request's context (which ends when the client disconnects) can
//     stop the write until its commit starts, never during the commit
//     (BarrierStore.Guard); a request that ended before the commit
//     answers 503 and wrote nothing. If the store cannot tell whether the
//     commit took effect (ErrOutcomeUnknown), it answers 503 with
//     HeaderOutcome set to OutcomeUnknown and no Retry-After: the write
//     may have been applied, so the client should read before retrying.
//
// Every method takes the same path, reads included: a read admitted with a
// higher epoch raises the barrier. That is safe (a newer token exists, so
// older holders are fenced anyway) and makes reads consistent with the
// barrier check. next runs while the store's write transaction is open, so
// it must be short, must not call the store itself, and cannot stream
// (http.Flusher is not supported).
func (f *Fence) Middleware(resourceOf func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(HeaderToken)
		if len(vals) == 0 {
			unauthorized(w, "missing "+HeaderToken+" header")
			return
		}
		if len(vals) > 1 {
			unauthorized(w, "more than one "+HeaderToken+" header")
			return
		}
		resource := resourceOf(r)
		tok, err := parse(vals[0])
		if err != nil {
			unauthorized(w, reason(err))
			return
		}
		var (
			adm Admission
			ok  bool
		)
		if f.v.proofRequired {
			adm, ok = f.checkRequest(w, r, tok, resource)
		} else {
			adm, ok = f.checkToken(w, r, tok, resource)
		}
		if !ok {
			return
		}
		ctx := context.WithValue(r.Context(), tokenKey, tok)
		rec := newRecorder()
		err = f.s.Guard(r.Context(), adm, func(tx Tx) error {
			next.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, txKey, tx)))
			if rec.status() >= 400 {
				return errHandlerFailed
			}
			return nil
		})
		var (
			stale *StaleError
			fork  *ForkError
		)
		switch {
		case err == nil, errors.Is(err, errHandlerFailed):
			rec.copyTo(w)
		case errors.As(err, &stale):
			staleResponse(w, stale)
		case errors.As(err, &fork):
			forkResponse(w, fork)
		case errors.Is(err, ErrOutcomeUnknown):
			w.Header().Set(HeaderOutcome, OutcomeUnknown)
			http.Error(w, "outcome unknown: the write was sent to the store but its commit was not confirmed; it may or may not have been applied, so read before retrying", http.StatusServiceUnavailable)
		case r.Context().Err() != nil:
			// The client went away (or a server timeout ended the
			// request) before the commit: nothing was written.
			http.Error(w, "request ended before the write committed: nothing was written", http.StatusServiceUnavailable)
		default:
			http.Error(w, "barrier store failed", http.StatusInternalServerError)
		}
	})
}

// staleResponse answers 409 for a stale token, with the barrier in
// HeaderBarrier.
func staleResponse(w http.ResponseWriter, stale *StaleError) {
	w.Header().Set(HeaderBarrier, strconv.FormatUint(stale.Barrier, 10))
	w.Header().Set(HeaderConflict, ConflictStale)
	http.Error(w, fmt.Sprintf("stale token: epoch %d below barrier %d for resource %q", stale.Epoch, stale.Barrier, stale.Resource), http.StatusConflict)
}

// forkResponse answers 409 for a fork, naming it by its ID: the proof
// holds the barrier holder's token, a bearer credential the refused
// client must not get.
func forkResponse(w http.ResponseWriter, fork *ForkError) {
	id := fork.Fork.ID()
	w.Header().Set(HeaderBarrier, strconv.FormatUint(fork.Fork.Epoch(), 10))
	w.Header().Set(HeaderConflict, ConflictFork)
	w.Header().Set(HeaderForkID, id)
	http.Error(w, fmt.Sprintf("fork: another holder's token was admitted at epoch %d for resource %q; two valid tokens for one epoch mean more than f nodes misbehaved (fork %s)",
		fork.Fork.Epoch(), fork.Fork.Resource(), id), http.StatusConflict)
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", "Palisade")
	http.Error(w, msg, http.StatusUnauthorized)
}

// checkToken admits a request outside proof mode (Verifier.Admit), then
// buffers its body. It answers and returns false if the request is
// refused.
func (f *Fence) checkToken(w http.ResponseWriter, r *http.Request, tok protocol.Token, resource string) (Admission, bool) {
	adm, err := f.v.Admit(tok, resource)
	if err != nil {
		unauthorized(w, reason(err))
		return Admission{}, false
	}
	if _, err := f.bufferBody(w, r); err != nil {
		return Admission{}, false
	}
	return adm, true
}

// checkRequest applies proof mode to a request (Verifier.VerifyRequest, with
// the body buffered only once the token is known valid). It answers and
// returns false if the request is refused.
func (f *Fence) checkRequest(w http.ResponseWriter, r *http.Request, tok protocol.Token, resource string) (Admission, bool) {
	vals := r.Header.Values(pop.HeaderProof)
	if len(vals) == 0 {
		unauthorized(w, reason(pop.ErrNoProof))
		return Admission{}, false
	}
	if len(vals) > 1 {
		unauthorized(w, "more than one "+pop.HeaderProof+" header")
		return Admission{}, false
	}
	proof, err := pop.ParseText(vals[0])
	var (
		key    ed25519.PublicKey
		cached bool
	)
	if err == nil {
		key, cached, err = f.v.checkProofTime(&tok, resource, proof)
	}
	if err == nil {
		err = f.v.checkSignature(&tok, cached)
	}
	if err != nil {
		unauthorized(w, reason(err))
		return Admission{}, false
	}
	body, err := f.bufferBody(w, r)
	if err != nil {
		return Admission{}, false
	}
	if err := pop.Verify(key, tok, pop.NewRequest(r.Method, requestTarget(r), body), proof); err != nil {
		unauthorized(w, reason(err))
		return Admission{}, false
	}
	adm := admitted(&tok)
	// A stale token is refused before its nonce takes room in the replay
	// record; Guard checks the barrier again in the transaction.
	if err := f.refuseStale(r.Context(), adm); err != nil {
		var stale *StaleError
		if errors.As(err, &stale) {
			staleResponse(w, stale)
		} else {
			http.Error(w, "barrier store failed", http.StatusInternalServerError)
		}
		return Admission{}, false
	}
	err = f.v.recordProof(tok, proof)
	if errors.Is(err, pop.ErrTooManyProofs) {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.v.replay.Window().Seconds()+0.999)))
		http.Error(w, "too many recent proofs of possession", http.StatusServiceUnavailable)
		return Admission{}, false
	}
	if err != nil {
		unauthorized(w, reason(err))
		return Admission{}, false
	}
	return adm, true
}

// requestTarget is the request target the client signed: the raw one from
// the request line (which http.StripPrefix leaves alone), else the URL's.
func requestTarget(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// reason is the short text for a refused token or proof.
func reason(err error) string {
	switch {
	case errors.Is(err, pop.ErrNoProof):
		return "missing " + pop.HeaderProof + " header: this resource requires the holder's proof of possession"
	case errors.Is(err, ErrHolderKey):
		return "token holder is not an Ed25519 peer ID: no proof of possession possible"
	case errors.Is(err, pop.ErrBadProof):
		return "bad proof of possession: malformed, or not the holder's signature over this request and token"
	case errors.Is(err, pop.ErrExpired):
		return "proof of possession outside the time window (check the client's clock)"
	case errors.Is(err, pop.ErrReplayed):
		return "replayed proof of possession"
	case errors.Is(err, ErrMalformedToken):
		return "malformed token"
	case errors.Is(err, ErrWrongCluster):
		return "token for another cluster"
	case errors.Is(err, ErrWrongResource):
		return "token for another resource"
	default:
		return "invalid token signature"
	}
}

// bufferBody replaces r.Body with an in-memory copy and returns it,
// answering 413 or 400 and returning an error if it cannot.
func (f *Fence) bufferBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := f.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "cannot read request body", http.StatusBadRequest)
		}
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

// recorder buffers a handler's response until the transaction has
// committed.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	if r.code != 0 || code < 200 {
		return // informational responses cannot be buffered; drop them
	}
	r.code = code
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

func (r *recorder) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	w.WriteHeader(r.status())
	_, _ = w.Write(r.body.Bytes())
}
