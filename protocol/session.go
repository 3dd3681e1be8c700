package protocol

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
)

// Sessions that cannot be borrowed (issue 20, F4). A lock session is
// owned by the process that drew its SessionKey: the session ID that
// statements, tokens and votes name is a hash of the key, so anyone who
// sees a token learns the ID but not the key. Every request that acts on
// a session (Acquire, Wait, Renew, Abandon, and Release without the
// session's token) carries the key, and a node derives the session from
// it: knowing a session ID, even with the holder's identity key, is not
// enough to act on that session. Replies that describe a holder name it
// by a further hash (HolderRef), never by its ID.

// SessionKeySize is the size of a SessionKey: 256 random bits.
const SessionKeySize = 32

// sessionKeyDomain separates the session ID derivation from every other
// hash.
const sessionKeyDomain = "palisade/session-id/v1\x00"

// SessionKey is the secret of one lock session, known only to the process
// that acquired (and, once sent, to the cluster's members over their
// authenticated channels).
type SessionKey [SessionKeySize]byte

// NewSessionKey draws a session key from r (crypto/rand.Reader if nil).
func NewSessionKey(r io.Reader) (SessionKey, error) {
	if r == nil {
		r = rand.Reader
	}
	var k SessionKey
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return SessionKey{}, fmt.Errorf("protocol: session key: %w", err)
	}
	return k, nil
}

// IsZero reports whether k is the zero key, which owns no session.
func (k SessionKey) IsZero() bool { return k == SessionKey{} }

// Session is the session ID k owns: the first SessionIDSize bytes of
// SHA-256 over a domain tag and k. It is never zero in practice (a 2^-128
// chance), and a node refuses a key whose session would be.
func (k SessionKey) Session() SessionID {
	h := sha256.New()
	h.Write([]byte(sessionKeyDomain))
	h.Write(k[:])
	var s SessionID
	copy(s[:], h.Sum(nil))
	return s
}

// HolderRef names a holder in a reply: its identity and the hash of its
// session ID (SessionID.Hash), enough to tell two sessions apart and to
// recognise one's own, but not to name the session in a request.
type HolderRef struct {
	ID      string
	Session SessionHash
}

// Ref is how replies name h; the zero holder's is the zero HolderRef.
func (h Holder) Ref() HolderRef {
	if h.IsZero() {
		return HolderRef{}
	}
	return HolderRef{ID: h.ID, Session: h.Session.Hash()}
}

// IsZero reports whether r names nobody.
func (r HolderRef) IsZero() bool { return r == HolderRef{} }

// Is reports whether r names h.
func (r HolderRef) Is(h Holder) bool { return !h.IsZero() && r == h.Ref() }

// String is "ID/hash-hex", "" for nobody.
func (r HolderRef) String() string {
	if r.IsZero() {
		return ""
	}
	return r.ID + "/" + r.Session.String()
}

// Short is "ID/" and the first 8 hex digits of the hash.
func (r HolderRef) Short() string {
	if r.IsZero() {
		return ""
	}
	return r.ID + "/" + r.Session.String()[:8]
}

func (e *encoder) holderRef(r HolderRef) {
	e.str(r.ID)
	e.fixed(r.Session[:])
}

// optHolderRef decodes a HolderRef that may be absent (an empty ID and a
// zero hash); a present one must name a valid identity.
func (d *decoder) optHolderRef(what string) HolderRef {
	var r HolderRef
	r.ID = d.str(what, MaxHolderLen)
	copy(r.Session[:], d.take(SessionHashSize, what+" session hash"))
	if d.err != nil || r.IsZero() {
		return HolderRef{}
	}
	if err := ValidateHolder(r.ID); err != nil {
		d.err = err
		return HolderRef{}
	}
	return r
}

func (e *encoder) sessionKey(k SessionKey) { e.fixed(k[:]) }

// sessionKey decodes a session key that must be set.
func (d *decoder) sessionKey() SessionKey {
	var k SessionKey
	copy(k[:], d.take(SessionKeySize, "session key"))
	if d.err == nil && (k.IsZero() || k.Session().IsZero()) {
		d.fail("zero session key")
	}
	return k
}
