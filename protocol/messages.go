package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/palisade-dev/palisade/crypto"
)

// libp2p protocol IDs, one per message family, versioned. A family whose
// format changes takes a new major version, so a peer of an earlier release
// fails with "protocol not supported" rather than a decode error. Version
// 2.0.0 of Status, Acquire, Commit, Renew, Release and Abandon is the one
// of session keys (issue 20): requests carry a SessionKey instead of a
// session ID, and replies name holders by HolderRef.
const (
	ProtoStatus  = "/palisade/status/2.0.0"
	ProtoAcquire = "/palisade/acquire/2.0.0"
	// ProtoCommit is version 2.1.0: a CommitRequest may end with the
	// token's vote certificate (issue 21). The field is optional and
	// trails the 2.0.0 fields, so a 2.0.0 request is a valid 2.1.0
	// request without one: nodes answer both IDs (ProtoCommitV2) with
	// the same decoder, and clients of the earlier release keep
	// committing. A client of this release speaks 2.1.0 only.
	ProtoCommit = "/palisade/commit/2.1.0"
	// ProtoCommitV2 is the Commit of the earlier release: the same
	// request without a certificate.
	ProtoCommitV2 = "/palisade/commit/2.0.0"
	ProtoRenew    = "/palisade/renew/2.0.0"
	ProtoRelease  = "/palisade/release/2.0.0"
	// ProtoAbandon withdraws a client's uncommitted votes after a round
	// that could not reach a quorum, so split votes resolve at once.
	ProtoAbandon = "/palisade/abandon/2.0.0"
	// ProtoEvidence carries Evidence of equivocation to a node, which
	// checks and records it. Its reply is an Ack.
	ProtoEvidence = "/palisade/evidence/1.0.0"
	// ProtoFork carries a Fork (its binary form, Fork.MarshalBinary) to a
	// node, which verifies it (VerifyFork), records it and passes it on
	// to the other members once. Its reply is an Ack.
	ProtoFork = "/palisade/fork/1.0.0"
)

// Frame and field limits.
const (
	// MaxFrameSize caps every request and reply frame. The largest message
	// honest parties send, an Acquire with a proof token and MaxProofVotes
	// signed votes with every field at its limit and Ed25519 identity
	// signatures (64 bytes), is 28,966 bytes (TestLargestAcquireFitsFrame).
	MaxFrameSize = 40 << 10
	// MaxMessageLen caps the human-readable text in a refusal.
	MaxMessageLen = 256
	// MaxIdentitySigLen caps a node's identity signature on a vote (an
	// Ed25519 signature is 64 bytes; other libp2p key types are larger).
	MaxIdentitySigLen = 1024
	// MaxTTL is the longest lease a node grants.
	MaxTTL = time.Hour
	// maxWireDuration bounds every duration field, so decoding cannot
	// overflow time.Duration.
	maxWireDuration = 1000 * MaxTTL
)

// Errors callers can branch on.
var (
	// ErrFrameTooLarge reports a frame whose announced length exceeds the cap.
	// The body is not read.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
)

// WriteFrame writes one uvarint-length-prefixed frame.
func WriteFrame(w io.Writer, msg []byte) error {
	if len(msg) > MaxFrameSize {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, len(msg), MaxFrameSize)
	}
	buf := binary.AppendUvarint(make([]byte, 0, len(msg)+3), uint64(len(msg)))
	_, err := w.Write(append(buf, msg...))
	return err
}

// ReadFrame reads one frame of at most max bytes. A larger announced length
// is refused before any of the body is read.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [binary.MaxVarintLen64]byte
	var n uint64
	for i := 0; ; i++ {
		if i == len(hdr) {
			return nil, fmt.Errorf("%w: frame length varint too long", ErrMalformed)
		}
		if _, err := io.ReadFull(r, hdr[i:i+1]); err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if hdr[i] < 0x80 {
			v, k := binary.Uvarint(hdr[:i+1])
			if k != i+1 || k != uvarintLen(v) {
				return nil, fmt.Errorf("%w: non-minimal frame length", ErrMalformed)
			}
			n = v
			break
		}
	}
	if max < 0 || n > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// Code says why a node refused a request.
