// Package client acquires fencing tokens from a Palisade cluster and keeps
// the leases that go with them. Its API follows etcd's concurrency.Mutex:
// Acquire waits until the lock is held or ctx ends (like Lock), TryAcquire
// makes one bounded attempt and reports a held lock at once (like TryLock).
// A client needs the cluster file (protocol.LoadCluster) and its key
// (LoadIdentity); see Example for acquire, fenced write and release, and
// ExampleLock_Lost for watching a lease end.
//
// Each acquisition asks 2f+1 nodes for their status, picks the next epoch
// from the (f+1)-th highest report (so f liars cannot inflate it), asks every node
// for a vote, combines the first 2f+1 votes optimistically into a token,
// and commits it to 2f+1 nodes. The returned Lock renews its lease in the
// background and reports loss on Lost. Safety never depends on the lease:
// the resource checks the token's epoch (S4, see package verifier).
//
// The files: client.go (Client, Acquire, TryAcquire, the round driver),
// plan.go (the pure acquisition planner), quorum.go (fan-out, quorum
// waiting, silent members, vote withdrawal), evidence.go (vote checks,
// equivocation, proofs), lock.go (Lock, renewal), errors.go, identity.go.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

var log = logging.Logger("palisade/client")

// Config configures a Client.
type Config struct {
	// Cluster is the checked cluster file.
	Cluster *protocol.Cluster
	// Identity is the client's key (see LoadIdentity); its peer ID is the
	// holder named in tokens and must be authorised in the cluster file
	// (S6).
	Identity Identity
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
	// VoteTimeout is how long a member holds an uncommitted vote for
	// this client: the members' vote timeout (node.Rules.VoteTimeout,
	// default 2 s, which is this default too). A Lock is handed out once
	// the votes combine; until t members acknowledged its Commit, its
	// Deadline is VoteTimeout from when the Acquire went out, minus a
	// tenth. Set it no higher than the members' setting.
	VoteTimeout time.Duration
	// CommitFirst hands out a Lock only once t members acknowledged its
	// Commit and its token verified, as before the lease started at the
	// vote: Acquire then takes one more round trip and, for a token from
	// members not yet vouched for, one more pairing.
	CommitFirst bool
	// Seed seeds the backoff jitter; 0 picks a random seed.
	Seed uint64
	// SessionKeys is where each acquisition draws its session key
	// (protocol.NewSessionKey); nil is crypto/rand. The key is the only
	// proof that a process owns its session, so whatever it reads must be
	// unpredictable to every other process; tests that must act on a
	// session from outside the Lock read the same bytes. It must be safe
	// for concurrent use.
	SessionKeys io.Reader
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
	if c.VoteTimeout <= 0 {
		c.VoteTimeout = 2 * time.Second
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
	cfg      Config
	host     host.Host
	pool     *transport.Pool // reused streams to the members
	ownHost  bool
	members  []member
	f, t     int
	era      protocol.Era
	verifier *verifier.Verifier // checks reported tokens, with its own cache

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the small client-wide state below. Each acquisition keeps
	// its own state in a planner, which needs no lock.
	mu sync.Mutex
	// closed stops tracked goroutines from starting, so none is added to
	// wg once Close waits on it.
	closed bool
	// rng draws the backoff jitter.
	rng *rand.Rand
	// silent are the members whose last acquire call got no reply
	// (timeout or transport error); see silentMembers.
	silent map[int]bool
	// held has one slot per resource this client holds or is acquiring:
	// the holder identity is the unit of exclusion, so two Acquires of one
	// client must not both get the (same) token.
	held map[string]chan struct{}
	// waitingLocally counts the Acquire calls waiting for a slot in held
	// (see WaitingLocally).
	waitingLocally atomic.Int32
	// myVotes are the votes this client received (per resource, its last
	// round's); evidence is the evidence of equivocation it found.
	myVotes  map[string]map[int]protocol.SignedVote
	evidence []protocol.Evidence
	// forksSent are the IDs of the forks this client sent to the nodes
	// (findFork), so it sends each once; at most 1024.
	forksSent map[string]bool
	// known is, per resource, an epoch the cluster has certainly reached
	// (this client's last token, or what refusals taught it): the next
	// acquisition starts above it without a status round.
	known map[string]uint64
	// partials records, per member, what this client learned of the
	// partial signatures it sends (see vouched): partialsProven once one
	// was in a token that verified, partialsForged once one did not
	// verify, which is for good. At most one entry per member.
	partials map[int]partialRecord
}

// partialRecord is what a client learned of one member's partials.
type partialRecord uint8

const (
	partialsProven partialRecord = iota + 1
	partialsForged
)

// goFunc runs f in a goroutine owned by the client; it reports false, and
// runs nothing, once the client is closed.
func (c *Client) goFunc(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.held[resource]
	if !ok {
		ch = make(chan struct{}, 1)
		c.held[resource] = ch
	}
	return ch
}

// New starts a client with its own libp2p host (no listen addresses).
// Its connection gater admits only the cluster's members (S6).
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ids, err := memberIDs(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	h, err := transport.NewHost(cfg.Identity, nil, transport.NewGater(ids...))
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
	return transport.PeerIDs(ss...)
}

// verifierCacheSize bounds the client's verified-token cache.
const verifierCacheSize = 1024

// poolIdle is how many idle streams the client keeps per member and
// protocol; knownCap bounds the resources whose epoch it remembers.
const (
	poolIdle = 4
	knownCap = 4096
)

func newClient(cfg Config, h host.Host) (*Client, error) {
	f, t := crypto.FaultThreshold(cfg.Cluster.File.N)
	c := &Client{
		cfg: cfg, host: h, f: f, t: t,
		era:      protocol.Era{Floor: cfg.Cluster.File.EpochFloor},
		verifier: verifier.New(cfg.Cluster, verifier.WithCacheSize(verifierCacheSize)),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		silent:   map[int]bool{},
		held:     map[string]chan struct{}{},
		myVotes:  map[string]map[int]protocol.SignedVote{},
		known:    map[string]uint64{},
		partials: map[int]partialRecord{},
		pool:     transport.NewPool(h, poolIdle),
	}
	for _, n := range cfg.Cluster.File.Nodes {
		id, err := peer.Decode(n.PeerID)
		if err != nil {
			return nil, fmt.Errorf("client: node %d peer ID: %w", n.Index, err)
		}
		pub, err := id.ExtractPublicKey()
		if err != nil {
			return nil, fmt.Errorf("client: node %d public key: %w", n.Index, err)
		}
		if err := transport.AddPeer(h, id, n.Addrs); err != nil {
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
// their leases run out. A Lock whose Commit is still under way (see
// Lock.Committed) holds only votes, which run out by the members' vote
// timeout: a process that means to leave its lease running by its TTL
// waits for Committed before Close.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.pool.Close()
	if c.ownHost {
		return c.host.Close()
	}
	return nil
}

// Option adjusts one Acquire or TryAcquire.
type Option func(*acquireOptions)

type acquireOptions struct {
	ttl          time.Duration
	tokenRelease bool
}

// WithTTL sets the lease length (default Config.DefaultTTL).
func WithTTL(d time.Duration) Option { return func(o *acquireOptions) { o.ttl = d } }

// WithTokenRelease lets the lease also be released by its token alone
// (Client.Release), from a process that does not hold the Lock: the
// command line's acquire exits after printing the token, and a later
// release has only the token. Without it (the default) only the Lock that
// acquired can release, renew or abandon its session: it alone knows the
// session's key. With it, any process of this client identity that has the
// token can end the lease (never extend it or take it over).
func WithTokenRelease() Option { return func(o *acquireOptions) { o.tokenRelease = true } }

// Acquire obtains a token for resource and starts renewing its lease. Like
// etcd's concurrency.Mutex.Lock, it waits until the lock is held or ctx
// ends: while another holder has the resource (it retries after about the
// time the holder has left), while fewer than 2f+1 nodes answer, and while
// this Client itself holds the resource. With no deadline on ctx it waits
// until it succeeds or ctx is cancelled. Refusals retrying cannot fix (an
// unauthorised identity, a wrong cluster) end it at once.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...Option) (*Lock, error) {
	o, err := c.options(resource, opts)
	if err != nil {
		return nil, err
	}
	return c.lock(ctx, resource, o, true)
}

// TryAcquire is Acquire without waiting, like etcd's
// concurrency.Mutex.TryLock: it fails at once with a *BusyError (errors.Is
// ErrBusy) when another holder's lease is held, with ErrHeldLocally when
// this Client holds or is acquiring the resource, and with a *QuorumError
// when fewer than 2f+1 nodes answer. Rounds lost to a stale epoch, a
// lagging node's proof or split votes with other contenders are retried
// after a short pause, at most 4 rounds in all, each call bounded by
// Config.RequestTimeout.
func (c *Client) TryAcquire(ctx context.Context, resource string, opts ...Option) (*Lock, error) {
	o, err := c.options(resource, opts)
	if err != nil {
		return nil, err
	}
	return c.lock(ctx, resource, o, false)
}

// options validates resource and applies opts.
func (c *Client) options(resource string, opts []Option) (acquireOptions, error) {
	o := acquireOptions{ttl: c.cfg.DefaultTTL}
	if err := protocol.ValidateResource(resource); err != nil {
		return o, fmt.Errorf("client: %w", err)
	}
	for _, f := range opts {
		f(&o)
	}
	if o.ttl <= 0 || o.ttl > protocol.MaxTTL {
		return o, fmt.Errorf("client: ttl %v not in (0, %v]", o.ttl, protocol.MaxTTL)
	}
	return o, nil
}

// WaitingLocally is how many Acquire calls of this client are waiting
// for a lock this same client holds or is acquiring (one Lock per
// resource per client): they ask no node until it is released.
func (c *Client) WaitingLocally() int { return int(c.waitingLocally.Load()) }

// lock takes this client's slot for resource and acquires it, waiting
// (Acquire) or not (TryAcquire).
func (c *Client) lock(ctx context.Context, resource string, o acquireOptions, wait bool) (*Lock, error) {
	// One Lock per resource per client: wait for (or, trying once, fail
	// on) a Lock this client already holds or is acquiring.
	slot := c.slot(resource)
	select {
	case slot <- struct{}{}:
	default:
		if !wait {
			return nil, fmt.Errorf("client: acquire %q: %w", resource, ErrHeldLocally)
		}
		c.waitingLocally.Add(1)
		select {
		case slot <- struct{}{}:
			c.waitingLocally.Add(-1)
		case <-ctx.Done():
			c.waitingLocally.Add(-1)
			return nil, fmt.Errorf("client: acquire %q: %w (this client holds it)", resource, ctx.Err())
		case <-c.ctx.Done():
			c.waitingLocally.Add(-1)
			return nil, ErrClosed
		}
	}
	lock, err := c.acquire(ctx, resource, o, wait)
	if err != nil {
		<-slot
		return nil, err
	}
	lock.setFreeSlot(func() { <-slot })
	return lock, nil
}

// newPlanner starts the plan of one acquisition in the session key owns,
// above the epoch this client knows the resource reached.
func (c *Client) newPlanner(resource string, key protocol.SessionKey, wait bool) *planner {
	p := &planner{
		resource: resource, f: c.f, t: c.t, era: c.era, wait: wait,
		minBackoff: c.cfg.MinBackoff, maxBackoff: c.cfg.MaxBackoff, jitter: c.jitter,
		holder: protocol.Holder{ID: c.ID(), Session: key.Session()}, key: key, backoff: c.cfg.MinBackoff,
	}
	p.know(c.knownEpoch(resource))
	return p
}

// knownEpoch is the epoch this client knows resource reached, 0 if none.
func (c *Client) knownEpoch(resource string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known[resource]
}

// learnEpoch records that resource reached epoch (never lowering it).
func (c *Client) learnEpoch(resource string, epoch uint64) {
	if epoch == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[resource]; !ok && len(c.known) >= knownCap {
		clear(c.known) // a cache: forgetting costs one status round
	}
	c.known[resource] = max(c.known[resource], epoch)
}

// acquire drives one acquisition (rounds); a session that waited and
// made no lock leaves the members' queues.
func (c *Client) acquire(ctx context.Context, resource string, o acquireOptions, wait bool) (*Lock, error) {
	// Each acquisition is a session of its own, owned by a key only this
	// process knows (issue 20): a sibling process sharing the identity key
	// can neither renew, abandon nor release it. A round that sent a
	// Commit and made no lock spends the session (planner.spent): the
	// rounds after it draw a new one.
	key, err := protocol.NewSessionKey(c.cfg.SessionKeys)
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resource, err)
	}
	p := c.newPlanner(resource, key, wait)
	p.tokenRelease = o.tokenRelease
	defer func() { c.learnEpoch(resource, p.learned()) }()
	lock, err := c.acquireRounds(ctx, o.ttl, p)
	if err != nil && p.waited {
		c.leave(resource, p.key)
	}
	return lock, err
}

