// Package client acquires fencing tokens from a Palisade cluster and keeps
// the leases that go with them.
//
// Acquire asks 2f+1 nodes for their status, picks the next epoch from the
// (f+1)-th highest report (so f liars cannot inflate it), asks every node
// for a vote, combines the first 2f+1 votes optimistically into a token,
// and commits it to 2f+1 nodes. The returned Lock renews its lease in the
// background and reports loss on Lost. Safety never depends on the lease:
// the resource checks the token's epoch.
package client

import (
	"bytes"
	"context"
	csha256 "crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/p2p"
	"github.com/palisade-dev/palisade/protocol"
)

var log = logging.Logger("palisade/client")

// Config configures a Client.
type Config struct {
	// Cluster is the checked cluster file.
	Cluster *protocol.Cluster
	// Identity is the client's libp2p key; its peer ID is the holder named
	// in tokens and must be authorised in the cluster file.
	Identity lcrypto.PrivKey
	// Clock drives lease deadlines, renewals and backoff (default real).
	Clock clockwork.Clock
	// RequestTimeout bounds one request to one node, dial included
	// (default 5 s).
	RequestTimeout time.Duration
	// DefaultTTL is the lease length when Acquire is given none (10 s).
	DefaultTTL time.Duration
	// MinBackoff and MaxBackoff bound the randomised wait between
	// attempts (default 5 ms and 500 ms).
	MinBackoff, MaxBackoff time.Duration
	// Seed seeds the backoff jitter; 0 picks a random seed.
	Seed uint64
}

func (c *Config) validate() error {
	if c.Cluster == nil || c.Identity == nil {
		return errors.New("client: config needs Cluster and Identity")
	}
	if len(c.Cluster.File.Nodes) != c.Cluster.File.N {
		return fmt.Errorf("client: cluster file lists %d nodes, want %d", len(c.Cluster.File.Nodes), c.Cluster.File.N)
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 5 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = 500 * time.Millisecond
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return nil
}

type member struct {
	index int
	id    peer.ID
	pub   lcrypto.PubKey
}

// Client talks to one cluster. It is safe for concurrent use.
type Client struct {
	cfg     Config
	host    host.Host
	ownHost bool
	members []member
	f, t    int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rmu sync.Mutex
	rng *rand.Rand

	// smu guards silent: the members whose last acquire call got no reply
	// (timeout or transport error). A round does not wait for them once
	// the quorum would depend on them; a reply from one clears its mark.
	smu    sync.Mutex
	silent map[int]bool

	vmu      sync.Mutex
	verified map[[32]byte]struct{}

	// gmu guards closed and the start of tracked goroutines, so none is
	// added to wg once Close waits on it.
	gmu    sync.Mutex
	closed bool

	// held has one slot per resource this client holds or is acquiring:
	// the holder identity is the unit of exclusion, so two Acquires of one
	// client must not both get the (same) token.
	hmu  sync.Mutex
	held map[string]chan struct{}

	// emu guards the votes this client received (per resource, its last
	// round's) and the evidence of equivocation it found.
	emu      sync.Mutex
	myVotes  map[string]map[int]protocol.SignedVote
	evidence []protocol.Evidence
}

// Evidence returns the evidence of equivocation this client has found:
// a node's signed vote for another holder at an epoch where it also voted
// for this client. Each piece was also sent to every node.
func (c *Client) Evidence() []protocol.Evidence {
	c.emu.Lock()
	defer c.emu.Unlock()
	return append([]protocol.Evidence(nil), c.evidence...)
}

// rememberVotes keeps the votes of one round, to compare with what nodes
// later report.
func (c *Client) rememberVotes(resource string, vs map[int]protocol.SignedVote) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if len(c.myVotes) >= 1024 {
		clear(c.myVotes)
	}
	c.myVotes[resource] = vs
}

// checkEquivocation compares the signed votes nodes report in Status with
// the votes they gave this client; a conflict is verified, recorded and
// sent to every node.
func (c *Client) checkEquivocation(resource string, sts []NodeStatus) {
	c.emu.Lock()
	mine := c.myVotes[resource]
	c.emu.Unlock()
	for _, st := range sts {
		v := st.Vote
		if v == nil || v.Node != st.Index {
			continue
		}
		own, ok := mine[v.Node]
		if !ok || own.Statement.Epoch != v.Statement.Epoch || own.Statement.Holder == v.Statement.Holder {
			continue
		}
		ev := protocol.Evidence{A: own, B: *v}
		if p2p.VerifyEvidence(c.cfg.Cluster, ev) != nil {
			continue
		}
		log.Warnw("evidence of equivocation", "node", v.Node, "resource", resource, "epoch", v.Statement.Epoch)
		c.emu.Lock()
		c.evidence = append(c.evidence, ev)
		c.emu.Unlock()
		req := ev.Marshal()
		for _, m := range c.members {
			c.goFunc(func() {
				ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
				defer cancel()
				_, _ = p2p.Call(ctx, c.host, m.id, protocol.ProtoEvidence, req)
			})
		}
	}
}

