package verifier_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// popFixture is a holder with an Ed25519 identity, its token for
// orders-db, and a verifier in proof mode on a test clock.
type popFixture struct {
	fx     *verifiertest.Dealer
	key    ed25519.PrivateKey
	holder string
	tok    protocol.Token
	clock  *verifiertest.Clock
	v      *verifier.Verifier
	nonce  uint64
}

func newPopFixture(t testing.TB, cfg pop.Config) *popFixture {
	t.Helper()
	p := &popFixture{fx: mainFixture(), key: verifiertest.Key(1), clock: verifiertest.NewClock()}
	p.holder = verifier.HolderID(p.key.Public().(ed25519.PublicKey))
	p.tok = p.fx.Token(t, "orders-db", 5, p.holder)
	cfg.Now = p.clock.Now
	p.v = verifier.New(p.fx.Cluster, verifier.RequireProof(cfg))
	return p
}

// prove signs req for tok with key at the clock's time plus skew, with a
// fresh counter nonce.
func (p *popFixture) prove(tok protocol.Token, req pop.Request, key ed25519.PrivateKey, skew time.Duration) pop.Proof {
	p.nonce++
	return verifiertest.Prove(tok, req, key, p.clock.Now().Add(skew), p.nonce)
}

func (p *popFixture) signer(key ed25519.PrivateKey) func([]byte) ([]byte, error) {
	return func(m []byte) ([]byte, error) { return ed25519.Sign(key, m), nil }
}

