package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/palisade-dev/palisade/protocol"
)

// Push handoff, the client's side. When a round finds the resource held
// (or reserved for earlier waiters), Acquire does not poll: it long-polls
// every member with Wait, and each member answers when the resource is
// free for this acquisition's session (it is first in the member's queue)
// or after a few seconds, when the client asks again. Once 2f+1 members
// said free, the next round starts at once, above the (f+1)-th highest
// epoch they reported (S5), without a status round.

// errNoTurn: too few members can answer a long poll; Acquire falls back
// to polling by rounds.
var errNoTurn = errors.New("client: too few nodes answer the wait")

// waitTurn blocks until t members say the resource is free for p's
// session, or ctx ends. It seeds p's floor from their epochs.
//
// It first registers with every member (a Wait answered at once), which
// queues the session and tells its place, the cohort; then it long-polls
// the members that did not say free, claiming the (f+1)-th lowest cohort
// they gave. A member that queued the session one cohort later (its
// request arrived just after a handoff there) moves it up, so the members
// agree on who is first (see node's queue.claim).
func (c *Client) waitTurn(ctx context.Context, p *planner) error {
	ctx, cancel := c.linked(ctx)
	defer cancel()
	req := protocol.WaitRequest{Cluster: c.cfg.Cluster.ID, Resource: p.resource, Session: p.holder.Session}
	free := map[int]uint64{} // member index -> its epoch
	var cohorts []uint64
	replies := c.fanOut(ctx, protocol.ProtoWait, req.Marshal())
	for range c.members {
		var r reply
		select {
		case r = <-replies:
		case <-ctx.Done():
			return ctx.Err()
		}
		wr, err := c.waitReply(p, r.b, r.err)
		if err != nil {
			continue // the long poll asks it again
		}
		if wr.Free {
			free[r.m.index] = wr.LastEpoch
		}
		if wr.Cohort > 0 {
			cohorts = append(cohorts, wr.Cohort)
		}
	}
	if len(free) < c.t && len(cohorts) > c.f {
		sort.Slice(cohorts, func(i, j int) bool { return cohorts[i] < cohorts[j] })
		req.Cohort = cohorts[c.f]
	}
	req.MaxWait = c.cfg.RequestTimeout * 4 / 5
	return c.pollTurn(ctx, p, req, free)
}

// pollTurn long-polls the members not yet in free until t members said
// free, or too few can.
func (c *Client) pollTurn(ctx context.Context, p *planner, req protocol.WaitRequest, free map[int]uint64) error {
	type turn struct {
		index int
		epoch uint64
		err   error // the member cannot say
	}
	b := req.Marshal()
	turns := make(chan turn, len(c.members))
	polling := 0
	for _, m := range c.members {
		if _, ok := free[m.index]; ok {
			continue
		}
		polling++
		if !c.goFunc(func() {
			for ctx.Err() == nil {
				start := c.cfg.Clock.Now()
				rb, err := c.callFor(ctx, m, protocol.ProtoWait, b, req.MaxWait+c.cfg.RequestTimeout)
				wr, err := c.waitReply(p, rb, err)
				if err != nil || wr.Free {
					turns <- turn{index: m.index, epoch: wr.LastEpoch, err: err}
					return
				}
				// Not yet: the member held the poll until something
				// changed or its wait ran out; ask again (not faster
				// than MinBackoff: a member that does not hold the poll
				// must not make us spin).
				if c.cfg.Clock.Since(start) < c.cfg.MinBackoff && c.sleep(ctx, c.cfg.MinBackoff) != nil {
					break
				}
			}
			turns <- turn{index: m.index, err: ctx.Err()}
		}) {
			return ErrClosed
		}
	}
	var epochs []uint64
	for _, e := range free {
		epochs = append(epochs, e)
	}
	failed := 0
	for k := 0; len(epochs) < c.t; k++ {
		if k == polling {
			return errNoTurn
		}
		var tn turn
		select {
		case tn = <-turns:
		case <-ctx.Done():
			return ctx.Err()
		}
		if tn.err != nil {
			log.Debugw("wait failed", "node", tn.index, "resource", p.resource, "err", tn.err)
			if failed++; len(c.members)-failed < c.t {
				return errNoTurn
			}
			continue
		}
		epochs = append(epochs, tn.epoch)
	}
	// S5: at least one honest member is at or above the (f+1)-th highest
	// epoch reported.
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
	p.know(epochs[c.f])
	return nil
}

// waitReply decodes a member's answer to Wait: a refusal, a malformed
// reply or an epoch beyond this cluster file's era is an error.
func (c *Client) waitReply(p *planner, b []byte, err error) (protocol.WaitReply, error) {
	var wr protocol.WaitReply
	if err == nil {
		wr, err = protocol.UnmarshalWaitReply(b)
	}
	if err == nil {
		err = wr.Err()
	}
	if err == nil && p.era.Beyond(wr.LastEpoch) {
		err = fmt.Errorf("%w (epoch %d)", errLaterEra, wr.LastEpoch)
	}
	return wr, err
}
