// Package node runs one Palisade node: a libp2p host that answers Status,
// Acquire, Commit, Renew and Release, votes by the pure rules in state.go,
// and writes every vote durably through a VoteStore before its partial
// signature leaves the node.
package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

var log = logging.Logger("palisade/node")

// Errors callers can branch on.
var (
	// ErrClosed is returned by a closed node.
	ErrClosed = errors.New("node: closed")
	// ErrBadConfig reports an invalid Config.
	ErrBadConfig = errors.New("node: bad config")
)

// Config is what a node needs besides its store, host and clock.
type Config struct {
	// Cluster is the checked cluster file.
	Cluster *protocol.Cluster
	// Share is this node's secret share; its index is the node's index.
	Share *crypto.Share
	// Rules are the voting parameters; see DefaultRules.
	Rules Rules
	// RequestTimeout bounds the handling of one request (default 5 s).
	RequestTimeout time.Duration
	// MaxInflightPerPeer bounds the requests one peer may have in progress;
	// more are refused so one client cannot starve others (default 16).
	MaxInflightPerPeer int
	// MaxWaitsPerPeer bounds the Wait long polls one peer may have open
	// (default 32); they do not count against MaxInflightPerPeer.
	MaxWaitsPerPeer int
	// MaxStreamsPerPeer bounds the streams one peer may hold open, idle,
	// in a request or in a long poll (default 96). More are reset.
	MaxStreamsPerPeer int
	// Hooks inject faults; zero in production.
	Hooks Hooks
	// OnEvidence, if set, receives each new piece of verified evidence of
	// equivocation the node sees (Dir.Start appends it to evidence.jsonl).
	OnEvidence func(protocol.Evidence)
	// OnFork, if set, receives each new verified fork the node sees (two
	// valid tokens for one resource and epoch with different holders),
	// before the node answers the request that showed it. Dir.Start
	// appends it to forks.jsonl, fsynced.
	OnFork func(protocol.Fork)
	// Limits bound what one admitted peer can make the node keep or
	// compute (zero: DefaultLimits).
	Limits Limits
	// AdminSecret is the bearer secret of the admin API's operator
	// endpoints (/revoke, /audit; see AdminHandler). Empty disables them.
	// Dir.Start reads it from the node directory (AdminSecretFileName).
	AdminSecret string
}

// Hooks let tests and testnet inject faults around the honest node.
type Hooks struct {
	// Intercept runs before a request is handled; a non-nil error drops
	// the request (its stream is reset). It may block until ctx ends to
	// model delay.
	Intercept func(ctx context.Context, proto string, from peer.ID) error
	// Handle sees each request frame before the honest handler; if it
	// reports handled, its reply (or its error: the stream is reset) is
	// used instead. Byzantine behaviours in tests answer here.
	Handle func(ctx context.Context, proto string, from peer.ID, req []byte) (reply []byte, handled bool, err error)
	// Reply may rewrite a reply before it is sent (Byzantine behaviour in
	// tests: corrupt partials, lie in Status).
	Reply func(proto string, from peer.ID, reply []byte) []byte
}

