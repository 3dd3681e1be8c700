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
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
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
		stmt := m.Dir.Cluster.Statement(ps[i].Resource, ps[i].Epoch, protocol.Holder{ID: from.String(), Session: ps[i].Session})
		if ok, err := pub.Verify(stmt.VoteBytes(), reply.IdentitySig); err == nil && ok {
			v.mu.Lock()
			cur := v.pending[from]
			for j := range cur {
				if cur[j].Resource == ps[i].Resource && cur[j].Epoch == ps[i].Epoch && cur[j].Session == ps[i].Session {
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
	v, _, err := byzVote(m, r.Resource, r.Epoch, protocol.Holder{ID: from.String(), Session: r.Session})
	if err != nil {
		return nil, false, nil
	}
	return v.Marshal(), true, nil
}

// ---------------------------------------------------------------------------
// ForgePartials

// forgery is what a ForgePartials node did to one vote.
type forgery int

// The forgeries ForgePartials cycles through.
const (
	// forgeWrongMessage: a well-formed partial of the node's own index
	// over another message. Only a pairing check finds it.
	forgeWrongMessage forgery = iota
	// forgeMalleated: the honest partial with a coordinate replaced by
	// x+p, written raw into the reply bytes (kyber itself would accept
	// it; the strict decoder must not).
	forgeMalleated
	// forgeOtherIndex: the node's valid partial labelled with another
	// node's index.
	forgeOtherIndex
)

func (f forgery) String() string {
	switch f {
	case forgeWrongMessage:
		return "wrong-message"
	case forgeMalleated:
		return "malleated"
	case forgeOtherIndex:
		return "other-index"
	}
	return fmt.Sprintf("forgery(%d)", int(f))
}

type partialForger struct {
	votes voteMatcher
	r     *byzRand

	mu     sync.Mutex
	log    map[string][]forgery // statement key -> what was sent for it
	forced *forgery             // if set, the forgery every vote gets (see force)
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
// send invalid partials: in turn a well-formed partial over the wrong
// message and a malleated (x+p) encoding, and every fifth vote its partial
// under another node's index.
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

func (p *partialForger) Request(_ context.Context, _ *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	if proto == protocol.ProtoAcquire {
		if r, err := protocol.UnmarshalAcquireRequest(req); err == nil {
			p.votes.request(from, r)
		}
	}
	return nil, false, nil
}

// partialSigOffset is where the signature of the partial starts in a
// marshalled vote: version, kind, the partial's index.
const partialSigOffset = 1 + 1 + crypto.PartialSize - crypto.SignatureSize

func (p *partialForger) Reply(m *Member, proto string, from peer.ID, reply []byte) []byte {
	ar, stmt, ok := p.votes.honestVote(m, proto, from, reply)
	if !ok {
		return reply
	}
	c := p.r.next()
	mode := forgeWrongMessage
	switch {
	case c%5 == 4:
		mode = forgeOtherIndex
	case c%2 == 1:
		mode = forgeMalleated
	}
	p.mu.Lock()
	if p.forced != nil {
		mode = *p.forced
	}
	p.mu.Unlock()
	var out []byte
	switch mode {
	case forgeMalleated:
		out = malleateVote(reply)
		if out == nil {
			mode = forgeWrongMessage
		}
	case forgeOtherIndex:
		n := m.Dir.Cluster.File.N
		ar.Partial.Index = ar.Partial.Index%n + 1
		out = ar.Marshal()
	}
	if mode == forgeWrongMessage {
		bad, err := m.Dir.Share.Sign(append([]byte("forged partial\x00"), stmt.SignedBytes()...))
		if err != nil {
			return reply
		}
		ar.Partial = bad
		out = ar.Marshal()
	}
	p.mu.Lock()
	k := stmtKey(stmt.Resource, stmt.Epoch, stmt.Holder)
	p.log[k] = append(p.log[k], mode)
	p.mu.Unlock()
	return out
}

// bn256P is the base field modulus of kyber's bn256.
var bn256P, _ = new(big.Int).SetString("65000549695646603732796438742359905742825358107623003571877145026864184071783", 10)

// malleateVote rewrites the x (or else y) coordinate of a marshalled
// vote's partial as coordinate+p, the non-canonical encoding of the same
// point. It returns nil if neither fits in 32 bytes.
func malleateVote(reply []byte) []byte {
	for _, off := range []int{partialSigOffset, partialSigOffset + 32} {
		if len(reply) < off+32 {
			return nil
		}
		if x, ok := addModulus(reply[off : off+32]); ok {
			out := append([]byte(nil), reply...)
			copy(out[off:], x)
			return out
		}
	}
	return nil
}

func addModulus(x []byte) ([]byte, bool) {
	v := new(big.Int).Add(new(big.Int).SetBytes(x), bn256P)
	if v.BitLen() > 256 {
		return nil, false
	}
	return v.FillBytes(make([]byte, 32)), true
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
// holder changed under another token's signature, or a partial posing as
// the group signature) or real but for another resource, and a vote at
// the claimed epoch that it really signed. Its refusals claim the epoch is
// stale below a huge last epoch or too far ahead of a huge one or of
// none. It votes honestly.
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
	st := protocol.StatusReply{Holder: s.otherHolder(m, from), LeaseLeft: protocol.MaxTTL}
	switch c % 4 {
	case 0:
		st.LastEpoch = math.MaxUint64 - 5
		st.Certified = s.forged(m, resource, st.LastEpoch, st.Holder)
	case 1:
		st.LastEpoch = s.r.uint64() | 1<<40
		if t, ok := s.pick(func(t protocol.Token) bool { return t.Resource != resource }); ok {
			st.Certified = &t // real, but for another resource
		} else {
			st.Certified = s.forged(m, resource, st.LastEpoch, st.Holder)
		}
	case 2:
		st.LastEpoch = rec.LastEpoch + 2 + uint64(s.r.intn(1<<20))
		if t, ok := s.pick(func(t protocol.Token) bool {
			return t.Resource == resource && (rec.Certified == nil || t.Epoch < rec.Certified.Epoch)
		}); ok {
			st.Certified = &t // stale
		} else {
			st.Certified = s.forged(m, resource, st.LastEpoch, st.Holder)
		}
	default:
		st.LastEpoch = 0 // understate, and claim no token
	}
	st.LeaseEpoch = st.LastEpoch
	if st.LastEpoch > 0 {
		// A vote at the claimed epoch, really signed by this node: it
		// counts towards a client's f+1 signed-vote catch-up proof.
		if v, stmt, err := byzVote(m, resource, st.LastEpoch, st.Holder); err == nil {
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

// forged makes a token for (resource, epoch, holder) that does not verify:
// another token's signature if the node saw one, else its own partial.
func (s *statusLiar) forged(m *Member, resource string, epoch uint64, holder protocol.Holder) *protocol.Token {
	stmt := m.Dir.Cluster.Statement(resource, epoch, holder)
	if t, ok := s.pick(func(protocol.Token) bool { return true }); ok {
		return &protocol.Token{Statement: stmt, Signature: t.Signature}
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
			if v, ok := p.replayFor(r.Resource, r.Epoch, protocol.Holder{ID: from.String(), Session: r.Session}); ok {
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
		return protocol.StatusReply{LastEpoch: math.MaxUint64 - 5, Holder: protocol.Holder{ID: m.PeerID.String(), Session: protocol.SessionID{1}}}.Marshal()
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
