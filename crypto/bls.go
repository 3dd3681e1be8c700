// Package crypto implements Palisade's threshold BLS signatures on kyber v3's
// bn256 pairing suite: dealer key generation for testnets, partial signing,
// optimistic combination and verification.
//
// The package defends against kyber's known pitfalls:
//   - hash-to-G1 has no domain separation, so every message is prefixed with
//     HashDomain before hashing (callers add their own tag, version and cluster
//     ID on top, see package protocol);
//   - signatures are malleable (a coordinate x+p still decodes), so every
//     point is decoded strictly: exact length, coordinates below p, not the
//     identity. Callers must still never key a cache on raw signature bytes
//     they did not decode through this package;
//   - G2 points get no subgroup check, so group keys must come only from
//     trusted files (cluster.json, DKG output), never from the network;
//   - kyber's PriShare.String prints the secret, so Share hides its scalar
//     from every fmt verb.
//
// There is no networking here.
package crypto

import (
	"bytes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing/bn256"
	"go.dedis.ch/kyber/v3/share"
)

const (
	// SignatureSize is the size of a (partial or full) BLS signature: an
	// uncompressed bn256 G1 point.
	SignatureSize = 64
	// PartialSize is the encoded size of a PartialSig: a 2-byte big-endian
	// share index followed by the signature.
	PartialSize = 2 + SignatureSize
	// PublicKeySize is the size of a public key: an uncompressed G2 point.
	PublicKeySize = 128
	// ScalarSize is the size of an encoded secret scalar.
	ScalarSize = 32
	// ShareSize is the encoded size of a Share: index then scalar.
	ShareSize = 2 + ScalarSize
	// MaxNodes bounds N so that an index fits the 2-byte wire field.
	MaxNodes = 1024
	// HashDomain is prefixed to every message before hash-to-G1, because
	// kyber's bn256 hash has no domain separation of its own.
	HashDomain = "palisade/bls-bn256/v1\x00"
)

// Errors callers can branch on.
var (
	// ErrInvalidSignature reports a signature or partial that does not verify.
	ErrInvalidSignature = errors.New("crypto: invalid signature")
	// ErrMalformedPoint reports bytes that are not the canonical encoding of a
	// curve point (wrong length, coordinate not below p, not on the curve, or
	// the identity).
	ErrMalformedPoint = errors.New("crypto: malformed point encoding")
	// ErrBadIndex reports a share index outside 1..N.
	ErrBadIndex = errors.New("crypto: share index out of range")
	// ErrNotEnoughPartials reports fewer than t valid partial signatures.
	ErrNotEnoughPartials = errors.New("crypto: not enough valid partial signatures")
	// ErrBadParameters reports an impossible (n, t) pair.
	ErrBadParameters = errors.New("crypto: bad threshold parameters")
)

var suite = bn256.NewSuite()

// Signature is a full (group) BLS signature in canonical encoding.
type Signature [SignatureSize]byte

// Equal reports whether two signatures are the same bytes. Signatures
// produced or parsed by this package are canonical, so equal bytes means
// equal points.
func (s Signature) Equal(o Signature) bool { return s == o }

// ParseSignature decodes a full signature strictly: exact length, canonical
// coordinates, a point on the curve other than the identity.
func ParseSignature(b []byte) (Signature, error) {
	var s Signature
	if _, err := decodeG1(b); err != nil {
		return s, err
	}
	copy(s[:], b)
	return s, nil
}

// PartialSig is one node's signature share over a message.
type PartialSig struct {
	// Index is the signer's share index, 1..N.
	Index int
	// Sig is the signer's partial signature.
	Sig Signature
}

// Marshal returns the 66-byte wire form: big-endian uint16 index, signature.
func (p PartialSig) Marshal() []byte {
	out := make([]byte, PartialSize)
	out[0] = byte(p.Index >> 8)
	out[1] = byte(p.Index)
	copy(out[2:], p.Sig[:])
	return out
}

// Equal reports whether two partials carry the same index and signature.
func (p PartialSig) Equal(o PartialSig) bool { return p.Index == o.Index && p.Sig == o.Sig }

// ParsePartial decodes the wire form of a partial signature. It checks the
// encoding only (index at least 1, canonical point); membership of the index
// and validity of the signature are checked by GroupKey.
func ParsePartial(b []byte) (PartialSig, error) {
	if len(b) != PartialSize {
		return PartialSig{}, fmt.Errorf("%w: partial is %d bytes, want %d", ErrMalformedPoint, len(b), PartialSize)
	}
	idx := int(b[0])<<8 | int(b[1])
	if idx < 1 || idx > MaxNodes {
		return PartialSig{}, fmt.Errorf("%w: %d", ErrBadIndex, idx)
	}
	sig, err := ParseSignature(b[2:])
	if err != nil {
		return PartialSig{}, err
	}
	return PartialSig{Index: idx, Sig: sig}, nil
}

