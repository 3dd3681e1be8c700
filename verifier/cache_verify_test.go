package verifier_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// sentinels are the errors a refused token wraps exactly one of.
var sentinels = []error{
	verifier.ErrMalformedToken, verifier.ErrInvalidToken, verifier.ErrWrongCluster,
	verifier.ErrWrongResource, verifier.ErrStale, pop.ErrNoProof,
}

// sentinel returns the sentinel err wraps, nil for nil.
func sentinel(t testing.TB, err error) error {
	t.Helper()
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	t.Fatalf("error %v wraps no sentinel", err)
	return nil
}

// TestCacheNeverAdmitsWhatFreshCheckRefuses caches valid tokens first, then
// presents variants: a cached verifier must answer exactly as an uncached
// one.
func TestCacheNeverAdmitsWhatFreshCheckRefuses(t *testing.T) {
	fx := mainFixture()
	cached := verifier.New(fx.Cluster)
	fresh := verifier.New(fx.Cluster, verifier.WithCacheSize(0))

	tok, xPlusP := withModulus(t)
	require.NoError(t, cached.Verify(tok))
	require.NoError(t, cached.VerifyFor(tok, "orders-db"))

	renamed, err := protocol.NewCluster(protocol.NewClusterFile("renamed", fx.Cluster.Key, nil, nil))
	require.NoError(t, err)
	variants := []struct {
		name     string
		tok      protocol.Token
		resource string
		want     error
	}{
		{"cached", tok, "orders-db", nil},
		{"epoch raised, same signature", func() protocol.Token { x := tok; x.Epoch++; return x }(), "orders-db", verifier.ErrInvalidToken},
		{"holder changed, same signature", func() protocol.Token { x := tok; x.Holder.ID = "client-b"; return x }(), "orders-db", verifier.ErrInvalidToken},
		{"resource changed, same signature", func() protocol.Token { x := tok; x.Resource = "orders-dc"; return x }(), "orders-dc", verifier.ErrInvalidToken},
		{"other resource", tok, "bucket", verifier.ErrWrongResource},
		{"other cluster ID", func() protocol.Token { x := tok; x.Cluster = renamed.ID; return x }(), "orders-db", verifier.ErrWrongCluster},
		{"malformed holder", func() protocol.Token { x := tok; x.Holder.ID = "a b"; return x }(), "orders-db", verifier.ErrMalformedToken},
	}
	// Every encoding attack on the cached signature: other bytes, so a
	// miss, and the fresh check's strict decoding refuses it.
	for _, a := range encodingAttacks(tok.Signature, xPlusP) {
		x := tok
		x.Signature = a.sig
		variants = append(variants, struct {
			name     string
			tok      protocol.Token
			resource string
			want     error
		}{"signature: " + a.name, x, "orders-db", verifier.ErrInvalidToken})
	}
	for _, vt := range variants {
		t.Run(vt.name, func(t *testing.T) {
			// Twice: a refusal must not be cached either.
			for range 2 {
				err := cached.VerifyFor(vt.tok, vt.resource)
				require.Equal(t, vt.want, sentinel(t, err), "%v", err)
				require.Equal(t, sentinel(t, fresh.VerifyFor(vt.tok, vt.resource)), sentinel(t, err))
			}
		})
	}
	mal := tok
	mal.Signature = xPlusP
	require.ErrorIs(t, cached.Verify(mal), crypto.ErrMalformedPoint)

	// The barrier still applies to a cached token.
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(cached, store)
	newer := fx.Token(t, "orders-db", tok.Epoch+1, "client-b")
	require.NoError(t, fence.Admit(context.Background(), newer, "orders-db", func(verifier.Tx) error { return nil }))
	require.ErrorIs(t, fence.Admit(context.Background(), tok, "orders-db", func(verifier.Tx) error { return nil }), verifier.ErrStale)

	// So does proof mode: a cached token alone admits nothing there.
	pv := verifier.New(fx.Cluster, verifier.RequireProof(pop.Config{}))
	require.NoError(t, pv.Verify(tok))
	require.ErrorIs(t, pv.VerifyFor(tok, "orders-db"), pop.ErrNoProof)
}

// TestCacheRandomMix checks seeded random sequences of valid, tampered and
// repeated tokens against an uncached verifier, with a cache small enough to
// evict.
func TestCacheRandomMix(t *testing.T) {
	fx := mainFixture()
	var pool []protocol.Token
	for epoch := uint64(1); epoch <= 6; epoch++ {
		pool = append(pool, fx.Token(t, "orders-db", epoch, holder(epoch)))
	}
	cached := verifier.New(fx.Cluster, verifier.WithCacheSize(3))
	fresh := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 60; i++ {
		tok := pool[rng.Intn(len(pool))]
		switch rng.Intn(5) {
		case 0:
			tok.Epoch++
		case 1:
			tok.Signature = pool[rng.Intn(len(pool))].Signature
		}
		require.Equal(t, sentinel(t, fresh.Verify(tok)), sentinel(t, cached.Verify(tok)), "step %d", i)
	}
}