// leave takes a session that waited and will wait no more (its
// acquisition gave up, or it was spent) out of every member's queue, in
// the background: an AbandonRequest at epoch 0. Left there, it would keep
// one of its identity's few places on the resource
// (node.Limits.WaitersPerClientPerResource), so that the identity's next
// session found no room, and be first in line where it had not been
// pruned yet, for a turn nobody takes, until WaiterTTL.
func (c *Client) leave(resource string, key protocol.SessionKey) {
	req := protocol.AbandonRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Key: key}.Marshal()
	for _, m := range c.members {
		c.goFunc(func() {
			if _, err := c.call(c.ctx, m, protocol.ProtoAbandon, req); err != nil {
				log.Debugw("leave failed", "node", m.index, "resource", resource, "err", err)
			}
		})
	}
}

// acquireRounds runs p's rounds until one acquires or the planner gives up,
// sleeping the pause the planner picks between them.
func (c *Client) acquireRounds(ctx context.Context, ttl time.Duration, p *planner) (*Lock, error) {
	resource := p.resource
	// last is the outcome of the last round that ran to its end: when the
	// caller gives up in the middle of a round, that one says more (a
	// holder, a refusal) than the round cut short.
	var last error
	for {
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if p.spent {
			key, err := protocol.NewSessionKey(c.cfg.SessionKeys)
			if err != nil {
				return nil, fmt.Errorf("client: acquire %q: %w", resource, err)
			}
			if p.waited {
				c.leave(resource, p.key)
			}
			p.renew(key)
		}
		start := c.cfg.Clock.Now()
		lock, err := c.attempt(ctx, ttl, p)
		p.ended(c.cfg.Clock.Since(start))
		if err == nil {
			p.know(lock.Epoch())
			return lock, nil
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) && last != nil {
				err = last
			}
			return nil, fmt.Errorf("client: acquire %q: %w (last attempt: %w)", resource, ctx.Err(), unwrapRetry(err))
		}
		last = err
		v := p.next(err)
		if !v.retry() {
			return nil, v.err
		}
		log.Debugw("acquire round failed", "resource", resource, "session", p.holder.Ref().Short(), "round", p.rounds, "took", p.lastRound, "split", p.split, "queue", v.queue, "pause", v.pause, "err", err)
		if v.queue {
			// Push handoff: the nodes answer our long poll when it is
			// our turn; only if they cannot (too few answer) do we poll
			// by rounds.
			lock, werr := c.waitTurn(ctx, ttl, p)
			if werr == nil {
				if lock != nil {
					p.know(lock.Epoch())
					return lock, nil
				}
				continue
			}
			if ctx.Err() != nil || c.ctx.Err() != nil {
				return nil, fmt.Errorf("client: acquire %q: %w (last attempt: %w)", resource, werr, unwrapRetry(err))
			}
			log.Debugw("wait for turn failed", "resource", resource, "session", p.holder.Ref().Short(), "err", werr)
			if ws := (*waitSplit)(nil); errors.As(werr, &ws) && ws.soon {
				v.pause = c.jitter(c.cfg.MinBackoff)
				log.Debugw("split wait: asking again soon", "resource", resource, "session", p.holder.Ref().Short(), "pause", v.pause)
			}
		}
		if v.pause <= 0 {
			continue
		}
		if serr := c.sleep(ctx, v.pause); serr != nil {
			return nil, fmt.Errorf("client: acquire %q: %w (last attempt: %w)", resource, serr, unwrapRetry(err))
		}
	}
}

