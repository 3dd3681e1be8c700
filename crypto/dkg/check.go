package dkg

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"fmt"
	"reflect"

	"go.dedis.ch/kyber/v3"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/sign/schnorr"
	"go.dedis.ch/protobuf"

	"github.com/palisade-dev/palisade/crypto"
)

// Slot names the place a relayed response, complaint or justification
// fills: the dealer's deal (0-based dealer index), the member that
// responded or complained (0-based new index), and the session it claims.
type Slot struct {
	// Dealer is the dealer's 0-based index (old index when resharing).
	Dealer uint32
	// Member is the responder's or complainer's 0-based new index.
	Member uint32
	// SessionID is the session the item claims.
	SessionID []byte
}

// dealers is the number of dealers: the old nodes when resharing.
func (d *DKG) dealers() int {
	if d.resharing {
		return len(d.cfg.OldNodes)
	}
	return len(d.cfg.NewNodes)
}

// knownSession returns the session ID of dealer i's deal as this member
// holds it (received, or revealed by a justification), or nil.
func (d *DKG) knownSession(i uint32) []byte {
	if v, ok := d.gen.Verifiers()[i]; ok && v != nil {
		return v.SessionID()
	}
	return nil
}

// sessionOwner reports another dealer than i whose deal, as this member
// holds it, has session sid. Session IDs hash the dealer's key, so a
// session of dealer j relabelled as dealer i's is a forgery.
func (d *DKG) sessionOwner(i uint32, sid []byte) (uint32, bool) {
	for j, v := range d.gen.Verifiers() {
		if j != i && v != nil && v.SessionID() != nil && bytes.Equal(v.SessionID(), sid) {
			return j, true
		}
	}
	return 0, false
}

// CheckResponse verifies a response or complaint that any member relayed,
// before the caller stores or relays it, without changing the DKG's state:
// it must decode strictly, name a dealer and a new member of this
// ceremony, carry that member's signature, and belong to the dealer's
// session as far as this member knows it. A forged or corrupted copy fails
// with ErrForged; a signed one for another session with ErrSession.
// It returns the slot the response fills.
func (d *DKG) CheckResponse(b []byte) (Slot, error) {
	r, err := decodeResponse(b)
	if err != nil {
		return Slot{}, fmt.Errorf("%w: %w", ErrForged, err)
	}
	s := Slot{Dealer: r.Index, Member: r.Response.Index, SessionID: r.Response.SessionID}
	if int(r.Index) >= d.dealers() || int(r.Response.Index) >= len(d.cfg.NewNodes) {
		return s, fmt.Errorf("%w: response of node %d to dealer %d: no such member", ErrForged, r.Response.Index+1, r.Index+1)
	}
	// The session checks are cheap: do them before the signature.
	d.mu.Lock()
	known := d.knownSession(r.Index)
	owner, relabelled := d.sessionOwner(r.Index, s.SessionID)
	d.mu.Unlock()
	if known != nil && !bytes.Equal(known, s.SessionID) {
		return s, fmt.Errorf("%w: response of node %d to dealer %d", ErrSession, r.Response.Index+1, r.Index+1)
	}
	if relabelled {
		return s, fmt.Errorf("%w: response of node %d labelled for dealer %d concerns dealer %d", ErrSession, r.Response.Index+1, r.Index+1, owner+1)
	}
	pub, err := decodeG2(d.cfg.NewNodes[r.Response.Index][:])
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrForged, err)
	}
	if err := schnorr.Verify(g2suite, pub, r.Response.Hash(g2suite), r.Response.Signature); err != nil {
		return s, fmt.Errorf("%w: response of node %d to dealer %d", ErrForged, r.Response.Index+1, r.Index+1)
	}
	return s, nil
}

// CheckJustification verifies a justification that any member relayed,
// before the caller stores or relays it, without changing the DKG's state:
// it must decode strictly (commitments in the G2 subgroup), carry its
// dealer's signature, reveal the deal of the member it names, and its
// session must be the hash of the dealer's key, the members' keys and the
// revealed commitments, equal to the dealer's session as far as this
// member knows it. Whether the revealed share matches the commitments is
// left to ProcessJustification: a signed bad justification is evidence
// against its dealer that every member must see. Errors wrap ErrForged
// or ErrSession.
func (d *DKG) CheckJustification(b []byte) (Slot, error) {
	j, err := decodeJustification(b)
	if err != nil {
		return Slot{}, fmt.Errorf("%w: %w", ErrForged, err)
	}
	jj := j.Justification
	s := Slot{Dealer: j.Index, Member: jj.Index, SessionID: jj.SessionID}
	pub, ok := d.dealerKey(j.Index)
	if !ok || int(jj.Index) >= len(d.cfg.NewNodes) || jj.Deal.SecShare.I != int(jj.Index) {
		return s, fmt.Errorf("%w: justification of dealer %d for node %d: no such member", ErrForged, j.Index+1, jj.Index+1)
	}
	// A session that is not the hash of the revealed commitments is
	// malformed whoever looks at it; the cheap checks go first.
	if jj.Deal.T != uint32(d.cfg.Threshold) || !bytes.Equal(jj.Deal.SessionID, jj.SessionID) ||
		!bytes.Equal(d.sessionID(pub, jj.Deal.Commitments, jj.Deal.T), jj.SessionID) {
		return s, fmt.Errorf("%w: justification of dealer %d for node %d: malformed session", ErrForged, j.Index+1, jj.Index+1)
	}
	d.mu.Lock()
	known := d.knownSession(j.Index)
	d.mu.Unlock()
	if known != nil && !bytes.Equal(known, s.SessionID) {
		return s, fmt.Errorf("%w: justification of dealer %d for node %d", ErrSession, j.Index+1, jj.Index+1)
	}
	if err := schnorr.Verify(g2suite, pub, jj.Hash(g2suite), jj.Signature); err != nil {
		return s, fmt.Errorf("%w: justification of dealer %d for node %d", ErrForged, j.Index+1, jj.Index+1)
	}
	return s, nil
}

