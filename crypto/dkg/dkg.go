// Package dkg is one member's side of Palisade's distributed key generation
// and resharing: kyber's Pedersen DKG over BLS12-381 G2, with strict wire forms
// for its deals, responses and justifications and the checks a relaying
// member needs. It does no I/O (internal/dkg moves the messages). It is
// apart from package crypto so that what embeds the verifier links neither
// kyber's DKG, VSS and Schnorr packages nor protobuf; its API takes and
// returns bytes, crypto types and its own types, never kyber's.
//
// S2 starts here: the group secret is never assembled anywhere; each
// member ends with one share, and a dealer's deal is checked against its
// public commitments before it counts, so f members cannot learn the key.
package dkg

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/sign/schnorr"
	"go.dedis.ch/kyber/v3/util/random"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
)

// DKG errors callers can branch on.
var (
	// ErrConfig reports an impossible DKG or resharing configuration.
	ErrConfig = errors.New("crypto/dkg: bad DKG configuration")
	// ErrNotQualified reports a DKG that ended with fewer qualified deals
	// than it needs, or with a share that does not match the group key.
	ErrNotQualified = errors.New("crypto/dkg: DKG did not qualify enough deals")
	// ErrMessage reports a deal, response or justification that kyber
	// refused (bad signature, wrong index, duplicate, unknown dealer).
	ErrMessage = errors.New("crypto/dkg: DKG message refused")
	// ErrForged reports a DKG message that is malformed in anyone's
	// view: not signed by its claimed author, naming a member or dealer
	// outside the ceremony, or (a justification) with a session that is not
	// the hash of its commitments. Whoever relayed it forged or corrupted
	// it. It wraps ErrMessage.
	ErrForged = fmt.Errorf("%w: forged or malformed", ErrMessage)
	// ErrSession reports a DKG message for another session than the
	// dealer's deal this member holds (a response relabelled to another
	// dealer, or an item from an equivocating dealer); its signature is
	// not checked, since it is dropped anyway. It wraps ErrMessage.
	ErrSession = fmt.Errorf("%w: session does not match the dealer's deal", ErrMessage)
)

// SeedSize is the size of the secret seed that makes a dealer's
// polynomial reproducible (so a member can resume after a crash).
const SeedSize = 32

// Key is a member's long-term key for one DKG ceremony: a scalar and its
// G2 public point. Deals addressed to the member are encrypted to it. It is
// secret; like crypto.Share, it never prints its scalar.
type Key struct {
	s   kyber.Scalar
	pub kyber.Point
}

// GenerateKey draws a fresh ceremony key from rand.
func GenerateKey(rand io.Reader) (k *Key, err error) {
	s, err := crypto.PickScalar(rand)
	if err != nil {
		return nil, fmt.Errorf("crypto/dkg: ceremony key: %w", err)
	}
	return &Key{s: s, pub: g2suite.Point().Mul(s, nil)}, nil
}

// ParseKey decodes Key.MarshalBinary's output.
func ParseKey(b []byte) (*Key, error) {
	s, err := decodeScalar(b)
	if err != nil {
		return nil, fmt.Errorf("crypto/dkg: DKG key: %w", err)
	}
	if s.Equal(g2suite.Scalar().Zero()) {
		return nil, errors.New("crypto/dkg: DKG key: zero scalar")
	}
	return &Key{s: s, pub: g2suite.Point().Mul(s, nil)}, nil
}

// MarshalBinary returns the secret scalar. Treat it as a secret.
func (k *Key) MarshalBinary() ([]byte, error) { return k.s.MarshalBinary() }

// Public returns the key's public point.
func (k *Key) Public() crypto.PublicKey {
	var p crypto.PublicKey
	b, _ := k.pub.MarshalBinary() // marshalling a G2 point cannot fail
	copy(p[:], b)
	return p
}

// String implements fmt.Stringer without revealing the secret.
func (k *Key) String() string { return "crypto.Key{secret: <redacted>}" }