// PublicKey is a BLS public key: a canonical G2 point.
type PublicKey [PublicKeySize]byte

// Equal reports whether two keys are the same.
func (k PublicKey) Equal(o PublicKey) bool { return k == o }

// ParsePublicKey decodes a public key strictly: canonical, on the curve,
// not the identity, and in G2's prime-order subgroup (kyber itself performs
// no subgroup check; a subgroup failure wraps ErrNotInSubgroup).
func ParsePublicKey(b []byte) (PublicKey, error) {
	var k PublicKey
	if _, err := decodeG2Subgroup(b); err != nil {
		return k, err
	}
	copy(k[:], b)
	return k, nil
}

// Verify checks sig over msg under the public key.
func (k PublicKey) Verify(msg []byte, sig Signature) error {
	X, err := decodeG2(k[:])
	if err != nil {
		return err
	}
	return verifyPoint(X, msg, sig[:])
}

// Share is one node's secret share of the group key. It never prints its
// secret: String, GoString and Format all redact it.
type Share struct {
	index int
	v     kyber.Scalar
}

// Index is the share's index, 1..N.
func (s *Share) Index() int { return s.index }

// String implements fmt.Stringer without revealing the secret.
func (s *Share) String() string {
	return fmt.Sprintf("crypto.Share{index: %d, secret: <redacted>}", s.index)
}

// GoString implements fmt.GoStringer without revealing the secret.
func (s *Share) GoString() string { return s.String() }

// Format implements fmt.Formatter so that no verb (%v, %+v, %#v, %x …)
// can print the secret scalar.
func (s *Share) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// Sign returns the share's partial signature over msg.
func (s *Share) Sign(msg []byte) (PartialSig, error) {
	hm := hashToG1(msg)
	sp := suite.G1().Point().Mul(s.v, hm)
	b, err := sp.MarshalBinary()
	if err != nil {
		return PartialSig{}, fmt.Errorf("crypto: sign: %w", err)
	}
	p := PartialSig{Index: s.index}
	copy(p.Sig[:], b)
	return p, nil
}

// MarshalBinary returns the secret encoding: big-endian uint16 index, then
// the 32-byte scalar. Treat the result as a secret.
func (s *Share) MarshalBinary() ([]byte, error) {
	v, err := s.v.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("crypto: marshal share: %w", err)
	}
	out := make([]byte, 0, ShareSize)
	out = append(out, byte(s.index>>8), byte(s.index))
	return append(out, v...), nil
}

// ParseShare decodes a share produced by MarshalBinary.
func ParseShare(b []byte) (*Share, error) {
	if len(b) != ShareSize {
		return nil, fmt.Errorf("crypto: share is %d bytes, want %d", len(b), ShareSize)
	}
	idx := int(b[0])<<8 | int(b[1])
	if idx < 1 || idx > MaxNodes {
		return nil, fmt.Errorf("%w: %d", ErrBadIndex, idx)
	}
	v := suite.G2().Scalar()
	if err := v.UnmarshalBinary(b[2:]); err != nil {
		return nil, fmt.Errorf("crypto: share scalar: %w", err)
	}
	return &Share{index: idx, v: v}, nil
}

// GroupKey is the public side of a threshold key: the commitments to the
// sharing polynomial, from which the group public key and every node's public
// key share follow. Load it only from trusted configuration.
type GroupKey struct {
	n, t    int
	commits []kyber.Point
	poly    *share.PubPoly
	public  PublicKey
	shares  []kyber.Point // public key share of index i at shares[i-1]
}

// NewGroupKey builds a group key for n nodes from the t encoded commitments
// (the first is the group public key).
func NewGroupKey(n int, commits [][]byte) (*GroupKey, error) {
	t := len(commits)
	if err := checkParams(n, t); err != nil {
		return nil, err
	}
	pts := make([]kyber.Point, t)
	for i, c := range commits {
		p, err := decodeG2Subgroup(c)
		if err != nil {
			return nil, fmt.Errorf("crypto: commitment %d: %w", i, err)
		}
		pts[i] = p
	}
	return newGroupKey(n, pts)
}

