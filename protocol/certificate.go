package protocol

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"

	"github.com/palisade-dev/palisade/crypto"
)

// A vote certificate is the identity-signed votes a client combined into a
// token: the proof, checkable with the members' identity keys alone, of
// who voted for the token's statement. Clients send it with their Commit
// (CommitRequest.Certificate); nodes keep it with the certified token and
// give it out in Forensics. Two certificates of one (resource, epoch) for
// different holders convict every member that signed both (Convict): an
// honest member votes once per (resource, epoch) (S1, S3).

// ProtoForensics asks a node for the vote certificates it keeps for one
// (resource, epoch) (ForensicsRequest, ForensicsReply). It is authorised
// as Status is: members, and client identities whose patterns allow the
// resource.
const ProtoForensics = "/palisade/forensics/1.0.0"

// Limits of certificates.
const (
	// MaxCertificateVotes caps the votes of one certificate on the wire.
	// A certificate needs t = 2f+1 of them, so certificates work for
	// clusters of up to 384 members (t = 255); a client of a larger
	// cluster commits without one.
	MaxCertificateVotes = 256
	// MaxCertificatesPerEpoch is how many certificates a node keeps, and
	// a ForensicsReply carries, for one (resource, epoch): the first, and
	// one more only for another holder (a fork).
	MaxCertificatesPerEpoch = 2
	// CertificateTextPrefix starts the text form of a certificate.
	CertificateTextPrefix = "pc3."
	// maxCertificateSize is the largest binary certificate: the version,
	// a statement with every field at its limit and MaxCertificateVotes
	// votes.
	maxCertificateSize = 1 + ClusterIDSize + 2 + MaxResourceLen + 8 + 2 + MaxHolderLen + SessionIDSize + 2 + MaxCertificateVotes*certVoteSize
	// certVoteSize is one vote's encoding: a 2-byte member index and an
	// Ed25519 signature.
	certVoteSize = 2 + ed25519.SignatureSize
	// maxCertificateTextLen is the longest text form of a certificate.
	maxCertificateTextLen = len(CertificateTextPrefix) + (maxCertificateSize*4+2)/3
)

// ErrBadCertificate reports a vote certificate that is malformed or does
// not verify for a cluster: too few or too many votes, a member twice, a
// vote for another statement, or an identity signature that does not
// check (wrapping ErrBadVote).
var ErrBadCertificate = errors.New("protocol: invalid vote certificate")

// CertVote is one member's vote in a certificate: its index and its
// identity signature (Ed25519, by the key of its peer ID) over the
// certificate statement's VoteBytes.
type CertVote struct {
	Node int
	Sig  []byte
}

// Certificate is the vote certificate of a statement: identity-signed
// votes of distinct members, in increasing member order. A certificate
// that verifies (VerifyCertificate) holds at least t votes: t members
// voted for Statement.
type Certificate struct {
	Statement Statement
	Votes     []CertVote
}

// NewCertificate makes the certificate of signed votes that are all for
// one statement, by distinct members, in canonical (member) order. It
// checks the form (Check), not the signatures: VerifyCertificate does.
func NewCertificate(votes []SignedVote) (Certificate, error) {
	if len(votes) == 0 {
		return Certificate{}, fmt.Errorf("%w: no votes", ErrBadCertificate)
	}
	c := Certificate{Statement: votes[0].Statement, Votes: make([]CertVote, 0, len(votes))}
	for _, v := range votes {
		if v.Statement != c.Statement {
			return Certificate{}, fmt.Errorf("%w: vote of node %d is for another statement", ErrBadCertificate, v.Node)
		}
		c.Votes = append(c.Votes, CertVote{Node: v.Node, Sig: v.IdentitySig})
	}
	sortCertVotes(c.Votes)
	if err := c.Check(); err != nil {
		return Certificate{}, err
	}
	return c, nil
}

func sortCertVotes(vs []CertVote) {
	slices.SortFunc(vs, func(a, b CertVote) int { return a.Node - b.Node })
}

