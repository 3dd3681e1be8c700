package bls12381

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

const rfc9380Vectors = "testdata/rfc9380_J.9.1_BLS12381G1_XMD-SHA-256_SSWU_RO_.txt"

type h2cVector struct {
	msg    string
	px, py []byte
}

// readH2CVectors parses the RFC 9380 vector file: "key = value" lines,
// "#" comments, one vector per "msg =" line.
func readH2CVectors(t *testing.T) (suite, dst string, vecs []h2cVector) {
	t.Helper()
	f, err := os.Open(rfc9380Vectors)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "suite":
			suite = v
		case "dst":
			dst = v
		case "msg":
			vecs = append(vecs, h2cVector{msg: v})
		case "P.x":
			vecs[len(vecs)-1].px = mustHex(t, v)
		case "P.y":
			vecs[len(vecs)-1].py = mustHex(t, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return suite, dst, vecs
}

// TestHashToG1RFC9380 checks circl's (signing path) and gnark's
// (verification path) hash_to_G1 against RFC 9380 Appendix J.9.1.
func TestHashToG1RFC9380(t *testing.T) {
	suite, dst, vecs := readH2CVectors(t)
	if suite != "BLS12381G1_XMD:SHA-256_SSWU_RO_" || dst != "QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_" {
		t.Fatalf("unexpected suite %q, dst %q", suite, dst)
	}
	if len(vecs) != 5 {
		t.Fatalf("%d vectors, want 5", len(vecs))
	}
	for _, v := range vecs {
		want := append(append([]byte(nil), v.px...), v.py...)
		if len(want) != 2*fpSize {
			t.Fatalf("msg %.10q: P of %d bytes", v.msg, len(want))
		}
		var c circl.G1
		c.Hash([]byte(v.msg), []byte(dst))
		if got := c.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("circl msg %.10q:\n got %x\nwant %x", v.msg, got, want)
		}
		g, err := gnark.HashToG1([]byte(v.msg), []byte(dst))
		if err != nil {
			t.Fatal(err)
		}
		if got := g.RawBytes(); !bytes.Equal(got[:], want) {
			t.Errorf("gnark msg %.10q:\n got %x\nwant %x", v.msg, got, want)
		}
	}
}

// TestHashToG1SigningDST checks that HashToG1 and G1Point.Hash use
// SignatureDST and that Pick does not.
func TestHashToG1SigningDST(t *testing.T) {
	msg := []byte("fencing token 42")
	var want circl.G1
	want.Hash(msg, []byte("BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"))
	if !HashToG1(msg).p.IsEqual(&want) {
		t.Fatal("HashToG1 does not use the min-sig ciphersuite DST")
	}
	if !new(G1Point).Hash(msg).Equal(&G1Point{p: want}) {
		t.Fatal("G1Point.Hash differs from HashToG1")
	}
	g, err := gnark.HashToG1(msg, []byte(SignatureDST))
	if err != nil {
		t.Fatal(err)
	}
	if gb, cb := g.Bytes(), want.BytesCompressed(); !bytes.Equal(gb[:], cb) {
		t.Fatal("gnark and circl disagree on hash_to_G1")
	}

	// Pick(stream) hashes 64 stream bytes with PickDSTG1 (G2: PickDSTG2).
	var seed [pickSeedBytes]byte
	stream("pick").XORKeyStream(seed[:], seed[:])
	picked := new(G1Point).Pick(stream("pick")).(*G1Point)
	var withPickDST, withSigDST circl.G1
	withPickDST.Hash(seed[:], []byte(PickDSTG1))
	withSigDST.Hash(seed[:], []byte(SignatureDST))
	if !picked.p.IsEqual(&withPickDST) {
		t.Error("G1 Pick does not hash with PickDSTG1")
	}
	if picked.p.IsEqual(&withSigDST) {
		t.Error("G1 Pick hashes with the signing DST")
	}
	picked2 := new(G2Point).Pick(stream("pick")).(*G2Point)
	var withPickDST2 circl.G2
	withPickDST2.Hash(seed[:], []byte(PickDSTG2))
	if !picked2.p.IsEqual(&withPickDST2) {
		t.Error("G2 Pick does not hash with PickDSTG2")
	}
	if PickDSTG1 == SignatureDST || PickDSTG2 == SignatureDST {
		t.Error("a Pick DST equals the signing DST")
	}
}