// GoString implements fmt.GoStringer without revealing the secret.
func (k *Key) GoString() string { return k.String() }

// Format implements fmt.Formatter so that no verb prints the secret.
func (k *Key) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// PlaceholderKey returns a G2 point whose discrete logarithm nobody
// knows, derived from tag. A ceremony uses it in place of a member that
// never published its key: deals to it are encrypted to nobody, and the
// member counts as silent.
func PlaceholderKey(tag []byte) crypto.PublicKey {
	x := g2suite.XOF(append([]byte("palisade/dkg/placeholder/v1\x00"), tag...))
	p := g2suite.Point().Pick(x)
	var k crypto.PublicKey
	b, _ := p.MarshalBinary()
	copy(k[:], b)
	return k
}

// Config configures one member's side of a fresh DKG or a resharing.
type Config struct {
	// Key is this member's ceremony key; its public key must be in
	// NewNodes, OldNodes or both.
	Key *Key
	// NewNodes are the ceremony public keys of the members that will hold
	// shares, in share-index order (share index i+1 at NewNodes[i]).
	NewNodes []crypto.PublicKey
	// Threshold is t of the new sharing. It is required (kyber's default is
	// a majority, too low for 3f+1 nodes): use crypto.FaultThreshold.
	Threshold int

	// OldNodes are, when resharing, the old members' ceremony keys in old
	// share-index order. Nil for a fresh DKG.
	OldNodes []crypto.PublicKey
	// OldGroup is, when resharing, the old group key (its threshold is the
	// old threshold). Every member needs it; it is trusted configuration.
	OldGroup *crypto.GroupKey
	// Share is, when resharing, this member's old share (old members only).
	Share *crypto.Share

	// Seed makes the dealer's polynomial reproducible: a member that
	// crashed and restarts with the same Key and Seed deals exactly the same
	// shares again. It is secret. All other randomness (nonces, ephemeral
	// keys) is fresh.
	Seed [SeedSize]byte
}

// DKG is one member's state machine for a Pedersen DKG or a resharing,
// wrapping kyber's share/dkg/pedersen over BLS12-381 G2. It does no I/O: the
// caller moves the encoded deals, responses and justifications between
// members. It is safe for concurrent use.
type DKG struct {
	mu        sync.Mutex
	cfg       Config
	gen       *pedersen.DistKeyGenerator
	resharing bool
	newIdx    int // 0-based index in NewNodes, or -1
	oldIdx    int // 0-based index in OldNodes (fresh DKG: NewNodes), or -1
	// justified are deals for this member revealed by a dealer's
	// justification: kyber keeps the first (bad) deal, so Result uses these.
	justified map[uint32]*vss.Deal
	// missing are the session IDs of deals this member complained it never
	// got (ComplainMissing), by dealer: several when relayed responses
	// disagree on a dealer's session.
	missing  map[uint32][][]byte
	timedOut bool
}

// dkgSuite is the BLS12-381 G2 suite whose random stream can be pinned to a
// seeded XOF while the dealer is built (reproducible polynomial) and is
// fresh crypto/rand afterwards (nonces, ephemeral keys).
type dkgSuite struct {
	*bls12381.GroupSuite
	mu     sync.Mutex
	seeded cipher.Stream
}

func (s *dkgSuite) RandomStream() cipher.Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seeded != nil {
		return s.seeded
	}
	return random.New()
}

