package verifier_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing/bn256"
)

// The reference for BenchmarkVerifyFirst: the check the verifier ran
// before the move to BLS12-381 (token format version 2), rebuilt here for
// measurement only, on kyber v3's bn256 as it was. Nothing outside this
// file uses it.

// bn256Domain is the prefix the old crypto package put before every
// message it hashed to G1 (its HashDomain).
const bn256Domain = "palisade/bls-bn256/v1\x00"

var bn256Suite = bn256.NewSuite()

// bn256Hash is kyber's bn256 hash to G1 (try-and-increment) of the
// domain-prefixed message, as the old code signed and verified.
func bn256Hash(msg []byte) kyber.Point {
	m := append([]byte(bn256Domain), msg...)
	return bn256Suite.G1().Point().(interface{ Hash([]byte) kyber.Point }).Hash(m)
}

// bn256Check is the old token check under a group key decoded once: the
// signature's strict decoding (unmarshal, re-marshal to the same bytes,
// not the identity), the hash to G1, and two pairings compared,
// e(H(m), X) == e(σ, g2). The old verifier also decoded the key on every
// check, and ran the second pairing on another goroutine: the first makes
// this reference, if anything, cheaper than the old check; the second
// moved the same CPU to another core.
func bn256Check(key kyber.Point, msg, sig []byte) error {
	s := bn256Suite.G1().Point()
	if err := s.UnmarshalBinary(sig); err != nil {
		return err
	}
	again, err := s.MarshalBinary()
	if err != nil || !bytes.Equal(again, sig) || s.Equal(bn256Suite.G1().Point().Null()) {
		return errors.New("non-canonical signature")
	}
	left := bn256Suite.Pair(bn256Hash(msg), key)
	right := bn256Suite.Pair(s, bn256Suite.G2().Point().Base())
	if !left.Equal(right) {
		return errors.New("invalid signature")
	}
	return nil
}

// BenchmarkVerifyFirstBn256 is BenchmarkVerifyFirst's reference: the same
// statement checked as the old verifier did, on bn256. Run both side by
// side on one core:
//
//	go test ./verifier -run '^$' -bench 'VerifyFirst' -cpu 1
func BenchmarkVerifyFirstBn256(b *testing.B) {
	fx := mainFixture()
	tok := fx.Token(b, "orders-db", 5, "client-a")
	seed := sha256.Sum256([]byte("bn256 reference key"))
	x := bn256Suite.G2().Scalar().SetBytes(seed[:])
	key := bn256Suite.G2().Point().Mul(x, nil)
	sig, err := bn256Suite.G1().Point().Mul(x, bn256Hash(tok.Statement.SignedBytes())).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	st := tok.Statement
	if err := bn256Check(key, st.SignedBytes(), sig); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := startCPU()
	for b.Loop() {
		if err := st.Validate(); err != nil {
			b.Fatal(err)
		}
		if err := bn256Check(key, st.SignedBytes(), sig); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// TestBn256ReferenceCheck: the reference accepts its signature and refuses
// it over another statement, so that it measures a real check.
func TestBn256ReferenceCheck(t *testing.T) {
	st := mainFixture().Token(t, "orders-db", 5, "client-a").Statement
	x := bn256Suite.G2().Scalar().SetInt64(12345)
	key := bn256Suite.G2().Point().Mul(x, nil)
	sig, err := bn256Suite.G1().Point().Mul(x, bn256Hash(st.SignedBytes())).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := bn256Check(key, st.SignedBytes(), sig); err != nil {
		t.Fatal(err)
	}
	other := st
	other.Epoch++
	if bn256Check(key, other.SignedBytes(), sig) == nil {
		t.Fatal("a signature over another statement verified")
	}
}

// cpuMeter reports a benchmark's CPU time per operation (metric
// "cpu-ns/op", the whole process's user and system time, garbage
// collection included) beside its wall-clock ns/op. On one core (-cpu 1)
// the two agree on an idle machine; on a busy one the CPU time is the
// figure that compares, as other processes inflate the wall clock.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

// startCPU starts measuring; call it right before the benchmark loop.
func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report adds the metric for the b.N operations since startCPU.
func (m cpuMeter) report(b *testing.B) {
	end, ok := processCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(end-m.start)/float64(b.N), "cpu-ns/op")
}