// DefaultRules are the voting defaults: MaxEpochStep from the cluster file
// (protocol.DefaultMaxEpochStep if unset), VoteTimeout 2 s, DefaultTTL 10 s,
// MaxTTL protocol.MaxTTL, ReserveFor 2 s, WaiterTTL 2 s.
func DefaultRules(c *protocol.Cluster) Rules {
	step := c.File.MaxEpochStep
	if step == 0 {
		step = protocol.DefaultMaxEpochStep
	}
	return Rules{MaxEpochStep: step, VoteTimeout: 2 * time.Second, DefaultTTL: 10 * time.Second, MaxTTL: protocol.MaxTTL,
		ReserveFor: 2 * time.Second, WaiterTTL: 2 * time.Second}
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.Cluster == nil || c.Share == nil {
		return fmt.Errorf("%w: cluster and share are required", ErrBadConfig)
	}
	if err := c.Cluster.Key.CheckShare(c.Share); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if c.Rules == (Rules{}) {
		c.Rules = DefaultRules(c.Cluster)
	}
	c.Rules.EpochFloor = max(c.Rules.EpochFloor, c.Cluster.File.EpochFloor)
	if c.Rules.ReserveFor <= 0 {
		c.Rules.ReserveFor = c.Rules.VoteTimeout
	}
	if c.Rules.WaiterTTL <= 0 {
		c.Rules.WaiterTTL = c.Rules.VoteTimeout
	}
	if c.Rules.MaxEpochStep == 0 || c.Rules.VoteTimeout <= 0 || c.Rules.DefaultTTL <= 0 || c.Rules.MaxTTL < c.Rules.DefaultTTL {
		return fmt.Errorf("%w: rules %+v", ErrBadConfig, c.Rules)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.MaxInflightPerPeer <= 0 {
		c.MaxInflightPerPeer = 16
	}
	if c.MaxWaitsPerPeer <= 0 {
		c.MaxWaitsPerPeer = 32
	}
	if c.MaxStreamsPerPeer <= 0 {
		c.MaxStreamsPerPeer = 96
	}
	c.Limits.fill()
	return nil
}

const numShards = 64

// verifiedTokenCache is how many verified tokens a node remembers so that
// a token shown again (a Commit relayed by members, a Release, an Acquire
// proof) costs no second pairing.
const verifiedTokenCache = 4096

type shard struct {
	mu   sync.Mutex
	recs map[string]Record
	// queues are the waiters of the shard's resources (queue.go).
	queues map[string]*queue
}

// Node is one running node. Close stops it.
type Node struct {
	cfg   Config
	store VoteStore
	host  host.Host
	clock clockwork.Clock
	stmt  func(resource string, epoch uint64, holder protocol.Holder) protocol.Statement

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeMu sync.RWMutex
	closed  bool

	shards   [numShards]shard
	inflight sync.Map // peer.ID -> chan struct{}
	waiting  sync.Map // peer.ID -> chan struct{} (Wait long polls)
	streams  sync.Map // peer.ID -> *atomic.Int32 open streams

	// Waiters queued on all resources, and per client identity
	// (waiters.go).
	waiterTotal atomic.Int64
	waitersOf   sync.Map           // string -> *atomic.Int32
	verifier    *verifier.Verifier // token checks, with the verified-token cache

	// Per-peer bounds (limits.go, records.go, evidence_limits.go).
	limits    limitCounters
	sigBudget sigBudget
	badSigs   digestSet
	recordCap int // per shard
	evidence  evidenceBook
	forks     forkBook

	// laterEra is logged once: a node that is asked about a later era
	// belongs to a group that was reshared and should be stopped.
	laterEra sync.Once

	ops ops // metrics, member probes, the client list (ops.go)

	// lapses are the recent reservations that ran out unused
	// (RecentLapses, waiters.go).
	lapses lapseRing
}

// New starts a node on host h: it registers the protocol handlers and
// answers until Close. The node does not own h or store; the caller closes
// them after the node.
func New(cfg Config, store VoteStore, h host.Host, clock clockwork.Clock) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if idx := cfg.Cluster.NodeIndex(h.ID().String()); len(cfg.Cluster.File.Nodes) > 0 && idx != cfg.Share.Index() {
		return nil, fmt.Errorf("%w: host %s is node %d in the cluster file, share is %d", ErrBadConfig, h.ID(), idx, cfg.Share.Index())
	}
	if h.Peerstore().PrivKey(h.ID()) == nil {
		return nil, fmt.Errorf("%w: host has no private key", ErrBadConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, store: store, host: h, clock: clock, stmt: cfg.Cluster.Statement, ctx: ctx, cancel: cancel}
	for i := range n.shards {
		n.shards[i].recs = map[string]Record{}
		n.shards[i].queues = map[string]*queue{}
	}
	n.verifier = verifier.New(cfg.Cluster, verifier.WithCacheSize(verifiedTokenCache))
	n.initLimits()
	n.initOps()
	for proto, fn := range n.handlers() {
		h.SetStreamHandler(lp2pproto.ID(proto), n.handler(proto, fn))
	}
	n.wg.Add(1)
	go n.sweep()
	log.Infow("node started", "index", cfg.Share.Index(), "peer", h.ID(), "cluster", cfg.Cluster.ID)
	return n, nil
}

// Index is the node's share index.
func (n *Node) Index() int { return n.cfg.Share.Index() }

// Host is the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Close stops answering, waits for requests in progress and returns. It
// closes neither the host nor the store.
func (n *Node) Close() error {
	n.closeMu.Lock()
	if n.closed {
		n.closeMu.Unlock()
		return nil
	}
	n.closed = true
	n.closeMu.Unlock()
	for proto := range n.handlers() {
		n.host.RemoveStreamHandler(lp2pproto.ID(proto))
	}
	n.cancel()
	n.wg.Wait()
	return nil
}

// Audit returns the node's audit log from sequence number from.
func (n *Node) Audit(ctx context.Context, from uint64, limit int) ([]AuditEntry, error) {
	return n.store.Audit(ctx, from, limit)
}

// Record returns the node's current record of a resource.
func (n *Node) Record(ctx context.Context, resource string) (Record, error) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return n.load(ctx, sh, resource)
}

type handlerFunc func(ctx context.Context, from peer.ID, req []byte) ([]byte, error)