type Code uint8

// Refusal codes. Clients branch on them.
const (
	CodeOK           Code = 0
	CodeStale        Code = 1 // epoch not above the node's last epoch
	CodeTooFar       Code = 2 // epoch above known + MaxEpochStep
	CodeUnauthorised Code = 3 // the client may not hold this resource
	CodeWrongCluster Code = 4 // request for another cluster
	CodeBadRequest   Code = 5 // invalid fields or proof
	CodeNotHolder    Code = 6 // renew or release by someone without the lease
	CodeNoLease      Code = 7 // lease expired or superseded
	CodeInternal     Code = 8 // the node failed (store error)
	// CodeOtherEra: the request names an epoch at or above the next
	// era's floor. The node belongs to an earlier era (its group was
	// reshared) and must be stopped; it never votes or catches up there.
	CodeOtherEra Code = 9
	// CodeFork: the token forks one the node holds as certified (same
	// resource and epoch, another holder, both signatures valid), or
	// another holder's committed lease at its epoch. The node refuses to
	// start a lease for it and records the fork (issue 21). Peers of an
	// earlier release, which know no code above 9, read it as malformed:
	// a failure either way.
	CodeFork Code = 10
	codeMax  Code = 10
)

var codeNames = [...]string{"ok", "stale epoch", "epoch too far ahead", "unauthorised", "wrong cluster", "bad request", "not the holder", "no lease", "internal error", "node of an earlier era", "fork"}

