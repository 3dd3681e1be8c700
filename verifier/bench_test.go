package verifier_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/palisade-dev/palisade/verifier"
)

// BenchmarkVerify is one token check: one pairing equation.
func BenchmarkVerify(b *testing.B) {
	fx := mainFixture()
	v := verifier.New(fx.cluster)
	tok := fx.token(b, "orders-db", 5, "client-a")
	b.ResetTimer()
	for b.Loop() {
		if err := v.Verify(tok); err != nil {
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
		err := s.Guard(ctx, "orders-db", epoch, func(tx verifier.Tx) error {
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
