package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// What an admitted peer can make a node store or compute is bounded per
// peer (S6). This file holds the limits and the guard every request passes
// before its handler: the ACL for every per-resource request, and a budget
// of failed signature checks per peer so that one peer's bad signatures
// cannot keep the node busy with pairings.

// Limits bound what one admitted peer can make a node keep or compute. Zero
// fields take the defaults in DefaultLimits.
type Limits struct {
	// RecordCache is the most resource records kept in memory. Records are
	// durable in the vote store, so only clean copies are cached and any
	// of them may be dropped; a never-seen resource is never cached.
	RecordCache int
	// EvidencePerMember is the most pieces of evidence of equivocation kept
	// (and written to disk) per accused member. Further evidence against
	// that member is dropped before its signatures are checked.
	EvidencePerMember int
	// ForksPerResource is the most forks (two valid tokens for one
	// resource and epoch, issue 21) kept, written and passed on per
	// resource; Forks the most in all. Further forks are dropped before
	// their signatures are checked.
	ForksPerResource, Forks int
	// BadSigBurst and BadSigRate are a token bucket per peer on signature
	// checks that fail: a peer may cost the node BadSigBurst failed checks
	// at once and BadSigRate per second in the long run. Only failures are
	// charged, so honest peers are never limited however many checks they
	// run at once; once a peer's bucket is empty, its uncached tokens and
	// its evidence are refused without a check. Checks already running
	// when the bucket empties are charged too (the balance goes negative),
	// so a burst is at most BadSigBurst + Config.MaxInflightPerPeer and the
	// long-run rate stays BadSigRate.
	BadSigBurst int
	BadSigRate  float64
	// BadSigCache is how many digests of tokens whose signature failed are
	// remembered, so a bad token re-sent by any peer costs no pairing.
	BadSigCache int
	// Waiters bounds the waiters queued on all resources (push handoff,
	// queue.go); WaitersPerResource those of one resource, and
	// WaitersPerClient those of one client identity. A waiter the node has
	// no room for is told where things stand but not queued; it is served
	// once the queue ahead of it is empty.
	Waiters, WaitersPerResource, WaitersPerClient int
	// WaitersPerClientPerResource bounds the waiters of one client
	// identity on one resource, so one identity cannot fill a resource's
	// queue with its sessions (issue 20, F3).
	WaitersPerClientPerResource int
}

// DefaultLimits are the limits a zero Limits gets.
var DefaultLimits = Limits{
	RecordCache:       16384,
	EvidencePerMember: 4,
	ForksPerResource:  2,
	Forks:             256,
	BadSigBurst:       4,
	BadSigRate:        1,
	BadSigCache:       1024,

	Waiters:            16384,
	WaitersPerResource: 64,
	WaitersPerClient:   1024,

	WaitersPerClientPerResource: 2,
}

// fill applies the defaults to zero fields.
func (l *Limits) fill() {
	d := DefaultLimits
	if l.RecordCache <= 0 {
		l.RecordCache = d.RecordCache
	}
	if l.EvidencePerMember <= 0 {
		l.EvidencePerMember = d.EvidencePerMember
	}
	if l.ForksPerResource <= 0 {
		l.ForksPerResource = d.ForksPerResource
	}
	if l.Forks <= 0 {
		l.Forks = d.Forks
	}
	if l.BadSigBurst <= 0 {
		l.BadSigBurst = d.BadSigBurst
	}
	if l.BadSigRate <= 0 {
		l.BadSigRate = d.BadSigRate
	}
	if l.BadSigCache <= 0 {
		l.BadSigCache = d.BadSigCache
	}
	if l.Waiters <= 0 {
		l.Waiters = d.Waiters
	}
	if l.WaitersPerResource <= 0 {
		l.WaitersPerResource = d.WaitersPerResource
	}
	if l.WaitersPerClient <= 0 {
		l.WaitersPerClient = d.WaitersPerClient
	}
	if l.WaitersPerClientPerResource <= 0 {
		l.WaitersPerClientPerResource = d.WaitersPerClientPerResource
	}
}

// LimitStats count what the limits did, for operators and tests.
type LimitStats struct {
	// CachedRecords is the number of records in memory now.
	CachedRecords int
	// TokenChecks counts signature checks of tokens run by the guard
	// (a token already in the verifier's cache costs no pairing);
	// BadTokens those that failed; ThrottledTokens tokens refused without
	// a check because their sender's budget was empty; CachedBadTokens
	// tokens refused because the same token had failed before.
	TokenChecks, BadTokens, ThrottledTokens, CachedBadTokens uint64
	// EvidenceChecks counts evidence whose signatures were checked;
	// EvidenceKept the pieces kept; EvidenceDropped those dropped
	// unchecked because their member had reached EvidencePerMember.
	EvidenceChecks, EvidenceKept, EvidenceDropped uint64
	// ForkChecks counts forks whose signatures were checked (ProtoFork);
	// ForksKept the forks recorded, from any source; ForksDropped those
	// dropped unchecked for the caps (ForksPerResource, Forks).
	ForkChecks, ForksKept, ForksDropped uint64
	// Unauthorised counts requests refused by the ACL.
	Unauthorised uint64
}

