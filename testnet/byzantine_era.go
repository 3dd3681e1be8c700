package testnet

// A Byzantine behaviour across a resharing. After a resharing the old
// group may keep running (docs/design-notes.md allows it), and its shares
// still sign for the same group key. Tokens and signed votes of the new
// group are public, so a Byzantine old member can show them to the honest
// old nodes: in a Commit, as the proof of an Acquire, and as the f+1
// signed votes of an Acquire (with its own vote and those of members that
// kept their identities across the resharing). An old node that caught up
// from any of them would vote in the new era, and the old group could then
// issue a second token for an epoch the new group issues too. Honest old
// nodes must refuse every such item with CodeOtherEra.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// EraFeed is what a group reshared after another has made public: the
// highest certified token per resource and its members' signed votes.
// Whoever watches the new group (a test, the scenario runner) fills it;
// EraRelay behaviours of old members read it. It is safe for concurrent
// use.
type EraFeed struct {
	first     chan struct{} // closed by the first token
	firstOnce sync.Once

	mu     sync.Mutex
	tokens map[string]protocol.Token
	votes  map[string]map[int]protocol.SignedVote // resource -> node index -> highest
}

// NewEraFeed returns an empty feed.
func NewEraFeed() *EraFeed {
	return &EraFeed{first: make(chan struct{}), tokens: map[string]protocol.Token{}, votes: map[string]map[int]protocol.SignedVote{}}
}

// AddToken offers a certified token of the new group; the feed keeps the
// highest per resource.
func (f *EraFeed) AddToken(t protocol.Token) {
	f.mu.Lock()
	if old, ok := f.tokens[t.Resource]; !ok || t.Epoch > old.Epoch {
		f.tokens[t.Resource] = t
	}
	f.mu.Unlock()
	f.firstOnce.Do(func() { close(f.first) })
}

// First is closed once the feed has a token.
func (f *EraFeed) First() <-chan struct{} { return f.first }

// AddVote offers a signed vote of a new-group member; the feed keeps the
// highest per member and resource.
func (f *EraFeed) AddVote(v protocol.SignedVote) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.votes[v.Statement.Resource]
	if m == nil {
		m = map[int]protocol.SignedVote{}
		f.votes[v.Statement.Resource] = m
	}
	if old, ok := m[v.Node]; !ok || v.Statement.Epoch > old.Statement.Epoch {
		m[v.Node] = v
	}
}

// Tokens returns the feed's tokens, one per resource, sorted by resource.
func (f *EraFeed) Tokens() []protocol.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]protocol.Token, 0, len(f.tokens))
	for _, t := range f.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

func (f *EraFeed) token(resource string) (protocol.Token, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[resource]
	return t, ok
}