func newGroupKey(n int, pts []kyber.Point) (*GroupKey, error) {
	g := &GroupKey{n: n, t: len(pts), commits: pts}
	g.poly = share.NewPubPoly(suite.G2(), suite.G2().Point().Base(), pts)
	pub, err := pts[0].MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("crypto: marshal group key: %w", err)
	}
	copy(g.public[:], pub)
	g.shares = make([]kyber.Point, n)
	for i := 1; i <= n; i++ {
		g.shares[i-1] = g.poly.Eval(i - 1).V
	}
	return g, nil
}

// N is the number of shares.
func (g *GroupKey) N() int { return g.n }

// Threshold is t, the number of partials that make a signature.
func (g *GroupKey) Threshold() int { return g.t }

// PublicKey is the group public key that verifies combined signatures.
func (g *GroupKey) PublicKey() PublicKey { return g.public }

// Commitments returns the encoded polynomial commitments, first the group
// public key.
func (g *GroupKey) Commitments() [][]byte {
	out := make([][]byte, len(g.commits))
	for i, c := range g.commits {
		b, _ := c.MarshalBinary() // bn256 marshalling cannot fail
		out[i] = b
	}
	return out
}

// Equal reports whether two group keys have the same parameters and
// commitments.
func (g *GroupKey) Equal(o *GroupKey) bool {
	if g.n != o.n || g.t != o.t {
		return false
	}
	for i := range g.commits {
		if !g.commits[i].Equal(o.commits[i]) {
			return false
		}
	}
	return true
}

// Verify checks a combined signature under the group public key.
func (g *GroupKey) Verify(msg []byte, sig Signature) error {
	return verifyPoint(g.commits[0], msg, sig[:])
}

// VerifyPartial checks one partial signature against the public key share of
// its index. It costs two pairings: check cheaper things first.
func (g *GroupKey) VerifyPartial(msg []byte, p PartialSig) error {
	if p.Index < 1 || p.Index > g.n {
		return fmt.Errorf("%w: %d not in 1..%d", ErrBadIndex, p.Index, g.n)
	}
	if err := verifyPoint(g.shares[p.Index-1], msg, p.Sig[:]); err != nil {
		return fmt.Errorf("partial of index %d: %w", p.Index, err)
	}
	return nil
}

// Combine makes the group signature over msg from partial signatures.
//
// It is optimistic: it interpolates the first t well-formed partials with
// distinct indices without checking them and verifies the result once. Only
// if that fails does it verify partials one by one, drop the invalid ones and
// interpolate t valid ones. bad lists the indices whose partials were found
// invalid or malformed (also when a signature is returned), so the caller can
// name the nodes that sent them. err wraps ErrNotEnoughPartials when fewer
// than t valid partials remain. S2: a signature is returned only once it
// verifies under the group key, so it rests on t valid partials, and f
// nodes hold fewer than t shares.
func (g *GroupKey) Combine(msg []byte, partials []PartialSig) (sig Signature, bad []int, err error) {
	cands, bad, err := g.candidates(partials)
	if err != nil {
		return sig, bad, err
	}
	hm := hashToG1(msg)
	if s, ok := g.interpolateAndCheck(hm, cands[:g.t]); ok {
		return s, bad, nil
	}
	// Pessimistic path: one partial at a time.
	good := make([]candidate, 0, g.t)
	for _, c := range cands {
		if len(good) == g.t {
			break
		}
		if pairingCheck(g.shares[c.index-1], hm, c.point) {
			good = append(good, c)
		} else {
			bad = appendUnique(bad, c.index)
		}
	}
	if len(good) < g.t {
		return sig, bad, fmt.Errorf("%w: %d valid, need %d", ErrNotEnoughPartials, len(good), g.t)
	}
	s, ok := g.interpolateAndCheck(hm, good)
	if !ok {
		// Cannot happen with t valid partials of distinct indices.
		return sig, bad, fmt.Errorf("%w: interpolation of valid partials failed", ErrInvalidSignature)
	}
	return s, bad, nil
}

type candidate struct {
	index int
	point kyber.Point
}

// candidates decodes partials: the well-formed ones with distinct indices
// in range, in order, and the indices of the others (out of range,
// duplicated, or whose every partial was malformed). err wraps
// ErrNotEnoughPartials when fewer than t are well-formed.
func (g *GroupKey) candidates(partials []PartialSig) (cands []candidate, bad []int, err error) {
	seen := make(map[int]bool, len(partials))
	malformed := map[int]bool{}
	cands = make([]candidate, 0, len(partials))
	for _, p := range partials {
		if p.Index < 1 || p.Index > g.n || seen[p.Index] {
			bad = appendUnique(bad, p.Index) // out of range or duplicated
			continue
		}
		pt, err := decodeG1(p.Sig[:])
		if err != nil {
			malformed[p.Index] = true
			continue
		}
		seen[p.Index] = true
		cands = append(cands, candidate{index: p.Index, point: pt})
	}
	// An index whose only partials were malformed is bad; one that also
	// sent a well-formed partial is judged by the pairing check.
	for i := range malformed {
		if !seen[i] {
			bad = appendUnique(bad, i)
		}
	}
	if len(cands) < g.t {
		return nil, bad, fmt.Errorf("%w: %d well-formed, need %d", ErrNotEnoughPartials, len(cands), g.t)
	}
	return cands, bad, nil
}

