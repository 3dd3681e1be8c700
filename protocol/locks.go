package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// ProtoLocks lists the live leases a node holds, one page at a time, in
// resource name order. A client identity sees only the resources its
// patterns allow (as for Status); a member sees every resource. Clients
// show a lease only when t members report it alike (client.Client.Locks).
const ProtoLocks = "/palisade/locks/1.0.0"

// MaxLocksPerPage caps the leases of one LocksReply. With every field at
// its limit a full page is 64 × 412 bytes plus a resource name, well
// inside MaxFrameSize (TestLargestLocksReplyFitsFrame).
const MaxLocksPerPage = 64

// SessionHashSize is the size of a SessionHash.
const SessionHashSize = 8

// sessionHashDomain separates session hashes from every other hash.
const sessionHashDomain = "palisade/session-hash/v1"

// SessionHash stands for a lock session in listings and replies
// (HolderRef): nodes never show a session ID there, only this hash of it.
// Two leases of one client identity with different sessions have
// different hashes (up to a 2^-64 chance).
type SessionHash [SessionHashSize]byte

// Hash returns the session's hash: the first SessionHashSize bytes of
// SHA-256 over a domain tag and the session ID.
func (s SessionID) Hash() SessionHash {
	h := sha256.New()
	h.Write([]byte(sessionHashDomain))
	h.Write(s[:])
	var out SessionHash
	copy(out[:], h.Sum(nil))
	return out
}

// String is the hex form.
func (h SessionHash) String() string { return hex.EncodeToString(h[:]) }

// LocksRequest asks a node for up to Limit of its live leases whose
// resource names sort (bytewise) after After.
type LocksRequest struct {
	Cluster ClusterID
	// After is the last resource of the previous page ("" for the first).
	After string
	// Limit is how many leases the reply may carry; 0 or more than
	// MaxLocksPerPage means MaxLocksPerPage.
	Limit uint32
}

// LeaseInfo is one live, committed lease as a node reports it.
type LeaseInfo struct {
	Resource string
	// HolderID is the holder's client identity; Session the hash of its
	// lock session (never the session ID itself).
	HolderID string
	Session  SessionHash
	Epoch    uint64
	// Left is how long the lease has left by the node's clock.
	Left time.Duration
}

// LocksReply is one page of a node's live leases, sorted by resource.
type LocksReply struct {
	// Code is CodeOK, or why the node refused (wrong cluster,
	// unauthorised).
	Code   Code
	Leases []LeaseInfo
	// Next is the last resource the node looked at: every lease of a
	// resource after the request's After and up to Next is in Leases.
	// The next page starts after it. "" means the node looked at every
	// resource after After.
	Next string
	// Message explains a refusal.
	Message string
}

// Err returns nil for CodeOK and a *RefusedError otherwise.
func (m LocksReply) Err() error {
	return Ack{Code: m.Code, Message: m.Message}.Err()
}

// Marshal encodes the request.
func (m LocksRequest) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.fixed(m.Cluster[:])
	e.str(m.After)
	e.u64(uint64(m.Limit))
	return e.b
}

// UnmarshalLocksRequest decodes a LocksRequest strictly: After is empty
// or a valid resource name.
func UnmarshalLocksRequest(b []byte) (LocksRequest, error) {
	return decode(b, func(d *decoder) LocksRequest {
		var m LocksRequest
		copy(m.Cluster[:], d.take(ClusterIDSize, "cluster ID"))
		m.After = d.optResource("after")
		limit := d.u64("limit")
		if limit > 1<<32-1 {
			d.fail("limit %d out of range", limit)
		}
		m.Limit = uint32(limit)
		return m
	})
}

// Marshal encodes the reply.
func (m LocksReply) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.u8(uint8(m.Code))
	e.u64(uint64(len(m.Leases)))
	for _, l := range m.Leases {
		e.str(l.Resource)
		e.str(l.HolderID)
		e.fixed(l.Session[:])
		e.u64(l.Epoch)
		e.u64(durMS(l.Left))
	}
	e.str(m.Next)
	e.str(truncate(m.Message))
	return e.b
}

// UnmarshalLocksReply decodes a LocksReply strictly: at most
// MaxLocksPerPage leases, valid names, resources in strictly ascending
// order and none after Next (when Next is set).
func UnmarshalLocksReply(b []byte) (LocksReply, error) {
	return decode(b, func(d *decoder) LocksReply {
		var m LocksReply
		m.Code = d.code()
		n := d.u64("lease count")
		if n > MaxLocksPerPage {
			d.fail("%d leases, at most %d", n, MaxLocksPerPage)
			return m
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			var l LeaseInfo
			l.Resource = d.resource()
			l.HolderID = d.str("holder", MaxHolderLen)
			if d.err == nil {
				if err := ValidateHolder(l.HolderID); err != nil {
					d.err = err
				}
			}
			copy(l.Session[:], d.take(SessionHashSize, "session hash"))
			l.Epoch = d.u64("epoch")
			l.Left = msDur(d, "left")
			if d.err == nil && i > 0 && l.Resource <= m.Leases[i-1].Resource {
				d.fail("lease %d (%q) does not sort after %q", i, l.Resource, m.Leases[i-1].Resource)
			}
			m.Leases = append(m.Leases, l)
		}
		m.Next = d.optResource("next")
		if d.err == nil && m.Next != "" && len(m.Leases) > 0 && m.Leases[len(m.Leases)-1].Resource > m.Next {
			d.fail("lease %q sorts after next %q", m.Leases[len(m.Leases)-1].Resource, m.Next)
		}
		m.Message = d.str("message", MaxMessageLen)
		return m
	})
}

// optResource decodes a resource name that may be empty.
func (d *decoder) optResource(what string) string {
	r := d.str(what, MaxResourceLen)
	if d.err == nil && r != "" {
		if err := ValidateResource(r); err != nil {
			d.err = err
		}
	}
	return r
}
