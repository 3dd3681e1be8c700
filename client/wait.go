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
// queues the session and tells its place: the cohort, signed by the member
// (protocol.SignedPlace). Then it long-polls the members that did not say
// free, claiming with the f+1 signed places of the lowest cohorts (the
// (f+1)-th lowest cohort). A member that queued the session one cohort
// later (its request arrived just after a handoff there) moves it up if
// the places verify, and one that queued it in an earlier cohort than
// that (its request arrived there just before a handoff) moves it back,
// so the members agree on who is first (see node's claimPlace). Such a
// member's "free" is not the others': it is asked again, with the claim.
// A member looks at one claim per queue entry only.
func (c *Client) waitTurn(ctx context.Context, p *planner) error {
	ctx, cancel := c.linked(ctx)
	defer cancel()
	req := protocol.WaitRequest{Cluster: c.cfg.Cluster.ID, Resource: p.resource, Key: p.key}
	free := map[int]uint64{} // member index -> its epoch
	var places []protocol.SignedPlace
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
		if pl := wr.Place; pl != nil && c.ownPlace(p, r.m.index, *pl) {
			places = append(places, *pl)
		}
	}
	claim := claimOf(places, c.f+1)
	if claim != nil {
		at := protocol.ClaimCohort(claim)
		for _, pl := range places {
			if pl.Cohort < at {
				delete(free, pl.Member) // the odd one out: ask again, claiming
			}
		}
	}
	if len(free) < c.t {
		req.Claim = claim
	}
	req.MaxWait = c.cfg.RequestTimeout * 4 / 5
	return c.pollTurn(ctx, p, req, free)
}

// ownPlace reports whether pl is member's place for p's session on p's
// resource in this cluster: what a claim may show. (Its signature is the
// nodes' to check.)
func (c *Client) ownPlace(p *planner, member int, pl protocol.SignedPlace) bool {
	return pl.Member == member && pl.Cluster == c.cfg.Cluster.ID && pl.Resource == p.resource && pl.Holder.Is(p.holder)
}

// claimOf is the claim made of places (one per member): the need places
// of the lowest cohorts, or none if there are fewer, or if every place
// gives the same cohort (nobody needs to move).
func claimOf(places []protocol.SignedPlace, need int) []protocol.SignedPlace {
	if len(places) < need || need > protocol.MaxClaimPlaces {
		return nil
	}
	sort.SliceStable(places, func(i, j int) bool { return places[i].Cohort < places[j].Cohort })
	if places[0].Cohort == places[len(places)-1].Cohort {
		return nil
	}
	return places[:need]
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
