package bls12381

import (
	"testing"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing"
	"go.dedis.ch/kyber/v3/util/test"
)

// kyber v3's own conformance tests (go.dedis.ch/kyber/v3/util/test):
// SuiteTest runs the hash, XOF and key-pair checks and then GroupTest
// (arithmetic laws, Pick, Embed/Data, encoding round trips including the
// identity, Set/Clone independence).

func TestKyberSuiteG1(t *testing.T) { test.SuiteTest(t, NewSuiteG1()) }

func TestKyberSuiteG2(t *testing.T) { test.SuiteTest(t, NewSuiteG2()) }

func TestKyberGroupGT(t *testing.T) { test.GroupTest(t, NewSuite().GT()) }

var _ pairing.Suite = NewSuite()

// TestPairingBilinear checks e(a·P, b·Q) = e(P, Q)^(ab) = e(ab·P, Q) and
// non-degeneracy through the kyber interface.
func TestPairingBilinear(t *testing.T) {
	s := NewSuite()
	rnd := stream("bilinear")
	a := s.G1().Scalar().Pick(rnd)
	b := s.G2().Scalar().Pick(rnd)
	P := s.G1().Point().Pick(rnd)
	Q := s.G2().Point().Pick(rnd)
	ab := s.G1().Scalar().Mul(a, b)

	left := s.Pair(s.G1().Point().Mul(a, P), s.G2().Point().Mul(b, Q))
	right := s.GT().Point().Mul(ab, s.Pair(P, Q))
	if !left.Equal(right) {
		t.Fatal("e(aP, bQ) != e(P, Q)^(ab)")
	}
	if !left.Equal(s.Pair(s.G1().Point().Mul(ab, P), Q)) {
		t.Fatal("e(aP, bQ) != e(abP, Q)")
	}
	if s.Pair(P, Q).Equal(s.GT().Point().Null()) {
		t.Fatal("degenerate pairing")
	}
	if !s.Pair(s.G1().Point().Base(), s.G2().Point().Base()).Equal(s.GT().Point().Base()) {
		t.Fatal("GT base is not e(g1, g2)")
	}
	// additive notation of GT: e(P, Q) + e(P, Q) = e(2P, Q); Sub and Neg.
	e := s.Pair(P, Q)
	two := s.G1().Scalar().SetInt64(2)
	if !s.GT().Point().Add(e, e).Equal(s.Pair(s.G1().Point().Mul(two, P), Q)) {
		t.Fatal("GT Add")
	}
	if !s.GT().Point().Sub(e, e).Equal(s.GT().Point().Null()) ||
		!s.GT().Point().Add(e, s.GT().Point().Neg(e)).Equal(s.GT().Point().Null()) {
		t.Fatal("GT Sub/Neg")
	}
}

// TestOrderAnnihilates checks r·P = O in G1, G2 and GT for picked
// elements, computed as (r-1)·P + P since scalars are reduced mod r.
func TestOrderAnnihilates(t *testing.T) {
	s := NewSuite()
	rm1 := s.G1().Scalar().SetInt64(-1)
	for _, g := range []kyber.Group{s.G1(), s.G2(), s.GT()} {
		p := g.Point().Pick(stream("order " + g.String()))
		q := g.Point().Mul(rm1, p)
		q.Add(q, p)
		if !q.Equal(g.Point().Null()) {
			t.Errorf("%s: r·P != O", g)
		}
	}
}

// TestEncodingFactory checks the kyber.Encoding of the suites.
func TestEncodingFactory(t *testing.T) {
	s := NewSuiteG2()
	var buf writeBuf
	p := s.Point().Pick(stream("enc"))
	x := s.Scalar().Pick(stream("enc"))
	if err := s.Write(&buf, p, x); err != nil {
		t.Fatal(err)
	}
	if len(buf) != G2Size+ScalarSize {
		t.Fatalf("encoded %d bytes", len(buf))
	}
	var p2 kyber.Point
	var x2 kyber.Scalar
	r := readBuf(buf)
	if err := s.Read(&r, &p2, &x2); err != nil {
		t.Fatal(err)
	}
	if !p2.Equal(p) || !x2.Equal(x) {
		t.Fatal("Read/Write round trip")
	}
}

type writeBuf []byte

func (w *writeBuf) Write(b []byte) (int, error) { *w = append(*w, b...); return len(b), nil }

type readBuf []byte

func (r *readBuf) Read(b []byte) (int, error) {
	n := copy(b, *r)
	*r = (*r)[n:]
	return n, nil
}