// New checks the configuration and builds the member's state machine.
func New(c Config) (*DKG, error) {
	bad := func(format string, args ...any) (*DKG, error) {
		return nil, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if c.Key == nil {
		return bad("no ceremony key")
	}
	if len(c.NewNodes) < 1 || len(c.NewNodes) > crypto.MaxNodes {
		return bad("%d new nodes", len(c.NewNodes))
	}
	if c.Threshold < 2 || c.Threshold > len(c.NewNodes) {
		return bad("threshold %d for %d nodes", c.Threshold, len(c.NewNodes))
	}
	newPts, err := dkgPoints(c.NewNodes)
	if err != nil {
		return nil, fmt.Errorf("%w: new nodes: %w", ErrConfig, err)
	}
	self := c.Key.Public()
	d := &DKG{cfg: c, newIdx: slices.Index(c.NewNodes, self), oldIdx: -1, justified: map[uint32]*vss.Deal{}, missing: map[uint32][][]byte{}}
	su := &dkgSuite{GroupSuite: bls12381.NewSuiteG2()}
	su.seeded = su.XOF(append([]byte("palisade/dkg/poly/v1\x00"), c.Seed[:]...))
	kc := &pedersen.Config{
		Suite:          su,
		Longterm:       c.Key.s,
		NewNodes:       newPts,
		Threshold:      c.Threshold,
		Reader:         su.XOF(append([]byte("palisade/dkg/secret/v1\x00"), c.Seed[:]...)),
		UserReaderOnly: true,
	}
	if c.OldNodes != nil || c.OldGroup != nil || c.Share != nil {
		d.resharing = true
		if c.OldGroup == nil || len(c.OldNodes) != c.OldGroup.N() {
			return bad("resharing needs the old group key and its %d old nodes", len(c.OldNodes))
		}
		oldPts, err := dkgPoints(c.OldNodes)
		if err != nil {
			return nil, fmt.Errorf("%w: old nodes: %w", ErrConfig, err)
		}
		d.oldIdx = slices.Index(c.OldNodes, self)
		kc.OldNodes = oldPts
		kc.OldThreshold = c.OldGroup.Threshold()
		oldCommits, err := groupCommits(c.OldGroup)
		if err != nil {
			return bad("old group key: %v", err)
		}
		kc.Reader, kc.UserReaderOnly = nil, false
		if c.Share != nil {
			if d.oldIdx != c.Share.Index()-1 {
				return bad("old share has index %d, ceremony key is old node %d", c.Share.Index(), d.oldIdx+1)
			}
			if err := c.OldGroup.CheckShare(c.Share); err != nil {
				return bad("old share: %v", err)
			}
			v, err := shareScalar(c.Share)
			if err != nil {
				return bad("old share: %v", err)
			}
			kc.Share = &pedersen.DistKeyShare{
				Commits: oldCommits,
				Share:   &share.PriShare{I: c.Share.Index() - 1, V: v},
			}
		} else {
			if d.newIdx < 0 {
				return bad("a member without an old share must be a new node")
			}
			kc.PublicCoeffs = oldCommits
		}
	} else {
		d.oldIdx = d.newIdx
	}
	if d.newIdx < 0 && d.oldIdx < 0 {
		return bad("ceremony key is in neither the old nor the new nodes")
	}
	d.gen, err = pedersen.NewDistKeyHandler(kc)
	su.mu.Lock()
	su.seeded = nil
	su.mu.Unlock()
	if err != nil {
		return bad("%v", err)
	}
	return d, nil
}

func dkgPoints(keys []crypto.PublicKey) ([]kyber.Point, error) {
	out := make([]kyber.Point, len(keys))
	seen := map[crypto.PublicKey]bool{}
	for i, k := range keys {
		if seen[k] {
			return nil, fmt.Errorf("key %d is listed twice", i+1)
		}
		seen[k] = true
		p, err := decodeG2Subgroup(k[:])
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		out[i] = p
	}
	return out, nil
}

// Resharing reports whether this is a resharing rather than a fresh DKG.
func (d *DKG) Resharing() bool { return d.resharing }

// Deals returns this member's encoded deals keyed by recipient share index
// (1-based), and, when this member both deals and receives in a resharing,
// its own response to its own deal, which it must broadcast like any other
// response. A member that holds no old share deals nothing.
func (d *DKG) Deals() (deals map[int][]byte, own []byte, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kd, err := d.gen.Deals()
	if err != nil {
		return nil, nil, fmt.Errorf("crypto/dkg: DKG deals: %w", err)
	}
	deals = map[int][]byte{}
	for i, dd := range kd {
		if i == d.newIdx {
			resp, err := d.gen.ProcessDeal(dd)
			if err != nil {
				return nil, nil, fmt.Errorf("crypto/dkg: DKG own deal: %w", err)
			}
			if own, err = encodeResponse(resp); err != nil {
				return nil, nil, err
			}
			continue
		}
		b, err := encodeDeal(dd)
		if err != nil {
			return nil, nil, err
		}
		deals[i+1] = b
	}
	return deals, own, nil
}

// CorruptDeal returns a deal to new share index to (1-based) whose share
// does not match this dealer's commitments but which is otherwise
// well-formed, signed and encrypted: the recipient's check against the
// commitments fails and it complains. It is a fault-injection seam for
// tests that play a Byzantine dealer; call it after Deals.
func (d *DKG) CorruptDeal(to int) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.oldIdx < 0 || to < 1 || to > len(d.cfg.NewNodes) {
		return nil, fmt.Errorf("%w: no deal to corrupt for node %d", ErrConfig, to)
	}
	dd := &pedersen.Deal{Index: uint32(d.oldIdx)}
	if err := d.corrupt(dd, to-1); err != nil {
		return nil, err
	}
	return encodeDeal(dd)
}

