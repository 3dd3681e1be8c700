package protocol

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// Signed places (issue 20, F1). A waiter's place in a resource's queue is
// what members gave it, and a member says so with its identity key: each
// Wait reply carries the member's SignedPlace for the waiting session.
// A waiter whose request reached some members just after a handoff (so
// they put it one cohort later than the others did) shows f+1 of these,
// from distinct members, as its claim (WaitRequest.Claim); a member moves
// it up one cohort only if they verify. At most f of them can be lies, so
// at least one honest member put the waiter there.

// DomainPlace tags the bytes a member signs with its identity key when it
// tells a waiter its place.
const DomainPlace = "palisade/place\x00"

// MaxClaimPlaces caps the signed places a claim may carry: a claim needs
// f+1 of them (members verify no more than that), and 16 covers clusters
// of up to 46 members. A larger cluster's waiters cannot claim, and are
// then at most one cohort apart between members.
const MaxClaimPlaces = 16

// MaxPlaceSigLen is the length cap of a place's signature: an Ed25519
// signature (members' identity keys are Ed25519, see PeerIDKey).
const MaxPlaceSigLen = ed25519.SignatureSize

// ErrBadPlace reports a signed place, or a claim, that is not what f+1
// members gave this waiter.
var ErrBadPlace = errors.New("protocol: invalid signed place")

// Place is a member's statement that it queued a holder (one lock session
// of one client identity, named by its HolderRef) on a resource in a
// cohort.
type Place struct {
	Cluster  ClusterID
	Resource string
	Holder   HolderRef
	Cohort   uint64
	// Member is the index (1..N) of the member that gave the place.
	Member int
}

// SignedPlace is a place with the member's identity signature over
// Place.PlaceBytes.
type SignedPlace struct {
	Place
	Sig []byte
}

// PlaceBytes is what a member signs: DomainPlace, Version, then cluster,
// resource, holder identity and session hash, cohort and member index,
// each variable-length field uvarint-length-prefixed.
func (p Place) PlaceBytes() []byte {
	e := encoder{b: make([]byte, 0, len(DomainPlace)+64+len(p.Resource)+len(p.Holder.ID)+SessionHashSize)}
	e.fixed([]byte(DomainPlace))
	e.u8(Version)
	e.bytes(p.Cluster[:])
	e.str(p.Resource)
	e.holderRef(p.Holder)
	e.u64(p.Cohort)
	e.u64(uint64(p.Member))
	return e.b
}

// Signer signs with a member's identity key (a libp2p crypto.PrivKey is
// one).
type Signer interface {
	Sign(msg []byte) ([]byte, error)
}

// SignPlace signs p with the member's identity key.
func SignPlace(key Signer, p Place) (SignedPlace, error) {
	sig, err := key.Sign(p.PlaceBytes())
	if err != nil {
		return SignedPlace{}, fmt.Errorf("protocol: sign place: %w", err)
	}
	return SignedPlace{Place: p, Sig: sig}, nil
}

// VerifyPlace checks a signed place: the member is one of c's, the place
// is for c, and the signature (by the member's Ed25519 peer ID key) is
// valid over its PlaceBytes. Every refusal wraps ErrBadPlace.
func VerifyPlace(c *Cluster, sp SignedPlace) error {
	if sp.Member < 1 || sp.Member > len(c.File.Nodes) {
		return fmt.Errorf("%w: member index %d", ErrBadPlace, sp.Member)
	}
	if sp.Cluster != c.ID {
		return fmt.Errorf("%w: place in cluster %s", ErrBadPlace, sp.Cluster)
	}
	pub, err := PeerIDKey(c.File.Nodes[sp.Member-1].PeerID)
	if err != nil {
		return fmt.Errorf("%w: member %d public key: %w", ErrBadPlace, sp.Member, err)
	}
	if !ed25519.Verify(pub, sp.PlaceBytes(), sp.Sig) {
		return fmt.Errorf("%w: member %d signature does not verify", ErrBadPlace, sp.Member)
	}
	return nil
}

// ClaimCohort is the cohort a claim asks for: the latest of its places'
// (each of the others vouches for an earlier one), 0 for no claim.
func ClaimCohort(claim []SignedPlace) uint64 {
	var c uint64
	for _, p := range claim {
		c = max(c, p.Cohort)
	}
	return c
}

