package testnet

// Byzantine behaviours: decorators around the honest node that a test (or
// the scenario runner) gives to at most f nodes with SetBehaviour. Each one
// attacks one assumption of the protocol; the tests in byzantine_test.go
// show that none of them breaks S1, S2, S4 or S5 and that a correct client
// still acquires. They sign with the member's real share and identity: a
// Byzantine node is a member gone bad, not a stranger.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	mrand "math/rand"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// passThrough is the do-nothing decorator the behaviours embed: every request
// goes to the honest node and its reply is sent as is.
type passThrough struct{}

func (passThrough) Request(context.Context, *Member, string, peer.ID, []byte) ([]byte, bool, error) {
	return nil, false, nil
}

func (passThrough) Reply(_ *Member, _ string, _ peer.ID, reply []byte) []byte { return reply }

// byzRand is a seeded random source and counter shared by the concurrent
// requests of one behaviour, so runs repeat.
type byzRand struct {
	mu  sync.Mutex
	rng *mrand.Rand
	n   uint64
}

func newByzRand(seed int64) *byzRand { return &byzRand{rng: mrand.New(mrand.NewSource(seed))} }

// next returns 0, 1, 2, … across calls.
func (r *byzRand) next() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return r.n - 1
}

func (r *byzRand) uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Uint64()
}

func (r *byzRand) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Intn(n)
}

func (r *byzRand) bytes(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := make([]byte, n)
	_, _ = r.rng.Read(b)
	return b
}

// byzVote is the vote a node gives holder at (resource, epoch): its partial
// over the statement and its identity signature over the vote bytes.
func byzVote(m *Member, resource string, epoch uint64, holder protocol.Holder) (protocol.AcquireReply, protocol.Statement, error) {
	stmt := m.Dir.Cluster.Statement(resource, epoch, holder)
	p, err := m.Dir.Share.Sign(stmt.SignedBytes())
	if err != nil {
		return protocol.AcquireReply{}, stmt, err
	}
	sig, err := m.Dir.Identity.Sign(stmt.VoteBytes())
	if err != nil {
		return protocol.AcquireReply{}, stmt, err
	}
	return protocol.AcquireReply{Kind: protocol.KindVote, Partial: p, IdentitySig: sig}, stmt, nil
}

// byzRecord is the honest node's record of resource, if it runs.
func byzRecord(ctx context.Context, m *Member, resource string) (node.Record, bool) {
	m.mu.Lock()
	r := m.running
	m.mu.Unlock()
	if r == nil {
		return node.Record{}, false
	}
	rec, err := r.Record(ctx, resource)
	if err != nil {
		return node.Record{}, false
	}
	return rec, true
}

// byzStatus decodes a Status request and reads the honest node's record
// of its resource; ok is false if either fails, and the behaviour then
// leaves the request to the honest node.
func byzStatus(ctx context.Context, m *Member, req []byte) (string, node.Record, bool) {
	r, err := protocol.UnmarshalStatusRequest(req)
	if err != nil {
		return "", node.Record{}, false
	}
	rec, ok := byzRecord(ctx, m, r.Resource)
	return r.Resource, rec, ok
}

// voteMatcher remembers the last Acquire requests of each peer so that
// Reply, which sees only the reply bytes, can tell which statement an
// honest vote is for: the one whose vote bytes the node's identity
// signature verifies over.
type voteMatcher struct {
	mu      sync.Mutex
	pending map[peer.ID][]protocol.AcquireRequest
}

const maxPendingPerPeer = 16

func (v *voteMatcher) request(from peer.ID, req protocol.AcquireRequest) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pending == nil {
		v.pending = map[peer.ID][]protocol.AcquireRequest{}
	}
	ps := append(v.pending[from], req)
	if len(ps) > maxPendingPerPeer {
		ps = ps[len(ps)-maxPendingPerPeer:]
	}
	v.pending[from] = ps
}