// corrupt fills dd (to new index i) with a bad but signed and encrypted
// deal (see CorruptDeal). d.mu must be held.
func (d *DKG) corrupt(dd *pedersen.Deal, i int) error {
	// Learn the commitments and session ID from our own view of our deal.
	var commits []kyber.Point
	var sid []byte
	t := uint32(d.cfg.Threshold)
	if v, ok := d.gen.Verifiers()[uint32(d.oldIdx)]; ok && v.SessionID() != nil {
		commits, sid = v.Commits(), v.SessionID()
	} else {
		return fmt.Errorf("%w: cannot corrupt deals without a deal to itself", ErrConfig)
	}
	bad := &vss.Deal{
		SessionID:   sid,
		SecShare:    &share.PriShare{I: i, V: g2suite.Scalar().Pick(random.New())},
		T:           t,
		Commitments: commits,
	}
	newPts, _ := dkgPoints(d.cfg.NewNodes)
	enc, err := encryptDeal(d.cfg.Key, newPts, i, bad)
	if err != nil {
		return err
	}
	dd.Deal = enc
	return signDeal(d.cfg.Key, dd)
}

// ProcessDeal processes a deal addressed to this member and returns the
// encoded response to broadcast (an approval, or a complaint if the share
// does not match the dealer's commitments).
func (d *DKG) ProcessDeal(b []byte) ([]byte, error) {
	dd, err := decodeDeal(b)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkDealPoints(dd); err != nil {
		return nil, fmt.Errorf("%w: deal from dealer %d: %w", ErrMessage, dd.Index+1, err)
	}
	resp, err := d.gen.ProcessDeal(dd)
	if err != nil {
		return nil, fmt.Errorf("%w: deal from dealer %d: %v", ErrMessage, dd.Index+1, err)
	}
	return encodeResponse(resp)
}

