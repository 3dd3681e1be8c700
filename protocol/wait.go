package protocol

import "time"

// ProtoWait is the long poll of a client waiting for a held resource: the
// node answers when the resource is free for that waiter, or when the
// request's MaxWait (capped by the node) ends. It is how a node that
// answered Busy notifies its waiters (push handoff, DESIGN L2).
const ProtoWait = "/palisade/wait/1.0.0"

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
	// Session is the waiting acquisition's session ID; never zero.
	Session SessionID
	// MaxWait is how long the node may hold the request; nodes cap it
	// (a few seconds).
	MaxWait time.Duration
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
	// reservation of an earlier waiter (LeaseEpoch 0, Pending).
	Holder     Holder
	LeaseEpoch uint64
	Left       time.Duration
	Pending    bool
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
	e.fixed(m.Session[:])
	e.u64(durMS(m.MaxWait))
	return e.b
}

// UnmarshalWaitRequest decodes a WaitRequest strictly.
func UnmarshalWaitRequest(b []byte) (WaitRequest, error) {
	return decode(b, func(d *decoder) WaitRequest {
		var m WaitRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.Resource = d.resource()
		m.Session = d.session()
		m.MaxWait = msDur(d, "max wait")
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
	e.holder(m.Holder)
	e.u64(m.LeaseEpoch)
	e.u64(durMS(m.Left))
	e.flag(m.Pending)
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
			Holder:     d.optHolder("holder"),
			LeaseEpoch: d.u64("lease epoch"),
			Left:       msDur(d, "left"),
			Pending:    d.flag("pending flag"),
			Message:    d.str("message", MaxMessageLen),
		}
		if d.err == nil && m.Free && !m.Holder.IsZero() {
			d.fail("free reply names a holder")
		}
		return m
	})
}