// voteProof collects valid signed votes of distinct nodes from status
// reports, for nodes that refused an epoch as too far ahead: f+1 of them
// show that an honest node voted that high.
func (c *Client) voteProof(resource string, sts []NodeStatus) []protocol.SignedVote {
	var out []protocol.SignedVote
	for _, st := range sts {
		v := st.Vote
		if v == nil || v.Node != st.Index || v.Statement.Resource != resource {
			continue
		}
		if p2p.VerifyVote(c.cfg.Cluster, *v) == nil {
			out = append(out, *v)
		}
	}
	if len(out) <= c.f {
		return nil
	}
	return out
}

// goFunc runs f in a goroutine owned by the client; it reports false, and
// runs nothing, once the client is closed.
func (c *Client) goFunc(f func()) bool {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// slot returns the per-resource slot of this client.
func (c *Client) slot(resource string) chan struct{} {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	ch, ok := c.held[resource]
	if !ok {
		ch = make(chan struct{}, 1)
		c.held[resource] = ch
	}
	return ch
}

// New starts a client with its own libp2p host (no listen addresses).
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ids, err := memberIDs(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(cfg.Identity, nil, p2p.NewGater(ids...))
	if err != nil {
		return nil, err
	}
	c, err := newClient(cfg, h)
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	c.ownHost = true
	return c, nil
}

// NewWithHost makes a client on an existing host, which it does not close.
func NewWithHost(cfg Config, h host.Host) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newClient(cfg, h)
}

func memberIDs(c *protocol.Cluster) ([]peer.ID, error) {
	ss := make([]string, len(c.File.Nodes))
	for i, n := range c.File.Nodes {
		ss[i] = n.PeerID
	}
	return p2p.PeerIDs(ss...)
}

func newClient(cfg Config, h host.Host) (*Client, error) {
	f, t := crypto.FaultThreshold(cfg.Cluster.File.N)
	c := &Client{cfg: cfg, host: h, f: f, t: t, verified: map[[32]byte]struct{}{}, held: map[string]chan struct{}{}, myVotes: map[string]map[int]protocol.SignedVote{}, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	for _, n := range cfg.Cluster.File.Nodes {
		id, err := peer.Decode(n.PeerID)
		if err != nil {
			return nil, fmt.Errorf("client: node %d peer ID: %w", n.Index, err)
		}
		pub, err := id.ExtractPublicKey()
		if err != nil {
			return nil, fmt.Errorf("client: node %d public key: %w", n.Index, err)
		}
		if err := p2p.AddPeer(h, id, n.Addrs); err != nil {
			return nil, err
		}
		c.members = append(c.members, member{index: n.Index, id: id, pub: pub})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.warmUp()
	return c, nil
}

// warmUp dials every member in the background, so the first acquisition
// does not pay for connection set-up (TCP, Noise, identify).
func (c *Client) warmUp() {
	for _, m := range c.members {
		c.goFunc(func() {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			defer cancel()
			ctx = network.WithForceDirectDial(ctx, "palisade member")
			if err := c.host.Connect(ctx, peer.AddrInfo{ID: m.id}); err != nil {
				log.Debugw("warm-up dial failed", "node", m.index, "err", err)
			}
		})
	}
}

// ID is the client's holder identity (its peer ID).
func (c *Client) ID() string { return c.host.ID().String() }

// Close stops every lock's renewal and the client's background requests,
// and closes the host if the client made it. It does not release locks:
// their leases run out.
func (c *Client) Close() error {
	c.gmu.Lock()
	c.closed = true
	c.gmu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.ownHost {
		return c.host.Close()
	}
	return nil
}

// Option adjusts one Acquire.
type Option func(*acquireOptions)

type acquireOptions struct {
	ttl  time.Duration
	wait time.Duration
}

// WithTTL sets the lease length (default Config.DefaultTTL).
func WithTTL(d time.Duration) Option { return func(o *acquireOptions) { o.ttl = d } }

// WithWait makes Acquire wait up to d for a busy resource, retrying with
// randomised backoff. Without it Acquire tries once and fails with ErrBusy.
func WithWait(d time.Duration) Option { return func(o *acquireOptions) { o.wait = d } }

// errRetry marks an attempt that failed for a reason the next attempt
// (with a higher epoch) may fix: a stale epoch or split votes.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// maxQuickRetries bounds retries of stale epochs and split votes in try
// mode.
const maxQuickRetries = 8

// Acquire obtains a token for resource and starts renewing its lease.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...Option) (*Lock, error) {
	if err := protocol.ValidateResource(resource); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	o := acquireOptions{ttl: c.cfg.DefaultTTL}
	for _, f := range opts {
		f(&o)
	}
	if o.ttl <= 0 || o.ttl > protocol.MaxTTL {
		return nil, fmt.Errorf("client: ttl %v not in (0, %v]", o.ttl, protocol.MaxTTL)
	}
	if o.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	// One Lock per resource per client: wait for (or, trying once, fail
	// on) a Lock this client already holds or is acquiring.
	slot := c.slot(resource)
	select {
	case slot <- struct{}{}:
	default:
		if o.wait <= 0 {
			return nil, &BusyError{Resource: resource, Holder: protocol.Holder{ID: c.ID()}, Local: true}
		}
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("client: acquire %q: %w (this client holds it)", resource, ctx.Err())
		case <-c.ctx.Done():
			return nil, ErrClosed
		}
	}
	lock, err := c.acquire(ctx, resource, o)
	if err != nil {
		<-slot
		return nil, err
	}
	lock.setFreeSlot(func() { <-slot })
	return lock, nil
}

