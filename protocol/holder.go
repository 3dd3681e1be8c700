package protocol

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// SessionIDSize is the size of a lock session ID: 128 random bits, so two
// acquisitions never share one by chance.
const SessionIDSize = 16

// SessionID names one lock session: one acquisition by one client process.
// It is the hash of the SessionKey the client draws at random for each
// acquisition (SessionKey.Session) and is part of the signed statement, so
// replicas that share one client identity are distinct holders and exclude
// each other like any two clients. It is public (every token carries it);
// only the key acts on the session.
type SessionID [SessionIDSize]byte

// NewSessionID draws a session ID from rand (crypto/rand.Reader if nil). A
// session drawn this way has no key, so no request can act on it: clients
// draw a SessionKey (NewSessionKey) and use its Session.
func NewSessionID(r io.Reader) (SessionID, error) {
	if r == nil {
		r = rand.Reader
	}
	var s SessionID
	if _, err := io.ReadFull(r, s[:]); err != nil {
		return SessionID{}, fmt.Errorf("protocol: session ID: %w", err)
	}
	return s, nil
}

// IsZero reports whether s is the zero ID, which names no session.
func (s SessionID) IsZero() bool { return s == SessionID{} }

// String is the hex form.
func (s SessionID) String() string { return hex.EncodeToString(s[:]) }

// Holder is who a statement names: a lock session, that is the client
// identity that acquired (a libp2p peer ID, which proofs of possession and
// the nodes' authentication of requests bind to) and the session ID of that
// one acquisition, whose key alone renews, abandons or releases it. Two holders are the same only if both parts are equal;
// nothing in Palisade recognises a holder by its identity alone.
type Holder struct {
	// ID is the client's identity (its libp2p peer ID).
	ID string
	// Session is the acquisition's random session ID.
	Session SessionID
}

// IsZero reports whether h names nobody.
func (h Holder) IsZero() bool { return h == Holder{} }

// String is the text form "ID/session-hex" used in logs, audit entries and
// stored records. The zero holder is "".
func (h Holder) String() string {
	if h.IsZero() {
		return ""
	}
	return h.ID + "/" + h.Session.String()
}

// Short is a shorter form for logs and messages: the ID and the first 8
// hex digits of the session.
func (h Holder) Short() string {
	if h.IsZero() {
		return ""
	}
	return h.ID + "/" + h.Session.String()[:8]
}

// Validate checks the identity's field limits and that the session is set.
func (h Holder) Validate() error {
	if err := ValidateHolder(h.ID); err != nil {
		return err
	}
	if h.Session.IsZero() {
		return fmt.Errorf("%w: holder %s has no session ID", ErrInvalidField, h.ID)
	}
	return nil
}

// MarshalText returns String's form.
func (h Holder) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses String's form: the session is the 32 lowercase hex
// digits after the last '/'. A bare identity without '/' (the form records
// written before sessions used) parses as a holder with the zero session,
// which matches no request: such a lease simply lapses.
func (h *Holder) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*h = Holder{}
		return nil
	}
	// The session is the part after the last '/': an ID may contain '/'
	// (it is a name), a session's lowercase hex never does.
	var v Holder
	v.ID = s
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		id, sess := s[:i], s[i+1:]
		raw, err := hex.DecodeString(sess)
		if err != nil || len(raw) != SessionIDSize || hex.EncodeToString(raw) != sess {
			return fmt.Errorf("%w: holder %q: bad session ID", ErrMalformed, s)
		}
		v.ID = id
		copy(v.Session[:], raw)
	}
	if err := ValidateHolder(v.ID); err != nil {
		return err
	}
	*h = v
	return nil
}

func (e *encoder) holder(h Holder) {
	e.str(h.ID)
	e.fixed(h.Session[:])
}

// optHolder decodes a holder that may be absent (an empty ID and the zero
// session); a present one must be valid.
func (d *decoder) optHolder(what string) Holder {
	var h Holder
	h.ID = d.str(what, MaxHolderLen)
	copy(h.Session[:], d.take(SessionIDSize, what+" session"))
	if d.err != nil {
		return Holder{}
	}
	if h.ID == "" && h.Session.IsZero() {
		return Holder{}
	}
	if err := h.Validate(); err != nil {
		d.err = err
		return Holder{}
	}
	return h
}

// session decodes a session ID that must be set.
func (d *decoder) session() SessionID {
	var s SessionID
	copy(s[:], d.take(SessionIDSize, "session ID"))
	if d.err == nil && s.IsZero() {
		d.fail("zero session ID")
	}
	return s
}
