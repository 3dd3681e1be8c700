package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// DomainFork starts the binary form of a Fork, so that a fork file is
// never mistaken for another encoding (a token's binary form starts with
// its version byte).
const DomainFork = "palisade/fork\x00"

// Limits of a fork's encodings.
const (
	// MaxForkSize is the largest binary fork: the domain tag, the version,
	// and two length-prefixed tokens of at most MaxTokenSize bytes.
	MaxForkSize = len(DomainFork) + 1 + 2*(2+MaxTokenSize)
	// ForkTextPrefix starts the text form of a fork.
	ForkTextPrefix = "pf3."
	// MaxForkTextLen is the longest text form of a fork.
	MaxForkTextLen = len(ForkTextPrefix) + (MaxForkSize*4+2)/3
)

// Errors about forks callers can branch on.
var (
	// ErrNotFork reports two tokens that do not fork: another cluster,
	// resource or epoch, or the same holder. It wraps ErrInvalidField.
	ErrNotFork = fmt.Errorf("%w: tokens do not fork", ErrInvalidField)
	// ErrBadFork reports a fork that does not verify for a cluster: a
	// token of another cluster, or a threshold signature that does not
	// verify under the cluster's group key (wrapping crypto's error).
	ErrBadFork = errors.New("protocol: fork does not verify")
)

// Fork is two valid tokens of one cluster for the same (resource, epoch)
// with different holders (an identity, or another lock session of the same
// identity). S1 rules it out while at most f nodes misbehave, so a fork
// that verifies (VerifyFork) proves that more than f nodes signed twice
// at one epoch, or were restored from old copies of their vote stores.
// Anyone with the cluster file can check it, offline.
//
// A fork has one encoding: the two tokens in the order of their binary
// forms (Token.MarshalBinary), smaller first. NewFork and ParseFork give
// A and B in that order; MarshalBinary writes that order whatever the
// fields hold.
type Fork struct {
	A, B Token
}

// NewFork makes the fork of two tokens, in canonical order. It checks the
// fields and that the tokens fork (else ErrNotFork), not the signatures:
// VerifyFork does that.
func NewFork(x, y Token) (Fork, error) {
	f := Fork{A: x, B: y}
	if err := f.Check(); err != nil {
		return Fork{}, err
	}
	xb, yb := x.appendTo(nil), y.appendTo(nil)
	if bytes.Compare(xb, yb) > 0 {
		f.A, f.B = y, x
	}
	return f, nil
}

// Check reports whether the two tokens are well formed (field limits) and
// fork: same cluster, resource and epoch, different holders. It does not
// check the signatures: that needs the cluster's group key (VerifyFork).
func (f Fork) Check() error {
	for _, t := range []Token{f.A, f.B} {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrNotFork, err)
		}
	}
	a, b := f.A.Statement, f.B.Statement
	if a.Cluster != b.Cluster || a.Resource != b.Resource || a.Epoch != b.Epoch {
		return fmt.Errorf("%w: not the same cluster, resource and epoch", ErrNotFork)
	}
	if a.Holder == b.Holder {
		return fmt.Errorf("%w: same holder %s", ErrNotFork, a.Holder.Short())
	}
	return nil
}

// Resource is the resource both tokens name.
func (f Fork) Resource() string { return f.A.Resource }

// Epoch is the epoch both tokens name.
func (f Fork) Epoch() uint64 { return f.A.Epoch }

// Equal reports whether f and o hold the same two tokens, in either order.
func (f Fork) Equal(o Fork) bool {
	return f.A == o.A && f.B == o.B || f.A == o.B && f.B == o.A
}