// handlers are the node's request handlers by protocol ID, behind the
// per-peer guard where it applies.
func (n *Node) handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		protocol.ProtoStatus:  n.guard(protocol.ProtoStatus, n.handleStatus),
		protocol.ProtoAcquire: n.guard(protocol.ProtoAcquire, n.handleAcquire),
		protocol.ProtoCommit:  n.guard(protocol.ProtoCommit, n.handleCommit),
		// The earlier release's Commit is the same request without a
		// certificate: the same handler, guarded as a Commit.
		protocol.ProtoCommitV2:  n.guard(protocol.ProtoCommit, n.handleCommit),
		protocol.ProtoRenew:     n.guard(protocol.ProtoRenew, n.handleRenew),
		protocol.ProtoRelease:   n.guard(protocol.ProtoRelease, n.handleRelease),
		protocol.ProtoAbandon:   n.guard(protocol.ProtoAbandon, n.handleAbandon),
		protocol.ProtoEvidence:  n.handleEvidenceBounded,
		protocol.ProtoFork:      n.handleFork,
		protocol.ProtoWait:      n.handleWait,
		protocol.ProtoLocks:     n.guard(protocol.ProtoLocks, n.handleLocks),
		protocol.ProtoForensics: n.guard(protocol.ProtoForensics, n.handleForensics),
	}
}

// handler wraps a request handler with what every stream gets: tracking
// for Close, a cap on the peer's open streams, capped frames, and for each
// request a deadline, per-peer concurrency bounds and a reset on error.
//
// A stream carries any number of requests, one at a time: the client's
// transport.Pool reuses streams, which saves a stream negotiation per
// call. A stream idle for transport.StreamIdleTimeout is closed, and so
// is every stream when the node closes. A client that half-closes after
// one request (transport.Call) is answered and the stream closed.
func (n *Node) handler(proto string, fn handlerFunc) network.StreamHandler {
	return func(s network.Stream) {
		n.closeMu.RLock()
		if n.closed {
			n.closeMu.RUnlock()
			_ = s.Reset()
			return
		}
		n.wg.Add(1)
		n.closeMu.RUnlock()
		defer n.wg.Done()

		from := s.Conn().RemotePeer()
		leave, ok := n.openStream(from) // S6: open streams are bounded per peer
		if !ok {
			n.turnedAway(TurnedAwayStreams)
			log.Debugw("too many open streams", "peer", from, "proto", proto)
			_ = s.Reset()
			return
		}
		defer leave()
		stop := context.AfterFunc(n.ctx, func() { _ = s.Reset() })
		defer stop()
		for {
			// A stream may idle between requests, but a request, once its
			// first byte arrived, must arrive whole within RequestTimeout.
			_ = s.SetReadDeadline(time.Now().Add(transport.StreamIdleTimeout))
			req, err := protocol.ReadFrame(&frameReader{s: s, timeout: n.cfg.RequestTimeout}, protocol.MaxFrameSize)
			if errors.Is(err, io.EOF) {
				_ = s.Close() // the client is done with the stream
				return
			}
			if err != nil {
				if errors.Is(err, protocol.ErrFrameTooLarge) || errors.Is(err, protocol.ErrMalformed) {
					n.turnedAway(TurnedAwayBadFrame)
				}
				log.Debugw("bad request frame", "peer", from, "proto", proto, "err", err)
				_ = s.Reset()
				return
			}
			if !n.serveOne(s, proto, from, fn, req) {
				_ = s.Reset()
				return
			}
		}
	}
}

// frameReader reads one frame from s: once the first byte arrived, the
// rest must arrive within timeout (a peer cannot hold a stream open with a
// frame it never finishes for longer than a request may take).
type frameReader struct {
	s       network.Stream
	timeout time.Duration
	started bool
}

func (r *frameReader) Read(p []byte) (int, error) {
	k, err := r.s.Read(p)
	if k > 0 && !r.started {
		r.started = true
		_ = r.s.SetReadDeadline(time.Now().Add(r.timeout))
	}
	return k, err
}

// serveOne answers one request frame on s; false means the stream must be
// reset (the request was refused or failed, or the reply could not be
// sent).
func (n *Node) serveOne(s network.Stream, proto string, from peer.ID, fn handlerFunc, req []byte) bool {
	timeout := n.cfg.RequestTimeout
	if proto == protocol.ProtoWait {
		timeout += maxWait(n.cfg.RequestTimeout)
	}
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	defer cancel()
	_ = s.SetWriteDeadline(time.Now().Add(timeout))
	stopWatch := func() bool { return false }
	if proto == protocol.ProtoWait {
		// A long poll ends when its client goes away (it reset the
		// stream: it got its turn from other nodes, or gave up), so the
		// waiter does not look alive here after it left.
		stopWatch = watchReset(s, cancel)
	}
	watching := true
	defer func() {
		if watching {
			stopWatch()
		}
	}()

	release, entered := n.enter(from, proto) // S6: in-flight requests are bounded per peer
	if !entered {
		n.turnedAway(TurnedAwayInFlight)
		log.Debugw("too many requests in flight", "peer", from, "proto", proto)
		return false
	}
	defer release()

	if hook := n.cfg.Hooks.Intercept; hook != nil {
		if err := hook(ctx, proto, from); err != nil {
			return false
		}
	}
	var reply []byte
	var err error
	handled := false
	if hook := n.cfg.Hooks.Handle; hook != nil {
		reply, handled, err = hook(ctx, proto, from, req)
	}
	if !handled {
		reply, err = fn(ctx, from, req)
	}
	if err != nil {
		log.Debugw("request failed", "peer", from, "proto", proto, "err", err)
		return false
	}
	if hook := n.cfg.Hooks.Reply; hook != nil {
		reply = hook(proto, from, reply)
	}
	// The watch stops before the reply leaves: the client may send its
	// next request as soon as it has the reply.
	watching = false
	if stopWatch() {
		return false // a byte arrived before the reply
	}
	return protocol.WriteFrame(s, reply) == nil
}

