package verifier_test

import (
	"context"
	"encoding/binary"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// BenchmarkVerifyFirst is the first check of a token (the cache is off, so
// every iteration pays it): the field checks, the signature's strict
// decoding (decompression, subgroup check), the hash to G1 and one
// multi-pairing under the group key, which the verifier keeps decoded.
// Goal: at most 0.4 times BenchmarkVerifyFirstBn256, the old bn256 check,
// on one core (go test -bench VerifyFirst -cpu 1 runs both).
func BenchmarkVerifyFirst(b *testing.B) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
	tok := fx.Token(b, "orders-db", 5, "client-a")
	b.ResetTimer()
	cpu := startCPU()
	for b.Loop() {
		if err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkVerifyCached is a token presented again: the verified-token
// cache answers instead of the pairing. Goal: at least 1,000,000 checks per
// second on one core (go test -bench VerifyCached -cpu 1), i.e. at most
// 1 µs/op.
func BenchmarkVerifyCached(b *testing.B) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	tok := fx.Token(b, "orders-db", 5, "client-a")
	if err := v.Verify(tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for b.Loop() {
		if err := v.VerifyFor(tok, "orders-db"); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkVerifyCachedParallel is BenchmarkVerifyCached from all cores
// over many tokens (the cache is sharded).
func BenchmarkVerifyCachedParallel(b *testing.B) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	var toks []protocol.Token
	for epoch := uint64(1); epoch <= 32; epoch++ {
		tok := fx.Token(b, "orders-db", epoch, holder(epoch))
		if err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
		toks = append(toks, tok)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := v.Verify(toks[i%len(toks)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkParseAndVerifyCached is a repeated token as it arrives in a
// header: parsing the text (base64, the fields and the signature's
// byte-level rules; no decompression) dominates, the cache answers the
// signature check.
func BenchmarkParseAndVerifyCached(b *testing.B) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	text := fx.Token(b, "orders-db", 5, "client-a").String()
	if _, err := v.ParseAndVerify(text); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.ParseAndVerify(text); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch verifies n new tokens per iteration in one VerifyBatch call
// (the cache is off, so each iteration pays the batch check) and reports
// the time per token.
func benchBatch(b *testing.B, n int) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
	toks := make([]protocol.Token, n)
	for i := range toks {
		toks[i] = fx.Token(b, "orders-db", uint64(i+1), holder(uint64(i+1)))
	}
	b.ResetTimer()
	for b.Loop() {
		for i, err := range v.VerifyBatch(toks) {
			if err != nil {
				b.Fatal(i, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/token")
}

// BenchmarkVerifyBatch10 is batch verification of 10 new tokens.
func BenchmarkVerifyBatch10(b *testing.B) { benchBatch(b, 10) }

// BenchmarkVerifyBatch100 is batch verification of 100 new tokens.
func BenchmarkVerifyBatch100(b *testing.B) { benchBatch(b, 100) }

// BenchmarkVerifyRequest is a request in proof mode with a cached token:
// the Ed25519 check of the holder's proof and the replay record.
func BenchmarkVerifyRequest(b *testing.B) {
	p := newPopFixture(b, pop.Config{MaxNonces: b.N + 1, Window: time.Hour})
	req := pop.NewRequest(http.MethodPut, "/orders-db", []byte("value"))
	proofs := make([]pop.Proof, b.N)
	for i := range proofs {
		proofs[i] = p.prove(p.tok, req, p.key, 0)
	}
	if err := p.v.Verify(p.tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.v.VerifyRequest(p.tok, "orders-db", req, proofs[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGuard raises the barrier and writes one small value per operation,
// the worst case of a guarded write.
func benchGuard(b *testing.B, s verifier.BarrierStore) {
	defer s.Close()
	ctx := context.Background()
	var epoch uint64
	for b.Loop() {
		epoch++
		err := s.Guard(ctx, admit("orders-db", epoch), func(tx verifier.Tx) error {
			return tx.Put("row", binary.BigEndian.AppendUint64(nil, epoch))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardBolt includes bbolt's fsync on every commit.
func BenchmarkGuardBolt(b *testing.B) {
	s, err := verifier.OpenBoltStore(filepath.Join(b.TempDir(), "barriers.db"))
	if err != nil {
		b.Fatal(err)
	}
	benchGuard(b, s)
}

// BenchmarkGuardMemory is the cost of the store logic alone.
func BenchmarkGuardMemory(b *testing.B) {
	benchGuard(b, verifier.NewMemoryStore())
}