// String names the code.
func (c Code) String() string {
	if c <= codeMax {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// StatusRequest asks a node what it knows of a resource.
type StatusRequest struct {
	Resource string
}

// StatusReply is one node's view of a resource.
type StatusReply struct {
	// LastEpoch is the highest epoch the node voted for or saw certified.
	LastEpoch uint64
	// Holder names the session holding the node's lease (or uncommitted
	// vote), if any is live: its identity and a hash of its session ID,
	// never the ID itself.
	Holder HolderRef
	// LeaseEpoch is the epoch of that lease.
	LeaseEpoch uint64
	// LeaseLeft is how long the lease has left, 0 if none.
	LeaseLeft time.Duration
	// Certified is the highest token the node knows, if any.
	Certified *Token
	// Vote is the node's last vote, signed with its identity key, if it
	// voted: clients use it to show lagging nodes that f+1 nodes moved on,
	// and to detect equivocation.
	Vote *SignedVote
	// Reserved, when no lease or vote holds the resource, is the waiter
	// the free resource is held for (push handoff), ReservedLeft how much
	// longer: a resource that is free but reserved shows as such. Zero
	// when nothing is reserved.
	Reserved     HolderRef
	ReservedLeft time.Duration
}

// AcquireRequest asks a node to vote for a lock session of the sender at an
// epoch: the holder is the sender's identity (taken from the authenticated
// connection) with the session Key owns (Key.Session()).
type AcquireRequest struct {
	Cluster  ClusterID
	Resource string
	Epoch    uint64
	// Key is the acquisition's session key; never zero. Only its hash,
	// the session ID, appears in the statement and the token.
	Key SessionKey
	TTL time.Duration
	// Proof is an optional certified token that lets a lagging node catch up.
	Proof *Token
	// Votes optionally carries signed votes of f+1 distinct nodes at or
	// above some epoch: at least one is honest, so a lagging node may treat
	// the lowest of them as known (S5) even though no token exists there.
	Votes []SignedVote
}

// ReplyKind says which variant an AcquireReply is.
type ReplyKind uint8

// Acquire reply kinds.
const (
	KindVote   ReplyKind = 1
	KindBusy   ReplyKind = 2
	KindRefuse ReplyKind = 3
)

// AcquireReply is a Vote, Busy, Queued (see KindQueued) or Refuse.
type AcquireReply struct {
	Kind ReplyKind
	// Vote: the partial signature over the statement, and the node's identity
	// signature over Statement.VoteBytes.
	Partial     crypto.PartialSig
	IdentitySig []byte
	// Busy: who holds the resource (named by a HolderRef, never by its
	// session ID), at which epoch, for how long, and whether that is only
	// an uncommitted vote (Pending) rather than a committed lease.
	// Contenders use Pending to tell a split round from a held lock.
	Holder     HolderRef
	LeaseEpoch uint64
	Left       time.Duration
	Pending    bool
	// Refuse: why, and the node's last epoch.
	Code      Code
	LastEpoch uint64
	Message   string
}

// CommitRequest tells a node that a token is certified and starts its lease.
type CommitRequest struct {
	Token Token
	TTL   time.Duration
	// Key, if not zero, is the token's session key: with it a node that
	// voted for the token's statement starts the lease without checking
	// the signature (one pairing saved). Without it the signature is
	// checked.
	Key SessionKey
	// TokenRelease asks that the lease may also be released by its token
	// alone (a ReleaseRequest without Key), for a process that acquires
	// and exits, leaving the release to another process holding only the
	// token (palisade acquire, then palisade release). Nodes honour it only
	// with Key; without it a lease ends only with its session key.
	TokenRelease bool
	// Certificate, if not empty, is the token's vote certificate: the
	// identity signatures over Token.Statement.VoteBytes of the members
	// whose votes the client combined (at least t, at most N, distinct,
	// see Cert). A node checks them (Ed25519, no pairing) and keeps the
	// certificate with the certified token for forensics; a Commit whose
	// certificate does not verify is refused. It is encoded after the
	// 2.0.0 fields and only when present.
	Certificate []CertVote
}

// RenewRequest extends the lease of the sender's session at an epoch: the
// session Key owns, so only the process that acquired can renew.
type RenewRequest struct {
	Cluster  ClusterID
	Resource string
	Epoch    uint64
	// Key is the session key of the lease; never zero.
	Key SessionKey
	TTL time.Duration
}

// AbandonRequest asks a node to drop the uncommitted vote of the sender's
// session (the one Key owns) at an epoch so the resource is free for
// others. The vote itself stays recorded: the node never votes at that
// epoch again. Epoch 0, where no vote is, asks instead that the session
// leave the resource's queue of waiters for good: its acquisition gave up
// and it will not take its turn. (A node without this answers it
// CodeNotHolder, and the session stays queued until WaiterTTL.)
type AbandonRequest struct {
	Cluster  ClusterID
	Resource string
	Epoch    uint64
	// Key is the session key of the vote; never zero.
	Key SessionKey
}

// Marshal encodes the request.
func (m AbandonRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.Resource)
	e.u64(m.Epoch)
	e.sessionKey(m.Key)
	return e.b
}

// UnmarshalAbandonRequest decodes an AbandonRequest strictly.
func UnmarshalAbandonRequest(b []byte) (AbandonRequest, error) {
	return decode(b, func(d *decoder) AbandonRequest {
		var m AbandonRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Epoch = d.u64("epoch")
		m.Key = d.sessionKey()
		return m
	})
}

// ReleaseRequest ends the sender's lease of the token's session. A node
// ends it if Key is the session's key (Key.Session() is the token's
// session), or, without Key, only if the lease was committed with
// TokenRelease and the token is genuine: its signature checks under the
// group key, or it is byte for byte the certified token the node holds.
type ReleaseRequest struct {
	Token Token
	// Key is the token's session key, or zero (absent) for a release by
	// token alone.
	Key SessionKey
}

// Ack answers Commit, Renew and Release.
type Ack struct {
	Code      Code
	LastEpoch uint64
	Left      time.Duration
	Message   string
}

// Err returns nil for CodeOK and a *RefusedError otherwise.
func (a Ack) Err() error {
	if a.Code == CodeOK {
		return nil
	}
	return &RefusedError{Code: a.Code, LastEpoch: a.LastEpoch, Message: a.Message}
}

// RefusedError is a node's refusal.
type RefusedError struct {
	Code      Code
	LastEpoch uint64
	Message   string
}

// Error says why the node refused.
func (e *RefusedError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("refused: %s (last epoch %d)", e.Code, e.LastEpoch)
	}
	return fmt.Sprintf("refused: %s (last epoch %d): %s", e.Code, e.LastEpoch, e.Message)
}