// limitCounters are the LimitStats counters.
type limitCounters struct {
	tokenChecks, badTokens, throttled, cachedBad          atomic.Uint64
	evidenceChecks, evidenceKept, evidenceDropped, unauth atomic.Uint64
	forkChecks, forksKept, forksDropped                   atomic.Uint64
}

// LimitStats returns what the node's limits did so far.
func (n *Node) LimitStats() LimitStats {
	c := &n.limits
	return LimitStats{
		CachedRecords:   n.cachedRecords(),
		TokenChecks:     c.tokenChecks.Load(),
		BadTokens:       c.badTokens.Load(),
		ThrottledTokens: c.throttled.Load(),
		CachedBadTokens: c.cachedBad.Load(),
		EvidenceChecks:  c.evidenceChecks.Load(),
		EvidenceKept:    c.evidenceKept.Load(),
		EvidenceDropped: c.evidenceDropped.Load(),
		ForkChecks:      c.forkChecks.Load(),
		ForksKept:       c.forksKept.Load(),
		ForksDropped:    c.forksDropped.Load(),
		Unauthorised:    c.unauth.Load(),
	}
}

// mayAccess reports whether peer p may send per-resource requests other
// than Acquire about resource: a client whose patterns allow it, or a
// member node (members relay tokens and ask about any resource).
func (n *Node) mayAccess(p peer.ID, resource string) bool {
	id := p.String()
	if c, ok := n.client(id); ok && c.Allows(resource) {
		return true
	}
	return n.cfg.Cluster.NodeIndex(id) > 0
}

// mayAcquire reports whether peer p may acquire resource: clients only.
func (n *Node) mayAcquire(p peer.ID, resource string) bool {
	c, ok := n.client(p.String())
	return ok && c.Allows(resource)
}

// guard wraps a request handler with the per-peer limits: the ACL, applied
// to Status and every per-resource request before anything is loaded, and
// the pairing budget for an Acquire's proof token (Commit and Release
// tokens are checked by applyToken, which skips the holder's own statement).
// A token that passes here is in the verified cache, so the handler's own
// check costs no second pairing. Requests that do not
// parse are left to the handler, which refuses them with its own reply.
// Every decision is then counted and logged (observed, ops.go).
func (n *Node) guard(proto string, fn handlerFunc) handlerFunc {
	return n.observed(proto, func(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
		if reply, stop, err := n.screen(proto, from, b); stop {
			return reply, err
		}
		return fn(ctx, from, b)
	})
}

// screen is guard's decision: stop reports that reply (or err) answers the
// request and the handler must not run.
//
// S6: the per-resource ACL and the per-peer pairing budget.
func (n *Node) screen(proto string, from peer.ID, b []byte) (reply []byte, stop bool, err error) {
	denyAck := func(resource string) ([]byte, bool, error) {
		n.turnedAway(TurnedAwayUnauthorised)
		return protocol.Ack{Code: protocol.CodeUnauthorised, Message: fmt.Sprintf("%s may not access %q", from, resource)}.Marshal(), true, nil
	}
	switch proto {
	case protocol.ProtoStatus:
		req, err := protocol.UnmarshalStatusRequest(b)
		if err == nil && !n.mayAccess(from, req.Resource) {
			// StatusReply has no refusal code: the peer gets the reply
			// of a resource nobody used, which tells it nothing, and its
			// Acquire is then refused as unauthorised. Nothing is loaded.
			n.turnedAway(TurnedAwayUnauthorised)
			return n.cfg.Rules.Status(Record{Resource: req.Resource}, n.clock.Now()).Marshal(), true, nil
		}
	case protocol.ProtoForensics:
		req, err := protocol.UnmarshalForensicsRequest(b)
		if err == nil && !n.mayAccess(from, req.Resource) {
			n.turnedAway(TurnedAwayUnauthorised)
			return protocol.ForensicsReply{Code: protocol.CodeUnauthorised, Message: fmt.Sprintf("%s may not access %q", from, req.Resource)}.Marshal(), true, nil
		}
	case protocol.ProtoAcquire:
		req, err := protocol.UnmarshalAcquireRequest(b)
		if err != nil || req.Proof == nil || !n.mayAcquire(from, req.Resource) {
			return nil, false, nil // the handler refuses or needs no pairing
		}
		if msg, bad := n.checkTokenFrom(from, *req.Proof, req.Resource); bad {
			return refuse(protocol.CodeBadRequest, 0, "proof: "+msg), true, nil
		}
	case protocol.ProtoCommit:
		// The token is checked by the handler (applyToken), which skips the
		// pairing for the holder's own token of a statement this node voted
		// for and charges the sender's budget otherwise.
		req, err := protocol.UnmarshalCommitRequest(b)
		if err == nil && !n.mayAccess(from, req.Token.Resource) {
			return denyAck(req.Token.Resource)
		}
	case protocol.ProtoRelease:
		req, err := protocol.UnmarshalReleaseRequest(b)
		if err == nil && !n.mayAccess(from, req.Token.Resource) {
			return denyAck(req.Token.Resource)
		}
	case protocol.ProtoRenew:
		req, err := protocol.UnmarshalRenewRequest(b)
		if err == nil && !n.mayAccess(from, req.Resource) {
			return denyAck(req.Resource)
		}
	case protocol.ProtoAbandon:
		req, err := protocol.UnmarshalAbandonRequest(b)
		if err == nil && !n.mayAccess(from, req.Resource) {
			return denyAck(req.Resource)
		}
	}
	return nil, false, nil
}

