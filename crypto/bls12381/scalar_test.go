package bls12381

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"testing"

	"go.dedis.ch/kyber/v3"
)

func scalarBig(t *testing.T, s *Scalar) *big.Int {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil || len(b) != ScalarSize {
		t.Fatalf("MarshalBinary: %d bytes, %v", len(b), err)
	}
	return new(big.Int).SetBytes(b)
}

func TestScalarOrderConstant(t *testing.T) {
	// r = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
	want, _ := new(big.Int).SetString("73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001", 16)
	if bigR.Cmp(want) != 0 {
		t.Fatal("scalarOrder is not r")
	}
	if !bigR.ProbablyPrime(20) || !bigP.ProbablyPrime(20) {
		t.Fatal("r or p not prime")
	}
}

// TestScalarArithmetic checks every operation against math/big.
func TestScalarArithmetic(t *testing.T) {
	rnd := stream("scalar arithmetic")
	mod := func(x *big.Int) *big.Int { return x.Mod(x, bigR) }
	for i := 0; i < 200; i++ {
		a, ab := randomScalar(rnd)
		b, bb := randomScalar(rnd)
		check := func(op string, got kyber.Scalar, want *big.Int) {
			t.Helper()
			if g := scalarBig(t, got.(*Scalar)); g.Cmp(want) != 0 {
				t.Fatalf("%s: got %x, want %x", op, g, want)
			}
		}
		check("add", new(Scalar).Add(a, b), mod(new(big.Int).Add(ab, bb)))
		check("sub", new(Scalar).Sub(a, b), mod(new(big.Int).Sub(ab, bb)))
		check("neg", new(Scalar).Neg(a), mod(new(big.Int).Neg(ab)))
		check("mul", new(Scalar).Mul(a, b), mod(new(big.Int).Mul(ab, bb)))
		check("inv", new(Scalar).Inv(b), new(big.Int).ModInverse(bb, bigR))
		check("div", new(Scalar).Div(a, b), mod(new(big.Int).Mul(ab, new(big.Int).ModInverse(bb, bigR))))
		// aliasing: the receiver is an operand
		c := a.Clone()
		check("div aliased", c.Div(c, b), mod(new(big.Int).Mul(ab, new(big.Int).ModInverse(bb, bigR))))
	}
	check := func(op string, got *Scalar, want *big.Int) {
		t.Helper()
		if g := scalarBig(t, got); g.Cmp(want) != 0 {
			t.Fatalf("%s: got %x, want %x", op, g, want)
		}
	}
	rm1 := new(big.Int).Sub(bigR, big.NewInt(1))
	check("SetInt64(-1)", new(Scalar).SetInt64(-1).(*Scalar), rm1)
	check("SetInt64(MaxInt64)", new(Scalar).SetInt64(math.MaxInt64).(*Scalar), big.NewInt(math.MaxInt64))
	check("SetInt64(MinInt64)", new(Scalar).SetInt64(math.MinInt64).(*Scalar), mod(big.NewInt(math.MinInt64)))
	check("One", new(Scalar).One().(*Scalar), big.NewInt(1))
	check("Zero", new(Scalar).One().Zero().(*Scalar), big.NewInt(0))
	check("Inv(0)", new(Scalar).Inv(new(Scalar).Zero()).(*Scalar), big.NewInt(0))
}

// TestScalarSetBytes checks the reduction of byte strings of every length
// from 0 to 100 against math/big.
func TestScalarSetBytes(t *testing.T) {
	rnd := stream("setbytes")
	for n := 0; n <= 100; n++ {
		for _, fill := range []byte{0x00, 0xff, 0x01} {
			b := bytes.Repeat([]byte{fill}, n)
			if fill == 0x01 {
				rnd.XORKeyStream(b, b)
			}
			want := new(big.Int).Mod(new(big.Int).SetBytes(b), bigR)
			if got := scalarBig(t, new(Scalar).SetBytes(b).(*Scalar)); got.Cmp(want) != 0 {
				t.Fatalf("len %d fill %x: got %x, want %x", n, fill, got, want)
			}
		}
	}
	// r itself reduces to zero, r+5 to 5.
	if got := scalarBig(t, new(Scalar).SetBytes(bigR.Bytes()).(*Scalar)); got.Sign() != 0 {
		t.Fatalf("SetBytes(r) = %x", got)
	}
}

// TestScalarUnmarshalStrict checks that only 32-byte big-endian values
// below r decode, and that a failed decode leaves the scalar unchanged.
func TestScalarUnmarshalStrict(t *testing.T) {
	enc := func(x *big.Int) []byte { return x.FillBytes(make([]byte, ScalarSize)) }
	rm1 := new(big.Int).Sub(bigR, big.NewInt(1))
	ok := [][]byte{enc(big.NewInt(0)), enc(big.NewInt(1)), enc(rm1), enc(new(big.Int).Rsh(bigR, 1))}
	for _, b := range ok {
		var s Scalar
		if err := s.UnmarshalBinary(b); err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		if got, _ := s.MarshalBinary(); !bytes.Equal(got, b) {
			t.Fatalf("%x re-encodes to %x", b, got)
		}
	}
	max := bytes.Repeat([]byte{0xff}, ScalarSize)
	bad := [][]byte{
		enc(bigR), enc(new(big.Int).Add(bigR, big.NewInt(1))), max,
		enc(new(big.Int).Add(bigR, new(big.Int).Lsh(big.NewInt(1), 8))), // differs from r in byte 30 only
		nil, make([]byte, 31), make([]byte, 33), append(enc(big.NewInt(1)), 0),
	}
	for _, b := range bad {
		s := new(Scalar).SetInt64(7).(*Scalar)
		if err := s.UnmarshalBinary(b); !errors.Is(err, ErrEncoding) {
			t.Fatalf("%x: error %v, want ErrEncoding", b, err)
		}
		if !s.Equal(new(Scalar).SetInt64(7)) {
			t.Fatalf("%x: failed decode changed the scalar", b)
		}
	}
	// lessThanOrder agrees with math/big around r.
	for d := int64(-300); d <= 300; d++ {
		x := new(big.Int).Add(bigR, big.NewInt(d))
		if got, want := lessThanOrder(enc(x)), x.Cmp(bigR) < 0; got != want {
			t.Fatalf("lessThanOrder(r%+d) = %v", d, got)
		}
	}
}

// TestScalarPick checks that Pick consumes 64 stream bytes and reduces
// them modulo r.
func TestScalarPick(t *testing.T) {
	var buf [pickBytes]byte
	stream("pick scalar").XORKeyStream(buf[:], buf[:])
	want := new(big.Int).Mod(new(big.Int).SetBytes(buf[:]), bigR)
	if got := scalarBig(t, new(Scalar).Pick(stream("pick scalar")).(*Scalar)); got.Cmp(want) != 0 {
		t.Fatalf("Pick = %x, want %x", got, want)
	}
}
