package testnet

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// TestProofOfPossession acquires real tokens from a 4-node network and
// writes to a resource whose verifier requires the holder's proof: the
// holder's signed requests are admitted; a replay, the token alone, and the
// token signed by another authorised client are refused; the fenced
// ex-holder is refused with 409 even with a valid proof.
func TestProofOfPossession(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	ctx := context.Background()
	c1 := newClient(t, nw, 0, client.Config{})
	c2 := newClient(t, nw, 1, client.Config{})

	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(verifier.New(nw.Keys.Cluster, verifier.RequireProof(pop.Config{})), store)
	srv := httptest.NewServer(fence.Middleware(func(r *http.Request) string { return "orders-db" },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, _ := verifier.TxFromContext(r.Context())
			b, _ := io.ReadAll(r.Body)
			if err := tx.Put("value", b); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})))
	defer srv.Close()
	put := func(body string) *http.Request {
		r, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/orders-db", strings.NewReader(body))
		require.NoError(t, err)
		return r
	}
	send := func(r *http.Request) (int, string) {
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	l1, err := c1.TryAcquire(ctx, "orders-db")
	require.NoError(t, err)
	r := put("one")
	require.NoError(t, l1.SignRequest(r))
	code, msg := send(r)
	require.Equal(t, http.StatusOK, code, msg)

	replay := put("one")
	replay.Header = r.Header.Clone()
	code, msg = send(replay)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "replayed")

	// l1's token leaks to client 2, which cannot sign for it.
	leaked := l1.Token()
	alone := put("stolen")
	alone.Header.Set(verifier.HeaderToken, leaked.String())
	code, _ = send(alone)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Error(t, client.SignRequest(put("stolen"), leaked, nw.Keys.Clients[1], time.Now()))
	forged := put("stolen")
	require.NoError(t, pop.SignRequest(forged, leaked, nw.Keys.Clients[1].Sign, time.Now()))
	code, msg = send(forged)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "bad proof")

	// Client 2 takes over; client 1's proofs still verify, but it is fenced.
	require.NoError(t, l1.Release(ctx))
	l2, err := c2.TryAcquire(ctx, "orders-db")
	require.NoError(t, err)
	r = put("two")
	require.NoError(t, l2.SignRequest(r))
	code, msg = send(r)
	require.Equal(t, http.StatusOK, code, msg)
	late := put("late")
	require.NoError(t, l1.SignRequest(late))
	code, _ = send(late)
	require.Equal(t, http.StatusConflict, code)
	require.NoError(t, l2.Release(ctx))
}