func (c *Client) acquire(ctx context.Context, resource string, o acquireOptions) (*Lock, error) {
	session, err := protocol.NewSessionID(nil)
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resource, err)
	}
	rs := round{holder: protocol.Holder{ID: c.ID(), Session: session}}
	backoff := c.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		lock, err := c.attempt(ctx, resource, o.ttl, &rs)
		if err == nil {
			return lock, nil
		}
		var busy *BusyError
		var retry errRetry
		var pause time.Duration
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("client: acquire %q: %w (last attempt: %w)", resource, ctx.Err(), err)
		case errors.As(err, &busy) && o.wait > 0:
			// Wait about as long as the holder has left, jittered.
			backoff = max(c.cfg.MinBackoff, min(busy.Left, c.cfg.MaxBackoff))
			pause = c.jitter(backoff)
		case errors.As(err, &retry) && (o.wait > 0 || attempt < maxQuickRetries):
			// Stale epochs and split votes: back off exponentially in
			// units of the round time (a fixed cap shorter than a round
			// keeps contenders in lockstep), ordered by the split.
			backoff = min(2*backoff, max(c.cfg.MaxBackoff, 8*rs.lastRound))
			pause = c.splitPause(rs, backoff)
		case errors.Is(err, ErrNotEnoughNodes) && o.wait > 0:
			backoff = min(2*backoff, c.cfg.MaxBackoff)
			pause = c.jitter(backoff)
		default:
			return nil, err
		}
		log.Debugw("acquire round failed", "resource", resource, "attempt", attempt, "took", rs.lastRound, "split", rs.split, "pause", pause, "err", err)
		if serr := c.sleep(ctx, pause); serr != nil {
			return nil, fmt.Errorf("client: acquire %q: %w (last attempt: %w)", resource, serr, unwrapRetry(err))
		}
	}
}

// splitPause is how long to wait before the next round after a retryable
// one. After a split, every contender that saw the same replies agrees on
// one of them to go next (see round.tally): it retries at once, and the
// others wait two round times more, enough for it to finish; they then find
// its lease and wait for it as for any holder. Without an agreed order,
// contenders that need every honest node (exactly t of them up) split again
// and again.
func (c *Client) splitPause(rs round, backoff time.Duration) time.Duration {
	switch rs.split {
	case splitFirst:
		return c.jitter(c.cfg.MinBackoff)
	case splitLater:
		return 2*rs.lastRound + c.jitter(backoff)
	case splitStuck:
		return max(c.cfg.MinBackoff, min(rs.stuckLeft, c.cfg.MaxBackoff)) + c.jitter(c.cfg.MinBackoff)
	default:
		return c.jitter(backoff)
	}
}

func unwrapRetry(err error) error {
	var r errRetry
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

func (c *Client) jitter(d time.Duration) time.Duration {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return time.Duration(c.rng.Int64N(int64(d) + 1)) // full jitter: desynchronises contenders
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	case <-c.cfg.Clock.After(d):
		return nil
	}
}

// reply is one node's answer in a fan-out.
type reply struct {
	m   member
	b   []byte
	err error
}

// fanOut sends req to every member concurrently. Replies arrive on the
// returned channel, which has room for all of them, so no sender blocks.
// The calls end with ctx.
func (c *Client) fanOut(ctx context.Context, proto string, req []byte) <-chan reply {
	out := make(chan reply, len(c.members))
	for _, m := range c.members {
		if !c.goFunc(func() {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
			defer cancel()
			b, err := p2p.Call(cctx, c.host, m.id, proto, req)
			out <- reply{m: m, b: b, err: err}
		}) {
			out <- reply{m: m, err: ErrClosed}
		}
	}
	return out
}