func TestVerifyRequest(t *testing.T) {
	p := newPopFixture(t, pop.Config{})
	attacker := verifiertest.Key(99)
	req := pop.NewRequest(http.MethodPut, "/orders-db/rows/7?if=none", []byte("value"))
	other := p.fx.Token(t, "orders-db", 6, p.holder)
	thiefTok := p.fx.Token(t, "orders-db", 5, "client-a") // holder not a peer ID

	change := func(f func(*pop.Request)) pop.Request { r := req; f(&r); return r }
	tests := []struct {
		name   string
		tok    protocol.Token // presented
		signed protocol.Token // signed by the proof
		req    pop.Request
		key    ed25519.PrivateKey
		skew   time.Duration
		want   error
	}{
		{"valid", p.tok, p.tok, req, p.key, 0, nil},
		{"valid at the window's edges", p.tok, p.tok, req, p.key, 30 * time.Second, nil},
		{"valid 30s old", p.tok, p.tok, req, p.key, -30 * time.Second, nil},
		{"leaked token, attacker's key", p.tok, p.tok, req, attacker, 0, pop.ErrBadProof},
		{"method changed", p.tok, p.tok, change(func(r *pop.Request) { r.Method = http.MethodDelete }), p.key, 0, pop.ErrBadProof},
		{"path changed", p.tok, p.tok, change(func(r *pop.Request) { r.Target = "/orders-db/rows/8?if=none" }), p.key, 0, pop.ErrBadProof},
		{"query changed", p.tok, p.tok, change(func(r *pop.Request) { r.Target = "/orders-db/rows/7" }), p.key, 0, pop.ErrBadProof},
		{"body changed", p.tok, p.tok, change(func(r *pop.Request) { r.BodyDigest[0] ^= 1 }), p.key, 0, pop.ErrBadProof},
		{"proof for another token", other, p.tok, req, p.key, 0, pop.ErrBadProof},
		{"expired", p.tok, p.tok, req, p.key, -31 * time.Second, pop.ErrExpired},
		{"from the future", p.tok, p.tok, req, p.key, 31 * time.Second, pop.ErrExpired},
		{"holder is not a peer ID", thiefTok, thiefTok, req, attacker, 0, verifier.ErrHolderKey},
		{"forged token", func() protocol.Token { x := p.tok; x.Epoch = 50; return x }(), p.tok, req, p.key, 0, verifier.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The verifier checks the request it receives, which for the
			// tampering cases is the original one.
			proof := p.prove(tt.signed, tt.req, tt.key, tt.skew)
			_, err := p.v.VerifyRequest(tt.tok, "orders-db", req, proof)
			if tt.want == nil {
				require.NoError(t, err)
				// The same proof again is a replay.
				_, err = p.v.VerifyRequest(tt.tok, "orders-db", req, proof)
				require.ErrorIs(t, err, pop.ErrReplayed)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
	// The token alone admits nothing in proof mode.
	require.ErrorIs(t, p.v.VerifyFor(p.tok, "orders-db"), pop.ErrNoProof)
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(p.v, store)
	noop := func(verifier.Tx) error { return nil }
	require.ErrorIs(t, fence.Admit(context.Background(), p.tok, "orders-db", noop), pop.ErrNoProof)
	require.NoError(t, fence.AdmitRequest(context.Background(), other, "orders-db", req, p.prove(other, req, p.key, 0), noop))
	require.ErrorIs(t, fence.AdmitRequest(context.Background(), p.tok, "orders-db", req, p.prove(p.tok, req, p.key, 0), noop), verifier.ErrStale)
	require.ErrorIs(t, fence.AdmitRequest(context.Background(), p.tok, "bucket", req, p.prove(p.tok, req, p.key, 0), noop), verifier.ErrWrongResource)
}

// TestReplayRecord covers the bounded replay record: it is filled only by
// proofs that verify, refuses when full rather than forget, frees entries
// as they leave the window, and stays safe when the clock steps back.
func TestReplayRecord(t *testing.T) {
	// One holder: its quota (2 of 4) is what fills.
	p := newPopFixture(t, pop.Config{MaxNonces: 4, MaxNoncesPerHolder: 2, Window: 10 * time.Second})
	req := pop.NewRequest(http.MethodPost, "/orders-db", nil)
	check := func(pr pop.Proof) error {
		_, err := p.v.VerifyRequest(p.tok, "orders-db", req, pr)
		return err
	}

	// Garbage does not take room.
	for i := 0; i < 5; i++ {
		require.ErrorIs(t, check(p.prove(p.tok, req, verifiertest.Key(99), 0)), pop.ErrBadProof)
	}
	first := p.prove(p.tok, req, p.key, 0)
	require.NoError(t, check(first))
	p.clock.Advance(4 * time.Second)
	second := p.prove(p.tok, req, p.key, 0)
	require.NoError(t, check(second))
	// Full: refuse a valid new proof rather than forget a nonce.
	require.ErrorIs(t, check(p.prove(p.tok, req, p.key, 0)), pop.ErrTooManyProofs)
	require.ErrorIs(t, check(first), pop.ErrReplayed)

	// first leaves the window: its room is free again, and it stays
	// refused, as expired.
	p.clock.Advance(7 * time.Second)
	require.ErrorIs(t, check(first), pop.ErrExpired)
	require.NoError(t, check(p.prove(p.tok, req, p.key, 0)))
	require.ErrorIs(t, check(second), pop.ErrReplayed)

	// The clock steps back 5 s: first's timestamp is within the window
	// again, but its nonce was forgotten, so it must still be refused.
	p.clock.Advance(-5 * time.Second)
	err := check(first)
	require.Error(t, err)
	require.True(t, errors.Is(err, pop.ErrExpired) || errors.Is(err, pop.ErrReplayed), "%v", err)
}

// serve runs one request through h and returns the status and body.
func serve(h http.Handler, r *http.Request) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestMiddlewareProof(t *testing.T) {
	p := newPopFixture(t, pop.Config{})
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(p.v, store)
	h := fence.Middleware(func(*http.Request) string { return "orders-db" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := verifier.TxFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		if err := tx.Put("value", body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "stored")
	}))
	newReq := func(method, target, body string) *http.Request {
		return httptest.NewRequest(method, target, strings.NewReader(body))
	}
	signed := func(method, target, body string, tok protocol.Token, key ed25519.PrivateKey) *http.Request {
		r := newReq(method, target, body)
		require.NoError(t, pop.SignRequest(r, tok, p.signer(key), p.clock.Now()))
		return r
	}
	// resend copies a signed request's headers onto another request.
	resend := func(from *http.Request, method, target, body string) *http.Request {
		r := newReq(method, target, body)
		r.Header = from.Header.Clone()
		return r
	}

	ok := signed(http.MethodPut, "/orders-db?x=1", "a", p.tok, p.key)
	code, msg := serve(h, ok)
	require.Equal(t, http.StatusOK, code, msg)
	require.Equal(t, "stored", msg)

	code, msg = serve(h, resend(ok, http.MethodPut, "/orders-db?x=1", "a"))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "replayed")

	tokenOnly := newReq(http.MethodPut, "/orders-db", "b")
	tokenOnly.Header.Set(verifier.HeaderToken, p.tok.String())
	code, msg = serve(h, tokenOnly)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "missing "+pop.HeaderProof)

	tmpl := signed(http.MethodPut, "/orders-db?x=1", "a", p.tok, p.key)
	for name, r := range map[string]*http.Request{
		"attacker's key": signed(http.MethodPut, "/orders-db", "b", p.tok, verifiertest.Key(99)),
		"method changed": resend(tmpl, http.MethodDelete, "/orders-db?x=1", "a"),
		"path changed":   resend(tmpl, http.MethodPut, "/orders-dc?x=1", "a"),
		"query changed":  resend(tmpl, http.MethodPut, "/orders-db?x=2", "a"),
		"body changed":   resend(tmpl, http.MethodPut, "/orders-db?x=1", "b"),
		"malformed proof": func() *http.Request {
			r := resend(tmpl, http.MethodPut, "/orders-db?x=1", "a")
			r.Header.Set(pop.HeaderProof, r.Header.Get(pop.HeaderProof)[1:])
			return r
		}(),
	} {
		code, msg := serve(h, r)
		require.Equal(t, http.StatusUnauthorized, code, name)
		require.Contains(t, msg, "bad proof of possession", name)
	}

	twice := resend(tmpl, http.MethodPut, "/orders-db?x=1", "a")
	twice.Header.Add(pop.HeaderProof, twice.Header.Get(pop.HeaderProof))
	code, msg = serve(h, twice)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "more than one")

	late := signed(http.MethodPut, "/orders-db", "c", p.tok, p.key)
	p.clock.Advance(31 * time.Second)
	code, msg = serve(h, late)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "time window")

	plain := p.fx.Token(t, "orders-db", 7, "client-a")
	code, msg = serve(h, signed(http.MethodPut, "/orders-db", "d", plain, verifiertest.Key(3)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "not an Ed25519 peer ID")

	// Nothing refused was written.
	err := store.Guard(context.Background(), admit("orders-db", p.tok.Epoch), func(tx verifier.Tx) error {
		v, ok, err := tx.Get("value")
		require.True(t, ok)
		require.Equal(t, "a", string(v))
		return err
	})
	require.NoError(t, err)
}