// statement finds (and forgets) the request that reply votes on.
func (v *voteMatcher) statement(m *Member, from peer.ID, reply protocol.AcquireReply) (protocol.Statement, bool) {
	v.mu.Lock()
	ps := append([]protocol.AcquireRequest(nil), v.pending[from]...)
	v.mu.Unlock()
	pub := m.Dir.Identity.GetPublic()
	for i := len(ps) - 1; i >= 0; i-- {
		stmt := m.Dir.Cluster.Statement(ps[i].Resource, ps[i].Epoch, protocol.Holder{ID: from.String(), Session: ps[i].Key.Session()})
		if ok, err := pub.Verify(stmt.VoteBytes(), reply.IdentitySig); err == nil && ok {
			v.mu.Lock()
			cur := v.pending[from]
			for j := range cur {
				if cur[j].Resource == ps[i].Resource && cur[j].Epoch == ps[i].Epoch && cur[j].Key == ps[i].Key {
					v.pending[from] = append(cur[:j:j], cur[j+1:]...)
					break
				}
			}
			v.mu.Unlock()
			return stmt, true
		}
	}
	return protocol.Statement{}, false
}

// honestVote decodes reply as the honest node's vote on an Acquire and
// finds (and forgets) the statement it is for. ok is false for any other
// reply (another protocol, a refusal, an unmatched vote), which the
// behaviours that tamper with votes pass through as is.
func (v *voteMatcher) honestVote(m *Member, proto string, from peer.ID, reply []byte) (protocol.AcquireReply, protocol.Statement, bool) {
	if proto != protocol.ProtoAcquire {
		return protocol.AcquireReply{}, protocol.Statement{}, false
	}
	ar, err := protocol.UnmarshalAcquireReply(reply)
	if err != nil || ar.Kind != protocol.KindVote {
		return protocol.AcquireReply{}, protocol.Statement{}, false
	}
	stmt, ok := v.statement(m, from, ar)
	return ar, stmt, ok
}

// ---------------------------------------------------------------------------
// Equivocate

type equivocator struct{ passThrough }

// Equivocate makes a node vote for every Acquire it gets, at any epoch and
// for any holder, ignoring its own vote history: the one thing S1's quorum
// intersection must survive. Its votes are real (its share, its identity),
// so two of them for one (resource, epoch) are evidence against it. All
// other requests go to the honest node.
func Equivocate() Behaviour { return equivocator{} }

func (equivocator) Request(_ context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	if proto != protocol.ProtoAcquire {
		return nil, false, nil
	}
	r, err := protocol.UnmarshalAcquireRequest(req)
	if err != nil {
		return nil, false, nil
	}
	v, _, err := byzVote(m, r.Resource, r.Epoch, protocol.Holder{ID: from.String(), Session: r.Key.Session()})
	if err != nil {
		return nil, false, nil
	}
	return v.Marshal(), true, nil
}

// ---------------------------------------------------------------------------
// ForgePartials

// forgery is what a ForgePartials node did to one vote.
type forgery int

// The forgeries ForgePartials draws from. The encoding attacks rewrite the
// 48 bytes of the node's honest partial (a compressed BLS12-381 G1 point)
// and leave everything else in the vote as it was, so only the partial
// gives them away.
const (
	// forgeWrongMessage: a well-formed partial of the node's own index
	// over another message. Only a pairing check finds it.
	forgeWrongMessage forgery = iota
	// forgeOtherIndex: the node's valid partial labelled with another
	// node's index.
	forgeOtherIndex
	// forgeXNotBelowP: the x-coordinate written as x+p, the same residue
	// in a non-canonical encoding; when x+p does not fit beside the flag
	// bits (most partials), another x ≥ p.
	forgeXNotBelowP
	// forgeSortFlag: the sort flag flipped, which names the negated
	// point: a valid encoding of a point of G1 that is not the partial.
	// Only a pairing check finds it.
	forgeSortFlag
	// forgeUncompressed: the compression flag cleared, so the 48 bytes
	// claim to be the first half of an uncompressed point.
	forgeUncompressed
	// forgeIdentity: the canonical encoding of the point at infinity.
	forgeIdentity
	// forgeInfinityFlag: the infinity flag set over the partial's
	// (non-zero) x-coordinate.
	forgeInfinityFlag
	// forgeNonSubgroup: a point on the curve outside the prime-order
	// subgroup, as ParsePartial's byte-level rules allow.
	forgeNonSubgroup
	// forgeNotOnCurve: a canonical x-coordinate with no point on the
	// curve, as ParsePartial's byte-level rules allow.
	forgeNotOnCurve
)