// Interpolate combines the first t well-formed partials with distinct
// indices into a group signature without any pairing check: it costs a
// Lagrange interpolation (about 0.2 ms for t = 3) where Combine also pays
// a verification (about 2-3 ms). The result is a candidate only: it
// verifies exactly when those t partials were valid. A caller that
// overlaps its verification with other work must not hand the signature
// out before GroupKey.Verify accepts it, and falls back to Combine (which
// finds the invalid partials) when it does not. bad is as for Combine.
func (g *GroupKey) Interpolate(partials []PartialSig) (sig Signature, bad []int, err error) {
	cands, bad, err := g.candidates(partials)
	if err != nil {
		return sig, bad, err
	}
	_, sig, ok := g.interpolate(cands[:g.t])
	if !ok {
		return sig, bad, fmt.Errorf("%w: interpolation failed", ErrInvalidSignature)
	}
	return sig, bad, nil
}

func (g *GroupKey) interpolateAndCheck(hm kyber.Point, cs []candidate) (Signature, bool) {
	pt, sig, ok := g.interpolate(cs)
	return sig, ok && pairingCheck(g.commits[0], hm, pt)
}

// interpolate recovers the group point from t candidates, unchecked; ok is
// false if that fails or gives the identity.
func (g *GroupKey) interpolate(cs []candidate) (pt kyber.Point, sig Signature, ok bool) {
	pub := make([]*share.PubShare, len(cs))
	for i, c := range cs {
		pub[i] = &share.PubShare{I: c.index - 1, V: c.point}
	}
	pt, err := share.RecoverCommit(suite.G1(), pub, g.t, g.n)
	if err != nil || pt.Equal(suite.G1().Point().Null()) {
		return nil, sig, false
	}
	b, err := pt.MarshalBinary()
	if err != nil {
		return nil, sig, false
	}
	copy(sig[:], b)
	return pt, sig, true
}

// Deal creates a fresh threshold key with a trusted dealer: the dealer sees
// the group secret. Use it for local testnets only; production clusters run
// the distributed key generation. rand supplies all randomness.
func Deal(rand io.Reader, n, t int) (*GroupKey, []*Share, error) {
	if err := checkParams(n, t); err != nil {
		return nil, nil, err
	}
	pri, err := pickPoly(rand, t)
	if err != nil {
		return nil, nil, fmt.Errorf("crypto: deal: reading randomness: %w", err)
	}
	_, commits := pri.Commit(suite.G2().Point().Base()).Info()
	gk, err := newGroupKey(n, commits)
	if err != nil {
		return nil, nil, err
	}
	shares := make([]*Share, n)
	for i, s := range pri.Shares(n) {
		shares[i] = &Share{index: s.I + 1, v: s.V}
	}
	return gk, shares, nil
}

// PublicShare returns the public key share of a secret share, for checking a
// share file against the group key.
func (s *Share) PublicShare() PublicKey {
	var k PublicKey
	b, _ := suite.G2().Point().Mul(s.v, nil).MarshalBinary()
	copy(k[:], b)
	return k
}

// CheckShare reports whether s is the share of index s.Index() of this group
// key.
func (g *GroupKey) CheckShare(s *Share) error {
	if s.index < 1 || s.index > g.n {
		return fmt.Errorf("%w: %d not in 1..%d", ErrBadIndex, s.index, g.n)
	}
	if !suite.G2().Point().Mul(s.v, nil).Equal(g.shares[s.index-1]) {
		return errors.New("crypto: share does not belong to this group key")
	}
	return nil
}

// FaultThreshold returns the number of Byzantine nodes n nodes tolerate,
// f = floor((n-1)/3), and the quorum size t = floor((n+f)/2)+1. For
// n = 3f+1 that is t = 2f+1. The formula keeps S1 for every n: two quorums
// share 2t-n >= f+1 nodes, so at least one honest node would have to vote
// twice; and n-f >= t, so f silent nodes cannot block a quorum.
func FaultThreshold(n int) (f, t int) {
	f = (n - 1) / 3
	return f, (n+f)/2 + 1
}

