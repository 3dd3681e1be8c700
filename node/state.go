package node

import (
	"fmt"
	"time"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// Rules are the parameters of the voting transitions.
type Rules struct {
	// MaxEpochStep bounds how far above the highest epoch it knows a node
	// votes (S5).
	MaxEpochStep uint64
	// VoteTimeout is how long an uncommitted vote holds the resource.
	VoteTimeout time.Duration
	// DefaultTTL is the lease length when a client asks for none.
	DefaultTTL time.Duration
	// MaxTTL caps the lease length a client may ask for.
	MaxTTL time.Duration
	// ReserveFor is how long a free resource is held for its first waiter
	// (push handoff, see queue.go) before the next waiter's turn;
	// WaiterTTL how long a waiter that stopped asking keeps its place.
	// Zero takes VoteTimeout for both. Liveness only.
	ReserveFor, WaiterTTL time.Duration
	// EpochFloor is the cluster's epoch floor (cluster.json epoch_floor):
	// every resource's last epoch counts as at least this, so the node
	// never votes at or below it. Config.Validate raises it to the
	// cluster file's floor.
	EpochFloor uint64
}

// floor applies the epoch floor to a record: a resource never voted on in
// this era starts at the floor.
func (r Rules) floor(rec Record) Record {
	if rec.LastEpoch < r.EpochFloor {
		rec.LastEpoch = r.EpochFloor
	}
	return rec
}

// laterEra reports whether epoch lies at or above the next era's floor
// (protocol.Era.Beyond): a group reshared after this node's; the node
// neither votes there nor learns anything from it (S1 across a resharing).
func (r Rules) laterEra(epoch uint64) bool {
	return protocol.Era{Floor: r.EpochFloor}.Beyond(epoch)
}

// ErrKeyOnlyMessage is the refusal of a Release without the session key
// of a lease whose Commit did not ask for release by token.
const ErrKeyOnlyMessage = "this lease ends only with its session key (it was not acquired for release by token)"

// ErrLaterEraMessage is the refusal a node of an earlier era gives to
// anything from a later one.
const ErrLaterEraMessage = "this node belongs to an earlier era (its cluster was reshared); stop it"

// refuseLaterEra refuses a request that names an epoch of a later era.
func (r Rules) refuseLaterEra(o Outcome, epoch uint64) Outcome {
	ceiling, _ := protocol.Era{Floor: r.EpochFloor}.Ceiling()
	return o.refuse(protocol.CodeOtherEra, fmt.Sprintf("epoch %d is at or above the next era's floor %d: %s", epoch, ceiling, ErrLaterEraMessage))
}

// earlierEra reports whether tok was certified at or below the epoch
// floor. This group never votes there, so such a token was signed by the
// group before a resharing (it checks under the same group key): it
// teaches this node nothing and must not start a lease that would hold
// off the new era's holders.
func (r Rules) earlierEra(tok protocol.Token) bool {
	return r.EpochFloor > 0 && tok.Epoch <= r.EpochFloor
}

// refuseEarlierEra is the refusal of a token from before the epoch floor;
// the reply's last epoch is the floor, so the client starts above it.
func (r Rules) refuseEarlierEra(o Outcome, tok protocol.Token) Outcome {
	o.Next = r.floor(o.Next)
	return o.refuse(protocol.CodeStale, fmt.Sprintf("token epoch %d is at or below the epoch floor %d: it is from before the last resharing", tok.Epoch, r.EpochFloor))
}

// Outcome is what a transition decided. The driver persists Next when
// Changed, fsyncs, and only then replies.
type Outcome struct {
	// At is the time the transition ran at.
	At      time.Time
	Next    Record
	Changed bool
	Audit   []AuditEntry
	// Kind is the acquire reply kind (vote, busy, refuse); for Commit,
	// Renew and Release it is KindRefuse on refusal and 0 on success.
	Kind protocol.ReplyKind
	// Repeat is set when a vote is the re-send of one already given: the
	// stored partial is returned and nothing is written.
	Repeat  bool
	Code    protocol.Code
	Message string
	// Busy details.
	Holder     protocol.Holder
	LeaseEpoch uint64
	Left       time.Duration
	Pending    bool // the busy lease is an uncommitted vote
	// Fork is the fork a Commit showed (a verified token against the
	// certified token of the record): the driver records it (recordFork).
	Fork *protocol.Fork
}

// Acquire is the pure voting rule. The caller has already checked the
// cluster, the field limits and that holder's identity may hold resource,
// and has verified proof (if any) as a certified token for this resource.
//
// A node votes iff the epoch is above its last epoch (S1, S3), below the
// next era's floor (S1 across a resharing), at most MaxEpochStep above the
// highest epoch it knows (S5), and no other holder has an unexpired lease
// or vote. A holder is one lock session: another session of the same
// client identity is another holder, and waits like anyone else. Safety
// (one holder per epoch) depends only on the first two rules; now only
// affects leases.
func (r Rules) Acquire(rec Record, holder protocol.Holder, epoch uint64, ttl time.Duration, proof *protocol.Token, now time.Time) Outcome {
	o := Outcome{Next: r.floor(rec), At: now}
	// S1/S5: the era ceiling: never vote at or above the next era's floor,
	// nor catch up from a token there.
	if r.laterEra(epoch) {
		return r.refuseLaterEra(o, epoch)
	}
	if proof != nil && r.laterEra(proof.Epoch) {
		return r.refuseLaterEra(o, proof.Epoch)
	}
	o.expire(now)
	if proof != nil && !r.earlierEra(*proof) {
		o.catchUp(*proof, now)
	}
	n := &o.Next
	busy := func() Outcome {
		o.Kind = protocol.KindBusy
		o.Holder, o.LeaseEpoch, o.Left = n.Lease.Holder, n.Lease.Epoch, n.Lease.Expires.Sub(now)
		o.Pending = !n.Lease.Committed
		return o
	}
	// A re-sent request of the same session gets the vote it already got
	// (S1/S3: the same vote again, never a second one at this epoch). The
	// lease starts at the vote (issue 20), so a vote sent again holds the
	// resource again, for VoteTimeout from now: a client hands out its Lock
	// on t votes, some of which may be repeats of a round it withdrew
	// (Abandon dropped their leases) or of one whose leases are running
	// out. So the vote is not sent again while another holder has the
	// resource (nothing is lost: the vote was sent once, and S1 holds
	// either way), and not renewed once the session released the epoch or
	// committed it. Nor past the vote's own timeout: a session that keeps
	// re-sending one Acquire would hold the resource without ever
	// committing, one fsync each. A re-send after VoteAt + VoteTimeout
	// is refused as stale (the client asks above), so a vote holds the
	// resource at most twice the vote timeout after it was given.
	if epoch == n.VoteEpoch && holder == n.VoteHolder && n.Vote.Index != 0 {
		if n.Lease.Active(now) && n.Lease.Holder != holder {
			return busy()
		}
		committed := n.Lease.Committed && n.Lease.Holder == holder && n.Lease.Active(now)
		if !committed && epoch > n.Released {
			if !now.Before(n.VoteAt.Add(r.VoteTimeout)) {
				return o.refuse(protocol.CodeStale, fmt.Sprintf("the vote at epoch %d is older than the vote timeout %v and was never committed: acquire above it", epoch, r.VoteTimeout))
			}
			if exp := now.Add(r.VoteTimeout); n.Lease.Holder != holder || n.Lease.Expires.Before(exp) {
				n.Lease = Lease{Holder: holder, Epoch: epoch, Expires: exp}
				o.Changed = true
			}
		}
		o.Kind, o.Repeat = protocol.KindVote, true
		return o
	}
	// S1/S3: one vote per epoch: never at or below the last epoch voted
	// for or learned.
	if epoch <= n.LastEpoch {
		return o.refuse(protocol.CodeStale, fmt.Sprintf("epoch %d is not above last epoch %d", epoch, n.LastEpoch))
	}
	known := max(n.LastEpoch, n.Seen)
	if n.Certified != nil && n.Certified.Epoch > known {
		known = n.Certified.Epoch
	}
	// S5: the epoch step: at most MaxEpochStep above the highest epoch
	// voted, seen in f+1 signed votes or certified.
	if epoch > known && epoch-known > r.MaxEpochStep {
		return o.refuse(protocol.CodeTooFar, fmt.Sprintf("epoch %d is more than %d above known epoch %d", epoch, r.MaxEpochStep, known))
	}
	if n.Lease.Active(now) && n.Lease.Holder != holder {
		return busy()
	}
	expires := now.Add(r.VoteTimeout)
	if n.Lease.Active(now) && n.Lease.Expires.After(expires) {
		expires = n.Lease.Expires // the same holder re-acquiring keeps its lease
	}
	n.LastEpoch = epoch // S1/S3: this epoch is used up; the driver persists it before the partial leaves
	n.VoteEpoch, n.VoteHolder, n.VoteTTL, n.VoteAt = epoch, holder, r.clampTTL(ttl), now
	n.Vote = crypto.PartialSig{} // the driver signs and fills it in
	// An uncommitted vote ends early only with the session's key
	// (Abandon, or Release by the acquiring process): no TokenRelease.
	n.Lease = Lease{Holder: holder, Epoch: epoch, Expires: expires}
	o.Kind, o.Changed = protocol.KindVote, true
	o.audit(now, AuditVote, n.Resource, epoch, holder, "")
	return o
}

// Shown is what a Commit or Release showed the node of its right to the
// token's session, beyond the token's fields (issue 20: sessions that
// cannot be borrowed).
type Shown struct {
	// Verified: the token is genuine: its signature was checked under the
	// group key, or it is byte for byte the certified token the record
	// holds (SameCertified).
	Verified bool
	// Key: the request carried the token's session key (the caller checked
	// that it hashes to the token's session). Only the process that
	// acquired knows it.
	Key bool
	// TokenRelease (Commit only): the committing process asked that the
	// lease may also be released by its token alone. Honoured only with
	// Key.
	TokenRelease bool
}

// unchecked reports whether a token shown with s may act on rec although
// its signature was not checked: only with the session's key, and only
// for the statement this node voted for or holds the lease of
// (OwnStatement). Without the key, a token whose signature nobody checked
// proves nothing: any process of the holder's identity could have made it
// from a Status reply.
func (s Shown) unchecked(rec Record, sender string, tok protocol.Token) bool {
	return s.Key && OwnStatement(rec, sender, tok)
}

// Commit records a certified token. Any sender teaches the node the epoch
// (catch-up); only the token holder's identity starts the lease (of the
// token's session), which runs ttl from now.
//
// shown.Verified says the token is genuine (its signature was checked, or
// it is the certified token the node holds). The driver skips the check (a
// pairing) only for a Commit from the token's holder that carries the
// session's key, of the statement this node itself voted for
// (OwnStatement): the node learns nothing from the signature then, and a
// bad one only fails the holder at the resource. Such a token starts the
// lease but is not recorded as certified, so the node never shows others a
// token it did not check.
//
// A lease committed with the key ends by token alone only if the Commit
// asked for it (shown.TokenRelease); one committed without the key never
// does, and a Commit without the key does not change what an existing
// lease of the same session allows.
func (r Rules) Commit(rec Record, sender string, tok protocol.Token, shown Shown, ttl time.Duration, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	// S1/S5: nothing is learned from a later era (the era ceiling), and a
	// token from before a resharing starts no lease.
	if r.laterEra(tok.Epoch) {
		return r.refuseLaterEra(o, tok.Epoch)
	}
	if r.earlierEra(tok) {
		return r.refuseEarlierEra(o, tok)
	}
	if !shown.Verified && !shown.unchecked(rec, sender, tok) {
		return o.refuse(protocol.CodeBadRequest, "token not checked") // the driver never gets here
	}
	o.expire(now)
	n := &o.Next
	// Issue 21: a valid token for another holder at the certified token's
	// epoch is a fork (more than f members signed twice). It starts no
	// lease, whoever sends it: the driver records the fork instead.
	if shown.Verified {
		if f, ok := forkWith(n.Certified, tok); ok {
			o.Fork = &f
			return o.refuse(protocol.CodeFork, forkMessage(f))
		}
		o.catchUp(tok, now)
	}
	// S6: a token is bound to its holder's identity: only it starts a lease.
	if sender != tok.Holder.ID {
		return o // learned the epoch; the lease is the holder's business
	}
	// Issue 21: nor does a token replace another holder's committed lease
	// at its epoch (one whose token the node took unchecked, so it holds
	// no certified token to prove the fork with): S1 allows one holder per
	// epoch, so one of the two tokens is a fork's.
	if l := n.Lease; l.Committed && l.Epoch == tok.Epoch && l.Holder != tok.Holder && tok.Epoch > n.Released {
		return o.refuse(protocol.CodeFork, fmt.Sprintf("another holder's lease was committed at epoch %d: the token forks it", tok.Epoch))
	}
	if tok.Epoch < n.Lease.Epoch || tok.Epoch < n.LastEpoch {
		return o.refuse(protocol.CodeStale, fmt.Sprintf("token epoch %d is superseded (last epoch %d)", tok.Epoch, n.LastEpoch))
	}
	if tok.Epoch <= n.Released {
		return o.refuse(protocol.CodeNoLease, fmt.Sprintf("the lease at epoch %d was released or revoked", tok.Epoch))
	}
	if ttl <= 0 && tok.Epoch == n.VoteEpoch {
		ttl = n.VoteTTL
	}
	tokenRelease := false
	switch {
	case shown.Key:
		tokenRelease = shown.TokenRelease
	case n.Lease.Committed && n.Lease.Holder == tok.Holder && n.Lease.Epoch == tok.Epoch:
		tokenRelease = n.Lease.TokenRelease // a re-sent Commit without the key loosens nothing
	}
	n.Lease = Lease{Holder: tok.Holder, Epoch: tok.Epoch, Expires: now.Add(r.clampTTL(ttl)), Committed: true, TokenRelease: tokenRelease}
	if tok.Epoch > n.LeaseGen {
		n.PrevGen, n.LeaseGen = n.LeaseGen, tok.Epoch
	}
	o.Changed = true
	o.audit(now, AuditCommit, n.Resource, tok.Epoch, tok.Holder, "")
	return o
}

// OwnStatement reports whether tok, sent by sender, is the holder's token
// for the statement this node voted for (or holds the lease of): then the
// node learns nothing from its signature, and Commit and Release skip the
// pairing (issue: one pairing per token). Only the holder's own identity
// qualifies: a relayed token is always checked.
func OwnStatement(rec Record, sender string, tok protocol.Token) bool {
	if sender != tok.Holder.ID || tok.Resource != rec.Resource {
		return false
	}
	voted := rec.VoteEpoch == tok.Epoch && rec.VoteHolder == tok.Holder && rec.Vote.Index != 0
	leased := !rec.Lease.Holder.IsZero() && rec.Lease.Epoch == tok.Epoch && rec.Lease.Holder == tok.Holder
	return voted || leased
}

// SameCertified reports whether tok is, byte for byte (signature
// included), the certified token rec holds: a token this node checked
// before, so it is genuine without another pairing.
func SameCertified(rec Record, tok protocol.Token) bool {
	return rec.Certified != nil && *rec.Certified == tok
}

// Renew extends the holder's (the session's) committed, unexpired lease at
// epoch.
func (r Rules) Renew(rec Record, holder protocol.Holder, epoch uint64, ttl time.Duration, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	l := rec.Lease // judged as it was, before expiry clears it
	o.expire(now)
	n := &o.Next
	switch {
	case l.Holder != holder || l.Epoch != epoch:
		return o.refuse(protocol.CodeNotHolder, "no lease of this holder at this epoch")
	case !l.Committed || !l.Active(now):
		return o.refuse(protocol.CodeNoLease, "lease expired or not committed")
	}
	n.Lease.Expires = now.Add(r.clampTTL(ttl))
	o.Changed = true
	o.audit(now, AuditRenew, n.Resource, epoch, holder, "")
	return o
}

// Release ends the holder's lease at the token's epoch (the caller checked
// that the sender is its holder's identity) so the resource is free at
// once. The token names the session, so a release ends only the lease of
// the session that acquired, and only with proof tied to that session
// (issue 20): its key (shown.Key), or, for a lease committed with
// TokenRelease, a genuine token (shown.Verified). A token whose signature
// was not checked ends a lease only with the key (Shown.unchecked), and
// then teaches nothing. Releasing a lease already released is acknowledged
// again (a re-sent Release).
func (r Rules) Release(rec Record, tok protocol.Token, shown Shown, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	if r.laterEra(tok.Epoch) {
		return r.refuseLaterEra(o, tok.Epoch)
	}
	if r.earlierEra(tok) {
		return r.refuseEarlierEra(o, tok)
	}
	if !shown.Verified && !shown.unchecked(rec, tok.Holder.ID, tok) {
		// The driver checks the signature first; a forged token with no
		// key never gets here.
		return o.refuse(protocol.CodeBadRequest, "token not checked and no session key")
	}
	o.expire(now)
	if shown.Verified {
		o.catchUp(tok, now)
	}
	n := &o.Next
	if n.Lease.Holder != tok.Holder || n.Lease.Epoch != tok.Epoch {
		if tok.Epoch == n.Released && n.Lease.Holder.IsZero() {
			return o // released already: the same answer again
		}
		// The lease starts at the vote (issue 20), so a Release can
		// overtake the session's Commit at a member that did not vote:
		// one whose last epoch, before this request taught it the
		// token's, was below it. A genuine token and its session's key
		// end the lease here before it starts: a late Commit is refused
		// (Released) instead of holding the resource for a TTL nobody
		// renews.
		if shown.Verified && shown.Key && tok.Epoch > rec.LastEpoch && tok.Epoch > n.Released {
			n.Released = tok.Epoch
			o.Changed = true
			o.audit(now, AuditRelease, n.Resource, tok.Epoch, tok.Holder, "before its commit")
			return o
		}
		// A member that voted for the session, whose vote's lease ran out
		// before the Commit came, says so (the lease ended under the
		// holder here), but remembers the release all the same, so that
		// the late Commit starts nothing.
		o = o.refuse(protocol.CodeNotHolder, "no lease of this holder at this epoch")
		if shown.Key && rec.VoteEpoch == tok.Epoch && rec.VoteHolder == tok.Holder && tok.Epoch > n.Released {
			n.Released = tok.Epoch
			o.Changed = true
		}
		return o
	}
	detail := ""
	if !shown.Key {
		if !n.Lease.TokenRelease {
			return o.refuse(protocol.CodeNotHolder, ErrKeyOnlyMessage)
		}
		detail = "by token"
	}
	if !n.Lease.Committed && tok.Epoch > n.LeaseGen {
		// The session held the lease from the vote and released it before
		// its Commit got here: the generation moves as the Commit would
		// have moved it, so that this member orders waiters as the
		// members the Commit reached do.
		n.PrevGen, n.LeaseGen = n.LeaseGen, tok.Epoch
	}
	n.Lease = Lease{}
	n.Released = tok.Epoch // a re-sent Commit must not bring it back
	o.Changed = true
	o.audit(now, AuditRelease, n.Resource, tok.Epoch, tok.Holder, detail)
	return o
}

// Abandon drops the holder's (the session's) uncommitted vote at epoch,
// freeing the resource at once. LastEpoch is unchanged, so the node still
// never votes at that epoch for anyone else (S1).
func (r Rules) Abandon(rec Record, holder protocol.Holder, epoch uint64, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	o.expire(now)
	n := &o.Next
	if n.Lease.Holder != holder || n.Lease.Epoch != epoch || n.Lease.Committed {
		return o.refuse(protocol.CodeNotHolder, "no uncommitted vote of this holder at this epoch")
	}
	n.Lease = Lease{}
	o.Changed = true
	o.audit(now, AuditAbandon, n.Resource, epoch, holder, "")
	return o
}

// SeeVotes records that f+1 distinct nodes (the caller verified their
// identity signatures) voted at epoch or above. At least one of them is
// honest, and an honest node votes at most MaxEpochStep above what it
// knows, so raising Seen keeps epochs bounded (S5) while letting a node
// that fell behind by uncommitted votes take part again. Seen never lets
// the node vote at or below LastEpoch (S1). Votes of a later era teach it
// nothing: they are refused (S1 across a resharing).
func (r Rules) SeeVotes(rec Record, epoch uint64, now time.Time) Outcome {
	o := Outcome{Next: rec, At: now}
	if r.laterEra(epoch) { // S1/S5: the era ceiling
		return r.refuseLaterEra(o, epoch)
	}
	if epoch > o.Next.Seen {
		o.Next.Seen = epoch
		o.Changed = true
		o.audit(now, AuditSeen, rec.Resource, epoch, protocol.Holder{}, "f+1 signed votes")
	}
	return o
}

// Status is a node's view of a resource. The caller applies the epoch
// floor first (Rules.Status).
func Status(rec Record, now time.Time) protocol.StatusReply {
	s := protocol.StatusReply{LastEpoch: rec.LastEpoch, Certified: rec.Certified}
	if rec.Lease.Active(now) {
		// The holder is named by its HolderRef: a reply never shows a
		// session ID (issue 20).
		s.Holder, s.LeaseEpoch, s.LeaseLeft = rec.Lease.Holder.Ref(), rec.Lease.Epoch, rec.Lease.Expires.Sub(now)
	}
	return s
}

func (r Rules) clampTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = r.DefaultTTL
	}
	if ttl > r.MaxTTL {
		ttl = r.MaxTTL
	}
	return ttl
}