// encodingAttacks are the forgeries that rewrite the partial's encoding.
var encodingAttacks = []forgery{
	forgeXNotBelowP, forgeSortFlag, forgeUncompressed, forgeIdentity,
	forgeInfinityFlag, forgeNonSubgroup, forgeNotOnCurve,
}

func (f forgery) String() string {
	switch f {
	case forgeWrongMessage:
		return "wrong-message"
	case forgeOtherIndex:
		return "other-index"
	case forgeXNotBelowP:
		return "x-not-below-p"
	case forgeSortFlag:
		return "sort-flag"
	case forgeUncompressed:
		return "uncompressed"
	case forgeIdentity:
		return "identity"
	case forgeInfinityFlag:
		return "infinity-flag"
	case forgeNonSubgroup:
		return "non-subgroup"
	case forgeNotOnCurve:
		return "not-on-curve"
	}
	return fmt.Sprintf("forgery(%d)", int(f))
}

// encoding reports whether f rewrites the partial's encoding.
func (f forgery) encoding() bool { return slices.Contains(encodingAttacks, f) }

// byteLevel reports whether f breaks a byte-level rule of the encoding
// (flags, x below p, not the identity), which crypto.ParsePartial checks
// and so every decoder of a vote refuses. The other encoding attacks pass
// those rules and are found when the partial is decoded in full (the curve
// and subgroup checks) or, for the sort flag, by the pairing.
func (f forgery) byteLevel() bool {
	switch f {
	case forgeXNotBelowP, forgeUncompressed, forgeIdentity, forgeInfinityFlag:
		return true
	}
	return false
}

// Flag bits of the first byte of a compressed point.
const (
	flagCompressed = 0x80
	flagInfinity   = 0x40
	flagSort       = 0x20
	flagBits       = flagCompressed | flagInfinity | flagSort
)

// fieldModulus is p, the base-field modulus of BLS12-381: AddModulus
// applied to x = 0.
var fieldModulus = func() *big.Int {
	b, _ := bls12381test.AddModulus(make([]byte, crypto.SignatureSize))
	return new(big.Int).SetBytes(b)
}()

// malleate returns sig with encoding attack mode applied. tag (at least 1)
// picks the point for forgeNonSubgroup and the x for forgeNotOnCurve.
func malleate(mode forgery, sig crypto.Signature, tag uint64) crypto.Signature {
	out := sig
	switch mode {
	case forgeXNotBelowP:
		if b, ok := bls12381test.AddModulus(sig[:]); ok {
			copy(out[:], b)
			return out
		}
		// x+p needs more than the 381 bits beside the flags: write
		// p + (x mod (2^381 - p)) instead, still at least p.
		x := new(big.Int).SetBytes(append([]byte{sig[0] &^ flagBits}, sig[1:]...))
		room := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 8*crypto.SignatureSize-3), fieldModulus)
		x.Add(x.Mod(x, room), fieldModulus)
		x.FillBytes(out[:])
		out[0] |= sig[0] & flagBits
	case forgeSortFlag:
		out[0] ^= flagSort
	case forgeUncompressed:
		out[0] &^= flagCompressed
	case forgeIdentity:
		copy(out[:], bls12381test.Identity(crypto.SignatureSize))
	case forgeInfinityFlag:
		out[0] |= flagInfinity
	case forgeNonSubgroup:
		q := bls12381test.NonSubgroupG1(tag)
		copy(out[:], q[:])
	case forgeNotOnCurve:
		q := bls12381test.NotOnCurveG1(tag)
		copy(out[:], q[:])
	}
	return out
}

type partialForger struct {
	votes voteMatcher
	r     *byzRand

	mu     sync.Mutex
	log    map[string][]forgery // statement key -> what was sent for it
	forced *forgery             // if set, the forgery every vote gets (see force)
	inWait int                  // forgeries sent in Wait answers
	// honestFirst is how many votes each client identity gets honest
	// before the forgeries start (ForgePartialsAfter); honest counts them.
	honestFirst int
	honest      map[peer.ID]int
}

