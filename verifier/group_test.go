package verifier_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// TestGroupChecksConcurrent: many concurrent first checks of distinct
// tokens, some forged, share batches and each still gets its own answer:
// valid tokens pass (and are cached), forged ones are refused alone.
func TestGroupChecksConcurrent(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	const n = 48
	toks := make([]protocol.Token, n)
	forged := map[int]bool{}
	for i := range toks {
		toks[i] = fx.Token(t, "orders-db", uint64(i+1), holder(uint64(i+1)))
		if i%7 == 3 {
			toks[i].Signature = toks[(i+1)%n].Signature // another token's: does not verify here
			forged[i] = true
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = v.VerifyFor(toks[i], "orders-db")
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if forged[i] {
			require.ErrorIs(t, err, verifier.ErrInvalidToken, "token %d", i)
			continue
		}
		require.NoError(t, err, "token %d", i)
	}
	checks := v.SignatureChecks()
	require.GreaterOrEqual(t, checks, uint64(n), "every token checked")
	// Valid ones are cached: checking them again costs nothing.
	for i := range toks {
		if err := v.VerifyFor(toks[i], "orders-db"); forged[i] != errors.Is(err, verifier.ErrInvalidToken) {
			t.Fatalf("token %d again: %v", i, err)
		}
	}
	require.Equal(t, checks+uint64(len(forged)), v.SignatureChecks(), "only the forged tokens are checked again")
}

// BenchmarkVerifyFirstParallel is BenchmarkVerifyFirst from 16 goroutines
// per core over distinct tokens (the cache is off, so every check pays):
// concurrent first checks share batches (group checking), so ns/op falls
// well below a single check's.
func BenchmarkVerifyFirstParallel(b *testing.B) {
	fx := mainFixture()
	const n = 256
	toks := make([]protocol.Token, n)
	for i := range toks {
		toks[i] = fx.Token(b, "orders-db", uint64(i+1), holder(uint64(i+1)))
	}
	v := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
	var next atomic.Uint64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := v.VerifyFor(toks[next.Add(1)%n], "orders-db"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestVerifyPrepared: a prepared check accepts and refuses exactly what
// VerifyFor does, counts one signature check and fills the cache.
func TestVerifyPrepared(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	tok := fx.Token(t, "orders-db", 9, holder(9))
	p := v.Prepare(tok.Statement)
	forged := tok
	forged.Signature = fx.Token(t, "orders-db", 10, holder(10)).Signature
	require.ErrorIs(t, v.VerifyPrepared(forged, p), verifier.ErrInvalidToken)
	require.NoError(t, v.VerifyPrepared(tok, p))
	require.EqualValues(t, 2, v.SignatureChecks())
	require.NoError(t, v.VerifyPrepared(tok, p), "cached")
	require.EqualValues(t, 2, v.SignatureChecks())
	other := fx.Token(t, "orders-db", 11, holder(11))
	require.NoError(t, v.VerifyPrepared(other, p), "another statement is checked in full")
	wrong := tok
	wrong.Cluster = otherFixture().Cluster.ID
	require.ErrorIs(t, v.VerifyPrepared(wrong, v.Prepare(wrong.Statement)), verifier.ErrWrongCluster)
}
