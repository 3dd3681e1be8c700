// Package crypto implements Palisade's threshold BLS signatures on the
// minimal-signature-size variant of the IETF BLS signature scheme over
// BLS12-381 (draft-irtf-cfrg-bls-signature, ciphersuite Ciphersuite):
// dealer key generation for testnets, partial signing, optimistic
// combination and verification.
//
// The curve arithmetic lives beneath kyber v3's interfaces in package
// crypto/bls12381: secret scalars (partial signing, dealing, share checks)
// are multiplied by circl's constant-time code, and signatures are checked
// by gnark-crypto with one multi-pairing each. Shamir sharing and the
// polynomials are kyber's; partial signatures, which are public, are
// interpolated with gnark's multi-scalar multiplication.
//
// The package keeps these rules:
//   - every point from outside (network, file, token) is decoded strictly:
//     exact length, flag bits, x below p, on the curve, in the prime-order
//     subgroup, not the identity. ParseSignature and ParsePartial check the
//     cheap byte-level rules only; Verify, VerifyPartial and Combine decode
//     fully before any pairing. A compressed encoding that passes the
//     byte-level rules names at most one point, so a signature's bytes are
//     a fine cache key once they have verified;
//   - the message is signed as given: callers put their own domain tag,
//     version and cluster ID inside it (see package protocol), so any IETF
//     min-sig implementation verifies a Palisade signature from the group
//     key and the signed bytes alone;
//   - kyber's PriShare.String prints the secret, so Share hides its scalar
//     from every fmt verb.
//
// There is no networking here.
package crypto

import (
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"

	"github.com/palisade-dev/palisade/crypto/bls12381"
)

const (
	// SignatureSize is the size of a (partial or full) BLS signature: a
	// compressed BLS12-381 G1 point.
	SignatureSize = bls12381.SignatureSize
	// PartialSize is the encoded size of a PartialSig: a 2-byte big-endian
	// share index followed by the signature.
	PartialSize = 2 + SignatureSize
	// PublicKeySize is the size of a public key: a compressed G2 point.
	PublicKeySize = bls12381.PublicKeySize
	// ScalarSize is the size of an encoded secret scalar.
	ScalarSize = bls12381.ScalarSize
	// ShareSize is the encoded size of a Share: index then scalar.
	ShareSize = 2 + ScalarSize
	// MaxNodes bounds N so that an index fits the 2-byte wire field.
	MaxNodes = 1024
	// Ciphersuite is the ciphersuite ID of the signatures, which is also
	// the domain separation tag of hash_to_G1 (RFC 9380,
	// BLS12381G1_XMD:SHA-256_SSWU_RO_).
	Ciphersuite = bls12381.SignatureDST
	// CurveName names the curve in files and messages.
	CurveName = "BLS12-381"
)

// Errors callers can branch on.
var (
	// ErrInvalidSignature reports a signature or partial that does not verify.
	ErrInvalidSignature = errors.New("crypto: invalid signature")
	// ErrMalformedPoint reports bytes that are not the canonical encoding of a
	// curve point of the right group (wrong length, flag bits, a coordinate
	// not below p, not on the curve, outside the prime-order subgroup, or
	// the identity). The library's reason is wrapped too.
	ErrMalformedPoint = errors.New("crypto: malformed point encoding")
	// ErrNotInSubgroup reports a point on the curve but outside the
	// prime-order subgroup; errors wrapping it also wrap ErrMalformedPoint.
	ErrNotInSubgroup = bls12381.ErrNotInSubgroup
	// ErrBadIndex reports a share index outside 1..N.
	ErrBadIndex = errors.New("crypto: share index out of range")
	// ErrNotEnoughPartials reports fewer than t valid partial signatures.
	ErrNotEnoughPartials = errors.New("crypto: not enough valid partial signatures")
	// ErrBadParameters reports an impossible (n, t) pair.
	ErrBadParameters = errors.New("crypto: bad threshold parameters")
)

var suite = bls12381.NewSuite()

