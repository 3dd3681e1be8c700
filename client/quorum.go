package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// This file holds the client's network side of a round: one request to one
// node (call), fan-out to every member, waiting for a quorum of replies,
// the members that stay silent, and the withdrawal (abandon) of votes a
// failed round leaves behind.

// call sends one request to member m and reads its reply, bounded by
// RequestTimeout. Every request the client sends goes through it.
func (c *Client) call(ctx context.Context, m member, proto string, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return transport.Call(ctx, c.host, m.id, proto, req, protocol.MaxFrameSize)
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

// collectVotes reads one round's acquire replies from ch until 2f+1 valid
// votes combine into a token, the replies still out cannot make a quorum,
// or ctx ends. Every other reply goes into b; the valid votes' signed
// statements go into received. It returns the token (nil if none), the
// partials of the valid votes and how many replies it read.
func (c *Client) collectVotes(ctx context.Context, ch <-chan reply, stmt protocol.Statement, b *ballot, received map[int]protocol.SignedVote) (tok *protocol.Token, votes []crypto.PartialSig, got int) {
	msg := stmt.SignedBytes()
	replied := map[int]bool{}
	silent := c.silentMembers()
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
			return nil, votes, got
		}
		if r.err != nil {
			b.fail(r.m, r.err)
			continue
		}
		ar, err := protocol.UnmarshalAcquireReply(r.b)
		if err != nil {
			// The channel is authenticated: garbage comes from the node.
			b.fail(r.m, fmt.Errorf("%w: %w", errBadVote, err))
			continue
		}
		if ar.Kind != protocol.KindVote {
			b.observe(r.m, ar)
			continue
		}
		if err := checkVote(r.m, stmt, ar); err != nil {
			b.fail(r.m, fmt.Errorf("%w: %w", errBadVote, err))
			continue
		}
		votes = append(votes, ar.Partial)
		received[r.m.index] = protocol.SignedVote{Node: r.m.index, Statement: stmt, IdentitySig: ar.IdentitySig}
		if len(votes) >= c.t {
			// S1: a token takes t votes at one (resource, epoch), and two
			// quorums share an honest node, which votes once. S2: only t
			// partials combine. Combine optimistically; a bad partial is dropped and its
			// node named, and another node's vote may complete the token.
			sig, bad, err := c.cfg.Cluster.Key.Combine(msg, votes)
			for _, idx := range bad {
				b.fail(c.members[idx-1], fmt.Errorf("%w: partial signature does not verify", errBadVote))
				log.Warnw("node sent an invalid partial", "node", idx, "resource", stmt.Resource, "epoch", stmt.Epoch)
				votes = dropIndex(votes, idx)
			}
			if err == nil {
				tok = &protocol.Token{Statement: stmt, Signature: sig}
			}
		}
	}
	return tok, votes, got
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