// ResponseSlot decodes a response or complaint strictly and returns the
// slot it claims, without checking its signature (see CheckResponse).
func ResponseSlot(b []byte) (Slot, error) {
	r, err := decodeResponse(b)
	if err != nil {
		return Slot{}, err
	}
	return Slot{Dealer: r.Index, Member: r.Response.Index, SessionID: r.Response.SessionID}, nil
}

// JustificationSlot decodes a justification strictly and returns the slot
// it claims, without checking its signature (see CheckJustification).
func JustificationSlot(b []byte) (Slot, error) {
	j, err := decodeJustification(b)
	if err != nil {
		return Slot{}, err
	}
	return Slot{Dealer: j.Index, Member: j.Justification.Index, SessionID: j.Justification.SessionID}, nil
}

// DealDealer returns the 0-based dealer index a deal claims, so that the
// caller can check it against the member it fetched the deal from.
func DealDealer(b []byte) (uint32, error) {
	dd, err := decodeDeal(b)
	if err != nil {
		return 0, err
	}
	return dd.Index, nil
}

// checkDealPoints opens a deal addressed to this member the way kyber's
// verifier does and decodes its commitments strictly, as every point from
// another party is (flag bits, x below p, on the curve, in G2's prime-order
// subgroup, not the identity), before kyber stores anything. kyber's own
// decoding of the plaintext loses the reason a point was refused and
// accepts the identity, so the commitments are first read as raw bytes
// here. A deal that does not open is left to kyber to refuse. d.mu must be
// held.
func (d *DKG) checkDealPoints(dd *pedersen.Deal) error {
	if d.newIdx < 0 || dd == nil || dd.Deal == nil {
		return nil
	}
	dealer, ok := d.dealerKey(dd.Index)
	if !ok {
		return nil
	}
	dh := g2suite.Point()
	if err := dh.UnmarshalBinary(dd.Deal.DHKey); err != nil {
		return nil
	}
	verifiers, err := dkgPoints(d.cfg.NewNodes)
	if err != nil {
		return err
	}
	h := g2suite.Hash()
	_, _ = h.Write([]byte("vss-dealer"))
	_, _ = dealer.MarshalTo(h)
	_, _ = h.Write([]byte("vss-verifiers"))
	for _, v := range verifiers {
		_, _ = v.MarshalTo(h)
	}
	hctx := h.Sum(nil)
	pre, _ := g2suite.Point().Mul(d.cfg.Key.s, dh).MarshalBinary()
	key, err := hkdf.Key(g2suite.Hash, pre, nil, string(hctx), 32)
	if err != nil {
		return nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil || len(dd.Deal.Nonce) != gcm.NonceSize() {
		return nil
	}
	plain, err := gcm.Open(nil, dd.Deal.Nonce, dd.Deal.Cipher, hctx)
	if err != nil {
		return nil
	}
	deal := &vss.Deal{}
	var point kyber.Point
	var scalar kyber.Scalar
	cons := protobuf.Constructors{
		reflect.TypeOf(&point).Elem():  func() any { return &rawPoint{} },
		reflect.TypeOf(&scalar).Elem(): func() any { return g2suite.Scalar() },
	}
	if err := protobuf.DecodeWithConstructors(plain, deal, cons); err != nil {
		return nil
	}
	if len(deal.Commitments) > crypto.MaxNodes {
		return fmt.Errorf("%w: %d commitments", ErrMalformed, len(deal.Commitments))
	}
	for i, c := range deal.Commitments {
		raw, ok := c.(*rawPoint)
		if !ok {
			return fmt.Errorf("%w: commitment %d is not a G2 point", ErrMalformed, i)
		}
		if _, err := decodeG2Subgroup(raw.b); err != nil {
			return fmt.Errorf("commitment %d: %w", i, err)
		}
	}
	return nil
}

// rawPoint keeps the bytes of a point that kyber's plaintext decoding
// meets, so that checkDealPoints can decode them strictly itself. Only
// UnmarshalBinary may be called on it: its other kyber.Point methods are
// those of a nil interface.
type rawPoint struct {
	kyber.Point
	b []byte
}

// UnmarshalBinary keeps a copy of b.
func (p *rawPoint) UnmarshalBinary(b []byte) error {
	p.b = bytes.Clone(b)
	return nil
}