// durMS encodes a duration in whole milliseconds, clamped to what the
// decoder accepts.
func durMS(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(min(d, maxWireDuration) / time.Millisecond)
}

func msDur(d *decoder, what string) time.Duration {
	v := d.u64(what)
	if v > uint64(maxWireDuration/time.Millisecond) {
		d.fail("%s: %d ms out of range", what, v)
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

func (e *encoder) optToken(t *Token) {
	if t == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.b = t.appendTo(e.b)
}

func (d *decoder) optToken() *Token {
	switch d.u8("token flag") {
	case 0:
		return nil
	case 1:
		t, err := decodeToken(d)
		if err != nil {
			if d.err == nil {
				d.err = err
			}
			return nil
		}
		return &t
	default:
		d.fail("token flag not 0 or 1")
		return nil
	}
}

func (d *decoder) code() Code {
	c := Code(d.u8("code"))
	if c > codeMax {
		d.fail("unknown code %d", c)
	}
	return c
}

func (d *decoder) resource() string {
	r := d.str("resource", MaxResourceLen)
	if d.err == nil {
		if err := ValidateResource(r); err != nil {
			d.err = err
		}
	}
	return r
}

// Marshal encodes the request.
func (m StatusRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.str(m.Resource)
	return e.b
}

// UnmarshalStatusRequest decodes a StatusRequest strictly.
func UnmarshalStatusRequest(b []byte) (StatusRequest, error) {
	return decode(b, func(d *decoder) StatusRequest {
		m := StatusRequest{Resource: d.resource()}
		return m
	})
}

// Marshal encodes the reply.
func (m StatusReply) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u64(m.LastEpoch)
	e.holderRef(m.Holder)
	e.u64(m.LeaseEpoch)
	e.u64(durMS(m.LeaseLeft))
	e.optToken(m.Certified)
	if m.Vote == nil {
		e.u8(0)
	} else {
		e.u8(1)
		e.vote(*m.Vote)
	}
	e.holderRef(m.Reserved)
	e.u64(durMS(m.ReservedLeft))
	return e.b
}

// UnmarshalStatusReply decodes a StatusReply strictly.
func UnmarshalStatusReply(b []byte) (StatusReply, error) {
	return decode(b, func(d *decoder) StatusReply {
		m := StatusReply{
			LastEpoch:  d.u64("last epoch"),
			Holder:     d.optHolderRef("holder"),
			LeaseEpoch: d.u64("lease epoch"),
			LeaseLeft:  msDur(d, "lease left"),
			Certified:  d.optToken(),
		}
		switch d.u8("vote flag") {
		case 0:
		case 1:
			v := d.vote()
			m.Vote = &v
		default:
			d.fail("vote flag not 0 or 1")
		}
		m.Reserved = d.optHolderRef("reserved")
		m.ReservedLeft = msDur(d, "reserved left")
		if d.err == nil && m.Reserved.IsZero() != (m.ReservedLeft == 0) {
			d.fail("reservation without a waiter or a time left")
		}
		return m
	})
}

// Marshal encodes the request.
func (m AcquireRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.Resource)
	e.u64(m.Epoch)
	e.sessionKey(m.Key)
	e.u64(durMS(m.TTL))
	e.optToken(m.Proof)
	e.u8(uint8(min(len(m.Votes), MaxProofVotes)))
	for _, v := range m.Votes[:min(len(m.Votes), MaxProofVotes)] {
		e.vote(v)
	}
	return e.b
}