// ForgePartialsAfter is ForgePartials that first sends each client
// identity n honest votes: a member whose partials made a valid token is
// vouched for by that client, whose next candidate with the member's
// forged partial is handed out at the vote while it is checked (the Lock
// is then lost with client.ErrBadToken), after which the client checks
// the member's partials first. The scenarios' forgers are these, with
// n = 1, so that both paths run.
func ForgePartialsAfter(n int) Behaviour {
	return &partialForger{r: newByzRand(0xf0f0), log: map[string][]forgery{}, honestFirst: n, honest: map[peer.ID]int{}}
}

// honestNow reports whether the vote for from is still one of its
// honest ones, and counts it.
func (p *partialForger) honestNow(from peer.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.honest[from] >= p.honestFirst {
		return false
	}
	p.honest[from]++
	return true
}

// force makes every vote from now on get forgery m instead of a drawn
// one. A test that must see each kind uses it: which draws reach a token
// depends on how many attempts each round takes.
func (p *partialForger) force(m forgery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forced = &m
}

// ForgePartials makes a node decide honestly (it records its votes) but
// send invalid partials, in Acquire replies and in Wait answers alike: in turn a well-formed partial over the wrong
// message and one of the BLS12-381 encoding attacks on its honest partial
// (x ≥ p, the sort flag flipped, the compression flag cleared, the
// identity, the infinity flag, a point outside the subgroup, an x with no
// point), and every fifth vote its partial under another node's index.
func ForgePartials() Behaviour {
	return &partialForger{r: newByzRand(0xf0f0), log: map[string][]forgery{}}
}

func stmtKey(resource string, epoch uint64, holder protocol.Holder) string {
	return fmt.Sprintf("%s\x00%d\x00%s", resource, epoch, holder)
}

// forgeries returns what the node sent for the statement, in order.
func (p *partialForger) forgeries(resource string, epoch uint64, holder protocol.Holder) []forgery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]forgery(nil), p.log[stmtKey(resource, epoch, holder)]...)
}

// statements reports for how many statements the node forged a vote.
func (p *partialForger) statements() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.log)
}

// waitForged reports how many of the votes the node forged rode in its
// answers to Wait rather than in Acquire replies.
func (p *partialForger) waitForged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inWait
}

func (p *partialForger) Request(_ context.Context, _ *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	switch proto {
	case protocol.ProtoAcquire:
		if r, err := protocol.UnmarshalAcquireRequest(req); err == nil {
			p.votes.request(from, r)
		}
	case protocol.ProtoWait:
		// A Wait that asks a vote is matched as the Acquire it stands for.
		if r, err := protocol.UnmarshalWaitRequest(req); err == nil && r.Epoch > 0 {
			p.votes.request(from, protocol.AcquireRequest{Cluster: r.Cluster, Resource: r.Resource, Epoch: r.Epoch, Key: r.Key, TTL: r.TTL})
		}
	}
	return nil, false, nil
}

func (p *partialForger) Reply(m *Member, proto string, from peer.ID, reply []byte) []byte {
	if proto == protocol.ProtoWait {
		return p.waitReply(m, from, reply)
	}
	ar, stmt, ok := p.votes.honestVote(m, proto, from, reply)
	if !ok || p.honestNow(from) {
		return reply
	}
	return p.forge(m, ar, stmt).Marshal()
}

// waitReply forges the vote an honest Wait answer carries, as Reply does
// an Acquire's.
func (p *partialForger) waitReply(m *Member, from peer.ID, reply []byte) []byte {
	wr, err := protocol.UnmarshalWaitReply(reply)
	if err != nil || wr.Vote == nil {
		return reply
	}
	ar := protocol.AcquireReply{Kind: protocol.KindVote, Partial: wr.Vote.Partial, IdentitySig: wr.Vote.IdentitySig}
	stmt, ok := p.votes.statement(m, from, ar)
	if !ok || p.honestNow(from) {
		return reply
	}
	ar = p.forge(m, ar, stmt)
	wr.Vote.Partial = ar.Partial
	p.mu.Lock()
	p.inWait++
	p.mu.Unlock()
	return wr.Marshal()
}