// libErr maps an error of package bls12381 onto this package's sentinels,
// keeping the library's reason in the chain.
func libErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bls12381.ErrInvalidSignature):
		return ErrInvalidSignature
	case errors.Is(err, bls12381.ErrEncoding), errors.Is(err, bls12381.ErrIdentity),
		errors.Is(err, bls12381.ErrNotInSubgroup), errors.Is(err, bls12381.ErrWrongGroup):
		return fmt.Errorf("%w: %w", ErrMalformedPoint, err)
	}
	return err
}

// Signature is a full (group) BLS signature: a compressed G1 point.
type Signature [SignatureSize]byte

// Equal reports whether two signatures are the same bytes. Signatures
// produced or parsed by this package follow the byte-level rules (flags,
// x below p), under which a point has exactly one encoding, so equal bytes
// means equal points.
func (s Signature) Equal(o Signature) bool { return s == o }

// ParseSignature checks the byte-level rules of a signature's encoding:
// exact length, compression flag, not the point at infinity, x below p. It
// does not decompress the point: that, the curve and the subgroup checks
// happen when the signature is verified, after any cache lookup.
func ParseSignature(b []byte) (Signature, error) {
	var s Signature
	if err := bls12381.CheckSignatureEncoding(b); err != nil {
		return s, libErr(err)
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

// Marshal returns the 50-byte wire form: big-endian uint16 index, signature.
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
// encoding only (index at least 1, the signature's byte-level rules as
// ParseSignature); the full point decoding, membership of the index
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

// PublicKey is a BLS public key: a compressed G2 point.
type PublicKey [PublicKeySize]byte

// Equal reports whether two keys are the same.
func (k PublicKey) Equal(o PublicKey) bool { return k == o }

// ParsePublicKey decodes a public key strictly: exact length, flag bits,
// canonical coordinates, on the curve, in G2's prime-order subgroup (a
// subgroup failure wraps ErrNotInSubgroup) and not the identity.
func ParsePublicKey(b []byte) (PublicKey, error) {
	var k PublicKey
	if _, err := bls12381.DecodeG2(b); err != nil {
		return k, libErr(err)
	}
	copy(k[:], b)
	return k, nil
}

// Verify checks sig over msg under the public key. It decodes the key on
// every call; GroupKey.Verify keeps its key decoded.
func (k PublicKey) Verify(msg []byte, sig Signature) error {
	return libErr(bls12381.Verify(k[:], msg, sig[:]))
}

// decode returns the key decoded for verification.
func (k PublicKey) decode() (*bls12381.PublicKey, error) {
	pk, err := bls12381.NewPublicKey(k[:])
	return pk, libErr(err)
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
//
// The scalar multiplication is circl's, whose table lookups and additions
// do not depend on the secret (see SECURITY.md).
func (s *Share) Sign(msg []byte) (PartialSig, error) {
	b, err := bls12381.Sign(s.v, msg).MarshalBinary()
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

// ParseShare decodes a share produced by MarshalBinary: the scalar must be
// canonical (below the group order).
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
	if v.Equal(suite.G2().Scalar().Zero()) {
		return nil, errors.New("crypto: share scalar is zero")
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
	key     *bls12381.PublicKey // commits[0], decoded for verification
	shares  []publicShare       // of index i at shares[i-1], made on first use
}

// publicShare is one index's public key share, evaluated from the
// polynomial on first use: a node needs only its own and those of the
// partials it checks, and each costs t scalar multiplications in G2.
type publicShare struct {
	once  sync.Once
	point kyber.Point
	key   *bls12381.PublicKey
	err   error
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
		p, err := bls12381.DecodeG2(c)
		if err != nil {
			return nil, fmt.Errorf("crypto: commitment %d: %w", i, libErr(err))
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
	if g.key, err = bls12381.PublicKeyFromPoint(pts[0]); err != nil {
		return nil, fmt.Errorf("crypto: group key: %w", libErr(err))
	}
	g.shares = make([]publicShare, n)
	return g, nil
}

// share returns the public key share of index i (1..n), evaluating it on
// first use. Its error is that of a polynomial whose value at i is the
// identity, which only a dealer who chose it could arrange.
func (g *GroupKey) share(i int) (*publicShare, error) {
	ps := &g.shares[i-1]
	ps.once.Do(func() {
		ps.point = g.poly.Eval(i - 1).V
		ps.key, ps.err = bls12381.PublicKeyFromPoint(ps.point)
		if ps.err != nil {
			ps.err = fmt.Errorf("crypto: public key share %d: %w", i, libErr(ps.err))
		}
	})
	return ps, ps.err
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
		b, _ := c.MarshalBinary() // marshalling a G2 point cannot fail
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

// Verify checks a combined signature under the group public key: a strict
// decoding of sig, a hash to G1 and one multi-pairing.
func (g *GroupKey) Verify(msg []byte, sig Signature) error {
	return libErr(g.key.Verify(msg, sig[:]))
}

// VerifyPartial checks one partial signature against the public key share of
// its index. It costs a multi-pairing: check cheaper things first.
func (g *GroupKey) VerifyPartial(msg []byte, p PartialSig) error {
	if p.Index < 1 || p.Index > g.n {
		return fmt.Errorf("%w: %d not in 1..%d", ErrBadIndex, p.Index, g.n)
	}
	ps, err := g.share(p.Index)
	if err != nil {
		return err
	}
	if err := libErr(ps.key.Verify(msg, p.Sig[:])); err != nil {
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
	hm, err := bls12381.HashMessage(msg)
	if err != nil {
		return sig, bad, err
	}
	if s, ok := g.interpolateAndCheck(hm, cands[:g.t]); ok {
		return s, bad, nil
	}
	// Pessimistic path: one partial at a time.
	good := make([]candidate, 0, g.t)
	for _, c := range cands {
		if len(good) == g.t {
			break
		}
		ps, err := g.share(c.index)
		if err == nil && ps.key.VerifyHash(hm, c.enc[:]) == nil {
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
	point *bls12381.PublicG1
	enc   Signature
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
		pt, err := bls12381.DecodePublicG1(p.Sig[:])
		if err != nil {
			malformed[p.Index] = true
			continue
		}
		seen[p.Index] = true
		cands = append(cands, candidate{index: p.Index, point: pt, enc: p.Sig})
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
// indices into a group signature without any pairing check: it costs the
// partials' decoding and a Lagrange interpolation, where Combine also pays
// a verification. The result is a candidate only: it
// verifies exactly when those t partials were valid. A caller that
// overlaps its verification with other work must not hand the signature
// out before GroupKey.Verify accepts it, and falls back to Combine (which
// finds the invalid partials) when it does not. bad is as for Combine.
func (g *GroupKey) Interpolate(partials []PartialSig) (sig Signature, bad []int, err error) {
	cands, bad, err := g.candidates(partials)
	if err != nil {
		return sig, bad, err
	}
	sig, ok := g.interpolate(cands[:g.t])
	if !ok {
		return sig, bad, fmt.Errorf("%w: interpolation failed", ErrInvalidSignature)
	}
	return sig, bad, nil
}

func (g *GroupKey) interpolateAndCheck(hm *bls12381.MessageHash, cs []candidate) (Signature, bool) {
	sig, ok := g.interpolate(cs)
	return sig, ok && g.key.VerifyHash(hm, sig[:]) == nil
}

// interpolate recovers the group signature from t candidates, unchecked;
// ok is false if that fails or gives the identity. The partials are
// public, so this is gnark's multi-scalar multiplication
// (bls12381.InterpolateG1), not circl's constant-time one.
func (g *GroupKey) interpolate(cs []candidate) (sig Signature, ok bool) {
	idx := make([]int, len(cs))
	pts := make([]*bls12381.PublicG1, len(cs))
	for i, c := range cs {
		idx[i], pts[i] = c.index, c.point
	}
	b, err := bls12381.InterpolateG1(idx, pts)
	if err != nil {
		return sig, false
	}
	copy(sig[:], b)
	return sig, true
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
	ps, err := g.share(s.index)
	if err != nil {
		return err
	}
	if !suite.G2().Point().Mul(s.v, nil).Equal(ps.point) {
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

// PickScalar draws a uniformly random scalar of the BLS12-381 groups from rand
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