func TestMiddlewareProofFull(t *testing.T) {
	p := newPopFixture(t, pop.Config{MaxNonces: 1})
	store := verifier.NewMemoryStore()
	defer store.Close()
	h := verifier.NewFence(p.v, store).Middleware(func(*http.Request) string { return "orders-db" },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		r := httptest.NewRequest(http.MethodPost, "/orders-db", nil)
		require.NoError(t, pop.SignRequest(r, p.tok, p.signer(p.key), p.clock.Now()))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		require.Equal(t, want, rec.Code, "request %d: %s", i, rec.Body)
		if want == http.StatusServiceUnavailable {
			require.Equal(t, "30", rec.Header().Get("Retry-After"))
		}
	}
}

// TestProofEndToEnd sends signed requests over a loopback HTTP server,
// through http.StripPrefix, with bodies that SignRequest must restore.
func TestProofEndToEnd(t *testing.T) {
	p := newPopFixture(t, pop.Config{})
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(p.v, store)
	var mu sync.Mutex
	var got []string
	h := fence.Middleware(func(*http.Request) string { return "orders-db" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := httptest.NewServer(http.StripPrefix("/api", h))
	defer srv.Close()

	send := func(r *http.Request) (int, string) {
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	newReq := func(method, path, body string) *http.Request {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r, err := http.NewRequest(method, srv.URL+path, rd)
		require.NoError(t, err)
		return r
	}

	r := newReq(http.MethodPut, "/api/rows/7?mode=a%20b", "hello")
	require.NoError(t, pop.SignRequest(r, p.tok, p.signer(p.key), p.clock.Now()))
	code, msg := send(r)
	require.Equal(t, http.StatusNoContent, code, msg)

	// The same headers and body again: refused as a replay.
	again := newReq(http.MethodPut, "/api/rows/7?mode=a%20b", "hello")
	again.Header = r.Header.Clone()
	code, msg = send(again)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "replayed")

	// A leaked token without the holder's key: no proof, then a proof by
	// another key.
	leaked := newReq(http.MethodPut, "/api/rows/7", "evil")
	leaked.Header.Set(verifier.HeaderToken, p.tok.String())
	code, msg = send(leaked)
	require.Equal(t, http.StatusUnauthorized, code, msg)
	leaked = newReq(http.MethodPut, "/api/rows/7", "evil")
	require.NoError(t, pop.SignRequest(leaked, p.tok, p.signer(verifiertest.Key(99)), p.clock.Now()))
	code, msg = send(leaked)
	require.Equal(t, http.StatusUnauthorized, code, msg)

	get := newReq(http.MethodGet, "/api/rows/7", "")
	require.NoError(t, pop.SignRequest(get, p.tok, p.signer(p.key), p.clock.Now()))
	code, msg = send(get)
	require.Equal(t, http.StatusNoContent, code, msg)

	require.Equal(t, []string{"PUT /rows/7 hello", "GET /rows/7 "}, got)
}
