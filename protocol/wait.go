package protocol

import (
	"time"

	"github.com/palisade-dev/palisade/crypto"
)

// ProtoWait is the long poll of a client waiting for a held resource: the
// node answers when the resource is free for that waiter, or when the
// request's MaxWait (capped by the node) ends. It is how a node that
// answered Busy notifies its waiters (push handoff, DESIGN L2).
//
// Version 2 carries the session key instead of the session ID, the
// waiter's claim as signed places (see Place) instead of a cohort number,
// and names holders in replies by HolderRef.
//
// Version 3 lets the vote ride in the answer (issue 20, handoff speed): a
// request may carry the epoch and TTL of the Acquire the waiter would send
// next, and a member that answers Free to the waiter it reserves the
// resource for votes as it would for that Acquire and puts the vote in
// the reply (WaitReply.Vote), which saves the waiter a round trip.
const ProtoWait = "/palisade/wait/3.0.0"

// KindQueued is the Acquire reply of a node whose resource is free but
// reserved for an earlier waiter: Holder is that waiter, Left how long
// the reservation lasts at most. The sender is queued behind it. Queued
// is liveness only: the node still votes at most once per epoch (S1).
const KindQueued ReplyKind = 4

// WaitRequest asks a node to answer when resource is free for the
// sender's lock session, or after at most MaxWait.
type WaitRequest struct {
	Cluster  ClusterID
	Resource string
	// Key is the waiting acquisition's session key; the node derives the
	// session from it (Key.Session), so only the process that drew the key
	// can wait, or claim a place, for that session. Never zero.
	Key SessionKey
	// MaxWait is how long the node may hold the request; nodes cap it
	// (a few seconds). Zero asks for the state at once (and joins the
	// queue).
	MaxWait time.Duration
	// Claim, if not empty, is the waiter's proof of an earlier place: the
	// signed places (WaitReply.Place) of f+1 distinct members, the f+1
	// with the lowest cohorts; it claims the latest of their cohorts
	// (ClaimCohort). A node that put the waiter exactly one cohort later,
	// because the waiter's request reached it just after a handoff, moves
	// it up if the signatures verify, so every node orders the waiters
	// alike. A node checks at most one claim per queue entry, and a claim
	// that fails is the waiter's last. At most MaxClaimPlaces places, all
	// for this cluster, resource and one holder, from distinct members.
	Claim []SignedPlace
	// Epoch, if not zero, is the epoch of the Acquire the waiter would
	// send once the resource is free for it, and TTL the lease it would
	// ask for (zero: the node's default). A member that answers Free to
	// the waiter it reserves the free resource for runs the Acquire rules
	// on them, as for an AcquireRequest of this session (S1: one vote per
	// epoch, the epoch window, the authorisation), and puts its vote in
	// the reply. It is attacker input bounded like an Acquire's: the
	// rules refuse an epoch at or below the node's last one or more than
	// MaxEpochStep above what it knows. A request without Epoch has no
	// TTL.
	Epoch uint64
	TTL   time.Duration
}

// WaitVote is a member's vote carried in a Free WaitReply: for the
// statement (cluster, resource, Epoch, the waiter's holder), the same
// partial signature and identity signature an Acquire's KindVote reply
// carries. Epoch is the request's.
type WaitVote struct {
	Epoch       uint64
	Partial     crypto.PartialSig
	IdentitySig []byte
}

// WaitReply answers a WaitRequest.
type WaitReply struct {
	// Code is CodeOK, or why the node refused to queue the waiter
	// (unauthorised, wrong cluster, bad request).
	Code Code
	// Free is set when no lease is live and the waiter is first in the
	// node's queue: an Acquire from it now gets the node's vote unless
	// its epoch is stale or too far.
	Free bool
	// LastEpoch is the node's last epoch: the next acquisition asks above
	// it.
	LastEpoch uint64
	// Holder, LeaseEpoch, Left and Pending say, when not Free, what holds
	// the resource: a lease (Pending: an uncommitted vote) or the
	// reservation of an earlier waiter (LeaseEpoch 0, Pending). The holder
	// is named by its HolderRef: no reply shows a session ID.
	Holder     HolderRef
	LeaseEpoch uint64
	Left       time.Duration
	Pending    bool
	// Cohort is the waiter's place in this node's line (the lease
	// generation it waits behind), 0 if the node has no room for it.
	Cohort uint64
	// Place is the node's signed statement of that place (nil when Cohort
	// is 0): what the waiter shows other nodes in its claim.
	Place *SignedPlace
	// Vote, only in a Free reply to a request with an Epoch, is the
	// member's vote at that epoch (see WaitRequest.Epoch); nil when the
	// member did not vote (the epoch was stale or too far: LastEpoch says
	// where the member stands, or the member only answers Free because
	// nobody is queued there). LastEpoch is then at least the vote's
	// epoch (equal, unless the vote is one given before, re-sent).
	Vote *WaitVote
	// Message explains a refusal.
	Message string
}

