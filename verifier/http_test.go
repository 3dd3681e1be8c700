package verifier_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// kvHandler is a fenced key-value resource: PUT stores the body, GET returns
// it. PUT ?fail answers 500 after writing, which must roll the write back.
func kvHandler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := verifier.TxFromContext(r.Context())
		require.True(t, ok, "no Tx in the request context")
		tok, ok := verifier.TokenFromContext(r.Context())
		require.True(t, ok, "no token in the request context")
		w.Header().Set("X-Holder", tok.Holder.ID)
		switch r.Method {
		case http.MethodGet:
			v, ok, err := tx.Get("value")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if !ok {
				http.Error(w, "no value", http.StatusNotFound)
				return
			}
			_, _ = w.Write(v)
		case http.MethodPut:
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if err := tx.Put("value", body); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if r.URL.Query().Has("fail") {
				http.Error(w, "handler failed", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "stored")
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

func resourceOfPath(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }

func TestMiddleware(t *testing.T) {
	stores := map[string]func(t *testing.T) verifier.BarrierStore{
		"memory": func(*testing.T) verifier.BarrierStore { return verifier.NewMemoryStore() },
		"bolt": func(t *testing.T) verifier.BarrierStore {
			s, err := verifier.OpenBoltStore(filepath.Join(t.TempDir(), "barriers.db"))
			require.NoError(t, err)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { testMiddleware(t, open(t)) })
	}
}

func testMiddleware(t *testing.T, s verifier.BarrierStore) {
	defer s.Close()
	fx := mainFixture()
	const res = "orders-db"
	tok := func(e uint64) string { return fx.Token(t, res, e, holder(e)).String() }
	t4, t5, t6 := tok(4), tok(5), tok(6)
	forged := fx.Token(t, res, 5, holder(5))
	forged.Epoch = 7 // signature no longer matches
	fence := verifier.NewFence(verifier.New(fx.Cluster), s)
	fence.MaxBodyBytes = 64
	h := fence.Middleware(resourceOfPath, kvHandler(t))

	// Steps run in order against one store; barrier is the expected barrier
	// after the step (0: none yet).
	steps := []struct {
		name     string
		method   string
		tokens   []string
		body     string
		query    string
		wantCode int
		wantBody string
		barrier  uint64
	}{
		{"missing header", "PUT", nil, "x", "", 401, "missing Palisade-Token header", 0},
		{"garbage", "PUT", []string{"hello"}, "x", "", 401, "malformed token", 0},
		{"wrong resource", "PUT", []string{fx.Token(t, "bucket/photos", 5, "c").String()}, "x", "", 401, "token for another resource", 0},
		{"wrong cluster", "PUT", []string{otherFixture().Token(t, res, 5, "c").String()}, "x", "", 401, "token for another cluster", 0},
		{"forged epoch", "PUT", []string{forged.String()}, "x", "", 401, "invalid token signature", 0},
		{"two token headers", "PUT", []string{t5, t5}, "x", "", 401, "more than one", 0},
		{"read before any write", "GET", []string{t5}, "", "", 404, "no value", 0},
		{"write at 5", "PUT", []string{t5}, "v5", "", 201, "stored", 5},
		{"read at 5", "GET", []string{t5}, "", "", 200, "v5", 5},
		{"stale write at 4", "PUT", []string{t4}, "v4", "", 409, "stale token: epoch 4 below barrier 5", 5},
		{"stale read at 4", "GET", []string{t4}, "", "", 409, "epoch 4 below barrier 5", 5},
		{"handler fails at 6", "PUT", []string{t6}, "v6-failed", "fail", 500, "handler failed", 5},
		{"failed write left no data", "GET", []string{t5}, "", "", 200, "v5", 5},
		{"body too large", "PUT", []string{t6}, strings.Repeat("x", 65), "", 413, "request body too large", 5},
		{"write at 6", "PUT", []string{t6}, "v6", "", 201, "stored", 6},
		{"another holder at 6", "PUT", []string{fx.Token(t, res, 6, "intruder").String()}, "v6-fork", "", 409, "fork: another holder's token was admitted at epoch 6", 6},
		{"old holder fenced", "PUT", []string{t5}, "v5-late", "", 409, "epoch 5 below barrier 6", 6},
		{"read at 6", "GET", []string{t6}, "", "", 200, "v6", 6},
	}
	for _, st := range steps {
		req := httptest.NewRequest(st.method, "/"+res+"?"+st.query, strings.NewReader(st.body))
		for _, tk := range st.tokens {
			req.Header.Add(verifier.HeaderToken, tk)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, st.wantCode, rec.Code, "%s: body %q", st.name, rec.Body.String())
		require.Contains(t, rec.Body.String(), st.wantBody, st.name)
		switch st.wantCode {
		case 401:
			require.Equal(t, "Palisade", rec.Header().Get("WWW-Authenticate"), st.name)
		case 409:
			require.Equal(t, fmt.Sprint(st.barrier), rec.Header().Get(verifier.HeaderBarrier), st.name)
			if !strings.HasPrefix(st.wantBody, "fork") {
				require.Equal(t, verifier.ConflictStale, rec.Header().Get(verifier.HeaderConflict), st.name)
				require.Empty(t, rec.Header().Get(verifier.HeaderForkID), st.name)
				break
			}
			require.Equal(t, verifier.ConflictFork, rec.Header().Get(verifier.HeaderConflict), st.name)
			fork, err := protocol.NewFork(fx.Token(t, res, 6, holder(6)), fx.Token(t, res, 6, "intruder"))
			require.NoError(t, err)
			require.Equal(t, fork.ID(), rec.Header().Get(verifier.HeaderForkID), st.name)
			require.Contains(t, rec.Body.String(), fork.ID(), st.name)
			require.NotContains(t, rec.Body.String()+fmt.Sprint(rec.Header()), tok(6)[len(tok(6))-40:],
				"%s: the barrier holder's token must not reach the refused client", st.name)
		case 200, 201:
			require.NotEmpty(t, rec.Header().Get("X-Holder"), "%s: recorded headers must be copied", st.name)
		}
		e, ok, err := s.Barrier(context.Background(), res)
		require.NoError(t, err)
		if st.barrier == 0 {
			require.False(t, ok, "%s: barrier set to %d", st.name, e)
		} else {
			require.True(t, ok, st.name)
			require.Equal(t, st.barrier, e, st.name)
		}
	}
}

// TestMiddlewareStoreFailure: a store error is a 500 and the handler's
// response is not sent.
func TestMiddlewareStoreFailure(t *testing.T) {
	fx := mainFixture()
	s := verifier.NewMemoryStore()
	require.NoError(t, s.Close())
	h := verifier.NewFence(verifier.New(fx.Cluster), s).Middleware(resourceOfPath, kvHandler(t))
	req := httptest.NewRequest("PUT", "/orders-db", strings.NewReader("v"))
	req.Header.Set(verifier.HeaderToken, fx.Token(t, "orders-db", 1, "c").String())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.NotContains(t, rec.Body.String(), "stored")
}