// jitter draws a pause in [0, d] from the client's seeded generator (full
// jitter: desynchronises contenders).
func (c *Client) jitter(d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.rng.Int64N(int64(d) + 1))
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

// attempt is one acquisition round: status (unless the planner already
// knows where to start), votes, combine, commit. The planner decides the
// epoch and what the replies mean.
func (c *Client) attempt(ctx context.Context, ttl time.Duration, p *planner) (*Lock, error) {
	resource := p.resource
	p.begin()
	var sts []NodeStatus
	if !p.blind() {
		var err error
		if sts, err = c.status(ctx, resource); err != nil {
			return nil, err
		}
		c.checkEquivocation(resource, sts)
		// Issue 21: a fork is not acquired above silently.
		if f := c.findFork(resource, sts); f != nil {
			return nil, &ForkError{Op: fmt.Sprintf("acquire %q", resource), Fork: *f}
		}
	}
	proof, votesProof := c.proofs(p, sts)
	epoch := p.pick(sts, proof)
	stmt := c.cfg.Cluster.Statement(resource, epoch, p.holder)
	req := protocol.AcquireRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch, Key: p.key, TTL: ttl, Proof: proof, Votes: votesProof}.Marshal()
	received := map[int]protocol.SignedVote{}
	defer c.rememberVotes(resource, received)

	// The fan-out ends with the client, not with ctx: replies still out
	// when the round gives up are drained in the background so that late
	// votes are withdrawn (see drainLate).
	rctx, cancel := context.WithCancel(c.ctx)
	voteSent := c.cfg.Clock.Now() // no member voted before this
	ch := c.fanOut(rctx, protocol.ProtoAcquire, req)
	b := &ballot{epoch: epoch, era: c.era}
	r := c.newVoteRound(ch, stmt, b, received)
	tok := r.collect(ctx, false)
	if tok != nil {
		var lock *Lock
		var err error
		tok, lock, err = c.commitChecked(ctx, r, *tok, ttl, p, voteSent)
		if tok != nil {
			c.drainWon(ch, len(c.members)-r.got, cancel)
			p.observe(b)
			return lock, err
		}
		// No valid token after all: the round failed like any other.
	}
	p.observe(b)
	c.drainLate(ch, len(c.members)-r.got, stmt, p.key, cancel)
	if err := c.withdraw(ctx, stmt, p.key, r.voters()); err != nil {
		return nil, err
	}
	return nil, p.outcome(b, len(r.votes))
}