// checkTokenFrom runs the signature check of a token sent by peer p under
// p's budget of failed checks. It reports bad with a message when the
// token must be refused; tokens that fail a cheap check are left to the
// handler (verifyToken), which refuses them without a pairing. A token
// that passes is in the verifier's cache, so the handler's check costs no
// second pairing.
func (n *Node) checkTokenFrom(p peer.ID, t protocol.Token, resource string) (msg string, bad bool) {
	if t.Cluster != n.cfg.Cluster.ID || t.Resource != resource || t.Validate() != nil {
		return "", false
	}
	d := t.Digest()
	if n.badSigs.has(d) {
		n.limits.cachedBad.Add(1)
		return "token signature: does not verify (seen before)", true
	}
	if !n.sigBudget.allow(p, n.clock.Now()) {
		n.limits.throttled.Add(1)
		return "too many bad signatures from this peer: token not checked, try again later", true
	}
	n.limits.tokenChecks.Add(1)
	if err := n.verifyToken(t, resource); err != nil {
		n.limits.badTokens.Add(1)
		n.sigBudget.charge(p, n.clock.Now())
		n.badSigs.add(d)
		return err.Error(), true
	}
	return "", false
}

// sigBudget is a token bucket per peer on failed signature checks.
type sigBudget struct {
	mu      sync.Mutex
	burst   float64
	rate    float64 // per second
	buckets map[peer.ID]*bucket
}

type bucket struct {
	tokens float64 // may be negative: checks that failed concurrently
	at     time.Time
}

// maxIdleBuckets bounds the bucket map: full buckets carry no state (a new
// one starts full), so beyond this many peers they are forgotten.
const maxIdleBuckets = 1024

// refill returns p's bucket brought up to now; the caller holds s.mu.
func (s *sigBudget) refill(p peer.ID, now time.Time) *bucket {
	if s.buckets == nil {
		s.buckets = map[peer.ID]*bucket{}
	}
	b, ok := s.buckets[p]
	if !ok {
		if len(s.buckets) >= maxIdleBuckets {
			s.prune(now)
		}
		b = &bucket{tokens: s.burst, at: now}
		s.buckets[p] = b
	}
	if dt := now.Sub(b.at); dt > 0 {
		b.tokens = min(s.burst, b.tokens+dt.Seconds()*s.rate)
		b.at = now
	}
	return b
}

// allow reports whether p may have another signature checked now.
func (s *sigBudget) allow(p peer.ID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buckets[p]; !ok || b.tokens >= s.burst {
		return true // fast path: a peer that never failed
	}
	return s.refill(p, now).tokens >= 1
}

// charge records one failed check by p.
func (s *sigBudget) charge(p peer.ID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill(p, now).tokens--
}

// prune forgets buckets that have refilled; the caller holds s.mu.
func (s *sigBudget) prune(now time.Time) {
	for p, b := range s.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*s.rate >= s.burst {
			delete(s.buckets, p)
		}
	}
}

// digestSet is a bounded set of token digests (of canonical encodings,
// never raw bytes): the bad-signature cache. (Verified tokens are cached by
// the node's verifier.) When full it starts over.
type digestSet struct {
	mu  sync.Mutex
	max int
	m   map[[32]byte]struct{}
}

func (s *digestSet) has(d [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[d]
	return ok
}

func (s *digestSet) add(d [32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= s.max {
		s.m = make(map[[32]byte]struct{}, s.max)
	}
	s.m[d] = struct{}{}
}

// initLimits sets up the limit state from the config; New calls it.
func (n *Node) initLimits() {
	l := n.cfg.Limits
	n.sigBudget = sigBudget{burst: float64(l.BadSigBurst), rate: l.BadSigRate}
	n.badSigs = digestSet{max: l.BadSigCache}
	n.recordCap = (l.RecordCache + numShards - 1) / numShards
	n.evidence = evidenceBook{max: l.EvidencePerMember}
	n.forks = forkBook{perResource: l.ForksPerResource, max: l.Forks}
}