// linked returns a context that ends with ctx or with the client.
func (c *Client) linked(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// NodeStatus is one node's answer to Status.
type NodeStatus struct {
	Index int
	Peer  string
	protocol.StatusReply
}

// Status asks every node about resource and returns the answers of at least
// 2f+1 of them.
func (c *Client) Status(ctx context.Context, resource string) ([]NodeStatus, error) {
	sts, err := c.status(ctx, resource)
	if err == nil {
		c.checkEquivocation(resource, sts)
	}
	return sts, err
}

func (c *Client) status(ctx context.Context, resource string) ([]NodeStatus, error) {
	ctx, cancel := c.linked(ctx)
	defer cancel()
	ch := c.fanOut(ctx, protocol.ProtoStatus, protocol.StatusRequest{Resource: resource}.Marshal())
	var sts []NodeStatus
	var failed []*NodeError
	for range c.members {
		r := <-ch
		var st protocol.StatusReply
		err := r.err
		if err == nil {
			st, err = protocol.UnmarshalStatusReply(r.b)
		}
		if err == nil {
			err = c.checkEra(st)
		}
		if err != nil {
			failed = append(failed, &NodeError{Index: r.m.index, Peer: r.m.id.String(), Err: err})
			continue
		}
		sts = append(sts, NodeStatus{Index: r.m.index, Peer: r.m.id.String(), StatusReply: st})
		if len(sts) == c.t {
			break // a quorum is enough; the rest are cancelled
		}
	}
	if len(sts) < c.t {
		return nil, &QuorumError{Op: "status", Need: c.t, Got: len(sts), Nodes: failed}
	}
	return sts, nil
}

// errLaterEra marks a status that reports an epoch at or above the next
// era's floor. No node of this cluster file's era ever votes or learns an
// epoch there: it comes from a group reshared after ours. A Byzantine node
// that relays such a (valid) token would otherwise make us ask for an
// epoch every honest node of our group refuses; if most nodes report it,
// our cluster file is out of date.
var errLaterEra = errors.New("reports an epoch of a later era: the cluster was reshared; use the new cluster.json")

// checkEra refuses a status from a later era than this client's cluster
// file (protocol.Era).
func (c *Client) checkEra(st protocol.StatusReply) error {
	era := protocol.Era{Floor: c.cfg.Cluster.File.EpochFloor}
	e := st.LastEpoch
	if st.Certified != nil {
		e = max(e, st.Certified.Epoch)
	}
	if era.Beyond(e) {
		return fmt.Errorf("%w (epoch %d)", errLaterEra, e)
	}
	return nil
}

// round is what one acquisition carries from one attempt to the next.
type round struct {
	// holder is the acquisition's lock session: this client's identity
	// and a session ID drawn for this acquisition alone, used in every
	// round of it (so a node recognises a re-sent request) and in no
	// other acquisition (so two processes sharing one key, or two
	// acquisitions of one process, are distinct holders).
	holder protocol.Holder
	// lastRound is how long the last attempt took.
	lastRound time.Duration
	// split says how the last round's votes split, if they did: whether
	// we are the contender that every client seeing the same replies
	// picks to go next.
	split splitRole
	// pending are the other contenders whose uncommitted votes the last
	// split round met; stuckLeft is how long until the votes of those met
	// twice in a row time out.
	pending   map[contender]bool
	stuckLeft time.Duration
	// floor is the lowest epoch worth trying, learned from refusals.
	floor uint64
	// hint is one above the highest epoch that at most f nodes refused
	// ours as stale with, tried once: those nodes may be honest ones that
	// other contenders moved ahead (we need them when exactly t nodes are
	// up), or liars. hinted says the current round's epoch came from a
	// hint; such a round neither raises the floor (unless more than f
	// nodes voted at its epoch, so an honest one did) nor gives a new
	// hint. So a lie costs one round, refused as too far by honest nodes,
	// and cannot pin the acquisition above every honest node's window.
	hint   uint64
	hinted bool
	// wantProof is set once a node refused an epoch as too far ahead: the
	// next attempt shows the nodes the highest certified token.
	wantProof bool
}

// bestToken returns the highest certified token among the reports that
// verifies, checking at most f+1 claims so liars cannot make us pay a
// pairing per node.
func (c *Client) bestToken(resource string, sts []NodeStatus) *protocol.Token {
	var claims []*protocol.Token
	for _, s := range sts {
		if t := s.Certified; t != nil && t.Cluster == c.cfg.Cluster.ID && t.Resource == resource {
			claims = append(claims, t)
		}
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Epoch > claims[j].Epoch })
	for i, t := range claims {
		if i > c.f {
			break
		}
		if c.verifyCached(*t) == nil {
			return t
		}
	}
	return nil
}

// verifyCached checks a token's signature, remembering the digests of the
// last good ones (keyed on the canonical encoding, never raw bytes) so the
// token a node reports again and again costs one pairing check.
func (c *Client) verifyCached(t protocol.Token) error {
	d := t.Digest()
	c.vmu.Lock()
	_, ok := c.verified[d]
	c.vmu.Unlock()
	if ok {
		return nil
	}
	if err := c.cfg.Cluster.Key.Verify(t.SignedBytes(), t.Signature); err != nil {
		return err
	}
	c.vmu.Lock()
	defer c.vmu.Unlock()
	if len(c.verified) >= 1024 {
		clear(c.verified)
	}
	c.verified[d] = struct{}{}
	return nil
}

// highestClaim is the highest epoch of a certified token some node
// reports for resource (unverified).
func highestClaim(resource string, sts []NodeStatus) uint64 {
	var h uint64
	for _, s := range sts {
		if t := s.Certified; t != nil && t.Resource == resource && t.Epoch > h {
			h = t.Epoch
		}
	}
	return h
}

