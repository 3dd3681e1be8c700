// Package protocol defines what Palisade's nodes, clients and verifiers say
// to each other: the canonical signed bytes, tokens and their text form, the
// wire messages with their size limits and libp2p protocol IDs, and the
// cluster file. It imports only package crypto and the standard library, so
// verifiers embedded in resources stay small.
package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/palisade-dev/palisade/crypto"
)

// Version is the version byte of the signed bytes and of every encoding
// here. Version 2 added the lock session to the statement: a holder is an
// identity plus a session ID (see Holder). Version 3 moved signatures to
// the IETF BLS ciphersuite on BLS12-381 (48-byte signatures, 96-byte
// keys). Tokens of versions 1 and 2 are refused with ErrTokenVersion.
const Version = 3

// Domain tags, one per kind of signed or hashed bytes; each ends in a zero
// byte so no tag is a prefix of another's input.
const (
	// DomainToken tags the bytes the group threshold-signs.
	DomainToken = "palisade/token\x00"
	// DomainVote tags the bytes a node signs with its identity key when it
	// votes, which makes conflicting votes attributable.
	DomainVote = "palisade/vote\x00"
	// DomainClusterID tags the hash that names a cluster.
	DomainClusterID = "palisade/cluster-id\x00"
)

// Limits on field sizes, enforced by every decoder.
const (
	// MaxResourceLen is the longest resource name in bytes.
	MaxResourceLen = 256
	// MaxHolderLen is the longest holder identity in bytes.
	MaxHolderLen = 128
	// MaxTokenSize is the largest binary token.
	MaxTokenSize = 1 + ClusterIDSize + 2 + MaxResourceLen + 8 + 2 + MaxHolderLen + SessionIDSize + crypto.SignatureSize
	// MaxTokenTextLen is the longest text form of a token.
	MaxTokenTextLen = len(TokenTextPrefix) + (MaxTokenSize*4+2)/3
	// ClusterIDSize is the size of a cluster ID.
	ClusterIDSize = 32
	// TokenTextPrefix starts the text form of a token.
	TokenTextPrefix = "pt3."
)

// oldTokenTextPrefixes started the text forms of earlier token versions.
var oldTokenTextPrefixes = map[string]int{"pt1.": 1, "pt2.": 2}

// Errors callers can branch on.
var (
	// ErrMalformed reports bytes that are not a canonical encoding.
	ErrMalformed = errors.New("protocol: malformed encoding")
	// ErrInvalidField reports a field outside its limits (empty resource,
	// control characters, over-long holder).
	ErrInvalidField = errors.New("protocol: invalid field")
	// ErrTokenVersion reports a token of an earlier format version, which
	// is never accepted: version 1 tokens named no lock session, version 2
	// tokens were signed on the bn256 curve. The error names the version
	// and what to do. It wraps ErrMalformed.
	ErrTokenVersion = fmt.Errorf("%w: token of an earlier format version", ErrMalformed)
)

// tokenVersionError explains why a token of version v is refused.
func tokenVersionError(v int) error {
	switch v {
	case 1:
		return fmt.Errorf("%w: version 1 tokens name no lock session and are no longer accepted; acquire a new token", ErrTokenVersion)
	case 2:
		return fmt.Errorf("%w: version 2 tokens are signed on the bn256 curve, which this release no longer verifies; the cluster must run a new DKG on BLS12-381 (palisade dkg), then acquire a new token", ErrTokenVersion)
	}
	return fmt.Errorf("%w: version %d", ErrTokenVersion, v)
}

// ClusterID names a cluster: a hash of its name and group public key.
type ClusterID [ClusterIDSize]byte

// NewClusterID computes the ID of the cluster with this name and group key.
func NewClusterID(name string, key crypto.PublicKey) ClusterID {
	e := encoder{}
	e.fixed([]byte(DomainClusterID))
	e.u8(Version)
	e.str(name)
	e.fixed(key[:])
	return sha256.Sum256(e.b)
}

// String is the hex form used in cluster files and logs.
func (c ClusterID) String() string { return hex.EncodeToString(c[:]) }

// ParseClusterID decodes the hex form.
func ParseClusterID(s string) (ClusterID, error) {
	var c ClusterID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != ClusterIDSize {
		return c, fmt.Errorf("%w: cluster ID %q", ErrMalformed, s)
	}
	copy(c[:], b)
	return c, nil
}

// Statement is what a token asserts and what nodes sign: this holder (one
// lock session of one client identity) owns this resource at this epoch,
// in this cluster.
type Statement struct {
	Cluster  ClusterID
	Resource string
	Epoch    uint64
	Holder   Holder
}