// ComplainMissing returns this member's signed complaint about the deal of
// dealer (1-based dealer index) that it never received or could not open.
// sid is that deal's session ID as other members' responses report it; when
// relayed responses disagree, call it once per candidate session: the
// members holding the deal accept only the complaint with its session.
// Every member that processes the complaint then needs the dealer's
// justification to keep the deal, so a dealer cannot give shares to some
// members and silently withhold them from others. The justification, once
// processed, gives this member its share of the deal.
func (d *DKG) ComplainMissing(dealer int, sid []byte) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.newIdx < 0 || len(sid) != SessionIDSize {
		return nil, fmt.Errorf("%w: cannot complain", ErrConfig)
	}
	v, ok := d.gen.Verifiers()[uint32(dealer-1)]
	if !ok || dealer-1 == d.oldIdx && !d.resharing {
		return nil, fmt.Errorf("%w: no dealer %d", ErrConfig, dealer)
	}
	if v.SessionID() != nil {
		return nil, fmt.Errorf("%w: deal of dealer %d was received", ErrConfig, dealer)
	}
	r := &vss.Response{SessionID: bytes.Clone(sid), Index: uint32(d.newIdx), Status: vss.StatusComplaint}
	sig, err := schnorr.Sign(g2suite, d.cfg.Key.s, r.Hash(g2suite))
	if err != nil {
		return nil, fmt.Errorf("crypto/dkg: sign complaint: %w", err)
	}
	r.Signature = sig
	// Record our own complaint, so that the dealer's justification is
	// accepted here and installs the deal.
	v.UnsafeSetResponseDKG(uint32(d.newIdx), vss.StatusComplaint)
	if !slices.ContainsFunc(d.missing[uint32(dealer-1)], func(s []byte) bool { return bytes.Equal(s, sid) }) {
		d.missing[uint32(dealer-1)] = append(d.missing[uint32(dealer-1)], bytes.Clone(sid))
	}
	return encodeResponse(&pedersen.Response{Index: uint32(dealer - 1), Response: r})
}

// ProcessResponse processes a response from any member. If it is a
// complaint about this member's own deal, it returns the encoded
// justification to broadcast.
func (d *DKG) ProcessResponse(b []byte) ([]byte, error) {
	r, err := decodeResponse(b)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.gen.ProcessResponse(r)
	if err != nil {
		return nil, fmt.Errorf("%w: response of node %d to dealer %d: %v", ErrMessage, r.Response.Index+1, r.Index+1, err)
	}
	if j == nil {
		return nil, nil
	}
	if len(j.Justification.Signature) == 0 {
		// kyber leaves a leaving dealer's justification unsigned; every
		// justification on the wire is signed by its dealer.
		if j.Justification.Signature, err = schnorr.Sign(g2suite, d.cfg.Key.s, j.Justification.Hash(g2suite)); err != nil {
			return nil, fmt.Errorf("crypto/dkg: sign justification: %w", err)
		}
	}
	return encodeJustification(j)
}

// dealerKey returns the ceremony public key of a 0-based dealer index.
func (d *DKG) dealerKey(i uint32) (kyber.Point, bool) {
	keys := d.cfg.NewNodes
	if d.resharing {
		keys = d.cfg.OldNodes
	}
	if int(i) >= len(keys) {
		return nil, false
	}
	p, err := decodeG2(keys[i][:])
	return p, err == nil
}

// sessionID recomputes a VSS session ID as kyber does: SHA-256 of the
// dealer key, the verifier keys, the commitments and t (little-endian u32).
func (d *DKG) sessionID(dealer kyber.Point, commits []kyber.Point, t uint32) []byte {
	h := g2suite.Hash()
	_, _ = dealer.MarshalTo(h)
	for _, k := range d.cfg.NewNodes {
		h.Write(k[:])
	}
	for _, c := range commits {
		_, _ = c.MarshalTo(h)
	}
	_ = binary.Write(h, binary.LittleEndian, t)
	return h.Sum(nil)
}

// ProcessJustification processes a dealer's justification.
func (d *DKG) ProcessJustification(b []byte) error {
	j, err := decodeJustification(b)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	pub, ok := d.dealerKey(j.Index)
	if !ok {
		return fmt.Errorf("%w: justification of unknown dealer %d", ErrMessage, j.Index+1)
	}
	if err := schnorr.Verify(g2suite, pub, j.Justification.Hash(g2suite), j.Justification.Signature); err != nil {
		return fmt.Errorf("%w: justification of dealer %d: bad signature", ErrMessage, j.Index+1)
	}
	if sids, ok := d.missing[j.Index]; ok && int(j.Justification.Index) == d.newIdx {
		// We never saw this deal: it must be one the others saw.
		dl := j.Justification.Deal
		if !slices.ContainsFunc(sids, func(s []byte) bool { return bytes.Equal(dl.SessionID, s) }) || !bytes.Equal(d.sessionID(pub, dl.Commitments, dl.T), dl.SessionID) {
			return fmt.Errorf("%w: justification of dealer %d does not match its deal's session", ErrMessage, j.Index+1)
		}
	}
	if err := d.gen.ProcessJustification(j); err != nil {
		return fmt.Errorf("%w: justification of dealer %d: %v", ErrMessage, j.Index+1, err)
	}
	if d.newIdx >= 0 && int(j.Justification.Index) == d.newIdx {
		d.justified[j.Index] = j.Justification.Deal
	}
	return nil
}