// votesFor returns the feed's votes on resource from members other than
// skip, by node index.
func (f *EraFeed) votesFor(resource string, skip int) []protocol.SignedVote {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []protocol.SignedVote
	for i, v := range f.votes[resource] {
		if i != skip {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// EraRelayStats counts the honest old nodes' answers to an EraRelay.
type EraRelayStats struct {
	// Sent counts the Commit and Acquire requests sent.
	Sent int
	// OtherEra counts refusals with protocol.CodeOtherEra: what an honest
	// old node must answer.
	OtherEra int
	// Refused counts other refusals (for example fewer than f+1 distinct
	// voters: a bad request); Failed counts requests without a reply
	// (crashed, cut-off or slow targets).
	Refused, Failed int
	// Accepted lists the new-era items an old node accepted: an acked
	// Commit or a vote. Each one is a violation of the era ceiling.
	Accepted []string
	// Codes counts the refusal codes.
	Codes map[protocol.Code]int
}

// EraRelayer is the EraRelay behaviour. Its Request and Reply hooks make
// the node lie in Status; RelayOnce and Run send the new era's tokens and
// votes to the honest old nodes.
type EraRelayer struct {
	feed     *EraFeed
	colluder lcrypto.PrivKey
	r        *byzRand

	mu    sync.Mutex
	stats EraRelayStats
	chost host.Host
}

// EraRelay makes an old member relay what feed holds from a later era: in
// Status it reports the new era's token as certified (with its own signed
// vote there); RelayOnce sends that token in a Commit to honest old nodes
// and, from the colluding client identity colluder (nil: none), in
// Acquire requests as the proof, or their f+1 signed votes (its own among
// them). Everything else it answers honestly.
func EraRelay(feed *EraFeed, colluder lcrypto.PrivKey) *EraRelayer {
	return &EraRelayer{feed: feed, colluder: colluder, r: newByzRand(0xe7a), stats: EraRelayStats{Codes: map[protocol.Code]int{}}}
}

// Request answers Status with the new era's token, if the feed has one.
func (e *EraRelayer) Request(_ context.Context, m *Member, proto string, _ peer.ID, req []byte) ([]byte, bool, error) {
	if proto != protocol.ProtoStatus {
		return nil, false, nil
	}
	r, err := protocol.UnmarshalStatusRequest(req)
	if err != nil {
		return nil, false, nil
	}
	tok, ok := e.feed.token(r.Resource)
	if !ok {
		return nil, false, nil
	}
	st := protocol.StatusReply{LastEpoch: tok.Epoch, Certified: &tok}
	if v, err := ownVote(m, tok.Statement); err == nil {
		st.Vote = &v
	}
	return st.Marshal(), true, nil
}

// Reply passes the honest reply through.
func (e *EraRelayer) Reply(_ *Member, _ string, _ peer.ID, reply []byte) []byte { return reply }

// ownVote is m's identity signature over stmt, as a signed vote.
func ownVote(m *Member, stmt protocol.Statement) (protocol.SignedVote, error) {
	sig, err := m.Dir.Identity.Sign(stmt.VoteBytes())
	if err != nil {
		return protocol.SignedVote{}, fmt.Errorf("testnet: era relay: sign vote: %w", err)
	}
	return protocol.SignedVote{Node: m.Index, Statement: stmt, IdentitySig: sig}, nil
}

// Stats returns a copy of what the relay counted so far.
func (e *EraRelayer) Stats() EraRelayStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Accepted = append([]string(nil), s.Accepted...)
	s.Codes = make(map[protocol.Code]int, len(e.stats.Codes))
	for c, n := range e.stats.Codes {
		s.Codes[c] = n
	}
	return s
}

// Close closes the colluding client's host, if one was started.
func (e *EraRelayer) Close() error {
	e.mu.Lock()
	h := e.chost
	e.chost = nil
	e.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.Close()
}

// colluderHost starts (once) a libp2p host with the colluding client's
// identity that knows every member of nw.
func (e *EraRelayer) colluderHost(nw *Network) (host.Host, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.chost != nil || e.colluder == nil {
		return e.chost, nil
	}
	var ids []peer.ID
	for _, m := range nw.Members {
		ids = append(ids, m.PeerID)
	}
	h, err := transport.NewHost(e.colluder, nil, transport.NewGater(ids...))
	if err != nil {
		return nil, fmt.Errorf("testnet: era relay: colluder host: %w", err)
	}
	for _, m := range nw.Members {
		if m.Dir == nil {
			continue
		}
		if err := transport.AddPeer(h, m.PeerID, m.Dir.Listen); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("testnet: era relay: colluder host: %w", err)
		}
	}
	e.chost = h
	return h, nil
}

const maxEraAccepts = 16

func (e *EraRelayer) count(target int, what string, code protocol.Code, accepted bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Sent++
	switch {
	case err != nil:
		e.stats.Failed++
	case accepted:
		if len(e.stats.Accepted) < maxEraAccepts {
			e.stats.Accepted = append(e.stats.Accepted, fmt.Sprintf("node %d accepted %s", target, what))
		}
	case code == protocol.CodeOtherEra:
		e.stats.OtherEra++
		e.stats.Codes[code]++
	default:
		e.stats.Refused++
		e.stats.Codes[code]++
	}
}

// RelayOnce sends, for every resource the feed has a token for, one
// Commit of that token to each target (old member indices of nw, not
// m itself) from m's host, and one Acquire from the colluding client: in
// turn at an epoch above the token with it as proof, at an epoch of the
// old era with it as proof, and at an epoch of the old era (the one above
// m's own, or the old era's last) with f+1 signed new-era votes. A
// crashed m sends nothing. Replies are counted in Stats.
func (e *EraRelayer) RelayOnce(ctx context.Context, nw *Network, m *Member, targets []int, timeout time.Duration) {
	r := nw.Node(m.Index)
	if r == nil {
		return
	}
	ch, err := e.colluderHost(nw)
	if err != nil {
		e.count(0, "colluder host", 0, false, err)
		ch = nil
	}
	f := m.Dir.Cluster.F
	ceiling, _ := protocol.Era{Floor: m.Dir.Cluster.File.EpochFloor}.Ceiling()
	for _, tok := range e.feed.Tokens() {
		own, _ := byzRecord(ctx, m, tok.Resource)
		var votes []protocol.SignedVote
		if v, err := ownVote(m, tok.Statement); err == nil {
			votes = append(votes, v)
		}
		votes = append(votes, e.feed.votesFor(tok.Resource, m.Index)...)
		if len(votes) > f+1 {
			votes = votes[:f+1]
		}
		for _, ti := range targets {
			if ti == m.Index || ctx.Err() != nil {
				continue
			}
			to := nw.Member(ti).PeerID
			cctx, cancel := context.WithTimeout(ctx, timeout)
			b, err := transport.Call(cctx, r.Host(), to, protocol.ProtoCommit, protocol.CommitRequest{Token: tok, TTL: time.Second}.Marshal(), protocol.MaxFrameSize)
			cancel()
			var ack protocol.Ack
			if err == nil {
				ack, err = protocol.UnmarshalAck(b)
			}
			e.count(ti, fmt.Sprintf("a Commit of %q epoch %d", tok.Resource, tok.Epoch), ack.Code, err == nil && ack.Code == protocol.CodeOK, err)
			if ch == nil {
				continue
			}
			req := protocol.AcquireRequest{Cluster: tok.Cluster, Resource: tok.Resource, TTL: time.Second}
			copy(req.Key[:], e.r.bytes(protocol.SessionKeySize))
			req.Key[0] |= 1 // never zero
			var what string
			switch e.r.next() % 3 {
			case 0:
				req.Epoch, req.Proof = tok.Epoch+1, &tok
				what = fmt.Sprintf("an Acquire of %q epoch %d with a new-era proof", tok.Resource, req.Epoch)
			case 1:
				req.Epoch, req.Proof = own.LastEpoch+1, &tok
				what = fmt.Sprintf("an Acquire of %q epoch %d with a new-era proof", tok.Resource, req.Epoch)
			default:
				req.Epoch, req.Votes = own.LastEpoch+1, votes
				if e.r.intn(2) == 0 && ceiling > 0 {
					req.Epoch = ceiling - 1
				}
				what = fmt.Sprintf("an Acquire of %q epoch %d with %d new-era votes", tok.Resource, req.Epoch, len(votes))
			}
			cctx, cancel = context.WithTimeout(ctx, timeout)
			b, err = transport.Call(cctx, ch, to, protocol.ProtoAcquire, req.Marshal(), protocol.MaxFrameSize)
			cancel()
			var ar protocol.AcquireReply
			if err == nil {
				ar, err = protocol.UnmarshalAcquireReply(b)
			}
			e.count(ti, what, ar.Code, err == nil && ar.Kind == protocol.KindVote, err)
		}
	}
}

// Run relays every interval until ctx ends, then closes the colluder's
// host.
func (e *EraRelayer) Run(ctx context.Context, nw *Network, m *Member, targets []int, interval, timeout time.Duration) {
	defer func() { _ = e.Close() }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		e.RelayOnce(ctx, nw, m, targets, timeout)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var _ Behaviour = (*EraRelayer)(nil)