// nextEpoch picks the epoch to ask for: one above the (f+1)-th highest
// reported epoch (at least one honest node is at or above it, so f liars
// cannot inflate it), above any verified token and the floor.
func (c *Client) nextEpoch(sts []NodeStatus, proof *protocol.Token, floor uint64) uint64 {
	es := make([]uint64, len(sts))
	for i, s := range sts {
		es[i] = s.LastEpoch
	}
	sort.Slice(es, func(i, j int) bool { return es[i] > es[j] })
	base := es[min(c.f, len(es)-1)]
	if proof != nil && proof.Epoch > base {
		base = proof.Epoch
	}
	if floor > base+1 {
		return floor
	}
	return base + 1
}

// attempt is one acquisition round: status, votes, combine, commit.
func (c *Client) attempt(ctx context.Context, resource string, ttl time.Duration, rs *round) (*Lock, error) {
	start := c.cfg.Clock.Now()
	defer func() { rs.lastRound = c.cfg.Clock.Since(start) }()
	rs.split = splitNone
	sts, err := c.status(ctx, resource)
	if err != nil {
		return nil, err
	}
	// A reported token costs a pairing check: verify one only if it would
	// raise the epoch we pick, or if a node needs it to catch up.
	c.checkEquivocation(resource, sts)
	var proof *protocol.Token
	var votesProof []protocol.SignedVote
	if rs.wantProof || highestClaim(resource, sts) > c.nextEpoch(sts, nil, 0)-1 {
		proof = c.bestToken(resource, sts)
	}
	if rs.wantProof {
		votesProof = c.voteProof(resource, sts)
	}
	plain := c.nextEpoch(sts, proof, rs.floor)
	epoch := max(plain, rs.hint)
	rs.hinted, rs.hint = epoch > plain, 0
	stmt := c.cfg.Cluster.Statement(resource, epoch, rs.holder)
	msg := stmt.SignedBytes()
	req := protocol.AcquireRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch, Session: rs.holder.Session, TTL: ttl, Proof: proof, Votes: votesProof}.Marshal()
	received := map[int]protocol.SignedVote{}
	defer func() { c.rememberVotes(resource, received) }()

	// The fan-out ends with the client, not with ctx: replies still out
	// when the round gives up are drained in the background so that late
	// votes are withdrawn (see drainLate).
	rctx, cancel := context.WithCancel(c.ctx)
	ch := c.fanOut(rctx, protocol.ProtoAcquire, req)
	var (
		votes   []crypto.PartialSig
		failed  []*NodeError
		busy    []protocol.AcquireReply
		busyIdx []int
		stale   []uint64
		hard    []*NodeError // refusals retrying cannot fix
		tok     *protocol.Token
		got     int // replies read
	)
	fail := func(m member, err error) {
		failed = append(failed, &NodeError{Index: m.index, Peer: m.id.String(), Err: err})
	}
	replied := map[int]bool{}
	silent := c.silentMembers()
