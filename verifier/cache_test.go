package verifier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// cacheTestToken is a token whose signature bytes are derived from i; the
// cache itself checks no signature, so these need not verify.
func cacheTestToken(i int) protocol.Token {
	tok := protocol.Token{Statement: protocol.Statement{Resource: "orders-db", Epoch: uint64(i), Holder: protocol.Holder{ID: fmt.Sprintf("client-%d", i), Session: protocol.SessionID{byte(i), byte(i >> 8), 1}}}}
	binary.BigEndian.PutUint64(tok.Signature[:8], uint64(i)*0x9e3779b97f4a7c15)
	tok.Signature[cacheShardByte] = byte(i * 7)
	return tok
}

func TestTokenCacheBounded(t *testing.T) {
	for _, size := range []int{2, 3, 100, 2048, 5000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := newTokenCache(size)
			for i := 0; i < 4*size+50; i++ {
				tok := cacheTestToken(i)
				c.add(&tok)
				require.True(t, c.contains(&tok), "just added %d", i)
				if i%61 == 0 || i < 2*size && size < 200 {
					require.LessOrEqual(t, c.len(), size, "after %d adds", i+1)
				}
			}
			require.LessOrEqual(t, c.len(), size)
			// The oldest entries are evicted.
			first := cacheTestToken(0)
			require.False(t, c.contains(&first))
		})
	}
}

func TestTokenCacheKeepsRecentlyUsed(t *testing.T) {
	c := newTokenCache(8) // one shard, generations of 4
	hot := cacheTestToken(1000)
	c.add(&hot)
	for i := 0; i < 100; i++ {
		tok := cacheTestToken(i)
		c.add(&tok)
		require.True(t, c.contains(&hot), "hot token evicted after %d adds", i+1)
	}
	// Without use it falls out within two generations.
	for i := 100; i < 109; i++ {
		tok := cacheTestToken(i)
		c.add(&tok)
	}
	require.False(t, c.contains(&hot))
}

func TestTokenCacheExactMatch(t *testing.T) {
	c := newTokenCache(16)
	tok := cacheTestToken(1)
	c.add(&tok)
	require.True(t, c.contains(&tok))
	variants := map[string]func(*protocol.Token){
		"epoch":     func(x *protocol.Token) { x.Epoch++ },
		"resource":  func(x *protocol.Token) { x.Resource += "x" },
		"holder":    func(x *protocol.Token) { x.Holder.Session[15] ^= 1 },
		"cluster":   func(x *protocol.Token) { x.Cluster[31] ^= 1 },
		"signature": func(x *protocol.Token) { x.Signature[crypto.SignatureSize-1] ^= 1 },
	}
	for name, change := range variants {
		x := tok
		change(&x)
		require.False(t, c.contains(&x), name)
	}
	// A miss on a same-signature, other-statement token does not evict.
	require.True(t, c.contains(&tok))
}

// TestTokenCacheConcurrent runs under -race.
func TestTokenCacheConcurrent(t *testing.T) {
	c := newTokenCache(4096)
	var wg sync.WaitGroup
	var missing atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				tok := cacheTestToken(g*100000 + i%700)
				if !c.contains(&tok) {
					c.add(&tok)
					if !c.contains(&tok) {
						missing.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, c.len(), 4096)
	require.Positive(t, c.len())
	// Another goroutine may evict a just-added token only by rotating its
	// shard twice in between; with 8 writers and generations of 128 that
	// is rare but possible, so only bound it.
	require.Less(t, missing.Load(), int64(100))
}

// TestVerifyFillsCache checks which checks fill the cache: a token that
// verified, by Verify or VerifyBatch, and nothing that was refused.
func TestVerifyFillsCache(t *testing.T) {
	d := verifiertest.NewDealer("cache-test", 5)
	c := d.Cluster
	issue := func(epoch uint64) protocol.Token { return d.Token(t, "orders-db", epoch, "client-a") }
	v := New(c)
	a, b, e := issue(1), issue(2), issue(3)
	forged := a
	forged.Epoch = 9

	require.Error(t, v.Verify(forged))
	require.Zero(t, v.cache.len())
	require.NoError(t, v.Verify(a))
	require.Equal(t, 1, v.cache.len())

	errs := v.VerifyBatch([]protocol.Token{a, b, forged, e})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], ErrInvalidToken)
	require.NoError(t, errs[3])
	require.Equal(t, 3, v.cache.len())
	for _, tok := range []protocol.Token{a, b, e} {
		require.True(t, v.cache.contains(&tok))
	}
	require.False(t, v.cache.contains(&forged))

	off := New(c, WithCacheSize(0))
	require.Nil(t, off.cache)
	require.NoError(t, off.Verify(a))
	require.Equal(t, []error{nil, ErrInvalidToken}, func() []error {
		errs := off.VerifyBatch([]protocol.Token{a, forged})
		if errs[1] != nil && errors.Is(errs[1], ErrInvalidToken) {
			errs[1] = ErrInvalidToken
		}
		return errs
	}())
}

// TestCacheConsultedBeforeDecoding: the verified-token cache answers before
// the signature is decompressed or checked for the subgroup, and parsing a
// token's text checks only the byte-level rules. To observe the order, the
// test plants a signature outside G1 in the cache, which the verifier
// itself never does (only verified signatures are stored): a check that
// decoded before the lookup would refuse it.
func TestCacheConsultedBeforeDecoding(t *testing.T) {
	d := verifiertest.NewDealer("cache-order", 3)
	v := New(d.Cluster)
	tok := d.Token(t, "orders-db", 1, "client-a")
	tok.Signature = bls12381test.NonSubgroupG1(11)
	require.ErrorIs(t, New(d.Cluster).Verify(tok), crypto.ErrNotInSubgroup, "a fresh check refuses it")

	v.cache.add(&tok)
	require.NoError(t, v.Verify(tok))
	require.NoError(t, v.VerifyFor(tok, "orders-db"))
	got, err := v.ParseAndVerify(tok.String())
	require.NoError(t, err)
	require.Equal(t, tok, got)
	require.Nil(t, v.VerifyBatch([]protocol.Token{tok})[0])
	require.Zero(t, v.SignatureChecks(), "the cache answered every time")
}
