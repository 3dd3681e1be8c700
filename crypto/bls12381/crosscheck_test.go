package bls12381

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

// The signing path (circl) and the verification path (gnark) must agree
// byte for byte: on point encodings, on hash_to_G1 and on signatures.

// TestCrossEncodings compares circl's and gnark's compressed and
// uncompressed encodings of k·g1 and k·g2 for random and small k, which
// exercises both values of the sort flag, and the identity.
func TestCrossEncodings(t *testing.T) {
	_, _, g1, g2 := gnark.Generators()
	rnd := stream("cross encodings")
	sortFlags := map[byte]int{}
	for i := 0; i < 40; i++ {
		var k *Scalar
		var kb *big.Int
		if i < 8 {
			k = new(Scalar).SetInt64(int64(i)).(*Scalar) // includes 0: the identity
			kb = big.NewInt(int64(i))
		} else {
			k, kb = randomScalar(rnd)
		}
		var c1 G1Point
		c1.Mul(k, nil)
		var n1 gnark.G1Affine
		n1.ScalarMultiplication(&g1, kb)
		cb, nb := c1.p.BytesCompressed(), n1.Bytes()
		if !bytes.Equal(cb, nb[:]) {
			t.Fatalf("G1 k=%s compressed: circl %x, gnark %x", k, cb, nb)
		}
		if cu, nu := c1.p.Bytes(), n1.RawBytes(); !bytes.Equal(cu, nu[:]) {
			t.Fatalf("G1 k=%s uncompressed: circl %x, gnark %x", k, cu, nu)
		}
		sortFlags[cb[0]&flagMask]++

		var c2 G2Point
		c2.Mul(k, nil)
		var n2 gnark.G2Affine
		n2.ScalarMultiplication(&g2, kb)
		cb2, nb2 := c2.p.BytesCompressed(), n2.Bytes()
		if !bytes.Equal(cb2, nb2[:]) {
			t.Fatalf("G2 k=%s compressed: circl %x, gnark %x", k, cb2, nb2)
		}
		if cu, nu := c2.p.Bytes(), n2.RawBytes(); !bytes.Equal(cu, nu[:]) {
			t.Fatalf("G2 k=%s uncompressed: circl %x, gnark %x", k, cu, nu)
		}
	}
	if sortFlags[flagCompressed] == 0 || sortFlags[flagCompressed|flagSort] == 0 || sortFlags[flagCompressed|flagInfinity] == 0 {
		t.Fatalf("flag combinations not all exercised: %v", sortFlags)
	}
}

// TestCrossHashAndSign compares hash_to_G1 (signing DST) and signatures of
// the two libraries, then verifies each library's signature with the other.
func TestCrossHashAndSign(t *testing.T) {
	s := NewSuite()
	rnd := stream("cross sign")
	_, _, _, g2 := gnark.Generators()
	for i := 0; i < 10; i++ {
		msg := []byte(fmt.Sprintf("token %d", i))
		if i == 0 {
			msg = nil
		}
		x, xb := randomScalar(rnd)

		// hash_to_G1
		ch := HashToG1(msg)
		nh, err := gnark.HashToG1(msg, []byte(SignatureDST))
		if err != nil {
			t.Fatal(err)
		}
		nhb := nh.Bytes()
		if !bytes.Equal(ch.p.BytesCompressed(), nhb[:]) {
			t.Fatalf("hash_to_G1(%q): circl %x, gnark %x", msg, ch.p.BytesCompressed(), nhb)
		}

		// signatures: circl x·H(m) (constant time) and gnark x·H(m)
		csig, _ := Sign(x, msg).MarshalBinary()
		var nsigP gnark.G1Affine
		nsigP.ScalarMultiplication(&nh, xb)
		nsig := nsigP.Bytes()
		if !bytes.Equal(csig, nsig[:]) {
			t.Fatalf("signature of %q: circl %x, gnark %x", msg, csig, nsig)
		}

		// public keys
		cpk, _ := s.G2().Point().Mul(x, nil).MarshalBinary()
		var npkP gnark.G2Affine
		npkP.ScalarMultiplication(&g2, xb)
		npk := npkP.Bytes()
		if !bytes.Equal(cpk, npk[:]) {
			t.Fatalf("public key: circl %x, gnark %x", cpk, npk)
		}

		// circl signature, gnark verification
		pk, err := NewPublicKey(cpk)
		if err != nil {
			t.Fatal(err)
		}
		if err := pk.Verify(msg, csig); err != nil {
			t.Fatalf("circl signature on the gnark path: %v", err)
		}
		// gnark signature, circl verification: e(sig, g2) = e(H(m), pk)
		sigPt, err := DecodeG1(nsig[:])
		if err != nil {
			t.Fatal(err)
		}
		pkPt, err := DecodeG2(npk[:])
		if err != nil {
			t.Fatal(err)
		}
		if !s.Pair(sigPt, s.G2().Point().Base()).Equal(s.Pair(HashToG1(msg), pkPt)) {
			t.Fatalf("gnark signature fails the circl pairing check")
		}
	}
}

// TestCrossGT compares circl's and gnark's pairing of the generators, which
// also pins the shared GT byte layout that GTPoint.UnmarshalBinary relies
// on.
func TestCrossGT(t *testing.T) {
	_, _, g1, g2 := gnark.Generators()
	ne, err := gnark.Pair([]gnark.G1Affine{g1}, []gnark.G2Affine{g2})
	if err != nil {
		t.Fatal(err)
	}
	ce, _ := circl.Pair(circl.G1Generator(), circl.G2Generator()).MarshalBinary()
	nb := ne.Bytes()
	if !bytes.Equal(ce, nb[:]) {
		t.Fatalf("e(g1, g2) differs:\ncircl %x\ngnark %x", ce[:48], nb[:48])
	}
}
