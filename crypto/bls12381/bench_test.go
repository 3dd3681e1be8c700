package bls12381

import (
	"testing"

	"go.dedis.ch/kyber/v3/share"
)

// Run with a bounded count, e.g.
//
//	go test ./crypto/bls12381/ -run '^$' -bench . -benchtime 200x

// BenchmarkVerify: one signature check with a predecoded key: strict
// decoding of the signature (with the G1 subgroup check), hash_to_G1 and
// one multi-pairing with precomputed lines, all with gnark.
func BenchmarkVerify(b *testing.B) {
	x, pkb := keyPair(b, "bench verify")
	pk, err := NewPublicKey(pkb)
	if err != nil {
		b.Fatal(err)
	}
	msg := []byte("palisade fencing token 1234567")
	sig, _ := Sign(x, msg).MarshalBinary()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := pk.Verify(msg, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyDecodeKey is Verify with the key decoded (and checked)
// on every call and no precomputed lines: gnark's PairingCheck.
func BenchmarkVerifyDecodeKey(b *testing.B) {
	x, pkb := keyPair(b, "bench verify")
	msg := []byte("palisade fencing token 1234567")
	sig, _ := Sign(x, msg).MarshalBinary()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Verify(pkb, msg, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignPartial: a partial signature on the constant-time circl
// path, hash_to_G1 and one scalar multiplication, plus its encoding.
func BenchmarkSignPartial(b *testing.B) {
	x, _ := randomScalar(stream("bench sign"))
	sh := &share.PriShare{I: 3, V: x}
	msg := []byte("palisade fencing token 1234567")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := SignShare(sh, msg).V.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeG1: strict decoding of a signature with circl (DecodeG1,
// for partials to combine), subgroup check included.
func BenchmarkDecodeG1(b *testing.B) {
	sig, _ := Sign(new(Scalar).SetInt64(99), []byte("m")).MarshalBinary()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeG1(sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeG1Gnark: the same strict decoding on the verification
// path (gnark).
func BenchmarkDecodeG1Gnark(b *testing.B) {
	sig, _ := Sign(new(Scalar).SetInt64(99), []byte("m")).MarshalBinary()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := gnarkG1(sig); err != nil {
			b.Fatal(err)
		}
	}
}
