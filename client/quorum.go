package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// This file holds the client's network side of a round: one request to one
// node (call), fan-out to every member, waiting for a quorum of replies,
// the members that stay silent, and the withdrawal (abandon) of votes a
// failed round leaves behind.

// call sends one request to member m and reads its reply, bounded by
// RequestTimeout, on a reused stream where one is idle (transport.Pool).
// Every request the client sends goes through it.
func (c *Client) call(ctx context.Context, m member, proto string, req []byte) ([]byte, error) {
	return c.callFor(ctx, m, proto, req, c.cfg.RequestTimeout)
}

// callFor is call bounded by timeout instead (a long poll's).
func (c *Client) callFor(ctx context.Context, m member, proto string, req []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.pool.Call(ctx, m.id, proto, req, protocol.MaxFrameSize)
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
	return c.fanOutTo(ctx, c.members, proto, req)
}

// fanOutTo is fanOut to the members ms alone.
func (c *Client) fanOutTo(ctx context.Context, ms []member, proto string, req []byte) <-chan reply {
	out := make(chan reply, len(ms))
	for _, m := range ms {
		if !c.goFunc(func() {
			b, err := c.call(ctx, m, proto, req)
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

// voteRound is the vote-collecting side of one acquire round: the replies
// of the fan-out on ch, the valid votes so far, and what every other reply
// showed (b). The valid votes' signed statements go into received.
type voteRound struct {
	c        *Client
	ch       <-chan reply
	stmt     protocol.Statement
	b        *ballot
	received map[int]protocol.SignedVote
	votes    []crypto.PartialSig
	got      int // replies read
	replied  map[int]bool
	silent   map[int]bool
	// prep is the check of the token, started at the first valid vote
	// (once a node voted, a token is likely; a round that only meets
	// busy nodes spends no pairing on it).
	prep *verifier.Prepared
	// start is when the round's requests went out.
	start time.Time
	// unasked are the members a round made of Wait answers (only) neither
	// heard from nor asked; ask asks them for their votes at the round's
	// epoch (see widen). Both are nil in a fanned-out round.
	unasked []member
	ask     func(ms []member) <-chan reply
}

// minGrace is the least a failed round waits for the replies that say why
// it failed (see voteRound.grace).
const minGrace = 50 * time.Millisecond

// grace is how long a round that can no longer succeed waits for the
// replies that would explain it: twice as long as it has run so far, at
// least minGrace and at most RequestTimeout. A slow node costs a failed round
// little; a node that answers with the others is heard.
func (r *voteRound) grace() time.Duration {
	return min(max(2*r.c.cfg.Clock.Since(r.start), minGrace), r.c.cfg.RequestTimeout)
}

func (c *Client) newVoteRound(ch <-chan reply, stmt protocol.Statement, b *ballot, received map[int]protocol.SignedVote) *voteRound {
	return &voteRound{c: c, ch: ch, stmt: stmt, b: b, received: received, replied: map[int]bool{}, silent: c.silentMembers(), start: c.cfg.Clock.Now()}
}

// only says that the round's replies are those of the members idx alone,
// already in hand (the votes of Wait answers, see waitVotes): collect
// waits for no other member, and takes none as silent.
func (r *voteRound) only(idx []int) {
	in := map[int]bool{}
	for _, i := range idx {
		in[i] = true
	}
	r.silent = nil
	for _, m := range r.c.members {
		if !in[m.index] {
			r.got++
			r.replied[m.index] = true
			r.unasked = append(r.unasked, m)
		}
	}
}

// widen asks the members a round of Wait answers left out (only) for
// their votes at its epoch, once, and reports whether it asked any. It is
// for when the votes in hand made no valid token: a member sent an invalid
// partial, which the Wait answers could not show before the candidate was
// committed. Committing it ended the waiter's turn at the members that
// took it, so a round above would find the waiter behind everyone who
// queued meanwhile; here the honest members complete the token at the
// same epoch instead (one that already voted for this session at it gives
// the same vote again, S1/S3), and its commit renews the leases the
// candidate started.
func (r *voteRound) widen() bool {
	if r.ask == nil || len(r.unasked) == 0 {
		return false
	}
	for _, m := range r.unasked {
		delete(r.replied, m.index)
		r.got--
	}
	r.ch = r.ask(r.unasked)
	r.unasked, r.ask = nil, nil
	r.start = r.c.cfg.Clock.Now()
	return true
}

// collect reads acquire replies until t valid votes make a token, the
// replies still out cannot make a quorum (and those in say why, or the
// round's grace has passed), or ctx ends; it returns the token or nil.
//
// With checked false the token is only a candidate: the first t votes
// interpolated without a pairing (crypto.GroupKey.Interpolate), which the
// caller verifies while it commits. With checked true (after a candidate
// failed), votes are combined by crypto.GroupKey.Combine, which verifies
// the result and finds invalid partials; their nodes are named in b and
// other votes may complete the token.
func (r *voteRound) collect(ctx context.Context, checked bool) *protocol.Token {
	c, t := r.c, r.c.t
	var grace <-chan time.Time // set once the round cannot succeed
	for {
		if len(r.votes) >= t {
			// S1: a token takes t votes at one (resource, epoch), and two
			// quorums share an honest node, which votes once. S2: only t
			// partials combine, and nothing is handed out before it
			// verifies under the group key (see Client.commitChecked).
			if tok := r.combine(checked); tok != nil {
				return tok
			}
			continue
		}
		// Stop waiting once the replies still out cannot make a quorum:
		// a silent node must not hold every failed round (and, through our
		// votes, every rival) for RequestTimeout. Members that gave no
		// reply last time do not count while they stay quiet.
		out := len(c.members) - r.got
		for idx := range r.silent {
			if !r.replied[idx] {
				out--
			}
		}
		if len(r.votes)+out < t {
			// The round has failed. The replies still out are awaited a
			// little longer only if those in do not yet say why (a busy
			// node and a stale one): the verdict decides whether the
			// caller waits for a holder or retries, and what it reports.
			if out <= 0 || r.b.decided(c.f, c.t) {
				return nil
			}
			if grace == nil {
				grace = c.cfg.Clock.After(r.grace())
			}
		}
		var rp reply
		select {
		case rp = <-r.ch:
			r.got++
			r.replied[rp.m.index] = true
			c.markSilent(rp.m.index, rp.err != nil)
		case <-grace:
			return nil
		case <-ctx.Done():
			return nil
		}
		r.take(rp)
	}
}

// take sorts one reply: a valid vote joins votes, anything else goes to
// the ballot.
func (r *voteRound) take(rp reply) {
	if rp.err != nil {
		r.b.fail(rp.m, rp.err)
		return
	}
	ar, err := protocol.UnmarshalAcquireReply(rp.b)
	if err != nil {
		// The channel is authenticated: garbage comes from the node.
		r.b.fail(rp.m, fmt.Errorf("%w: %w", errBadVote, err))
		return
	}
	if ar.Kind != protocol.KindVote {
		r.b.observe(rp.m, ar)
		return
	}
	if err := checkVote(rp.m, r.stmt, ar); err != nil {
		r.b.fail(rp.m, fmt.Errorf("%w: %w", errBadVote, err))
		return
	}
	r.votes = append(r.votes, ar.Partial)
	r.received[rp.m.index] = protocol.SignedVote{Node: rp.m.index, Statement: r.stmt, IdentitySig: ar.IdentitySig}
	if r.prep == nil {
		r.prep = r.c.verifier.Prepare(r.stmt)
	}
}

// combine makes a token of the votes (a candidate unless checked), or
// drops the partials found bad (naming their nodes) and returns nil.
func (r *voteRound) combine(checked bool) *protocol.Token {
	key := r.c.cfg.Cluster.Key
	var sig crypto.Signature
	var bad []int
	var err error
	if checked {
		sig, bad, err = key.Combine(r.stmt.SignedBytes(), r.votes)
	} else {
		sig, bad, err = key.Interpolate(r.votes)
	}
	for _, idx := range bad {
		r.c.forged(idx)
		r.b.fail(r.c.members[idx-1], fmt.Errorf("%w: partial signature does not verify", errBadVote))
		log.Warnw("node sent an invalid partial", "node", idx, "resource", r.stmt.Resource, "epoch", r.stmt.Epoch)
		r.votes = dropIndex(r.votes, idx)
	}
	if err != nil {
		if len(bad) == 0 {
			r.votes = r.votes[:0] // cannot happen: nothing to learn from these votes
		}
		return nil
	}
	return &protocol.Token{Statement: r.stmt, Signature: sig}
}

// voters are the indices of the nodes whose valid votes the round holds.
func (r *voteRound) voters() []int {
	out := make([]int, len(r.votes))
	for i, v := range r.votes {
		out[i] = v.Index
	}
	return out
}

// certificate is the vote certificate of the round's valid votes, for the
// Commit: the identity signatures of the members whose partials the token
// combines, which checkVote verified, in member order. A cluster whose
// quorum exceeds protocol.MaxCertificateVotes commits without one.
func (r *voteRound) certificate() []protocol.CertVote {
	voters := r.voters()
	if len(voters) > protocol.MaxCertificateVotes {
		return nil
	}
	slices.Sort(voters)
	out := make([]protocol.CertVote, 0, len(voters))
	for _, idx := range voters {
		if v, ok := r.received[idx]; ok && v.Statement == r.stmt {
			out = append(out, protocol.CertVote{Node: idx, Sig: v.IdentitySig})
		}
	}
	return out
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

// abandon withdraws our uncommitted votes for stmt (a failed round) from
// the nodes that gave them, so a split resolves without waiting for vote
// expiry. key is the session's key: nodes drop only the votes of the
// session it owns.
func (c *Client) abandon(stmt protocol.Statement, key protocol.SessionKey, voters []int) {
	if len(voters) == 0 {
		return
	}
	resource, epoch := stmt.Resource, stmt.Epoch
	req := protocol.AbandonRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch, Key: key}.Marshal()
	var wg sync.WaitGroup
	for _, idx := range voters {
		m := c.members[idx-1]
		wg.Add(1)
		if !c.goFunc(func() {
			defer wg.Done()
			if _, err := c.call(c.ctx, m, protocol.ProtoAbandon, req); err != nil {
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

// silentMembers returns the members whose last acquire call got no reply
// (timeout or transport error). A round does not wait for them once the
// quorum would depend on them; a reply from one clears its mark.
func (c *Client) silentMembers() map[int]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]bool, len(c.silent))
	for idx := range c.silent {
		out[idx] = true
	}
	return out
}

// markSilent records whether member idx's last acquire call failed without
// a reply.
func (c *Client) markSilent(idx int, silent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
func (c *Client) drainLate(ch <-chan reply, n int, stmt protocol.Statement, key protocol.SessionKey, stop context.CancelFunc) {
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
		c.abandon(stmt, key, late)
	}) {
		stop()
	}
}

// drainWon reads the n replies of a won round still out in the background
// and then ends its fan-out (stop). Their votes are for the session that
// won, which its Commit and Release cover; cancelling the calls instead
// would reset their streams, which the next round pays for with new ones.
func (c *Client) drainWon(ch <-chan reply, n int, stop context.CancelFunc) {
	if n == 0 || !c.goFunc(func() {
		defer stop()
		for range n {
			select {
			case r := <-ch:
				c.markSilent(r.m.index, r.err != nil)
			case <-c.ctx.Done():
				return
			}
		}
	}) {
		stop()
	}
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

// errBadVote marks a node that answered an acquire with something no honest
// node sends: a malformed reply, a vote under another index or without a
// valid identity signature, or a partial that does not verify.
var errBadVote = errors.New("invalid vote")