// forge replaces the partial of the honest vote ar for stmt by a forgery
// and logs which.
func (p *partialForger) forge(m *Member, ar protocol.AcquireReply, stmt protocol.Statement) protocol.AcquireReply {
	c := p.r.next()
	mode := forgeWrongMessage
	switch {
	case c%5 == 4:
		mode = forgeOtherIndex
	case c%2 == 1:
		mode = encodingAttacks[p.r.intn(len(encodingAttacks))]
	}
	tag := 1 + p.r.uint64()%(1<<16)
	p.mu.Lock()
	if p.forced != nil {
		mode = *p.forced
	}
	p.mu.Unlock()
	switch {
	case mode == forgeOtherIndex:
		n := m.Dir.Cluster.File.N
		ar.Partial.Index = ar.Partial.Index%n + 1
	case mode.encoding():
		ar.Partial.Sig = malleate(mode, ar.Partial.Sig, tag)
	default:
		bad, err := m.Dir.Share.Sign(append([]byte("forged partial\x00"), stmt.SignedBytes()...))
		if err != nil {
			return ar
		}
		ar.Partial = bad
	}
	p.mu.Lock()
	k := stmtKey(stmt.Resource, stmt.Epoch, stmt.Holder)
	p.log[k] = append(p.log[k], mode)
	p.mu.Unlock()
	return ar
}

// ---------------------------------------------------------------------------
// LieInStatus

type statusLiar struct {
	r *byzRand

	mu   sync.Mutex
	seen []protocol.Token // certified tokens the node saw, newest last
}

const maxSeenTokens = 64

// LieInStatus makes a node answer Status with lies: a huge LastEpoch
// (math.MaxUint64-5 or random large values, or 0), another holder with a
// long lease, a certified token that is stale, forged (the epoch and
// holder changed under another token's signature or its negation, a
// partial posing as the group signature, or a signature that is a point
// outside the subgroup or an x with no point) or real but for another
// resource, and a vote at the claimed epoch that it really signed. Its
// refusals claim the epoch is stale below a huge last epoch or too far
// ahead of a huge one or of none. It votes honestly.
func LieInStatus() Behaviour { return &statusLiar{r: newByzRand(0x5a7e)} }

func (s *statusLiar) remember(t *protocol.Token) {
	if t == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.seen {
		if o.Digest() == t.Digest() {
			return
		}
	}
	s.seen = append(s.seen, *t)
	if len(s.seen) > maxSeenTokens {
		s.seen = s.seen[1:]
	}
}

// pick returns a seen token that satisfies ok, preferring recent ones.
func (s *statusLiar) pick(ok func(protocol.Token) bool) (protocol.Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.seen) - 1; i >= 0; i-- {
		if ok(s.seen[i]) {
			return s.seen[i], true
		}
	}
	return protocol.Token{}, false
}

func (s *statusLiar) Request(ctx context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	switch proto {
	case protocol.ProtoCommit:
		if r, err := protocol.UnmarshalCommitRequest(req); err == nil {
			s.remember(&r.Token) // unverified: the liar does not care
		}
		return nil, false, nil
	case protocol.ProtoStatus:
	default:
		return nil, false, nil
	}
	resource, rec, ok := byzStatus(ctx, m, req)
	if !ok {
		return nil, false, nil
	}
	s.remember(rec.Certified)
	return s.lie(m, from, resource, rec).Marshal(), true, nil
}