// VerifyClaim checks a waiter's claim on a resource of c: f+1 places from
// distinct members, all for this cluster, resource and holder, with valid
// signatures. It returns the claimed cohort (ClaimCohort). Places are
// checked cheaply first, all of them; only then are the signatures of
// the first f+1 distinct members verified, and no more: extra places cost
// nothing. Every refusal wraps ErrBadPlace.
func VerifyClaim(c *Cluster, resource string, holder HolderRef, claim []SignedPlace) (uint64, error) {
	need := c.F + 1
	if len(claim) > MaxClaimPlaces {
		return 0, fmt.Errorf("%w: %d places, at most %d", ErrBadPlace, len(claim), MaxClaimPlaces)
	}
	seen := make(map[int]bool, len(claim))
	var check []SignedPlace
	for _, p := range claim {
		switch {
		case p.Cluster != c.ID:
			return 0, fmt.Errorf("%w: place in cluster %s", ErrBadPlace, p.Cluster)
		case p.Resource != resource:
			return 0, fmt.Errorf("%w: place on %q", ErrBadPlace, p.Resource)
		case p.Holder != holder || holder.IsZero():
			return 0, fmt.Errorf("%w: place of another holder", ErrBadPlace)
		case p.Member < 1 || p.Member > len(c.File.Nodes):
			return 0, fmt.Errorf("%w: member index %d", ErrBadPlace, p.Member)
		case p.Cohort == 0:
			return 0, fmt.Errorf("%w: cohort 0", ErrBadPlace)
		case seen[p.Member]:
			return 0, fmt.Errorf("%w: member %d twice", ErrBadPlace, p.Member)
		}
		seen[p.Member] = true
		if len(check) < need {
			check = append(check, p)
		}
	}
	if len(check) < need {
		return 0, fmt.Errorf("%w: %d members vouch, need %d", ErrBadPlace, len(check), need)
	}
	for _, p := range check {
		if err := VerifyPlace(c, p); err != nil {
			return 0, err
		}
	}
	return ClaimCohort(claim), nil
}

func (e *encoder) place(p SignedPlace) {
	e.u64(uint64(p.Member))
	e.fixed(p.Cluster[:])
	e.str(p.Resource)
	e.holderRef(p.Holder)
	e.u64(p.Cohort)
	e.bytes(p.Sig)
}

// place decodes a signed place: a member index in range, a valid
// resource, a holder, a cohort above 0 and a signature of at most
// MaxPlaceSigLen bytes. The signature is not checked (VerifyPlace).
func (d *decoder) place() SignedPlace {
	var p SignedPlace
	n := d.u64("place member")
	if d.err == nil && (n < 1 || n > 1<<16) {
		d.fail("place member index %d out of range", n)
	}
	p.Member = int(n)
	copy(p.Cluster[:], d.take(ClusterIDSize, "place cluster"))
	p.Resource = d.resource()
	p.Holder = d.optHolderRef("place holder")
	if d.err == nil && p.Holder.IsZero() {
		d.fail("place without holder")
	}
	p.Cohort = d.u64("place cohort")
	if d.err == nil && p.Cohort == 0 {
		d.fail("place in cohort 0")
	}
	p.Sig = d.bytes("place signature", MaxPlaceSigLen)
	if d.err == nil && len(p.Sig) == 0 {
		d.fail("place without signature")
	}
	if d.err != nil {
		return SignedPlace{}
	}
	return p
}

// Marshal encodes the signed place.
func (p SignedPlace) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.place(p)
	return e.b
}

// UnmarshalSignedPlace decodes a SignedPlace strictly.
func UnmarshalSignedPlace(b []byte) (SignedPlace, error) {
	return decode(b, func(d *decoder) SignedPlace { return d.place() })
}

// claim encodes a claim: a count, then the places.
func (e *encoder) claim(c []SignedPlace) {
	e.u8(uint8(len(c)))
	for _, p := range c {
		e.place(p)
	}
}

// claim decodes a claim of a WaitRequest for cluster and resource: at
// most MaxClaimPlaces places, all for that cluster and resource and one
// holder, from distinct members.
func (d *decoder) claim(cluster ClusterID, resource string) []SignedPlace {
	n := int(d.u8("claim places"))
	if d.err == nil && n > MaxClaimPlaces {
		d.fail("claim of %d places exceeds limit %d", n, MaxClaimPlaces)
	}
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]SignedPlace, 0, n)
	members := make(map[int]bool, n)
	for range n {
		p := d.place()
		if d.err != nil {
			return nil
		}
		switch {
		case p.Cluster != cluster || p.Resource != resource:
			d.fail("claim place for another cluster or resource")
		case len(out) > 0 && p.Holder != out[0].Holder:
			d.fail("claim places of two holders")
		case members[p.Member]:
			d.fail("claim names member %d twice", p.Member)
		}
		if d.err != nil {
			return nil
		}
		members[p.Member] = true
		out = append(out, p)
	}
	return out
}

// optPlace encodes a place that may be absent.
func (e *encoder) optPlace(p *SignedPlace) {
	e.flag(p != nil)
	if p != nil {
		e.place(*p)
	}
}

func (d *decoder) optPlace() *SignedPlace {
	if !d.flag("place flag") {
		return nil
	}
	p := d.place()
	if d.err != nil {
		return nil
	}
	return &p
}