// Err returns nil for CodeOK and a *RefusedError otherwise.
func (m WaitReply) Err() error {
	return Ack{Code: m.Code, LastEpoch: m.LastEpoch, Message: m.Message}.Err()
}

// Marshal encodes the request.
func (m WaitRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.Resource)
	e.sessionKey(m.Key)
	e.u64(durMS(m.MaxWait))
	e.claim(m.Claim)
	e.u64(m.Epoch)
	e.u64(durMS(m.TTL))
	return e.b
}

// UnmarshalWaitRequest decodes a WaitRequest strictly.
func UnmarshalWaitRequest(b []byte) (WaitRequest, error) {
	return decode(b, func(d *decoder) WaitRequest {
		var m WaitRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Key = d.sessionKey()
		m.MaxWait = msDur(d, "max wait")
		m.Claim = d.claim(m.Cluster, m.Resource)
		m.Epoch = d.u64("epoch")
		m.TTL = msDur(d, "ttl")
		if d.err == nil && m.Epoch == 0 && m.TTL != 0 {
			d.fail("ttl without an epoch")
		}
		return m
	})
}

// Marshal encodes the reply.
func (m WaitReply) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u8(uint8(m.Code))
	e.flag(m.Free)
	e.u64(m.LastEpoch)
	e.holderRef(m.Holder)
	e.u64(m.LeaseEpoch)
	e.u64(durMS(m.Left))
	e.flag(m.Pending)
	e.u64(m.Cohort)
	e.optPlace(m.Place)
	if m.Vote == nil {
		e.u8(0)
	} else {
		e.u8(1)
		e.u64(m.Vote.Epoch)
		e.partialVote(m.Vote.Partial, m.Vote.IdentitySig)
	}
	e.str(truncate(m.Message))
	return e.b
}

// UnmarshalWaitReply decodes a WaitReply strictly.
func UnmarshalWaitReply(b []byte) (WaitReply, error) {
	return decode(b, func(d *decoder) WaitReply {
		m := WaitReply{
			Code:       d.code(),
			Free:       d.flag("free flag"),
			LastEpoch:  d.u64("last epoch"),
			Holder:     d.optHolderRef("holder"),
			LeaseEpoch: d.u64("lease epoch"),
			Left:       msDur(d, "left"),
			Pending:    d.flag("pending flag"),
			Cohort:     d.u64("cohort"),
			Place:      d.optPlace(),
		}
		switch d.u8("vote flag") {
		case 0:
		case 1:
			v := WaitVote{Epoch: d.u64("vote epoch")}
			v.Partial, v.IdentitySig = d.partialVote()
			m.Vote = &v
		default:
			d.fail("vote flag not 0 or 1")
		}
		m.Message = d.str("message", MaxMessageLen)
		if d.err == nil && m.Free && !m.Holder.IsZero() {
			d.fail("free reply names a holder")
		}
		if d.err == nil && m.Place != nil && m.Place.Cohort != m.Cohort {
			d.fail("place in cohort %d, reply says %d", m.Place.Cohort, m.Cohort)
		}
		if d.err == nil && m.Vote != nil {
			switch {
			case !m.Free || m.Code != CodeOK:
				d.fail("vote in a reply that is not free")
			case m.Vote.Epoch == 0 || m.Vote.Epoch > m.LastEpoch:
				d.fail("vote at epoch %d, last epoch %d", m.Vote.Epoch, m.LastEpoch)
			}
		}
		return m
	})
}
