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
func (c *Client) waitTurn(ctx context.Context, p *planner) error {
	ctx, cancel := c.linked(ctx)
	defer cancel()
	maxWait := c.cfg.RequestTimeout * 4 / 5
	req := protocol.WaitRequest{Cluster: c.cfg.Cluster.ID, Resource: p.resource, Session: p.holder.Session, MaxWait: maxWait}.Marshal()
	type turn struct {
		index int
		epoch uint64
		err   error // the member cannot say
	}
	turns := make(chan turn, len(c.members))
	for _, m := range c.members {
		if !c.goFunc(func() {
			for ctx.Err() == nil {
				start := c.cfg.Clock.Now()
				b, err := c.callFor(ctx, m, protocol.ProtoWait, req, maxWait+c.cfg.RequestTimeout)
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
	failed := 0
	for range c.members {
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
		if epochs = append(epochs, tn.epoch); len(epochs) == c.t {
			// S5: at least one honest member is at or above the
			// (f+1)-th highest epoch reported.
			sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
			p.know(epochs[c.f])
			return nil
		}
	}
	return errNoTurn
}