// checkCertVotes checks a certificate's votes: 1 to MaxCertificateVotes
// of them, members in strictly increasing order within 1..crypto.MaxNodes,
// Ed25519-sized signatures.
func checkCertVotes(vs []CertVote) error {
	if len(vs) == 0 || len(vs) > MaxCertificateVotes {
		return fmt.Errorf("%w: %d votes, want 1 to %d", ErrBadCertificate, len(vs), MaxCertificateVotes)
	}
	prev := 0
	for _, v := range vs {
		if v.Node < 1 || v.Node > crypto.MaxNodes {
			return fmt.Errorf("%w: node index %d", ErrBadCertificate, v.Node)
		}
		if v.Node <= prev {
			return fmt.Errorf("%w: node %d not in increasing order (twice, or after %d)", ErrBadCertificate, v.Node, prev)
		}
		if len(v.Sig) != ed25519.SignatureSize {
			return fmt.Errorf("%w: node %d signature is %d bytes, want %d", ErrBadCertificate, v.Node, len(v.Sig), ed25519.SignatureSize)
		}
		prev = v.Node
	}
	return nil
}

// Check reports whether the certificate is well formed: a valid statement
// and 1 to MaxCertificateVotes votes of distinct members in increasing
// order, each with a 64-byte signature. It checks no signature and not
// the threshold: that needs the cluster (VerifyCertificate).
func (c Certificate) Check() error {
	if err := c.Statement.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCertificate, err)
	}
	if c.Statement.Holder.IsZero() {
		return fmt.Errorf("%w: no holder", ErrBadCertificate)
	}
	return checkCertVotes(c.Votes)
}

// SignedVotes returns the certificate's votes as signed votes, each
// checkable alone (VerifyVote).
func (c Certificate) SignedVotes() []SignedVote {
	out := make([]SignedVote, len(c.Votes))
	for i, v := range c.Votes {
		out[i] = SignedVote{Node: v.Node, Statement: c.Statement, IdentitySig: v.Sig}
	}
	return out
}

// Signers returns the members whose votes the certificate holds.
func (c Certificate) Signers() []int {
	out := make([]int, len(c.Votes))
	for i, v := range c.Votes {
		out[i] = v.Node
	}
	return out
}

// Equal reports whether c and o hold the same statement and votes.
func (c Certificate) Equal(o Certificate) bool {
	return c.Statement == o.Statement && slices.EqualFunc(c.Votes, o.Votes, func(a, b CertVote) bool {
		return a.Node == b.Node && bytes.Equal(a.Sig, b.Sig)
	})
}

// VerifyCertificate checks a certificate for cluster c: it is well formed
// (Check), for c, holds at least t and at most N votes of members of c,
// and every vote's identity signature is valid. It costs one Ed25519
// check per vote and no pairing. Every refusal wraps ErrBadCertificate.
func VerifyCertificate(c *Cluster, cert Certificate) error {
	return VerifyCertificateKnowing(c, cert, nil)
}

// VerifyCertificateKnowing is VerifyCertificate for a member that knows
// one vote already: its own (known, nil for none). A vote of the
// certificate that is known exactly (the same member, statement and
// signature bytes) is not checked again. Ed25519 signatures are
// deterministic, so the vote a member gave comes back byte for byte in
// an honest client's certificate; any other bytes are checked. A member
// that voted saves one of its t checks per Commit this way. The caller
// must take known from its own durable record, never from the request.
func VerifyCertificateKnowing(c *Cluster, cert Certificate, known *SignedVote) error {
	if err := cert.Check(); err != nil {
		return err
	}
	if cert.Statement.Cluster != c.ID {
		return fmt.Errorf("%w: for cluster %s", ErrBadCertificate, cert.Statement.Cluster)
	}
	n := len(c.File.Nodes)
	if len(cert.Votes) < c.File.T || len(cert.Votes) > n {
		return fmt.Errorf("%w: %d votes, want %d to %d", ErrBadCertificate, len(cert.Votes), c.File.T, n)
	}
	msg := cert.Statement.VoteBytes()
	for _, v := range cert.Votes {
		if known != nil && v.Node == known.Node && cert.Statement == known.Statement && bytes.Equal(v.Sig, known.IdentitySig) {
			continue
		}
		if err := verifyVoteBytes(c, v.Node, msg, v.Sig); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCertificate, err)
		}
	}
	return nil
}