// commitChecked hands out a Lock for the round's token and commits it.
// It returns the token (nil if no valid one could be made) with the
// Lock, or the commit's error. The commit carries the session's key
// (p.key) and, if asked for, lets the lease be released by token
// (p.tokenRelease).
//
// With voteSent (when the Acquire went out; zero when the votes came in
// Wait answers, whose vote time the client cannot bound) and unless
// Config.CommitFirst, the lease starts at the vote (grantAtVote).
// Otherwise the Lock is handed out only for a token that verified (S2)
// and once t members acknowledged its Commit.
//
// When every partial in the candidate comes from a member whose partials
// this client has seen in a token that verified (vouched), it commits the
// candidate while it verifies it: the round trip and the nodes' fsync
// overlap the client's one pairing. Otherwise it verifies first
// (checkThenCommit). A Commit a member takes serves the session, which
// leaves that member's queue for good, so a candidate spoilt by a forged
// partial must not be committed while the votes in hand may not complete
// a token: the waiter would lose its place (scenario seed 838).
func (c *Client) commitChecked(ctx context.Context, r *voteRound, tok protocol.Token, ttl time.Duration, p *planner, voteSent time.Time) (*protocol.Token, *Lock, error) {
	if !voteSent.IsZero() && !c.cfg.CommitFirst {
		return c.grantAtVote(ctx, r, tok, ttl, p, voteSent)
	}
	if !c.vouched(r.voters()) {
		return c.checkThenCommit(ctx, r, tok, ttl, p)
	}
	verified := make(chan error, 1)
	if !c.goFunc(func() { verified <- c.verifier.VerifyPrepared(tok, r.prep) }) {
		return &tok, nil, ErrClosed
	}
	sent, left, err := c.commit(ctx, tok, ttl, p.key, p.tokenRelease, r.certificate())
	// Whatever comes of it, the members that took the Commit, or take
	// the Release of a failed one, are done with this session.
	p.spent = true
	if verr := <-verified; verr != nil {
		// S2: never hand out a token that does not verify. A vouched
		// member forged: it is checked first from now on (combine).
		log.Warnw("combined token does not verify: checking the votes one by one", "resource", tok.Resource, "epoch", tok.Epoch, "err", verr)
		good := r.completeChecked(ctx)
		if good == nil {
			if err == nil {
				c.releaseLater(tok, p.key) // the session's key ends the leases it started
			}
			return nil, nil, nil
		}
		// The same statement: nodes that started a lease for the bad
		// token take the good one's commit as a renewal.
		tok = *good
		sent, left, err = c.commit(ctx, tok, ttl, p.key, p.tokenRelease, r.certificate())
	} else {
		c.vouch(r)
	}
	return c.locked(tok, p, sent, left, err, r)
}

