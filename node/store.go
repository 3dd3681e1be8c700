package node

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// ErrStoreClosed is returned by a VoteStore after Close.
var ErrStoreClosed = errors.New("node: vote store closed")

// Record is the durable state of one resource on one node. A node writes it
// through its VoteStore before any reply that depends on it leaves the node.
type Record struct {
	Resource string `json:"resource"`
	// LastEpoch is the highest epoch this node voted for or saw certified.
	// The node never votes at or below it again (S1, S3).
	LastEpoch uint64 `json:"last_epoch"`
	// VoteEpoch, VoteHolder and Vote are the last vote given, kept so a
	// re-sent request of the same session gets the same vote back without
	// a new write.
	VoteEpoch  uint64            `json:"vote_epoch,omitempty"`
	VoteHolder protocol.Holder   `json:"vote_holder,omitzero"`
	Vote       crypto.PartialSig `json:"vote"`
	// VoteIDSig is the node's identity signature over the vote's
	// statement (protocol.Statement.VoteBytes), shown in Status.
	VoteIDSig []byte `json:"vote_id_sig,omitempty"`
	// VoteAt is when the vote was given. A re-sent request of its session
	// starts the vote's lease again only until VoteAt plus the vote
	// timeout (Rules.Acquire), so re-sending one Acquire cannot hold a
	// resource without a Commit. Records written before it read as zero:
	// their votes are not renewed (fail closed).
	VoteAt time.Time `json:"vote_at,omitzero"`
	// Seen is the highest epoch f+1 distinct nodes were shown to have
	// voted at (SeeVotes).
	Seen uint64 `json:"seen,omitempty"`
	// VoteTTL is the lease length the voted-for client asked for.
	VoteTTL time.Duration `json:"vote_ttl,omitempty"`
	// Certified is the highest token this node has verified, if any.
	Certified *protocol.Token `json:"certified,omitempty"`
	// Released is the highest epoch whose lease its holder released or
	// this node's operator revoked (Rules.Revoke).
	Released uint64 `json:"released,omitempty"`
	// LeaseGen is the highest epoch of a lease committed here: the
	// generation waiters are ordered by (queue.go). Liveness only.
	LeaseGen uint64 `json:"lease_gen,omitempty"`
	// PrevGen is LeaseGen before the commit that raised it to its value:
	// the generation before, whose newcomers waited in cohort PrevGen+1
	// (epochs abandoned in between leave gaps in the numbering). Liveness
	// only.
	PrevGen uint64 `json:"prev_gen,omitempty"`
	// Lease is the node's timing-based view of who holds the resource.
	Lease Lease `json:"lease"`
	// Certificates are the vote certificates of committed tokens the node
	// was shown (CommitRequest.Certificate), in epoch order: at most
	// CertificateEpochs epochs, two per epoch only for a fork (see
	// keepCertificate). Stores of earlier releases have none.
	Certificates []protocol.Certificate `json:"certificates,omitempty"`
	// CertTokens are the tokens those certificates certify, kept with
	// them (keepCertificate) so that forensics can show both tokens of a
	// fork (protocol.Fork) after later epochs replaced Certified. Stores
	// of earlier releases have none.
	CertTokens []protocol.Token `json:"cert_tokens,omitempty"`
}

// Lease is advisory: it gives liveness and exclusion between honest
// clients; safety never depends on it.
type Lease struct {
	// Holder is the lock session holding the lease; another session of
	// the same client identity is another holder.
	Holder protocol.Holder `json:"holder,omitzero"`
	Epoch  uint64          `json:"epoch,omitempty"`
	// Expires is when the lease (or uncommitted vote) lapses.
	Expires time.Time `json:"expires"`
	// Committed is false while the lease is only a vote awaiting Commit.
	Committed bool `json:"committed,omitempty"`
	// TokenRelease says the lease may also be ended by a Release without
	// the session's key, with a genuine token: its Commit carried the key
	// and asked for it (CommitRequest.TokenRelease, as palisade acquire
	// does). Otherwise, and for every uncommitted vote, only the session's
	// key ends the lease early. Records written before session keys have
	// no such field and read as false: fail closed. Such a lease (whose
	// session ID is the hash of no key, so nobody renews it either) ends
	// by its TTL, at most protocol.MaxTTL after the upgrade, or by an
	// operator's revoke.
	TokenRelease bool `json:"token_release,omitempty"`
}

// Active reports whether the lease is held at now.
func (l Lease) Active(now time.Time) bool { return !l.Holder.IsZero() && now.Before(l.Expires) }

// AuditKind names what a node decided.
type AuditKind string

// Audit kinds.
const (
	AuditVote    AuditKind = "vote"
	AuditCommit  AuditKind = "commit"
	AuditRenew   AuditKind = "renew"
	AuditRelease AuditKind = "release"
	AuditAbandon AuditKind = "abandon"
	AuditExpire  AuditKind = "expire"
	AuditCatchUp AuditKind = "catch-up"
	// AuditSeen: f+1 signed votes showed the node an epoch (Record.Seen);
	// it raises what the node knows, not its last epoch.
	AuditSeen   AuditKind = "seen-votes"
	AuditRevoke AuditKind = "revoke"
)

// AuditEntry is one line of a node's append-only audit log.
type AuditEntry struct {
	// Seq is assigned by the store: 1, 2, 3, … with no gaps.
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Kind     AuditKind `json:"kind"`
	Resource string    `json:"resource"`
	Epoch    uint64    `json:"epoch"`
	// Holder is the lock session in Holder.String form.
	Holder string `json:"holder,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// VoteStore is a node's durable state. Implementations must make Save
// durable (fsynced) before it returns: a vote's partial may leave the node
// only after that (S3). Concurrent Saves may share one fsync.
type VoteStore interface {
	// Load returns the record of resource; ok is false if there is none.
	Load(ctx context.Context, resource string) (rec Record, ok bool, err error)
	// Save durably writes rec, replacing the resource's record, and appends
	// the audit entries (their Seq is assigned here) in the same atomic
	// transaction.
	Save(ctx context.Context, rec Record, audit ...AuditEntry) error
	// Audit returns up to limit audit entries with Seq >= from, in order.
	Audit(ctx context.Context, from uint64, limit int) ([]AuditEntry, error)
	// Close releases the store; later calls return ErrStoreClosed.
	Close() error
}