collect:
	for got < len(c.members) && tok == nil {
		// Stop waiting once the replies still out cannot make a quorum:
		// a silent node must not hold every failed round (and, through our
		// votes, every rival) for RequestTimeout. Members that gave no
		// reply last time do not count while they stay quiet.
		out := len(c.members) - got
		for idx := range silent {
			if !replied[idx] {
				out--
			}
		}
		if len(votes)+out < c.t {
			break
		}
		var r reply
		select {
		case r = <-ch:
			got++
			replied[r.m.index] = true
			c.markSilent(r.m.index, r.err != nil)
		case <-ctx.Done():
			break collect
		}
		if r.err != nil {
			fail(r.m, r.err)
			continue
		}
		ar, err := protocol.UnmarshalAcquireReply(r.b)
		if err != nil {
			// The channel is authenticated: garbage comes from the node.
			fail(r.m, fmt.Errorf("%w: %w", errBadVote, err))
			continue
		}
		switch ar.Kind {
		case protocol.KindVote:
			if err := c.checkVote(r.m, stmt, ar); err != nil {
				fail(r.m, fmt.Errorf("%w: %w", errBadVote, err))
				continue
			}
			votes = append(votes, ar.Partial)
			received[r.m.index] = protocol.SignedVote{Node: r.m.index, Statement: stmt, IdentitySig: ar.IdentitySig}
		case protocol.KindBusy:
			busy = append(busy, ar)
			busyIdx = append(busyIdx, r.m.index)
			fail(r.m, fmt.Errorf("busy: held by %s at epoch %d", ar.Holder.Short(), ar.LeaseEpoch))
		default:
			if !refusalConsistent(protocol.Era{Floor: c.cfg.Cluster.File.EpochFloor}, ar, epoch) {
				// A stale epoch is at or below the node's last one, a
				// too-far one above it: a refusal saying otherwise
				// teaches nothing and no honest node sends it.
				fail(r.m, fmt.Errorf("%w: refusal (%s) claims last epoch %d against epoch %d", errBadVote, ar.Code, ar.LastEpoch, epoch))
				continue
			}
			e := &NodeError{Index: r.m.index, Peer: r.m.id.String(), Err: &protocol.RefusedError{Code: ar.Code, LastEpoch: ar.LastEpoch, Message: ar.Message}}
			failed = append(failed, e)
			switch ar.Code {
			case protocol.CodeTooFar:
				rs.wantProof = true
				stale = append(stale, ar.LastEpoch)
			case protocol.CodeStale:
				stale = append(stale, ar.LastEpoch)
			case protocol.CodeUnauthorised, protocol.CodeWrongCluster, protocol.CodeBadRequest, protocol.CodeOtherEra:
				hard = append(hard, e)
			}
		}
		if len(votes) >= c.t {
			sig, bad, err := c.cfg.Cluster.Key.Combine(msg, votes)
			for _, idx := range bad {
				fail(c.members[idx-1], fmt.Errorf("%w: partial signature does not verify", errBadVote))
				log.Warnw("node sent an invalid partial", "node", idx, "resource", resource, "epoch", epoch)
				votes = dropIndex(votes, idx)
			}
			if err == nil {
				tok = &protocol.Token{Statement: stmt, Signature: sig}
			}
		}
	}
	if tok == nil {
		voters := make([]int, len(votes))
		for i, v := range votes {
			voters[i] = v.Index
		}
		c.drainLate(ch, len(c.members)-got, stmt, cancel)
		if ctx.Err() != nil {
			// The caller gave up: withdraw our votes without making it wait.
			c.goFunc(func() { c.abandon(stmt, voters) })
			return nil, fmt.Errorf("client: acquire %q: %w", resource, ctx.Err())
		}
		c.abandon(stmt, voters)
		return nil, c.roundError(resource, epoch, failed, busy, busyIdx, stale, hard, len(votes), rs)
	}
	cancel()
	var suspects []int
	for _, e := range failed {
		if errors.Is(e.Err, errBadVote) {
			suspects = append(suspects, e.Index)
		}
	}
	return c.commit(ctx, *tok, ttl, suspects)
}

// errBadVote marks a node that answered an acquire with something no honest
// node sends: a malformed reply, a vote under another index or without a
// valid identity signature, or a partial that does not verify.
var errBadVote = errors.New("invalid vote")

// abandon withdraws our uncommitted votes for stmt (a failed round) from
// the nodes that gave them, so a split resolves without waiting for vote
// expiry.
func (c *Client) abandon(stmt protocol.Statement, voters []int) {
	if len(voters) == 0 {
		return
	}
	resource, epoch := stmt.Resource, stmt.Epoch
	req := protocol.AbandonRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch, Session: stmt.Holder.Session}.Marshal()
	var wg sync.WaitGroup
	for _, idx := range voters {
		m := c.members[idx-1]
		wg.Add(1)
		if !c.goFunc(func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
			defer cancel()
			if _, err := p2p.Call(ctx, c.host, m.id, protocol.ProtoAbandon, req); err != nil {
				log.Debugw("abandon failed", "node", m.index, "resource", resource, "epoch", epoch, "err", err)
			}
		}) {
			wg.Done()
		}
	}
	// Wait for the nodes that voted for us (they just answered, so this is
	// about one round trip): retrying before they dropped our votes would
	// find them still busy for us and split again.
	wg.Wait()
}

// silentMembers returns the members whose last acquire call got no reply.
func (c *Client) silentMembers() map[int]bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	out := make(map[int]bool, len(c.silent))
	for idx := range c.silent {
		out[idx] = true
	}
	return out
}

// markSilent records whether member idx's last acquire call failed without
// a reply.
func (c *Client) markSilent(idx int, silent bool) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.silent == nil {
		c.silent = map[int]bool{}
	}
	if silent {
		c.silent[idx] = true
	} else {
		delete(c.silent, idx)
	}
}

// drainLate reads the n replies still out when a round gave up early and
// withdraws the votes among them, then stops the fan-out. A node that votes
// after we stopped listening would otherwise hold the resource for its vote
// timeout, and every other contender would meet it as busy: with exactly t
// honest nodes up, that alone keeps contenders splitting. Each call is
// bounded by RequestTimeout, and the drain stops when the client closes.
func (c *Client) drainLate(ch <-chan reply, n int, stmt protocol.Statement, stop context.CancelFunc) {
	if n == 0 {
		stop()
		return
	}
	if !c.goFunc(func() {
		defer stop()
		var late []int
		for range n {
			select {
			case r := <-ch:
				c.markSilent(r.m.index, r.err != nil)
				if r.err != nil {
					continue
				}
				if ar, err := protocol.UnmarshalAcquireReply(r.b); err == nil && ar.Kind == protocol.KindVote {
					late = append(late, r.m.index)
				}
			case <-c.ctx.Done():
				return
			}
		}
		c.abandon(stmt, late)
	}) {
		stop()
	}
}