// checkThenCommit verifies the candidate before anything is committed.
// If it fails, the round finds the invalid partials (Combine), completes a
// token from other votes if it can and commits that one; if it cannot,
// nothing was committed and the session keeps its place in the queues.
// Against members that never forge, this costs one pairing in series the
// first time each member's partial is in a candidate. A member whose
// partial once failed is checked first for the client's life, so a
// Byzantine member can spend at most one session of a client, and only
// after its partials were good.
func (c *Client) checkThenCommit(ctx context.Context, r *voteRound, tok protocol.Token, ttl time.Duration, p *planner) (*protocol.Token, *Lock, error) {
	good := c.checkFirst(ctx, r, tok)
	if good == nil {
		return nil, nil, nil
	}
	tok = *good
	sent, left, err := c.commit(ctx, tok, ttl, p.key, p.tokenRelease, r.certificate())
	p.spent = true
	return c.locked(tok, p, sent, left, err, r)
}

// checkFirst verifies the candidate tok before anything of it leaves the
// client. If it fails, the round finds the invalid partials (Combine) and
// completes a token from other votes if it can; checkFirst returns the
// verified token, or nil if none can be made. The round's votes are then
// vouched for.
func (c *Client) checkFirst(ctx context.Context, r *voteRound, tok protocol.Token) *protocol.Token {
	if err := c.verifier.VerifyPrepared(tok, r.prep); err != nil {
		log.Warnw("candidate token does not verify: checking the votes one by one before any commit", "resource", tok.Resource, "epoch", tok.Epoch, "err", err)
		good := r.completeChecked(ctx)
		if good == nil {
			return nil
		}
		tok = *good
	}
	c.vouch(r)
	return &tok
}

