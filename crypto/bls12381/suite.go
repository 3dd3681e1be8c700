package bls12381

import (
	"crypto/cipher"
	"crypto/sha256"
	"hash"
	"io"
	"reflect"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	"go.dedis.ch/fixbuf"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing"
	"go.dedis.ch/kyber/v3/util/random"
	"go.dedis.ch/kyber/v3/xof/blake2xb"
)

// group implements kyber.Group for G1, G2 and GT.
type group struct {
	name     string
	pointLen int
	newPoint func() kyber.Point
}

var (
	g1Group = &group{name: "bls12-381.G1", pointLen: G1Size, newPoint: func() kyber.Point { return new(G1Point).Null() }}
	g2Group = &group{name: "bls12-381.G2", pointLen: G2Size, newPoint: func() kyber.Point { return new(G2Point).Null() }}
	gtGroup = &group{name: "bls12-381.GT", pointLen: GTSize, newPoint: func() kyber.Point { return new(GTPoint).Null() }}
)

// String returns the group's name.
func (g *group) String() string { return g.name }

// ScalarLen returns ScalarSize.
func (g *group) ScalarLen() int { return ScalarSize }

// Scalar returns a new scalar set to zero.
func (g *group) Scalar() kyber.Scalar { return new(Scalar).Zero() }

// PointLen returns the size of the group's point encoding.
func (g *group) PointLen() int { return g.pointLen }

// Point returns a new point set to the identity.
func (g *group) Point() kyber.Point { return g.newPoint() }

// The kyber interface types, for Encoding.New.
var (
	tScalar  = reflect.TypeOf((*kyber.Scalar)(nil)).Elem()
	tPoint   = reflect.TypeOf((*kyber.Point)(nil)).Elem()
	tG1Point = reflect.TypeOf(G1Point{})
	tG2Point = reflect.TypeOf(G2Point{})
	tGTPoint = reflect.TypeOf(GTPoint{})
)

// common holds what the pairing suite and the single-group suites share:
// SHA-256 as kyber.HashFactory, BLAKE2Xb as kyber.XOFFactory (as kyber's
// bn256 suite), crypto/rand as kyber.Random, fixbuf as kyber.Encoding.
type common struct {
	// group answers Encoding.New for kyber.Point; nil in the pairing suite,
	// where a bare kyber.Point is ambiguous.
	group kyber.Group
}

// Hash returns a new SHA-256 hash.
func (c common) Hash() hash.Hash { return sha256.New() }

// XOF returns a new BLAKE2Xb XOF keyed with seed.
func (c common) XOF(seed []byte) kyber.XOF { return blake2xb.New(seed) }

// RandomStream returns a cipher.Stream of crypto/rand bytes.
func (c common) RandomStream() cipher.Stream { return random.New() }

// New returns a new kyber.Scalar, kyber.Point or concrete point of type t.
// A bare kyber.Point is only defined in a single-group suite; in the
// pairing suite New panics on it, as kyber's bn256 does.
func (c common) New(t reflect.Type) interface{} {
	switch t {
	case tScalar:
		return new(Scalar).Zero()
	case tPoint:
		if c.group == nil {
			panic("bls12381: kyber.Point is ambiguous in the pairing suite; use NewSuiteG1 or NewSuiteG2")
		}
		return c.group.Point()
	case tG1Point:
		return new(G1Point).Null()
	case tG2Point:
		return new(G2Point).Null()
	case tGTPoint:
		return new(GTPoint).Null()
	}
	return nil
}

// Read decodes objs from r with kyber's fixbuf encoding.
func (c common) Read(r io.Reader, objs ...interface{}) error { return fixbuf.Read(r, c, objs...) }

// Write encodes objs to w with kyber's fixbuf encoding.
func (c common) Write(w io.Writer, objs ...interface{}) error { return fixbuf.Write(w, objs) }

// Suite is the BLS12-381 pairing suite, circl-backed: it implements kyber
// v3's pairing.Suite. Its groups share the scalar type Scalar.
type Suite struct{ common }

var _ pairing.Suite = (*Suite)(nil)

// NewSuite returns the BLS12-381 pairing suite.
func NewSuite() *Suite { return &Suite{} }

// G1 returns G1, the group of signatures (48-byte points).
func (s *Suite) G1() kyber.Group { return g1Group }

// G2 returns G2, the group of public keys (96-byte points).
func (s *Suite) G2() kyber.Group { return g2Group }

// GT returns GT, the target group of the pairing.
func (s *Suite) GT() kyber.Group { return gtGroup }

// Pair returns e(p1, p2) for p1 in G1 and p2 in G2, computed by circl.
func (s *Suite) Pair(p1, p2 kyber.Point) kyber.Point {
	return &GTPoint{v: *circl.Pair(&toG1(p1).p, &toG2(p2).p)}
}

// String returns the suite's name.
func (s *Suite) String() string { return "bls12-381" }

// GroupSuite is a single group of the pairing with the suite's hash, XOF,
// randomness and encoding: what kyber's share/vss, share/dkg/pedersen,
// sign/schnorr and util/key take as their Suite. Run the DKG of a min-sig
// scheme over NewSuiteG2.
type GroupSuite struct {
	kyber.Group
	common
}

// NewSuiteG1 returns the suite of group G1.
func NewSuiteG1() *GroupSuite { return &GroupSuite{Group: g1Group, common: common{group: g1Group}} }

// NewSuiteG2 returns the suite of group G2, the group of public keys.
func NewSuiteG2() *GroupSuite { return &GroupSuite{Group: g2Group, common: common{group: g2Group}} }

// String returns the group's name.
func (s *GroupSuite) String() string { return s.Group.String() }
