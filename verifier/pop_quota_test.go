package verifier_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// TestProofFloodCannotLockOutHolder measures the bounds of the replay
// record under flooding by holders with valid keys and tokens (issue 10
// §4): an ex-holder with a stale token records nothing, a holder with a
// current token takes at most its quota, the legitimate holder is never
// refused for lack of room, and the record never exceeds MaxNonces.
func TestProofFloodCannotLockOutHolder(t *testing.T) {
	const (
		maxNonces = 256
		quota     = maxNonces / 8 // the default MaxNoncesPerHolder
		flood     = 2 * maxNonces
	)
	p := newPopFixture(t, pop.Config{MaxNonces: maxNonces})
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(p.v, store)
	ctx := context.Background()
	req := pop.NewRequest(http.MethodPost, "/orders-db", nil)
	admit := func(tok protocol.Token, key ed25519.PrivateKey) error {
		r := pop.NewRequest(http.MethodPost, "/"+tok.Resource, nil)
		return fence.AdmitRequest(ctx, tok, tok.Resource, r, p.prove(tok, r, key, 0), nil)
	}
	holderOf := func(key ed25519.PrivateKey) string { return verifier.HolderID(key.Public().(ed25519.PublicKey)) }
	h := fence.Middleware(func(r *http.Request) string { return r.URL.Path[1:] }, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serveSigned := func(tok protocol.Token, key ed25519.PrivateKey) int {
		r := httptest.NewRequest(http.MethodPost, "/"+tok.Resource, nil)
		require.NoError(t, pop.SignRequest(r, tok, p.signer(key), p.clock.Now()))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	recorded := func() (int, int) { return verifier.ReplayRecordLen(p.v) }

	// The legitimate holder (epoch 5) has written: the barrier is 5.
	require.NoError(t, admit(p.tok, p.key))

	// An ex-holder's stale token (epoch 3), with valid proofs from its own
	// key: refused as stale, and none of its nonces is recorded.
	exKey := verifiertest.Key(2)
	staleTok := p.fx.Token(t, "orders-db", 3, holderOf(exKey))
	for i := range flood {
		err := admit(staleTok, exKey)
		require.ErrorIs(t, err, verifier.ErrStale, "stale proof %d", i)
	}
	for i := range quota {
		require.Equal(t, http.StatusConflict, serveSigned(staleTok, exKey), "stale request %d", i)
	}
	total, _ := recorded()
	require.Equal(t, 1, total, "stale tokens took room in the replay record")

	// A holder of another resource's current token: admitted up to its
	// quota, then refused, its own requests only.
	curKey := verifiertest.Key(3)
	curTok := p.fx.Token(t, "other-db", 1, holderOf(curKey))
	admitted := 0
	for range flood {
		err := admit(curTok, curKey)
		if err == nil {
			admitted++
			continue
		}
		require.ErrorIs(t, err, pop.ErrTooManyProofs)
	}
	require.Equal(t, quota, admitted, "a holder recorded more than its quota")
	require.Equal(t, http.StatusServiceUnavailable, serveSigned(curTok, curKey))

	// The legitimate holder is admitted, through both paths.
	for i := range quota / 2 {
		require.NoError(t, admit(p.tok, p.key), "legitimate request %d", i)
	}
	require.Equal(t, http.StatusOK, serveSigned(p.tok, p.key))
	total, most := recorded()
	t.Logf("after the stale and the current flood: %d nonces recorded, at most %d of one holder (quota %d, cap %d)", total, most, quota, maxNonces)
	require.Equal(t, 1+quota+quota/2+1, total)

	// Many holders at once can fill the record, never beyond its cap or a
	// holder beyond its quota.
	for i := range 2 * maxNonces / quota {
		key := verifiertest.Key(byte(10 + i))
		tok := p.fx.Token(t, fmt.Sprintf("r-%d", i), 1, holderOf(key))
		for range 2 * quota {
			if err := admit(tok, key); err != nil {
				require.ErrorIs(t, err, pop.ErrTooManyProofs)
			}
		}
	}
	total, most = recorded()
	t.Logf("after %d more holders flooded: %d nonces recorded, at most %d of one holder", 2*maxNonces/quota, total, most)
	require.LessOrEqual(t, total, maxNonces)
	require.LessOrEqual(t, most, quota)

	// The nonces leave with the window, and room comes back.
	p.clock.Advance(31 * time.Second)
	require.NoError(t, admit(p.tok, p.key))
	total, _ = recorded()
	require.Equal(t, 1, total)

	// VerifyRequest, which knows no barrier, still refuses beyond the
	// quota.
	err := error(nil)
	for i := 0; err == nil; i++ {
		require.Less(t, i, maxNonces, "no quota")
		_, err = p.v.VerifyRequest(p.tok, "orders-db", req, p.prove(p.tok, req, p.key, 0))
	}
	require.True(t, errors.Is(err, pop.ErrTooManyProofs), "%v", err)
	_, most = recorded()
	require.Equal(t, quota, most)
}