// catchUp learns a certified token: the epoch can no longer be voted for,
// and it becomes the highest known token if it is.
func (o *Outcome) catchUp(tok protocol.Token, now time.Time) {
	n := &o.Next
	if n.Certified == nil || tok.Epoch > n.Certified.Epoch {
		t := tok
		n.Certified = &t
		o.Changed = true
	}
	// S1: a certified epoch can no longer be voted for; S5: a lagging node
	// catches up by being shown a token.
	if tok.Epoch > n.LastEpoch {
		n.LastEpoch = tok.Epoch
		o.Changed = true
		o.audit(now, AuditCatchUp, n.Resource, tok.Epoch, tok.Holder, "")
	}
	if !n.Lease.Holder.IsZero() && n.Lease.Epoch < tok.Epoch {
		n.Lease = Lease{} // superseded by a later certified epoch
		o.Changed = true
	}
}

// expire clears a lapsed lease, auditing a committed one.
func (o *Outcome) expire(now time.Time) {
	l := o.Next.Lease
	if l.Holder.IsZero() || l.Active(now) {
		return
	}
	if l.Committed {
		o.audit(now, AuditExpire, o.Next.Resource, l.Epoch, l.Holder, "")
	}
	o.Next.Lease = Lease{}
	o.Changed = true
}

func (o Outcome) refuse(code protocol.Code, msg string) Outcome {
	o.Kind, o.Code, o.Message = protocol.KindRefuse, code, msg
	return o
}

func (o *Outcome) audit(now time.Time, kind AuditKind, resource string, epoch uint64, holder protocol.Holder, detail string) {
	o.Audit = append(o.Audit, AuditEntry{Time: now, Kind: kind, Resource: resource, Epoch: epoch, Holder: holder.String(), Detail: detail})
}

// Status is Status with the epoch floor applied, so clients pick their
// next epoch above it.
func (r Rules) Status(rec Record, now time.Time) protocol.StatusReply {
	return Status(r.floor(rec), now)
}