func (s *statusLiar) lie(m *Member, from peer.ID, resource string, rec node.Record) protocol.StatusReply {
	c := s.r.next()
	holder := s.otherHolder(m, from)
	st := protocol.StatusReply{Holder: holder.Ref(), LeaseLeft: protocol.MaxTTL}
	switch c % 4 {
	case 0:
		st.LastEpoch = math.MaxUint64 - 5
		st.Certified = s.forged(m, resource, st.LastEpoch, holder)
	case 1:
		st.LastEpoch = s.r.uint64() | 1<<40
		if t, ok := s.pick(func(t protocol.Token) bool { return t.Resource != resource }); ok {
			st.Certified = &t // real, but for another resource
		} else {
			st.Certified = s.forged(m, resource, st.LastEpoch, holder)
		}
	case 2:
		st.LastEpoch = rec.LastEpoch + 2 + uint64(s.r.intn(1<<20))
		if t, ok := s.pick(func(t protocol.Token) bool {
			return t.Resource == resource && (rec.Certified == nil || t.Epoch < rec.Certified.Epoch)
		}); ok {
			st.Certified = &t // stale
		} else {
			st.Certified = s.forged(m, resource, st.LastEpoch, holder)
		}
	default:
		st.LastEpoch = 0 // understate, and claim no token
	}
	st.LeaseEpoch = st.LastEpoch
	if st.LastEpoch > 0 {
		// A vote at the claimed epoch, really signed by this node: it
		// counts towards a client's f+1 signed-vote catch-up proof.
		if v, stmt, err := byzVote(m, resource, st.LastEpoch, holder); err == nil {
			st.Vote = &protocol.SignedVote{Node: m.Index, Statement: stmt, IdentitySig: v.IdentitySig}
		}
	}
	return st
}

// otherHolder names a session of a configured client other than the
// asker.
func (s *statusLiar) otherHolder(m *Member, from peer.ID) protocol.Holder {
	h := protocol.Holder{ID: "mallory"}
	cs := m.Dir.Cluster.File.Clients
	for range cs {
		if id := cs[s.r.intn(len(cs))].PeerID; id != from.String() {
			h.ID = id
			break
		}
	}
	copy(h.Session[:], s.r.bytes(protocol.SessionIDSize))
	return h
}

// forged makes a token for (resource, epoch, holder) that does not verify.
// Its signature is drawn from: another token's signature (if the node saw
// one), that signature negated (the sort flag flipped: a point of G1 that
// signs nothing), the node's own partial posing as the group signature, a
// point on the curve outside the subgroup, and an x with no point. Each
// passes the byte-level rules that decoding a Status reply checks, so only
// the full decoding or the pairing of a verification refuses it. An
// encoding that breaks those rules would only make the whole reply
// malformed, which Garbage already sends.
func (s *statusLiar) forged(m *Member, resource string, epoch uint64, holder protocol.Holder) *protocol.Token {
	stmt := m.Dir.Cluster.Statement(resource, epoch, holder)
	tag := 1 + s.r.uint64()%(1<<16)
	switch s.r.intn(5) {
	case 0, 1:
		if t, ok := s.pick(func(protocol.Token) bool { return true }); ok {
			sig := t.Signature
			if tag%2 == 0 {
				sig = malleate(forgeSortFlag, sig, tag)
			}
			return &protocol.Token{Statement: stmt, Signature: sig}
		}
	case 2:
		return &protocol.Token{Statement: stmt, Signature: malleate(forgeNonSubgroup, crypto.Signature{}, tag)}
	case 3:
		return &protocol.Token{Statement: stmt, Signature: malleate(forgeNotOnCurve, crypto.Signature{}, tag)}
	}
	p, err := m.Dir.Share.Sign(stmt.SignedBytes())
	if err != nil {
		return nil
	}
	return &protocol.Token{Statement: stmt, Signature: p.Sig}
}

func (s *statusLiar) Reply(_ *Member, proto string, _ peer.ID, reply []byte) []byte {
	if proto != protocol.ProtoAcquire {
		return reply
	}
	ar, err := protocol.UnmarshalAcquireReply(reply)
	if err != nil || ar.Kind != protocol.KindRefuse {
		return reply
	}
	huge := math.MaxUint64 - 5 - uint64(s.r.intn(1000))
	switch s.r.next() % 3 {
	case 0:
		// "Stale" at a huge last epoch, a lie that agrees with itself:
		// the client may try one round there (its hint), which honest
		// nodes refuse as too far.
		ar.Code, ar.LastEpoch = protocol.CodeStale, huge
	case 1:
		// "Too far" at a huge last epoch contradicts itself: the client
		// must ignore it.
		ar.Code, ar.LastEpoch = protocol.CodeTooFar, huge
	default:
		// "Too far" claiming no history: the client then shows the nodes
		// signed votes, this node's lying one among them.
		ar.Code, ar.LastEpoch = protocol.CodeTooFar, 0
	}
	return ar.Marshal()
}

// ---------------------------------------------------------------------------
// Replay