// completeChecked makes a verified token of the round's votes after a
// candidate failed: it drops the invalid partials (naming their nodes),
// waits for other votes, and asks the members a round of Wait answers left
// out (widen) if those in hand are too few. It returns nil if no token can
// be made.
func (r *voteRound) completeChecked(ctx context.Context) *protocol.Token {
	good := r.collect(ctx, true)
	if good == nil && r.widen() {
		good = r.collect(ctx, true)
	}
	return good
}

// grantAtVote hands out the Lock once t votes combine, before the Commit
// (issue 20, point 6): the lease starts at the vote. The t members that
// voted hold the resource for this session for their vote timeout from
// their vote, which came after voteSent, and every other quorum shares an
// honest one of them (S1's argument), so no other session can be given
// the resource before voteSent + VoteTimeout: that, minus a tenth, is the
// Lock's Deadline until t members acknowledged the Commit, which the Lock
// sends in the background (Lock.Committed). Safety never depends on it:
// the resource checks the token.
//
// A candidate whose partials all come from vouched members is handed out
// while it is checked, with the Commit (the client's pairing overlaps the
// Commit round and the caller's first use of the token); if it fails, the
// Lock is lost with ErrBadToken, the forging members are checked first
// from then on, and the session's votes and lease are released. Any other
// candidate is checked first, as checkThenCommit does: one that fails is
// completed from other votes or not handed out at all, and nothing of it
// is committed, so a waiter keeps its place (scenario seed 838).
func (c *Client) grantAtVote(ctx context.Context, r *voteRound, tok protocol.Token, ttl time.Duration, p *planner, voteSent time.Time) (*protocol.Token, *Lock, error) {
	checked := !c.vouched(r.voters())
	if checked {
		good := c.checkFirst(ctx, r, tok)
		if good == nil {
			return nil, nil, nil
		}
		tok = *good
	}
	p.spent = true
	votes, prep, cert := slices.Clone(r.votes), r.prep, r.certificate()
	key, tokenRelease := p.key, p.tokenRelease
	settle := func(ctx context.Context) settled {
		return c.settle(ctx, tok, votes, prep, checked, ttl, key, tokenRelease, cert)
	}
	hold := c.cfg.VoteTimeout
	l := newLock(c, tok, key, ttl, voteSent.Add(hold-margin(hold)), r.b.suspects(), settle)
	log.Debugw("acquired at the vote", "resource", tok.Resource, "epoch", tok.Epoch, "session", p.holder.Ref().Short(), "checked", checked)
	return &tok, l, nil
}