func dropIndex(ps []crypto.PartialSig, idx int) []crypto.PartialSig {
	out := ps[:0]
	for _, p := range ps {
		if p.Index != idx {
			out = append(out, p)
		}
	}
	return out
}

// checkVote does the cheap checks on a vote: the partial's index is the
// sender's, and the identity signature over the statement is the sender's.
// The partial itself is checked by the combination.
func (c *Client) checkVote(m member, stmt protocol.Statement, ar protocol.AcquireReply) error {
	if ar.Partial.Index != m.index {
		return fmt.Errorf("vote carries share index %d", ar.Partial.Index)
	}
	ok, err := m.pub.Verify(stmt.VoteBytes(), ar.IdentitySig)
	if err != nil || !ok {
		return errors.New("vote identity signature does not verify")
	}
	return nil
}

// roundError explains a failed round and decides whether it is worth
// retrying.
func (c *Client) roundError(resource string, epoch uint64, failed []*NodeError, busy []protocol.AcquireReply, busyIdx []int, stale []uint64, hard []*NodeError, votes int, rs *round) error {
	qe := &QuorumError{Op: fmt.Sprintf("acquire %q at epoch %d", resource, epoch), Need: c.t, Got: votes, Nodes: failed}
	if len(hard) > c.f {
		return &RefusedError{Op: qe.Op, Nodes: hard}
	}
	if len(stale) > c.f {
		// At least one honest node is at or above the (f+1)-th highest
		// reported epoch: start the next round above it.
		sort.Slice(stale, func(i, j int) bool { return stale[i] > stale[j] })
		if next := stale[c.f] + 1; next > rs.floor {
			rs.floor = next
		}
		return errRetry{qe}
	}
	var held []protocol.AcquireReply
	var heldIdx []int
	for i, b := range busy {
		if !b.Pending {
			held, heldIdx = append(held, b), append(heldIdx, busyIdx[i])
		}
	}
	if len(held) > c.f {
		// A committed lease: report the holder the busy nodes name most,
		// with the shortest time left among them.
		count := map[protocol.Holder]int{}
		be := &BusyError{Resource: resource, Nodes: heldIdx}
		for _, b := range held {
			count[b.Holder]++
			if count[b.Holder] > count[be.Holder] {
				be.Holder, be.Epoch = b.Holder, b.LeaseEpoch
			}
		}
		for _, b := range held {
			if b.Holder == be.Holder && (be.Left == 0 || b.Left < be.Left) {
				be.Left = b.Left
			}
		}
		return be
	}
	if votes > 0 || len(busy) > 0 || len(stale) > 0 {
		// Split votes: nobody can finish this epoch; try a higher one, in
		// the order the split suggests.
		rs.learnSplit(c.f, epoch, votes, stale)
		rs.tally(resource, epoch, votes, busy)
		return errRetry{qe}
	}
	return qe
}

// learnSplit sets where the next round starts after a split round at
// epoch with our votes from votes nodes and at most f stale or too-far
// refusals (their last epochs). A plain round moves the floor past epoch,
// which our own votes may have used up, and hints one above the stale
// refusals. A hinted round may have been a liar's: it moves the floor
// only if more than f nodes voted, so an honest one took the epoch, and
// hints nothing, so liars cannot keep every round hinted.
func (rs *round) learnSplit(f int, epoch uint64, votes int, stale []uint64) {
	if rs.hinted && votes <= f {
		return
	}
	rs.floor = max(rs.floor, epoch+1)
	if rs.hinted {
		return
	}
	for _, e := range stale {
		if e < math.MaxUint64 {
			rs.hint = max(rs.hint, e+1)
		}
	}
}

// refusalConsistent reports whether an acquire refusal of our epoch agrees
// with itself and with our era: an honest node refuses as stale only an
// epoch at or below its last epoch, and as too far only one above it, and
// no node of our era has a last epoch beyond it (a liar's stale refusal
// there would make us hint an epoch every honest node refuses).
func refusalConsistent(era protocol.Era, ar protocol.AcquireReply, epoch uint64) bool {
	if (ar.Code == protocol.CodeStale || ar.Code == protocol.CodeTooFar) && era.Beyond(ar.LastEpoch) {
		return false
	}
	switch ar.Code {
	case protocol.CodeStale:
		return ar.LastEpoch >= epoch
	case protocol.CodeTooFar:
		return ar.LastEpoch < epoch
	}
	return true
}

// splitRole is a contender's place in the order after a split round.
type splitRole uint8

const (
	splitNone  splitRole = iota // the round did not split
	splitFirst                  // we retry first
	splitLater                  // another contender retries first
	splitStuck                  // votes of a contender that stopped block us
)

// contender is one acquisition round: a holder (a lock session) asking at
// an epoch.
type contender struct {
	holder protocol.Holder
	epoch  uint64
}