type oldVote struct {
	stmt  protocol.Statement
	reply []byte
}

type replayer struct {
	votes voteMatcher
	r     *byzRand

	mu     sync.Mutex
	old    []oldVote
	tokens map[string][]protocol.Token // resource -> certified tokens seen, oldest first
}

const maxOldVotes = 64

// Replay makes a node answer Acquire with a vote it gave earlier for
// another (epoch, holder), preferring the same resource, and Status with
// the oldest token and signed vote it knows for the resource. Every third Acquire, and any it has nothing
// to replay for, it answers honestly, so it keeps gathering old votes.
func Replay() Behaviour {
	return &replayer{r: newByzRand(0x4e91), tokens: map[string][]protocol.Token{}}
}

func (p *replayer) Request(ctx context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	switch proto {
	case protocol.ProtoAcquire:
		r, err := protocol.UnmarshalAcquireRequest(req)
		if err != nil {
			return nil, false, nil
		}
		if p.r.next()%3 != 0 {
			if v, ok := p.replayFor(r.Resource, r.Epoch, protocol.Holder{ID: from.String(), Session: r.Key.Session()}); ok {
				return v, true, nil
			}
		}
		p.votes.request(from, r)
		return nil, false, nil
	case protocol.ProtoStatus:
		resource, rec, ok := byzStatus(ctx, m, req)
		if !ok {
			return nil, false, nil
		}
		st := protocol.StatusReply{Vote: p.oldSignedVote(m, resource)}
		if old := p.oldToken(resource, rec.Certified); old != nil {
			st.LastEpoch, st.Certified = old.Epoch, old
		}
		return st.Marshal(), true, nil
	}
	return nil, false, nil
}

// replayFor picks an old vote for another statement.
func (p *replayer) replayFor(resource string, epoch uint64, holder protocol.Holder) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var other []byte
	for i := len(p.old) - 1; i >= 0; i-- {
		s := p.old[i].stmt
		if s.Epoch == epoch && s.Holder == holder && s.Resource == resource {
			continue
		}
		if s.Resource == resource {
			return p.old[i].reply, true
		}
		if other == nil {
			other = p.old[i].reply
		}
	}
	return other, other != nil
}

// oldSignedVote is the oldest vote the node gave on resource, as the
// signed vote Status shows.
func (p *replayer) oldSignedVote(m *Member, resource string) *protocol.SignedVote {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.old {
		if o.stmt.Resource != resource {
			continue
		}
		ar, err := protocol.UnmarshalAcquireReply(o.reply)
		if err != nil {
			return nil
		}
		return &protocol.SignedVote{Node: m.Index, Statement: o.stmt, IdentitySig: ar.IdentitySig}
	}
	return nil
}

// oldToken remembers cur and returns the oldest token seen for resource
// below cur (or cur itself if it is the only one).
func (p *replayer) oldToken(resource string, cur *protocol.Token) *protocol.Token {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := p.tokens[resource]
	if cur != nil && (len(ts) == 0 || ts[len(ts)-1].Epoch < cur.Epoch) {
		ts = append(ts, *cur)
		if len(ts) > maxSeenTokens {
			ts = ts[1:]
		}
		p.tokens[resource] = ts
	}
	if len(ts) == 0 {
		return nil
	}
	t := ts[0]
	return &t
}

func (p *replayer) Reply(m *Member, proto string, from peer.ID, reply []byte) []byte {
	_, stmt, ok := p.votes.honestVote(m, proto, from, reply)
	if !ok {
		return reply
	}
	p.mu.Lock()
	p.old = append(p.old, oldVote{stmt: stmt, reply: append([]byte(nil), reply...)})
	if len(p.old) > maxOldVotes {
		p.old = p.old[1:]
	}
	p.mu.Unlock()
	return reply
}

// ---------------------------------------------------------------------------
// Garbage

type garbage struct{ r *byzRand }

// errGarbageReset is how Garbage cuts a stream without a reply: the client
// reads a truncated (absent) frame.
var errGarbageReset = errors.New("testnet: byzantine node resets the stream")