// SetTimeout ends the ceremony's waiting: missing responses count as
// absent, and deals with too many absent or unjustified complaints are
// disqualified.
func (d *DKG) SetTimeout() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timedOut = true
	d.gen.SetTimeout()
}

// Certified reports whether every deal is certified with every response
// present, so the ceremony can end before its timeout.
func (d *DKG) Certified() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen.Certified()
}

// QUAL returns the 1-based (old, when resharing) indices of the dealers
// whose deals are certified, sorted.
func (d *DKG) QUAL() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int
	for _, i := range d.gen.QUAL() {
		out = append(out, i+1)
	}
	slices.Sort(out)
	return out
}

// Receives reports whether this member gets a new share.
func (d *DKG) Receives() bool { return d.newIdx >= 0 }

// Result returns this member's new share and the new group key. It needs
// enough qualified deals (the threshold for a fresh DKG, the old threshold
// for a resharing); call it after SetTimeout or once Certified. A
// resharing keeps the group public key; Result checks that it did.
func (d *DKG) Result() (*crypto.Share, *crypto.GroupKey, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.newIdx < 0 {
		return nil, nil, fmt.Errorf("%w: this member receives no share", ErrConfig)
	}
	var sh kyber.Scalar
	var commits []kyber.Point
	if d.resharing {
		ks, err := d.gen.DistKeyShare()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrNotQualified, err)
		}
		sh, commits = ks.Share.V, ks.Commits
	} else {
		var err error
		if sh, commits, err = d.freshKey(); err != nil {
			return nil, nil, err
		}
	}
	gk, err := crypto.NewGroupKey(len(d.cfg.NewNodes), encodePoints(commits))
	if err != nil {
		return nil, nil, err
	}
	s, err := newShare(d.newIdx+1, sh)
	if err != nil {
		return nil, nil, err
	}
	if err := gk.CheckShare(s); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNotQualified, err)
	}
	if d.resharing && gk.PublicKey() != d.cfg.OldGroup.PublicKey() {
		return nil, nil, fmt.Errorf("%w: resharing changed the group public key", ErrNotQualified)
	}
	return s, gk, nil
}

// freshKey sums the qualified deals. It is kyber's dkgKey, except that a
// deal revealed by a justification replaces the bad one kyber kept.
func (d *DKG) freshKey() (kyber.Scalar, []kyber.Point, error) {
	qual := d.gen.QUAL()
	if len(qual) < d.cfg.Threshold {
		return nil, nil, fmt.Errorf("%w: %d qualified dealers, need %d", ErrNotQualified, len(qual), d.cfg.Threshold)
	}
	slices.Sort(qual)
	sh := g2suite.Scalar().Zero()
	var pub *share.PubPoly
	for _, i := range qual {
		deal := d.justified[uint32(i)]
		if deal == nil {
			deal = d.gen.Verifiers()[uint32(i)].Deal()
		}
		if deal == nil || deal.SecShare == nil || len(deal.Commitments) != d.cfg.Threshold {
			return nil, nil, fmt.Errorf("%w: no usable deal from qualified dealer %d", ErrNotQualified, i+1)
		}
		sh = sh.Add(sh, deal.SecShare.V)
		poly := share.NewPubPoly(g2suite, g2suite.Point().Base(), deal.Commitments)
		if pub == nil {
			pub = poly
			continue
		}
		var err error
		if pub, err = pub.Add(poly); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrNotQualified, err)
		}
	}
	_, commits := pub.Info()
	return sh, commits, nil
}