// watchReset calls cancel if s's far side resets or closes it while a
// request is served (a client sends nothing more on a stream before it
// has the reply, so a read returns only then). The returned stop ends the
// watch and waits for it, leaving s readable for the next request; it
// reports broken if a byte arrived before the reply (a protocol error:
// the stream must be reset).
func watchReset(s network.Stream, cancel context.CancelFunc) (stop func() (broken bool)) {
	done := make(chan struct{})
	stopping := make(chan struct{})
	var got bool
	go func() {
		defer close(done)
		var b [1]byte
		k, err := s.Read(b[:])
		got = k > 0
		if err == nil || got {
			cancel()
			return
		}
		select {
		case <-stopping: // our own deadline ended the read
		default:
			cancel() // reset or closed by the client
		}
	}()
	return func() bool {
		close(stopping)
		_ = s.SetReadDeadline(time.Now())
		<-done
		return got
	}
}

// enter takes one of the peer's in-flight slots: long polls (Wait) have
// slots of their own, so a client waiting for many resources can still
// acquire, commit and renew.
func (n *Node) enter(p peer.ID, proto string) (release func(), ok bool) {
	m, size := &n.inflight, n.cfg.MaxInflightPerPeer
	if proto == protocol.ProtoWait {
		m, size = &n.waiting, n.cfg.MaxWaitsPerPeer
	}
	v, _ := m.LoadOrStore(p, make(chan struct{}, size))
	sem := v.(chan struct{})
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, true
	default:
		return nil, false
	}
}

// openStream counts one of the peer's open streams, at most
// Config.MaxStreamsPerPeer at once.
func (n *Node) openStream(p peer.ID) (leave func(), ok bool) {
	v, _ := n.streams.LoadOrStore(p, new(atomic.Int32))
	c := v.(*atomic.Int32)
	if c.Add(1) > int32(n.cfg.MaxStreamsPerPeer) {
		c.Add(-1)
		return nil, false
	}
	return func() { c.Add(-1) }, true
}

func (n *Node) shard(resource string) *shard {
	h := fnv.New32a()
	_, _ = h.Write([]byte(resource))
	return &n.shards[h.Sum32()%numShards]
}

// load returns the record of resource; the caller holds sh.mu.
func (n *Node) load(ctx context.Context, sh *shard, resource string) (Record, error) {
	if r, ok := sh.recs[resource]; ok {
		return r, nil
	}
	r, ok, err := n.store.Load(ctx, resource)
	if err != nil {
		return Record{}, fmt.Errorf("load %q: %w", resource, err)
	}
	if !ok {
		return Record{Resource: resource}, nil // not cached: nothing to keep
	}
	n.keepRecord(sh, r)
	return r, nil
}

// apply runs one transition on a resource under its lock and persists the
// result before returning: nothing that depends on the new state may leave
// the node before the store has it (S3).
func (n *Node) apply(ctx context.Context, resource string, step func(rec Record, now time.Time) (Outcome, error)) (Outcome, error) {
	return n.applyIn(ctx, resource, func(_ *shard, rec Record, now time.Time) (Outcome, error) { return step(rec, now) })
}

// applyIn is apply for steps that also read or change the resource's
// wait queue (in sh, whose lock is held).
func (n *Node) applyIn(ctx context.Context, resource string, step func(sh *shard, rec Record, now time.Time) (Outcome, error)) (Outcome, error) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec, err := n.load(ctx, sh, resource)
	if err != nil {
		return Outcome{}, err
	}
	o, err := step(sh, rec, n.clock.Now())
	if err != nil {
		return Outcome{}, err
	}
	if err := n.persist(ctx, sh, o); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// persist saves the record a transition changed, before anything that
// depends on it leaves the node, and then lets the wait queue see the
// change. The caller holds sh.mu.
func (n *Node) persist(ctx context.Context, sh *shard, o Outcome) error {
	if !o.Changed {
		return nil
	}
	// S3: the vote is durable (fsynced) before it leaves: the reply is
	// built only after Save returns.
	if err := n.store.Save(ctx, o.Next, o.Audit...); err != nil {
		return fmt.Errorf("save %q: %w", o.Next.Resource, err)
	}
	n.keepRecord(sh, o.Next)
	n.changed(sh, o)
	return nil
}