// verifyVoteBytes checks member node's identity signature over msg, the
// VoteBytes of a statement of c (the caller checked the cluster).
func verifyVoteBytes(c *Cluster, node int, msg, sig []byte) error {
	if node < 1 || node > len(c.File.Nodes) {
		return fmt.Errorf("%w: node index %d", ErrBadVote, node)
	}
	pub, err := PeerIDKey(c.File.Nodes[node-1].PeerID)
	if err != nil {
		return fmt.Errorf("%w: node %d public key: %w", ErrBadVote, node, err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: node %d identity signature does not verify", ErrBadVote, node)
	}
	return nil
}

// certVotes encodes a certificate's votes: a uvarint count, then each
// vote's member index (2 bytes) and signature (64 bytes), in member order.
func (e *encoder) certVotes(vs []CertVote) {
	vs = slices.Clone(vs)
	sortCertVotes(vs)
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.u16(uint16(v.Node))
		e.fixed(v.Sig)
	}
}

func (d *decoder) certVotes() []CertVote {
	if d.err != nil {
		return nil
	}
	n := d.uvarint("certificate vote count")
	if d.err == nil && (n < 1 || n > MaxCertificateVotes) {
		d.fail("%d certificate votes, want 1 to %d", n, MaxCertificateVotes)
	}
	if d.err != nil {
		return nil
	}
	vs := make([]CertVote, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		node := int(d.u16("certificate vote node"))
		sig := d.take(ed25519.SignatureSize, "certificate vote signature")
		vs = append(vs, CertVote{Node: node, Sig: slices.Clone(sig)})
	}
	if d.err == nil {
		if err := checkCertVotes(vs); err != nil {
			d.fail("%v", err)
		}
	}
	if d.err != nil {
		return nil
	}
	return vs
}

// certificate encodes a certificate without the version byte: the
// statement's cluster, resource, epoch and holder, then its votes.
func (e *encoder) certificate(c Certificate) {
	e.fixed(c.Statement.Cluster[:])
	e.str(c.Statement.Resource)
	e.u64(c.Statement.Epoch)
	e.holder(c.Statement.Holder)
	e.certVotes(c.Votes)
}

func (d *decoder) certificate() Certificate {
	var c Certificate
	copy(c.Statement.Cluster[:], d.take(ClusterIDSize, "certificate cluster"))
	c.Statement.Resource = d.resource()
	c.Statement.Epoch = d.u64("certificate epoch")
	c.Statement.Holder = d.optHolder("certificate holder")
	if d.err == nil && c.Statement.Holder.IsZero() {
		d.fail("certificate without holder")
	}
	c.Votes = d.certVotes()
	if d.err != nil {
		return Certificate{}
	}
	return c
}

// MarshalBinary returns the canonical binary form: Version, the
// statement's cluster ID, resource, epoch and holder, then the votes
// (a uvarint count; each a 2-byte member index and a 64-byte signature,
// in member order). It fails if the certificate is not well formed.
func (c Certificate) MarshalBinary() ([]byte, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	e := encoder{}
	e.u8(Version)
	e.certificate(c)
	return e.b, nil
}

// ParseCertificate decodes the binary form strictly. It checks the form,
// not the signatures (VerifyCertificate).
func ParseCertificate(b []byte) (Certificate, error) {
	if len(b) > maxCertificateSize {
		return Certificate{}, fmt.Errorf("%w: certificate is %d bytes, limit %d", ErrMalformed, len(b), maxCertificateSize)
	}
	return decode(b, func(d *decoder) Certificate { return d.certificate() })
}

// String returns the text form: CertificateTextPrefix then unpadded
// base64url of the binary form ("pc3.invalid" for a certificate that does
// not Check).
func (c Certificate) String() string {
	b, err := c.MarshalBinary()
	if err != nil {
		return CertificateTextPrefix + "invalid"
	}
	return textForm(CertificateTextPrefix, b)
}

// MarshalText returns the text form, so certificates read well in JSON
// (and nodes keep them so in their records).
func (c Certificate) MarshalText() ([]byte, error) {
	b, err := c.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return []byte(textForm(CertificateTextPrefix, b)), nil
}