// tally sets the split role from a failed round of our session
// (rs.holder): our votes, and the uncommitted votes
// that busy nodes report for other contenders. The contender with the most
// votes goes first; ties go to the lowest hash of (resource, epoch,
// holder), which every client computes alike and which changes from epoch
// to epoch, so no client always wins ties. Contenders that saw the same
// replies agree on the order without talking to each other. f Byzantine
// nodes inventing a contender can at worst make everyone wait, which is the
// behaviour without an order.
//
// A live contender withdraws the votes of a failed round at once (abandon),
// so votes of one contender met in two rounds in a row are stuck: a client
// that crashed or stalled mid-round. Then the role is splitStuck and we
// wait for those votes to time out rather than burn epochs against them.
func (rs *round) tally(resource string, epoch uint64, votes int, busy []protocol.AcquireReply) {
	self := rs.holder
	count := map[contender]int{}
	if votes > 0 {
		count[contender{self, epoch}] = votes
	}
	prev := rs.pending
	rs.pending = map[contender]bool{}
	rs.stuckLeft = 0
	for _, b := range busy {
		if !b.Pending || b.Holder == self {
			continue
		}
		k := contender{b.Holder, b.LeaseEpoch}
		count[k]++
		rs.pending[k] = true
		if prev[k] && (rs.stuckLeft == 0 || b.Left < rs.stuckLeft) {
			rs.stuckLeft = b.Left
		}
	}
	switch {
	case rs.stuckLeft > 0:
		rs.split = splitStuck
		return
	case len(count) == 0:
		rs.split = splitNone
		return
	}
	rank := func(k contender) [csha256.Size]byte {
		h := csha256.New()
		h.Write([]byte(resource))
		h.Write(binary.BigEndian.AppendUint64(nil, k.epoch))
		h.Write([]byte(k.holder.ID))
		h.Write(k.holder.Session[:])
		return [csha256.Size]byte(h.Sum(nil))
	}
	var first contender
	var firstRank [csha256.Size]byte
	for k, n := range count {
		r := rank(k)
		if n > count[first] || (n == count[first] && bytes.Compare(r[:], firstRank[:]) < 0) {
			first, firstRank = k, r
		}
	}
	rs.split = splitLater
	if first.holder == self {
		rs.split = splitFirst
	}
}

// commit tells every node the token is certified and waits for 2f+1 acks.
// The lease runs from when the commit was sent.
func (c *Client) commit(ctx context.Context, tok protocol.Token, ttl time.Duration, suspects []int) (*Lock, error) {
	sent := c.cfg.Clock.Now()
	_, _, left, err := c.quorum(ctx, "commit", protocol.ProtoCommit, protocol.CommitRequest{Token: tok, TTL: ttl}.Marshal())
	if err != nil {
		// Some nodes may have started a lease nobody will use: release it
		// in the background rather than let it block others for its TTL.
		c.goFunc(func() {
			rctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
			defer cancel()
			_, _, _, _ = c.quorum(rctx, "release", protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok}.Marshal())
		})
		return nil, err
	}
	if left <= 0 || left > ttl {
		left = ttl
	}
	l := newLock(c, tok, left, sent, suspects)
	log.Debugw("acquired", "resource", tok.Resource, "epoch", tok.Epoch)
	return l, nil
}

// quorum sends req to all nodes and waits until 2f+1 acknowledge it, or
// until it is certain they cannot. Requests to the other nodes carry on in
// the background (owned by the client, bounded by RequestTimeout) so every
// node hears of a commit. refusals counts nodes that refused.
//
// left is the (f+1)-th shortest lease time the acknowledging nodes
// reported: f Byzantine nodes cannot shrink it below what an honest node
// granted.
func (c *Client) quorum(ctx context.Context, op, proto string, req []byte) (oks, refusals int, left time.Duration, err error) {
	bg, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
	ch := c.fanOut(bg, proto, req)
	fwd := make(chan reply, len(c.members))
	if !c.goFunc(func() {
		defer cancel()
		for range c.members {
			fwd <- <-ch
		}
	}) {
		cancel()
		return 0, 0, 0, ErrClosed
	}
	var failed []*NodeError
	var lefts []time.Duration
	quantile := func() time.Duration {
		sort.Slice(lefts, func(i, j int) bool { return lefts[i] < lefts[j] })
		return lefts[min(c.f, len(lefts)-1)]
	}
	for range c.members {
		var r reply
		select {
		case r = <-fwd:
		case <-ctx.Done():
			return oks, refusals, left, fmt.Errorf("client: %s: %w", op, ctx.Err())
		}
		var a protocol.Ack
		err := r.err
		if err == nil {
			a, err = protocol.UnmarshalAck(r.b)
		}
		if err == nil {
			if err = a.Err(); err != nil {
				refusals++
			}
		}
		if err != nil {
			failed = append(failed, &NodeError{Index: r.m.index, Peer: r.m.id.String(), Err: err})
			continue
		}
		lefts = append(lefts, a.Left)
		oks++
		if oks == c.t {
			return oks, refusals, quantile(), nil
		}
	}
	return oks, refusals, left, &QuorumError{Op: op, Need: c.t, Got: oks, Nodes: failed}
}