func (n *Node) handleStatus(ctx context.Context, _ peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalStatusRequest(b)
	if err != nil {
		return nil, err
	}
	rec, err := n.Record(ctx, req.Resource)
	if err != nil {
		return nil, err
	}
	st := n.cfg.Rules.Status(rec, n.clock.Now())
	if st.Holder.IsZero() {
		st.Reserved, st.ReservedLeft = n.Reserved(req.Resource)
		if st.ReservedLeft < time.Millisecond {
			st.Reserved, st.ReservedLeft = protocol.HolderRef{}, 0 // the wire counts whole milliseconds
		}
	}
	st.Vote = n.signedVote(rec)
	return st.Marshal(), nil
}

// signedVote is the vote rec keeps, as the node signed it, or nil if it
// keeps none.
func (n *Node) signedVote(rec Record) *protocol.SignedVote {
	if rec.VoteEpoch == 0 || len(rec.VoteIDSig) == 0 {
		return nil
	}
	return &protocol.SignedVote{Node: n.Index(), Statement: n.stmt(rec.Resource, rec.VoteEpoch, rec.VoteHolder), IdentitySig: rec.VoteIDSig}
}

func refuse(code protocol.Code, lastEpoch uint64, msg string) []byte {
	return protocol.AcquireReply{Kind: protocol.KindRefuse, Code: code, LastEpoch: lastEpoch, Message: msg}.Marshal()
}

func (n *Node) handleAcquire(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalAcquireRequest(b)
	if err != nil {
		return refuse(protocol.CodeBadRequest, 0, err.Error()), nil
	}
	// S6: the holder is the authenticated sender's identity, so the token
	// is bound to it; its session is the one the request's key owns, so
	// only the process that drew the key acquires in that session.
	holder := protocol.Holder{ID: from.String(), Session: req.Key.Session()}
	if req.Cluster != n.cfg.Cluster.ID {
		return refuse(protocol.CodeWrongCluster, 0, "request is for cluster "+req.Cluster.String()), nil
	}
	// S6: only authorised client identities acquire, per resource pattern.
	if c, ok := n.client(holder.ID); !ok || !c.Allows(req.Resource) {
		return refuse(protocol.CodeUnauthorised, 0, fmt.Sprintf("%s may not acquire %q", holder.ID, req.Resource)), nil
	}
	if e := n.laterEraEpoch(req.Epoch, req.Proof); e != 0 {
		o := n.cfg.Rules.refuseLaterEra(Outcome{Next: Record{Resource: req.Resource}}, e)
		n.noteLaterEra(o, from)
		return refuse(o.Code, 0, o.Message), nil
	}
	if req.Proof != nil {
		if err := n.verifyToken(*req.Proof, req.Resource); err != nil {
			return refuse(protocol.CodeBadRequest, 0, "proof: "+err.Error()), nil
		}
	}
	seen, err := n.checkVoteProof(req)
	if err != nil {
		return refuse(protocol.CodeBadRequest, 0, "vote proof: "+err.Error()), nil
	}
	stmt := n.stmt(req.Resource, req.Epoch, holder)
	var fork *protocol.Fork
	o, err := n.applyIn(ctx, req.Resource, func(sh *shard, rec Record, now time.Time) (Outcome, error) {
		if req.Proof != nil {
			// The proof was verified above: against the certified token
			// at its epoch, it is a fork (issue 21), recorded below.
			if f, ok := forkWith(rec.Certified, *req.Proof); ok {
				fork = &f
			}
		}
		return n.voteStep(sh, rec, holder, stmt, req.TTL, req.Proof, seen, now)
	})
	if fork != nil {
		n.recordFork(*fork, ForkSourceProof, from)
	}
	if err != nil {
		logFailed(ctx, "acquire failed", err, "resource", req.Resource, "epoch", req.Epoch, "peer", from)
		return refuse(protocol.CodeInternal, 0, "node failed to record the vote"), nil
	}
	switch o.Kind {
	case protocol.KindVote:
		log.Debugw("vote", "resource", req.Resource, "epoch", req.Epoch, "peer", from, "repeat", o.Repeat)
		return protocol.AcquireReply{Kind: protocol.KindVote, Partial: o.Next.Vote, IdentitySig: o.Next.VoteIDSig}.Marshal(), nil
	case protocol.KindBusy:
		// Replies name the holder by its HolderRef, never its session ID.
		return protocol.AcquireReply{Kind: protocol.KindBusy, Holder: o.Holder.Ref(), LeaseEpoch: o.LeaseEpoch, Left: o.Left, Pending: o.Pending}.Marshal(), nil
	case protocol.KindQueued:
		return protocol.AcquireReply{Kind: protocol.KindQueued, Holder: o.Holder.Ref(), Left: o.Left}.Marshal(), nil
	default:
		n.noteLaterEra(o, from)
		return refuse(o.Code, o.Next.LastEpoch, o.Message), nil
	}
}