// settled is how the Commit of a Lock handed out at the vote ended: when
// it was sent and the lease time the members granted, or why the Lock is
// lost.
type settled struct {
	sent time.Time
	left time.Duration
	err  error
}

// settle commits tok for a Lock handed out at the vote and, unless it was
// checked before (checked), verifies it meanwhile. A token that does not
// verify ends the Lock with ErrBadToken: its forging members are named
// (Combine) and checked first from now on. What a failed settle started
// is released by the Lock (awaitCommit, or its Release).
func (c *Client) settle(ctx context.Context, tok protocol.Token, votes []crypto.PartialSig, prep *verifier.Prepared, checked bool, ttl time.Duration, key protocol.SessionKey, tokenRelease bool, cert []protocol.CertVote) settled {
	var verified chan error
	if !checked {
		verified = make(chan error, 1)
		if !c.goFunc(func() { verified <- c.verifier.VerifyPrepared(tok, prep) }) {
			return settled{err: ErrClosed}
		}
	}
	sent, left, err := c.commitOnly(ctx, tok, ttl, key, tokenRelease, cert)
	if verified != nil {
		if verr := <-verified; verr != nil {
			_, bad, _ := c.cfg.Cluster.Key.Combine(tok.SignedBytes(), votes)
			for _, idx := range bad {
				c.forged(idx)
			}
			log.Warnw("token handed out at the vote does not verify: the lock is lost", "resource", tok.Resource, "epoch", tok.Epoch, "forgers", bad, "err", verr)
			return settled{err: fmt.Errorf("%w: %w: %q epoch %d (invalid partials from nodes %v): %w", ErrLost, ErrBadToken, tok.Resource, tok.Epoch, bad, verr)}
		}
		c.vouchVotes(votes)
	}
	if err != nil {
		return settled{err: fmt.Errorf("%w: %q epoch %d: commit: %w", ErrLost, tok.Resource, tok.Epoch, err)}
	}
	return settled{sent: sent, left: left}
}

// locked hands out the Lock for tok once its commit went through.
func (c *Client) locked(tok protocol.Token, p *planner, sent time.Time, left time.Duration, err error, r *voteRound) (*protocol.Token, *Lock, error) {
	if err != nil {
		return &tok, nil, err
	}
	l := newLock(c, tok, p.key, left, sent.Add(left-margin(left)), r.b.suspects(), nil)
	log.Debugw("acquired", "resource", tok.Resource, "epoch", tok.Epoch, "session", p.holder.Ref().Short())
	return &tok, l, nil
}