// UnmarshalAcquireRequest decodes an AcquireRequest strictly.
func UnmarshalAcquireRequest(b []byte) (AcquireRequest, error) {
	return decode(b, func(d *decoder) AcquireRequest {
		var m AcquireRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Epoch = d.u64("epoch")
		m.Key = d.sessionKey()
		m.TTL = msDur(d, "ttl")
		m.Proof = d.optToken()
		if n := int(d.u8("vote count")); d.err == nil && n > MaxProofVotes {
			d.fail("%d proof votes, limit %d", n, MaxProofVotes)
		} else {
			for i := 0; i < n && d.err == nil; i++ {
				m.Votes = append(m.Votes, d.vote())
			}
		}
		return m
	})
}

// Marshal encodes the reply; only the fields of its Kind are written.
func (m AcquireReply) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u8(uint8(m.Kind))
	switch m.Kind {
	case KindVote:
		e.partialVote(m.Partial, m.IdentitySig)
	case KindBusy:
		e.holderRef(m.Holder)
		e.u64(m.LeaseEpoch)
		e.u64(durMS(m.Left))
		e.flag(m.Pending)
	case KindQueued:
		e.holderRef(m.Holder)
		e.u64(durMS(m.Left))
	case KindRefuse:
		e.u8(uint8(m.Code))
		e.u64(m.LastEpoch)
		e.str(truncate(m.Message))
	}
	return e.b
}

// UnmarshalAcquireReply decodes an AcquireReply strictly.
func UnmarshalAcquireReply(b []byte) (AcquireReply, error) {
	return decode(b, func(d *decoder) AcquireReply {
		m := AcquireReply{Kind: ReplyKind(d.u8("kind"))}
		switch {
		case d.err != nil:
		case m.Kind == KindVote:
			m.Partial, m.IdentitySig = d.partialVote()
		case m.Kind == KindBusy:
			m.Holder = d.optHolderRef("holder")
			if d.err == nil && m.Holder.IsZero() {
				d.fail("busy reply without holder")
			}
			m.LeaseEpoch = d.u64("lease epoch")
			m.Left = msDur(d, "left")
			m.Pending = d.flag("pending flag")
		case m.Kind == KindQueued:
			m.Holder = d.optHolderRef("holder")
			if d.err == nil && m.Holder.IsZero() {
				d.fail("queued reply without holder")
			}
			m.Left = msDur(d, "left")
		case m.Kind == KindRefuse:
			m.Code = d.code()
			m.LastEpoch = d.u64("last epoch")
			m.Message = d.str("message", MaxMessageLen)
		default:
			d.fail("unknown reply kind %d", m.Kind)
		}
		return m
	})
}

// partialVote encodes a vote as replies carry it: the partial signature,
// then the identity signature (Acquire's KindVote, Wait's Vote).
func (e *encoder) partialVote(p crypto.PartialSig, identitySig []byte) {
	e.fixed(p.Marshal())
	e.bytes(identitySig)
}

// partialVote decodes what encoder.partialVote wrote: a partial that
// parses strictly, and an identity signature of 1 to MaxIdentitySigLen
// bytes.
func (d *decoder) partialVote() (crypto.PartialSig, []byte) {
	var p crypto.PartialSig
	raw := d.take(crypto.PartialSize, "partial")
	if d.err == nil {
		var err error
		p, err = crypto.ParsePartial(raw)
		if err != nil && d.err == nil {
			// Keep the point's reason (crypto.ErrMalformedPoint) in the
			// chain.
			d.err = fmt.Errorf("%w: partial: %w", ErrMalformed, err)
		}
	}
	sig := d.bytes("identity signature", MaxIdentitySigLen)
	if d.err == nil && len(sig) == 0 {
		d.fail("vote without identity signature")
	}
	return p, sig
}