// Garbage makes a node answer every request with garbage, in turn: random
// bytes, the honest reply truncated, the bytes of another message type, an
// empty reply, or a reset stream (no frame at all).
func Garbage() Behaviour { return &garbage{r: newByzRand(0x6a6b)} }

func (g *garbage) Request(context.Context, *Member, string, peer.ID, []byte) ([]byte, bool, error) {
	if g.r.intn(5) == 0 {
		return nil, true, errGarbageReset
	}
	return nil, false, nil
}

func (g *garbage) Reply(m *Member, proto string, _ peer.ID, reply []byte) []byte {
	switch g.r.next() % 4 {
	case 0:
		return g.r.bytes(1 + g.r.intn(256))
	case 1:
		if len(reply) > 1 {
			return reply[:g.r.intn(len(reply))]
		}
		return nil
	case 2:
		return otherMessage(m, proto)
	default:
		return nil
	}
}

// otherMessage is a well-formed message of a type the client does not
// expect on proto.
func otherMessage(m *Member, proto string) []byte {
	switch proto {
	case protocol.ProtoAcquire:
		return protocol.Ack{Code: protocol.CodeStale, LastEpoch: math.MaxUint64 - 5}.Marshal()
	case protocol.ProtoStatus:
		return protocol.AcquireReply{Kind: protocol.KindRefuse, Code: protocol.CodeStale, LastEpoch: math.MaxUint64 - 5}.Marshal()
	default: // acks expected
		return protocol.StatusReply{LastEpoch: math.MaxUint64 - 5, Holder: protocol.Holder{ID: m.PeerID.String(), Session: protocol.SessionID{1}}.Ref()}.Marshal()
	}
}

// ---------------------------------------------------------------------------
// Oversized

type oversized struct{ r *byzRand }

// Oversized makes a node answer every request with the largest frame the
// framing allows (protocol.MaxFrameSize bytes): random bytes, or the
// honest reply padded with trailing bytes to the cap. A frame announcing
// more than the cap cannot go through the node's writer; the tests send
// those raw, from a rogue host with the node's identity.
func Oversized() Behaviour { return &oversized{r: newByzRand(0x0b16)} }

func (o *oversized) Request(context.Context, *Member, string, peer.ID, []byte) ([]byte, bool, error) {
	return nil, false, nil
}

func (o *oversized) Reply(_ *Member, _ string, _ peer.ID, reply []byte) []byte {
	if o.r.next()%2 == 0 || len(reply) >= protocol.MaxFrameSize {
		return o.r.bytes(protocol.MaxFrameSize)
	}
	out := make([]byte, protocol.MaxFrameSize)
	copy(out, reply)
	copy(out[len(reply):], o.r.bytes(protocol.MaxFrameSize-len(reply)))
	return out
}

// ---------------------------------------------------------------------------
// Slow and Silent

type slow struct {
	passThrough
	d time.Duration
}

// Slow makes a node answer honestly, but only after d (or reset the stream
// if the request's context ends first).
func Slow(d time.Duration) Behaviour { return slow{d: d} }

func (s slow) Request(ctx context.Context, _ *Member, _ string, _ peer.ID, _ []byte) ([]byte, bool, error) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-t.C:
		return nil, false, nil
	}
}

type silent struct {
	passThrough
	r *byzRand
}

// errSilent is how a Silent node drops a request.
var errSilent = errors.New("testnet: byzantine node stays silent")

// Silent makes a node never answer: in turn it resets the stream at once,
// or holds it without a word until the request's context ends (the node's
// request timeout, or its shutdown).
func Silent() Behaviour { return silent{r: newByzRand(0x5113)} }

func (s silent) Request(ctx context.Context, _ *Member, _ string, _ peer.ID, _ []byte) ([]byte, bool, error) {
	if s.r.next()%2 == 0 {
		return nil, true, errSilent
	}
	<-ctx.Done()
	return nil, true, errSilent
}

var (
	_ Behaviour = equivocator{}
	_ Behaviour = (*partialForger)(nil)
	_ Behaviour = (*statusLiar)(nil)
	_ Behaviour = (*replayer)(nil)
	_ Behaviour = (*garbage)(nil)
	_ Behaviour = (*oversized)(nil)
	_ Behaviour = slow{}
	_ Behaviour = silent{}
)