// voteStep is the acquire transition of holder at stmt's epoch on rec:
// what an Acquire runs, and what a Wait runs for the waiter the free
// resource is reserved for (the vote in the answer, waitVote). It learns
// the f+1 signed votes' epoch (seen, if not 0), applies the voting rules
// (Rules.Acquire, with proof if any), the wait queue's veto
// (queueAcquire), and for a vote produces the partial and the identity
// signature over stmt. The caller holds sh.mu, has checked the cluster,
// the client's authorisation and proof, and persists the outcome before
// any of it leaves the node (S1/S3).
func (n *Node) voteStep(sh *shard, rec Record, holder protocol.Holder, stmt protocol.Statement, ttl time.Duration, proof *protocol.Token, seen uint64, now time.Time) (Outcome, error) {
	var audit []AuditEntry
	changed := false
	if seen > 0 {
		so := n.cfg.Rules.SeeVotes(rec, seen, now)
		if so.Kind == protocol.KindRefuse {
			return so, nil
		}
		rec, changed, audit = so.Next, so.Changed, so.Audit
	}
	o := n.cfg.Rules.Acquire(rec, holder, stmt.Epoch, ttl, proof, now)
	if qo, queued := n.queueAcquire(sh, rec, holder, o, now); queued {
		o = qo // liveness only: the vote is not given, nothing of it is kept
	}
	o.Changed = o.Changed || changed
	o.Audit = append(audit, o.Audit...)
	// S2: a partial is produced only here, for the statement the rules
	// just voted for (or re-sent); S1/S3: the caller persists it before
	// the reply leaves.
	if o.Kind == protocol.KindVote && (!o.Repeat || len(o.Next.VoteIDSig) == 0) {
		p, err := n.cfg.Share.Sign(stmt.SignedBytes())
		if err != nil {
			return Outcome{}, err
		}
		idSig, err := n.host.Peerstore().PrivKey(n.host.ID()).Sign(stmt.VoteBytes())
		if err != nil {
			return Outcome{}, fmt.Errorf("identity signature: %w", err)
		}
		o.Next.Vote, o.Next.VoteIDSig, o.Changed = p, idSig, true
	}
	return o, nil
}

// laterEraEpoch returns the first of epoch and tok's epoch that lies in a
// later era, or 0. The handlers refuse those before paying for a pairing;
// the rules refuse them again (S1/S5: the era ceiling).
func (n *Node) laterEraEpoch(epoch uint64, tok *protocol.Token) uint64 {
	switch {
	case n.cfg.Rules.laterEra(epoch):
		return epoch
	case tok != nil && n.cfg.Rules.laterEra(tok.Epoch):
		return tok.Epoch
	}
	return 0
}

// noteLaterEra logs, once per node, that a peer showed it an epoch of a
// later era: this node's group was reshared and the node should be
// stopped.
func (n *Node) noteLaterEra(o Outcome, from peer.ID) {
	if o.Code != protocol.CodeOtherEra {
		return
	}
	n.laterEra.Do(func() {
		log.Errorw("refused an epoch of a later era: this node belongs to an earlier era (its cluster was reshared); stop it",
			"peer", from, "resource", o.Next.Resource, "detail", o.Message)
	})
}

// logFailed logs a request the node could not serve: as an error, unless
// the request's context ended first (the node is stopping or the client
// went away), which is no fault of the node and loses nothing: the
// request was not applied.
func logFailed(ctx context.Context, msg string, err error, kv ...any) {
	kv = append(kv, "err", err)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		log.Debugw(msg, kv...)
		return
	}
	log.Errorw(msg, kv...)
}

// ack answers Commit, Renew, Release and Abandon.
func (n *Node) ack(ctx context.Context, from peer.ID, o Outcome, err error) ([]byte, error) {
	n.noteLaterEra(o, from)
	if err != nil {
		logFailed(ctx, "request failed", err, "peer", from)
		return protocol.Ack{Code: protocol.CodeInternal, Message: "node failed to record the request"}.Marshal(), nil
	}
	a := protocol.Ack{Code: o.Code, LastEpoch: o.Next.LastEpoch, Message: o.Message}
	if o.Kind == protocol.KindRefuse {
		return a.Marshal(), nil
	}
	a.Code = protocol.CodeOK
	if l := o.Next.Lease; !l.Holder.IsZero() {
		a.Left = l.Expires.Sub(o.At)
	}
	return a.Marshal(), nil
}