// ID names the fork without showing its tokens: hex of a SHA-256 hash of
// its binary form (empty for a fork that does not Check). The tokens are
// bearer credentials of their holders, so answers to clients and
// metrics name a fork by its ID; the proof itself goes where operators
// keep it (the store's fork records, logs).
func (f Fork) ID() string {
	b, err := f.MarshalBinary()
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// ordered returns the tokens' binary forms in canonical order.
func (f Fork) ordered() (a, b []byte) {
	a, b = f.A.appendTo(nil), f.B.appendTo(nil)
	if bytes.Compare(a, b) > 0 {
		a, b = b, a
	}
	return a, b
}

// MarshalBinary returns the canonical binary form: DomainFork, Version,
// then the two tokens' binary forms, each uvarint-length-prefixed, the
// smaller first. It fails if the tokens do not fork (Check).
func (f Fork) MarshalBinary() ([]byte, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	a, b := f.ordered()
	e := encoder{b: make([]byte, 0, len(DomainFork)+1+4+len(a)+len(b))}
	e.fixed([]byte(DomainFork))
	e.u8(Version)
	e.bytes(a)
	e.bytes(b)
	return e.b, nil
}

// ParseFork decodes the binary form strictly: the domain tag and version,
// two tokens (ParseToken's rules) in canonical order, nothing after them,
// and tokens that fork (Check). It does not check the signatures: use
// VerifyFork.
func ParseFork(b []byte) (Fork, error) {
	if len(b) > MaxForkSize {
		return Fork{}, fmt.Errorf("%w: fork is %d bytes, limit %d", ErrMalformed, len(b), MaxForkSize)
	}
	d := decoder{b: b}
	if tag := d.take(len(DomainFork), "fork domain tag"); d.err == nil && string(tag) != DomainFork {
		d.fail("not a fork: domain tag %q", tag)
	}
	d.version()
	ab := d.bytes("fork token A", MaxTokenSize)
	bb := d.bytes("fork token B", MaxTokenSize)
	if err := d.finish(); err != nil {
		return Fork{}, err
	}
	if bytes.Compare(ab, bb) >= 0 {
		return Fork{}, fmt.Errorf("%w: fork tokens not in canonical order", ErrMalformed)
	}
	a, err := ParseToken(ab)
	if err != nil {
		return Fork{}, fmt.Errorf("fork token A: %w", err)
	}
	t, err := ParseToken(bb)
	if err != nil {
		return Fork{}, fmt.Errorf("fork token B: %w", err)
	}
	f := Fork{A: a, B: t}
	if err := f.Check(); err != nil {
		return Fork{}, err
	}
	return f, nil
}

// String returns the text form: ForkTextPrefix then unpadded base64url of
// the binary form, one line fit for a file, a log line or an HTTP header.
// A fork that does not Check yields "pf3.invalid".
func (f Fork) String() string {
	b, err := f.MarshalBinary()
	if err != nil {
		return ForkTextPrefix + "invalid"
	}
	return textForm(ForkTextPrefix, b)
}

// ParseForkText decodes the text form strictly (surrounding spaces are
// trimmed, nothing else is forgiven).
func ParseForkText(s string) (Fork, error) {
	b, err := parseTextForm(s, ForkTextPrefix, MaxForkTextLen, "fork")
	if err != nil {
		return Fork{}, err
	}
	return ParseFork(b)
}

// MarshalText returns the text form, so forks read well in JSON.
func (f Fork) MarshalText() ([]byte, error) {
	b, err := f.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return []byte(textForm(ForkTextPrefix, b)), nil
}

// UnmarshalText parses the text form strictly.
func (f *Fork) UnmarshalText(b []byte) error {
	v, err := ParseForkText(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// VerifyFork checks a fork for cluster c, offline: the tokens fork (else
// ErrNotFork), name c (else ErrBadFork), and both threshold signatures
// verify under c's group key (else ErrBadFork, wrapping crypto's error).
// It costs two signature checks.
func VerifyFork(c *Cluster, f Fork) error {
	if err := f.Check(); err != nil {
		return err
	}
	if f.A.Cluster != c.ID {
		return fmt.Errorf("%w: tokens of cluster %s, this is %s", ErrBadFork, f.A.Cluster, c.ID)
	}
	for _, t := range []Token{f.A, f.B} {
		if err := c.Key.Verify(t.Statement.SignedBytes(), t.Signature); err != nil {
			return fmt.Errorf("%w: token of holder %s: %w", ErrBadFork, t.Holder.Short(), err)
		}
	}
	return nil
}