// Marshal encodes the request.
func (m CommitRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.b = m.Token.appendTo(e.b)
	e.u64(durMS(m.TTL))
	e.optSessionKey(m.Key)
	e.flag(m.TokenRelease)
	if len(m.Certificate) > 0 {
		e.certVotes(m.Certificate)
	}
	return e.b
}

// UnmarshalCommitRequest decodes a CommitRequest strictly.
func UnmarshalCommitRequest(b []byte) (CommitRequest, error) {
	return decode(b, func(d *decoder) CommitRequest {
		var m CommitRequest
		if d.err == nil {
			t, err := decodeToken(d)
			if err != nil && d.err == nil {
				d.err = err
			}
			m.Token = t
		}
		m.TTL = msDur(d, "ttl")
		m.Key = d.optSessionKey()
		m.TokenRelease = d.flag("token release flag")
		if d.more() {
			m.Certificate = d.certVotes()
		}
		return m
	})
}

// Marshal encodes the request.
func (m RenewRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.Resource)
	e.u64(m.Epoch)
	e.sessionKey(m.Key)
	e.u64(durMS(m.TTL))
	return e.b
}

// UnmarshalRenewRequest decodes a RenewRequest strictly.
func UnmarshalRenewRequest(b []byte) (RenewRequest, error) {
	return decode(b, func(d *decoder) RenewRequest {
		var m RenewRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Epoch = d.u64("epoch")
		m.Key = d.sessionKey()
		m.TTL = msDur(d, "ttl")
		return m
	})
}

// Marshal encodes the request.
func (m ReleaseRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.b = m.Token.appendTo(e.b)
	e.optSessionKey(m.Key)
	return e.b
}

// UnmarshalReleaseRequest decodes a ReleaseRequest strictly.
func UnmarshalReleaseRequest(b []byte) (ReleaseRequest, error) {
	return decode(b, func(d *decoder) ReleaseRequest {
		var m ReleaseRequest
		if d.err == nil {
			t, err := decodeToken(d)
			if err != nil && d.err == nil {
				d.err = err
			}
			m.Token = t
		}
		m.Key = d.optSessionKey()
		return m
	})
}

// optSessionKey encodes a session key that may be absent (zero): a flag
// byte, then the key if set.
func (e *encoder) optSessionKey(k SessionKey) {
	if k.IsZero() {
		e.u8(0)
		return
	}
	e.u8(1)
	e.sessionKey(k)
}

// optSessionKey decodes a session key that may be absent; a present one
// must not be zero.
func (d *decoder) optSessionKey() SessionKey {
	switch d.u8("session key flag") {
	case 0:
		return SessionKey{}
	case 1:
		return d.sessionKey()
	default:
		d.fail("session key flag not 0 or 1")
		return SessionKey{}
	}
}

// Marshal encodes the ack.
func (m Ack) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u8(uint8(m.Code))
	e.u64(m.LastEpoch)
	e.u64(durMS(m.Left))
	e.str(truncate(m.Message))
	return e.b
}

// truncate cuts a refusal message to MaxMessageLen bytes at a UTF-8
// boundary, so Marshal never writes what its decoder refuses.
func truncate(msg string) string {
	if len(msg) <= MaxMessageLen {
		return msg
	}
	cut := MaxMessageLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// UnmarshalAck decodes an Ack strictly.
func UnmarshalAck(b []byte) (Ack, error) {
	return decode(b, func(d *decoder) Ack {
		m := Ack{Code: d.code(), LastEpoch: d.u64("last epoch"), Left: msDur(d, "left"), Message: d.str("message", MaxMessageLen)}
		return m
	})
}

func (d *decoder) version() {
	switch v := d.u8("version"); {
	case d.err != nil:
	case v > 0 && v < Version:
		d.fail("version %d, want %d: the sender runs an earlier (bn256) release; every node and client must run the same release", v, Version)
	case v != Version:
		d.fail("version %d, want %d", v, Version)
	}
}