// vouched reports whether every member of voters has sent a partial that
// was in a token that verified, and none that failed.
func (c *Client) vouched(voters []int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, idx := range voters {
		if c.partials[idx] != partialsProven {
			return false
		}
	}
	return true
}

// vouch records that the round's votes made a token that verified.
func (c *Client) vouch(r *voteRound) { c.vouchVotes(r.votes) }

// vouchVotes records that votes made a token that verified. Only a token
// of exactly t partials vouches for them all: with more in hand, one that
// was not interpolated may be invalid.
func (c *Client) vouchVotes(votes []crypto.PartialSig) {
	if len(votes) != c.t {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range votes {
		if c.partials[v.Index] != partialsForged {
			c.partials[v.Index] = partialsProven
		}
	}
}

// forged records that member idx sent a partial that does not verify.
func (c *Client) forged(idx int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partials[idx] = partialsForged
}

// proofs returns what the round shows lagging nodes, as the planner asks:
// the highest certified token that verifies, and f+1 signed votes.
func (c *Client) proofs(p *planner, sts []NodeStatus) (*protocol.Token, []protocol.SignedVote) {
	if len(sts) == 0 {
		return nil, nil // a blind round (see planner.blind)
	}
	var proof *protocol.Token
	var votes []protocol.SignedVote
	if p.needsProof(sts) {
		proof = c.bestToken(p.resource, sts)
	}
	if p.wantProof {
		votes = c.voteProof(p.resource, sts)
	}
	return proof, votes
}

// withdraw abandons the votes of a failed round (see abandon). If the
// caller gave up (ctx ended), it withdraws them without making it wait
// and returns ctx's error.
func (c *Client) withdraw(ctx context.Context, stmt protocol.Statement, key protocol.SessionKey, voters []int) error {
	if ctx.Err() != nil {
		c.goFunc(func() { c.abandon(stmt, key, voters) })
		return fmt.Errorf("client: acquire %q: %w", stmt.Resource, ctx.Err())
	}
	c.abandon(stmt, key, voters)
	return nil
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
			err = checkEra(c.era, st)
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

// commit tells every node the token is certified and waits for 2f+1 acks.
// The lease runs from sent, when the commit was sent, for left (the
// (f+1)-th shortest lease the nodes granted, at most ttl). The commit
// carries the session's key, so the nodes that voted skip the pairing,
// tokenRelease (WithTokenRelease) and the token's vote certificate, which
// the nodes keep for forensics (issue 21).
func (c *Client) commit(ctx context.Context, tok protocol.Token, ttl time.Duration, key protocol.SessionKey, tokenRelease bool, cert []protocol.CertVote) (sent time.Time, left time.Duration, err error) {
	sent, left, err = c.commitOnly(ctx, tok, ttl, key, tokenRelease, cert)
	if err != nil {
		// Some nodes may have started a lease nobody will use: release it
		// in the background rather than let it block others for its TTL.
		c.releaseLater(tok, key)
	}
	return sent, left, err
}

// commitOnly is commit without the release of a failed one.
func (c *Client) commitOnly(ctx context.Context, tok protocol.Token, ttl time.Duration, key protocol.SessionKey, tokenRelease bool, cert []protocol.CertVote) (sent time.Time, left time.Duration, err error) {
	sent = c.cfg.Clock.Now()
	req := protocol.CommitRequest{Token: tok, TTL: ttl, Key: key, TokenRelease: tokenRelease, Certificate: cert}
	_, _, left, err = c.quorum(ctx, "commit", protocol.ProtoCommit, req.Marshal())
	if err != nil {
		return sent, 0, err
	}
	if left <= 0 || left > ttl {
		left = ttl
	}
	return sent, left, nil
}

// releaseLater releases tok's leases, with its session's key, in the
// background.
func (c *Client) releaseLater(tok protocol.Token, key protocol.SessionKey) {
	c.goFunc(func() {
		rctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
		defer cancel()
		_, _, _, _ = c.quorum(rctx, "release", protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok, Key: key}.Marshal())
	})
}