func (n *Node) handleCommit(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalCommitRequest(b)
	if err != nil {
		return protocol.Ack{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if e := n.laterEraEpoch(0, &req.Token); e != 0 {
		return n.ack(ctx, from, n.cfg.Rules.refuseLaterEra(Outcome{Next: Record{Resource: req.Token.Resource}}, e), nil)
	}
	// The certificate is checked before anything else is done: t Ed25519
	// checks, never a pairing, and a Commit that carries a bad one is
	// refused whole (an honest client checked every vote it combined).
	cert, err := n.checkCommitCertificate(req)
	if err != nil {
		return certificateRefusal(err), nil
	}
	reply, err := n.applyToken(ctx, from, req.Token, req.Key, func(rec Record, shown Shown, now time.Time) Outcome {
		shown.TokenRelease = req.TokenRelease
		o := n.cfg.Rules.Commit(rec, from.String(), req.Token, shown, req.TTL, now)
		return n.cfg.Rules.withCertificate(o, req.Token, cert)
	})
	// Only a Commit this node took serves the session: one it refused (a
	// token that does not verify: the client combined a Byzantine
	// member's invalid partial before checking) leaves the waiter its
	// place, where the client completes the token at the same epoch
	// (issue 20: a Byzantine member must not cost an honest waiter its
	// turn).
	if accepted(reply) {
		n.served(from, req.Token)
	}
	return reply, err
}

// accepted reports whether reply is an Ack with CodeOK.
func accepted(reply []byte) bool {
	a, err := protocol.UnmarshalAck(reply)
	return err == nil && a.Code == protocol.CodeOK
}

// servedBy takes tok's session out of its wait queue (served) after a
// Release from its holder's identity that carried the session's key, or
// that the node accepted: a sibling process of the identity, which has
// neither, cannot take the session's place in line away with a forged
// token (issue 20).
func (n *Node) servedBy(from peer.ID, tok protocol.Token, key protocol.SessionKey, reply []byte) {
	if (key.IsZero() || key.Session() != tok.Holder.Session) && !accepted(reply) {
		return
	}
	n.served(from, tok)
}

// ErrWrongKeyMessage is the refusal of a Commit or Release whose session
// key does not own the token's session.
const ErrWrongKeyMessage = "the session key does not own the token's session"

// applyToken runs a Commit or Release transition of tok sent by from, with
// the session key the request carried (zero if none). A key that does not
// own the token's session is refused before anything else. The token's
// signature is checked (a pairing, under from's budget of failed checks)
// unless it need not be: tok is byte for byte the certified token the
// record holds (SameCertified: checked before), or the request carries the
// session's key and tok is from's own token for the statement this node
// voted for (Shown.unchecked): then the holder tells the node nothing the
// node does not know, and the transition records no certified token. A
// token without the key is never taken unchecked (issue 20: any process of
// the holder's identity can send one). The check runs outside the shard
// lock; if the record changed meanwhile so that the shortcut no longer
// applies, the transition runs again after the check.
func (n *Node) applyToken(ctx context.Context, from peer.ID, tok protocol.Token, key protocol.SessionKey, rule func(rec Record, shown Shown, now time.Time) Outcome) ([]byte, error) {
	if tok.Cluster != n.cfg.Cluster.ID || tok.Validate() != nil {
		// Cheap refusals (wrong cluster, bad fields) with their reason.
		if err := n.verifyToken(tok, tok.Resource); err != nil {
			return protocol.Ack{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
		}
	}
	keyed := !key.IsZero()
	if keyed && key.Session() != tok.Holder.Session {
		return protocol.Ack{Code: protocol.CodeNotHolder, Message: ErrWrongKeyMessage}.Marshal(), nil
	}
	errCheck := errors.New("token needs its signature checked")
	for verified := false; ; verified = true {
		o, err := n.apply(ctx, tok.Resource, func(rec Record, now time.Time) (Outcome, error) {
			shown := Shown{Verified: verified || SameCertified(rec, tok), Key: keyed}
			// A token that may fork the certified one is always checked,
			// so that the fork it makes is proven (issue 21).
			_, forks := forkWith(rec.Certified, tok)
			if !shown.Verified && (forks || !shown.unchecked(rec, from.String(), tok)) {
				return Outcome{}, errCheck
			}
			return rule(rec, shown, now), nil
		})
		if verified || !errors.Is(err, errCheck) {
			if err == nil && o.Fork != nil {
				source := ForkSourceRelay
				if from.String() == tok.Holder.ID {
					source = ForkSourceCommit
				}
				n.recordFork(*o.Fork, source, from)
			}
			return n.ack(ctx, from, o, err)
		}
		// S2: only a signature under the group key teaches the node.
		if msg, bad := n.checkTokenFrom(from, tok, tok.Resource); bad {
			return protocol.Ack{Code: protocol.CodeBadRequest, Message: msg}.Marshal(), nil
		}
	}
}

func (n *Node) handleRenew(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalRenewRequest(b)
	if err != nil {
		return protocol.Ack{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Cluster != n.cfg.Cluster.ID {
		return protocol.Ack{Code: protocol.CodeWrongCluster}.Marshal(), nil
	}
	// The session is the one the key owns: knowing a session ID, even
	// with the holder's identity key, renews nothing (issue 20).
	holder := protocol.Holder{ID: from.String(), Session: req.Key.Session()}
	o, err := n.apply(ctx, req.Resource, func(rec Record, now time.Time) (Outcome, error) {
		return n.cfg.Rules.Renew(rec, holder, req.Epoch, req.TTL, now), nil
	})
	return n.ack(ctx, from, o, err)
}

func (n *Node) handleRelease(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalReleaseRequest(b)
	if err != nil {
		return protocol.Ack{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Token.Holder.ID != from.String() {
		return protocol.Ack{Code: protocol.CodeNotHolder, Message: "only the holder may release"}.Marshal(), nil
	}
	if e := n.laterEraEpoch(0, &req.Token); e != 0 {
		return n.ack(ctx, from, n.cfg.Rules.refuseLaterEra(Outcome{Next: Record{Resource: req.Token.Resource}}, e), nil)
	}
	reply, err := n.applyToken(ctx, from, req.Token, req.Key, func(rec Record, shown Shown, now time.Time) Outcome {
		return n.cfg.Rules.Release(rec, req.Token, shown, now)
	})
	n.servedBy(from, req.Token, req.Key, reply)
	return reply, err
}

func (n *Node) handleAbandon(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalAbandonRequest(b)
	if err != nil {
		return protocol.Ack{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Cluster != n.cfg.Cluster.ID {
		return protocol.Ack{Code: protocol.CodeWrongCluster}.Marshal(), nil
	}
	holder := protocol.Holder{ID: from.String(), Session: req.Key.Session()} // as for Renew
	if req.Epoch == 0 {
		// The session leaves the queue (protocol.AbandonRequest): only
		// the process that holds its key can send this for it.
		n.dequeue(req.Resource, holder)
		log.Debugw("waiter left", "node", n.Index(), "resource", req.Resource, "waiter", n.clientName(holder.ID)+"/"+holder.Session.Hash().String()[:8])
		return protocol.Ack{Code: protocol.CodeOK}.Marshal(), nil
	}
	o, err := n.apply(ctx, req.Resource, func(rec Record, now time.Time) (Outcome, error) {
		return n.cfg.Rules.Abandon(rec, holder, req.Epoch, now), nil
	})
	return n.ack(ctx, from, o, err)
}

// checkVoteProof verifies the signed votes an Acquire carries and returns
// the epoch they prove f+1 distinct members voted at or above (0 if none
// are given). Conflicting votes of one member among them are recorded as
// evidence.
func (n *Node) checkVoteProof(req protocol.AcquireRequest) (uint64, error) {
	if len(req.Votes) == 0 {
		return 0, nil
	}
	best := map[int]protocol.SignedVote{} // highest vote per member
	for _, v := range req.Votes {
		if v.Statement.Resource != req.Resource {
			return 0, fmt.Errorf("vote of node %d is for resource %q", v.Node, v.Statement.Resource)
		}
		if err := protocol.VerifyVote(n.cfg.Cluster, v); err != nil {
			return 0, err
		}
		if prev, ok := best[v.Node]; ok {
			if prev.Statement.Epoch == v.Statement.Epoch && prev.Statement.Holder != v.Statement.Holder {
				n.recordEvidence(protocol.Evidence{A: prev, B: v})
			}
			if prev.Statement.Epoch >= v.Statement.Epoch {
				continue
			}
		}
		best[v.Node] = v
	}
	// S5: f+1 distinct members, so at least one honest one voted at or
	// above the (f+1)-th highest epoch: f liars cannot inflate it.
	if len(best) <= n.cfg.Cluster.F {
		return 0, fmt.Errorf("%d distinct voters, need %d", len(best), n.cfg.Cluster.F+1)
	}
	epochs := make([]uint64, 0, len(best))
	for _, v := range best {
		epochs = append(epochs, v.Statement.Epoch)
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
	return epochs[n.cfg.Cluster.F], nil
}

// recordEvidence keeps evidence of equivocation (once per pair, at most
// Limits.EvidencePerMember per member) and hands it to Config.OnEvidence.
func (n *Node) recordEvidence(ev protocol.Evidence) {
	if !n.keepEvidence(ev) {
		return
	}
	log.Warnw("evidence of equivocation", "node", ev.A.Node, "resource", ev.A.Statement.Resource, "epoch", ev.A.Statement.Epoch)
	if f := n.cfg.OnEvidence; f != nil {
		f(ev)
	}
}

// verifyToken checks a token for this cluster and resource through the
// node's verifier: cheap checks first (cluster, fields, resource), the
// pairing last, and the verifier's bounded cache of verified tokens so a
// token is paid for once (S2: only a signature under the group key counts).
func (n *Node) verifyToken(t protocol.Token, resource string) error {
	return n.verifier.VerifyFor(t, resource)
}