func checkParams(n, t int) error {
	if n < 1 || n > MaxNodes || t < 1 || t > n {
		return fmt.Errorf("%w: n=%d t=%d", ErrBadParameters, n, t)
	}
	return nil
}

func hashToG1(msg []byte) kyber.Point {
	m := make([]byte, 0, len(HashDomain)+len(msg))
	m = append(m, HashDomain...)
	m = append(m, msg...)
	return suite.G1().Point().(interface{ Hash([]byte) kyber.Point }).Hash(m)
}

func verifyPoint(X kyber.Point, msg, sig []byte) error {
	s, err := decodeG1(sig)
	if err != nil {
		return err
	}
	if !pairingCheck(X, hashToG1(msg), s) {
		return ErrInvalidSignature
	}
	return nil
}

// pairingCheck reports e(H(m), X) == e(S, g2). The two pairings are
// independent: the second runs on another goroutine (joined before
// returning), so one check takes about one pairing's time when a core is
// free, and the same CPU either way.
func pairingCheck(X, hm, s kyber.Point) bool {
	right := make(chan kyber.Point, 1)
	go func() { right <- suite.Pair(s, suite.G2().Point().Base()) }()
	left := suite.Pair(hm, X)
	return left.Equal(<-right)
}

// decodeG1 decodes a canonical, non-identity G1 point.
func decodeG1(b []byte) (kyber.Point, error) {
	return decodeStrict(suite.G1().Point(), b, SignatureSize)
}

// decodeG2 decodes a canonical, non-identity G2 point.
func decodeG2(b []byte) (kyber.Point, error) {
	return decodeStrict(suite.G2().Point(), b, PublicKeySize)
}

func decodeStrict(p kyber.Point, b []byte, size int) (kyber.Point, error) {
	if len(b) != size {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrMalformedPoint, len(b), size)
	}
	if err := p.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedPoint, err)
	}
	// kyber accepts coordinates >= p (they are reduced): the re-encoding
	// differs from the input exactly when the input was not canonical.
	again, err := p.MarshalBinary()
	if err != nil || !bytes.Equal(again, b) {
		return nil, fmt.Errorf("%w: non-canonical encoding", ErrMalformedPoint)
	}
	if p.Equal(p.Clone().Null()) {
		return nil, fmt.Errorf("%w: identity element", ErrMalformedPoint)
	}
	return p, nil
}

func appendUnique(xs []int, x int) []int {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

// pickPoly draws a random secret polynomial of degree t-1 from rand. kyber
// wants a cipher.Stream, which cannot report errors, so a failed read panics
// inside readerStream and is turned back into an error here.
func pickPoly(rand io.Reader, t int) (pri *share.PriPoly, err error) {
	defer recoverStream(&err)
	stream := readerStream{r: rand}
	secret := suite.G2().Scalar().Pick(stream)
	return share.NewPriPoly(suite.G2(), t, secret, stream), nil
}

// PickScalar draws a uniformly random scalar of the bn256 groups from rand
// (it is how crypto/dkg draws a ceremony key); a failed read is an error.
func PickScalar(rand io.Reader) (s kyber.Scalar, err error) {
	defer recoverStream(&err)
	return suite.G2().Scalar().Pick(readerStream{r: rand}), nil
}

// recoverStream turns a readerStream panic back into an error.
func recoverStream(err *error) {
	if r := recover(); r != nil {
		re, ok := r.(streamError)
		if !ok {
			panic(r)
		}
		*err = re.err
	}
}

type streamError struct{ err error }

// readerStream adapts an io.Reader to the cipher.Stream kyber wants.
type readerStream struct{ r io.Reader }

var _ cipher.Stream = readerStream{}

func (s readerStream) XORKeyStream(dst, src []byte) {
	buf := make([]byte, len(src))
	if _, err := io.ReadFull(s.r, buf); err != nil {
		panic(streamError{err})
	}
	for i := range src {
		dst[i] = src[i] ^ buf[i]
	}
}

// MarshalText encodes the partial as hex of its wire form; the zero value
// encodes as an empty string.
func (p PartialSig) MarshalText() ([]byte, error) {
	if p == (PartialSig{}) {
		return []byte{}, nil
	}
	return []byte(hex.EncodeToString(p.Marshal())), nil
}

// UnmarshalText decodes MarshalText's output strictly.
func (p *PartialSig) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*p = PartialSig{}
		return nil
	}
	raw, err := hex.DecodeString(string(b))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedPoint, err)
	}
	q, err := ParsePartial(raw)
	if err != nil {
		return err
	}
	*p = q
	return nil
}