// UnmarshalText parses the text form strictly.
func (c *Certificate) UnmarshalText(b []byte) error {
	raw, err := parseTextForm(string(b), CertificateTextPrefix, maxCertificateTextLen, "certificate")
	if err != nil {
		return err
	}
	v, err := ParseCertificate(raw)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Cert returns the certificate the Commit carries: its votes for the
// token's statement. ok is false for a Commit without one.
func (m CommitRequest) Cert() (c Certificate, ok bool) {
	if len(m.Certificate) == 0 {
		return Certificate{}, false
	}
	return Certificate{Statement: m.Token.Statement, Votes: m.Certificate}, true
}

// ForensicsRequest asks a node for the vote certificates it keeps for
// (Resource, Epoch).
type ForensicsRequest struct {
	Cluster  ClusterID
	Resource string
	Epoch    uint64
}

// ForensicsReply is a node's certificates for the requested (resource,
// epoch): none, one, or two for different holders (a fork), and the
// certified tokens it keeps there, at most MaxCertificatesPerEpoch for
// different holders (two of them are a fork proof, protocol.Fork, that the
// asker checks with pairings). Code is CodeOK, or why the node refused.
type ForensicsReply struct {
	Code         Code
	Certificates []Certificate
	Tokens       []Token
	Message      string
}

// Marshal encodes the request.
func (m ForensicsRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.Resource)
	e.u64(m.Epoch)
	return e.b
}

// UnmarshalForensicsRequest decodes a ForensicsRequest strictly.
func UnmarshalForensicsRequest(b []byte) (ForensicsRequest, error) {
	return decode(b, func(d *decoder) ForensicsRequest {
		var m ForensicsRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Epoch = d.u64("epoch")
		return m
	})
}

// Marshal encodes the reply: the code, a count byte and the certificates,
// a count byte and the tokens (at most MaxCertificatesPerEpoch of each are
// written), then the message.
func (m ForensicsReply) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u8(uint8(m.Code))
	certs := m.Certificates[:min(len(m.Certificates), MaxCertificatesPerEpoch)]
	e.u8(uint8(len(certs)))
	for _, c := range certs {
		e.certificate(c)
	}
	toks := m.Tokens[:min(len(m.Tokens), MaxCertificatesPerEpoch)]
	e.u8(uint8(len(toks)))
	for _, t := range toks {
		e.b = t.appendTo(e.b)
	}
	e.str(truncate(m.Message))
	return e.b
}

// UnmarshalForensicsReply decodes a ForensicsReply strictly: at most
// MaxCertificatesPerEpoch certificates, all for one (cluster, resource,
// epoch) and for different holders, and likewise for the tokens. It
// checks no signature: the asker verifies what it uses.
func UnmarshalForensicsReply(b []byte) (ForensicsReply, error) {
	return decode(b, func(d *decoder) ForensicsReply {
		var m ForensicsReply
		m.Code = d.code()
		n := int(d.u8("certificate count"))
		if d.err == nil && n > MaxCertificatesPerEpoch {
			d.fail("%d certificates, limit %d", n, MaxCertificatesPerEpoch)
		}
		for i := 0; i < n && d.err == nil; i++ {
			c := d.certificate()
			if d.err != nil {
				break
			}
			if i > 0 {
				first := m.Certificates[0].Statement
				if c.Statement.Cluster != first.Cluster || c.Statement.Resource != first.Resource || c.Statement.Epoch != first.Epoch {
					d.fail("certificates of different (cluster, resource, epoch)")
				} else if c.Statement.Holder == first.Holder {
					d.fail("two certificates of one holder")
				}
			}
			m.Certificates = append(m.Certificates, c)
		}
		n = int(d.u8("token count"))
		if d.err == nil && n > MaxCertificatesPerEpoch {
			d.fail("%d tokens, limit %d", n, MaxCertificatesPerEpoch)
		}
		for i := 0; i < n && d.err == nil; i++ {
			t, err := decodeToken(d)
			if err != nil {
				if d.err == nil {
					d.err = err
				}
				break
			}
			if i > 0 {
				first := m.Tokens[0]
				if t.Cluster != first.Cluster || t.Resource != first.Resource || t.Epoch != first.Epoch {
					d.fail("tokens of different (cluster, resource, epoch)")
				} else if t.Holder == first.Holder {
					d.fail("two tokens of one holder")
				}
			}
			m.Tokens = append(m.Tokens, t)
		}
		m.Message = d.str("message", MaxMessageLen)
		return m
	})
}