// SignedBytes is the one canonical encoding that the group signs:
// DomainToken, Version, then cluster, resource, epoch, holder identity and
// session ID; each variable-length field is uvarint-length-prefixed. Node,
// client and verifier all use it.
func (s Statement) SignedBytes() []byte {
	e := encoder{b: make([]byte, 0, 64+SessionIDSize+len(s.Resource)+len(s.Holder.ID))}
	e.fixed([]byte(DomainToken))
	e.u8(Version)
	e.bytes(s.Cluster[:])
	e.str(s.Resource)
	e.u64(s.Epoch)
	e.holder(s.Holder)
	return e.b
}

// VoteBytes is what a node signs with its identity key when it votes for the
// statement. Two of these from one node with the same (cluster, resource,
// epoch) and different holders are evidence of equivocation.
func (s Statement) VoteBytes() []byte {
	return append([]byte(DomainVote), s.SignedBytes()[len(DomainToken):]...)
}

// Validate checks the field limits.
func (s Statement) Validate() error {
	if err := ValidateResource(s.Resource); err != nil {
		return err
	}
	return s.Holder.Validate()
}

// Token is a fencing token: a statement with the group's threshold signature.
// It is self-contained: the group public key alone checks it.
type Token struct {
	Statement
	Signature crypto.Signature
}

// MarshalBinary returns the canonical binary form: Version, cluster ID,
// resource, epoch, holder identity, session ID, signature.
func (t Token) MarshalBinary() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t.appendTo(nil), nil
}

func (t Token) appendTo(b []byte) []byte {
	e := encoder{b: b}
	e.u8(Version)
	e.fixed(t.Cluster[:])
	e.str(t.Resource)
	e.u64(t.Epoch)
	e.holder(t.Holder)
	e.fixed(t.Signature[:])
	return e.b
}

// ParseToken decodes the binary form strictly. It checks the encoding,
// field limits and the signature's canonical form, not the signature itself:
// use verifier for that.
func ParseToken(b []byte) (Token, error) {
	d := decoder{b: b}
	t, err := decodeToken(&d)
	if err == nil {
		err = d.finish()
	}
	if err != nil {
		return Token{}, err
	}
	return t, nil
}

func decodeToken(d *decoder) (Token, error) {
	var t Token
	switch v := d.u8("token version"); {
	case d.err != nil:
	case v == 1 || v == 2:
		return Token{}, tokenVersionError(int(v))
	case v != Version:
		return Token{}, fmt.Errorf("%w: token version %d, want %d", ErrMalformed, v, Version)
	}
	copy(t.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
	t.Resource = d.str("resource", MaxResourceLen)
	t.Epoch = d.u64("epoch")
	t.Holder.ID = d.str("holder", MaxHolderLen)
	copy(t.Holder.Session[:], d.take(SessionIDSize, "session ID"))
	sig := d.take(crypto.SignatureSize, "signature")
	if d.err != nil {
		return Token{}, d.err
	}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	s, err := crypto.ParseSignature(sig)
	if err != nil {
		return Token{}, fmt.Errorf("%w: token signature: %w", ErrMalformed, err)
	}
	t.Signature = s
	return t, nil
}

// String returns the text form: TokenTextPrefix then unpadded base64url of
// the binary form. It fits an HTTP header and a shell argument unquoted.
// An invalid token yields "pt3.invalid".
func (t Token) String() string {
	b, err := t.MarshalBinary()
	if err != nil {
		return TokenTextPrefix + "invalid"
	}
	return TokenTextPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseTokenText decodes the text form strictly (surrounding spaces are
// trimmed, nothing else is forgiven).
func ParseTokenText(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxTokenTextLen {
		return Token{}, fmt.Errorf("%w: token text is %d bytes, limit %d", ErrMalformed, len(s), MaxTokenTextLen)
	}
	rest, ok := strings.CutPrefix(s, TokenTextPrefix)
	if !ok {
		for prefix, v := range oldTokenTextPrefixes {
			if strings.HasPrefix(s, prefix) {
				return Token{}, tokenVersionError(v)
			}
		}
	}
	if !ok {
		return Token{}, fmt.Errorf("%w: token text must start with %q", ErrMalformed, TokenTextPrefix)
	}
	// Go's base64 decoder skips CR and LF even in strict mode: refuse them
	// so each token has exactly one text form.
	if strings.ContainsAny(rest, "\r\n") {
		return Token{}, fmt.Errorf("%w: token text contains a line break", ErrMalformed)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil {
		return Token{}, fmt.Errorf("%w: token text: %w", ErrMalformed, err)
	}
	return ParseToken(b)
}

// Digest is a hash of the token's canonical binary form, for logs and for
// keying caches (never key on raw, possibly malleated, bytes).
func (t Token) Digest() [32]byte {
	return sha256.Sum256(t.appendTo(nil))
}

// MarshalText returns the text form, so tokens read well in JSON.
func (t Token) MarshalText() ([]byte, error) {
	b, err := t.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return []byte(TokenTextPrefix + base64.RawURLEncoding.EncodeToString(b)), nil
}

// UnmarshalText parses the text form strictly.
func (t *Token) UnmarshalText(b []byte) error {
	v, err := ParseTokenText(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
