package bls12381

import (
	"errors"
	"sync"
	"testing"

	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"go.dedis.ch/kyber/v3/sign/bls"
)

func keyPair(t testing.TB, seed string) (*Scalar, []byte) {
	t.Helper()
	x, _ := randomScalar(stream(seed))
	pk, _ := new(G2Point).Mul(x, nil).MarshalBinary()
	return x, pk
}

func TestVerify(t *testing.T) {
	x, pkb := keyPair(t, "verify")
	_, otherPkb := keyPair(t, "verify other")
	pk, err := NewPublicKey(pkb)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("fence 7")
	sig, _ := Sign(x, msg).MarshalBinary()
	if len(sig) != SignatureSize {
		t.Fatalf("signature of %d bytes", len(sig))
	}
	if err := pk.Verify(msg, sig); err != nil {
		t.Fatalf("PublicKey.Verify: %v", err)
	}
	if err := Verify(pkb, msg, sig); err != nil {
		t.Fatalf("Verify: %v", err)
	}

	inf := make([]byte, G1Size)
	inf[0] = 0xc0
	nsg := nonSubgroupG1(t)
	cases := []struct {
		name    string
		pk, msg []byte
		sig     []byte
		want    error
	}{
		{"wrong message", pkb, []byte("fence 8"), sig, ErrInvalidSignature},
		{"wrong key", otherPkb, msg, sig, ErrInvalidSignature},
		{"negated signature", pkb, msg, with(sig, func(b []byte) { b[0] ^= flagSort }), ErrInvalidSignature},
		{"identity signature", pkb, msg, inf, ErrIdentity},
		{"signature outside G1", pkb, msg, nsg[:], ErrNotInSubgroup},
		{"signature with trailing byte", pkb, msg, append(append([]byte(nil), sig...), 0), ErrEncoding},
		{"truncated signature", pkb, msg, sig[:G1Size-1], ErrEncoding},
		{"signature as the hash itself", pkb, msg, HashToG1(msg).p.BytesCompressed(), ErrInvalidSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(c.pk, c.msg, c.sig); !errors.Is(err, c.want) {
				t.Errorf("Verify: %v, want %v", err, c.want)
			}
			k, err := NewPublicKey(c.pk)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Verify(c.msg, c.sig); !errors.Is(err, c.want) {
				t.Errorf("PublicKey.Verify: %v, want %v", err, c.want)
			}
		})
	}

	// The identity key with the identity signature satisfies the pairing
	// equation for every message; both must be refused before pairing.
	g2inf := make([]byte, G2Size)
	g2inf[0] = 0xc0
	if _, err := NewPublicKey(g2inf); !errors.Is(err, ErrIdentity) {
		t.Errorf("NewPublicKey(identity): %v", err)
	}
	if err := Verify(g2inf, msg, inf); !errors.Is(err, ErrIdentity) {
		t.Errorf("Verify(identity, identity): %v", err)
	}
	if _, err := PublicKeyFromPoint(new(G2Point).Null()); !errors.Is(err, ErrIdentity) {
		t.Errorf("PublicKeyFromPoint(identity): %v", err)
	}
	if _, err := PublicKeyFromPoint(new(G1Point).Base()); !errors.Is(err, ErrWrongGroup) {
		t.Errorf("PublicKeyFromPoint(G1 point): %v", err)
	}
	if got := pk.Bytes(); string(got) != string(pkb) {
		t.Error("PublicKey.Bytes")
	}
	if !pk.Point().Equal(new(G2Point).Mul(x, nil)) {
		t.Error("PublicKey.Point")
	}
}

// TestVerifyFixedQLinesReused: gnark v0.22.0's PairingCheckFixedQ scales
// the precomputed lines it is given in place, so reusing them makes the
// next check fail. PublicKey.Verify copies them per call: verifying many
// times, with several messages, concurrently, must keep working and leave
// the key's lines untouched.
func TestVerifyFixedQLinesReused(t *testing.T) {
	x, pkb := keyPair(t, "fixed q")
	pk, err := NewPublicKey(pkb)
	if err != nil {
		t.Fatal(err)
	}
	before := pk.lines
	beforeNeg := negG2Lines()
	msgs := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	sigs := make([][]byte, len(msgs))
	for i, m := range msgs {
		sigs[i], _ = Sign(x, m).MarshalBinary()
	}
	for round := 0; round < 3; round++ {
		for i, m := range msgs {
			if err := pk.Verify(m, sigs[i]); err != nil {
				t.Fatalf("round %d msg %q: %v", round, m, err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			errs <- pk.Verify(msgs[g%3], sigs[g%3])
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Verify: %v", err)
		}
	}
	if pk.lines != before || negG2Lines() != beforeNeg {
		t.Fatal("Verify modified the precomputed lines")
	}

	// The upstream behaviour the copy guards against: the same lines
	// passed twice.
	s, err := gnarkG1(sigs[0])
	if err != nil {
		t.Fatal(err)
	}
	h, _ := gnark.HashToG1(msgs[0], []byte(SignatureDST))
	shared := []lines{negG2Lines(), pk.lines}
	first, err1 := gnark.PairingCheckFixedQ([]gnark.G1Affine{s, h}, shared)
	second, err2 := gnark.PairingCheckFixedQ([]gnark.G1Affine{s, h}, shared)
	if err1 != nil || err2 != nil || !first {
		t.Fatalf("raw PairingCheckFixedQ: %v %v %v", first, err1, err2)
	}
	if second {
		t.Errorf("gnark's PairingCheckFixedQ no longer mutates its lines: the per-call copy in PublicKey.Verify could go")
	}
}

// TestKyberBLSVerifyAcceptsIdentity documents why callers must verify with
// this package: kyber v3's sign/bls.Verify over this suite (whose
// UnmarshalBinary must accept the identity, see the package doc) accepts
// the identity signature under the identity key for any message. Verify
// and NewPublicKey refuse both.
func TestKyberBLSVerifyAcceptsIdentity(t *testing.T) {
	s := NewSuite()
	inf := make([]byte, G1Size)
	inf[0] = 0xc0
	if err := bls.Verify(s, s.G2().Point().Null(), []byte("anything"), inf); err != nil {
		t.Skipf("kyber's bls.Verify now refuses the identity: %v", err)
	}
	g2inf := make([]byte, G2Size)
	g2inf[0] = 0xc0
	if err := Verify(g2inf, []byte("anything"), inf); !errors.Is(err, ErrIdentity) {
		t.Fatalf("Verify(identity, identity): %v", err)
	}
}
