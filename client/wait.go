package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Push handoff, the client's side. When a round finds the resource held
// (or reserved for earlier waiters), Acquire does not poll: it long-polls
// every member with Wait, and each member answers when the resource is
// free for this acquisition's session (it is first in the member's queue)
// or after a few seconds, when the client asks again.
//
// Each Wait also names the epoch the client would ask for next (and the
// lease's TTL), and a member that answers Free to the waiter it reserves
// the resource for votes at that epoch as it would for an Acquire, in
// its answer (issue 20: the vote rides in the answer, which saves the
// Acquire round trip). With t valid votes on one statement the client
// combines, checks and commits as after an Acquire round; otherwise the
// next round starts at once, above the (f+1)-th highest epoch the members
// reported (S5), without a status round: at the very epoch of the votes
// if the members allow it, whose voters then give the same vote again.

// errNoTurn: too few members can answer a long poll; Acquire falls back
// to polling by rounds.
var errNoTurn = errors.New("client: too few nodes answer the wait")

// errWaitSplit: members voted for us in their Wait answers but too few
// others said free within waitVoteGrace: they hold the resource for other
// waiters (the members do not agree on who is first). Our votes are
// withdrawn, so they do not hold those members for the vote timeout, and
// Acquire goes on by rounds.
var errWaitSplit = errors.New("client: members disagree on whose turn it is")

// waitSplit is errWaitSplit with what the split wait learned from the
// members that did not say free (see waitAsks.splitSoon).
type waitSplit struct {
	// soon: ask again after a short pause, not the split pause. We are
	// still queued at every member, and a member prunes a waiter that
	// neither polls nor asks for Rules.WaiterTTL: a pause scaled by the
	// round time (seconds on a loaded machine) would cost us our place.
	soon bool
}

func (e *waitSplit) Error() string        { return errWaitSplit.Error() }
func (e *waitSplit) Is(target error) bool { return target == errWaitSplit }

// waitVoteGrace is how long a wait that holds a member's vote waits for
// the other members' Free answers. The members that reserve a released
// resource for us answer within a round trip of each other; a vote held
// longer only keeps the resource from the waiter those others serve.
const waitVoteGrace = 100 * time.Millisecond

// waitTurn blocks until t members say the resource is free for p's
// session, or ctx ends. If the votes in their answers make a token, it
// commits it and returns the Lock; otherwise (nil, nil) and p's floor is
// where the next round starts.
//
// It first registers with every member (a Wait answered at once), which
// queues the session and tells its place: the cohort, signed by the member
// (protocol.SignedPlace). Once t members answered it waits at most
// waitVoteGrace for the rest: a member that holds the request without a
// word must not keep it from long-polling the others, which drop a waiter
// that does not poll (it was passed over for half a second so). Then it
// long-polls the members that did not say
// free, claiming with the f+1 signed places of the lowest cohorts (the
// (f+1)-th lowest cohort). A member that queued the session one cohort
// later (its request arrived just after a handoff there) moves it up if
// the places verify, and one that queued it in an earlier cohort than
// that (its request arrived there just before a handoff) moves it back,
// so the members agree on who is first (see node's claimPlace). Such a
// member's "free" is not the others': unless it came with a vote, it is
// asked again, with the claim. A member looks at one claim per queue
// entry only.
func (c *Client) waitTurn(ctx context.Context, ttl time.Duration, p *planner) (*Lock, error) {
	wctx, cancel := c.linked(ctx)
	defer cancel()
	p.waited = true
	asks := &waitAsks{f: c.f, floor: p.floor, era: p.era, known: map[int]uint64{}, now: c.cfg.Clock.Now}
	req := protocol.WaitRequest{Cluster: c.cfg.Cluster.ID, Resource: p.resource, Key: p.key}
	if req.Epoch = asks.ask(0); req.Epoch > 0 {
		req.TTL = ttl
	}
	free := map[int]protocol.WaitReply{} // member index -> its Free answer
	var places []protocol.SignedPlace
	replies := c.fanOut(wctx, protocol.ProtoWait, req.Marshal())
	var rest <-chan time.Time // set once t members answered
registering:
	for got := range len(c.members) {
		if got == c.t {
			rest = c.cfg.Clock.After(waitVoteGrace)
		}
		var r reply
		select {
		case r = <-replies:
		case <-rest:
			break registering // the long polls ask the others again
		case <-wctx.Done():
			return nil, wctx.Err()
		}
		wr, err := c.waitReply(p, r.b, r.err)
		if err != nil {
			continue // the long poll asks it again
		}
		wr = askedVote(wr, req.Epoch)
		asks.report(r.m.index, wr)
		if wr.Free {
			free[r.m.index] = wr
		}
		if pl := wr.Place; pl != nil && c.ownPlace(p, r.m.index, *pl) {
			places = append(places, *pl)
		}
	}
	claim := claimOf(places, c.f+1)
	if claim != nil {
		at := protocol.ClaimCohort(claim)
		for _, pl := range places {
			if wr, ok := free[pl.Member]; ok && pl.Cohort < at && wr.Vote == nil {
				// The odd one out: ask again, claiming. (A vote is a
				// vote, whatever the member's order: it stays.)
				delete(free, pl.Member)
			}
		}
	}
	if len(free) < c.t {
		req.Claim = claim
		req.MaxWait = c.cfg.RequestTimeout * 4 / 5
		if err := c.pollTurn(wctx, p, req, ttl, free, asks); err != nil {
			if errors.Is(err, errWaitSplit) {
				c.withdrawWaitVotes(p, free, 0)
				soon, pending := asks.splitSoon(p.holder.Ref(), p.waitPending)
				p.waitPending = pending
				err = &waitSplit{soon: soon}
			}
			return nil, err
		}
	}
	return c.waitVotes(ctx, ttl, p, free)
}

// waitAsks picks the epoch each member's Wait asks a vote at, from what
// the members reported so far. It is shared by the long polls of one
// waitTurn.
type waitAsks struct {
	f     int
	floor uint64 // the planner's floor when the wait began
	era   protocol.Era

	mu sync.Mutex
	// known is, per member, the highest epoch it reported it cannot vote
	// at: its last epoch, or one below the epoch of the vote it gave us
	// (it gives the same vote again there).
	known map[int]uint64
	// held is, per member whose last answer was not free, whom that
	// answer says the resource is held for, and heldAt when it came (by
	// now, time.Now if nil).
	held   map[int]protocol.WaitReply
	heldAt map[int]time.Time
	now    func() time.Time
}

// report records a member's answer.
func (a *waitAsks) report(member int, wr protocol.WaitReply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known[member] = knownEpoch(wr)
	if wr.Free {
		delete(a.held, member)
		return
	}
	if a.held == nil {
		a.held, a.heldAt = map[int]protocol.WaitReply{}, map[int]time.Time{}
	}
	a.held[member], a.heldAt[member] = wr, a.clock()
}

func (a *waitAsks) clock() time.Time {
	if a.now == nil {
		return time.Now()
	}
	return a.now()
}

// lagging says how much longer a wait that holds votes (free) gives the
// members that have not said free, and whether it should (a split
// otherwise). They only lag when each one's last answer shows a lease at
// an epoch below the lowest of our votes, committed or still a vote (the
// lease starts at the vote, and a member may answer our registration
// before the holder's Commit reaches it): the voters moved past that
// lease, so its Release has yet to reach the member (a busy machine
// spreads one request's arrival at the members over more than
// waitVoteGrace). If, counting those, t members would say free, the wait
// gives them until the leases they showed would have run out by
// themselves, and no later than until. A member that holds the resource
// for anyone else (a turn, a vote, a lease at or above our votes) makes
// the members disagree; so do members that failed (gone).
func (a *waitAsks) lagging(free map[int]protocol.WaitReply, t int, gone map[int]bool, until time.Time) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	low := uint64(math.MaxUint64)
	for _, wr := range free {
		if wr.Vote != nil {
			low = min(low, wr.Vote.Epoch)
		}
	}
	now := a.clock()
	lag, end := 0, now
	for m, wr := range a.held {
		if _, ok := free[m]; ok || gone[m] {
			continue
		}
		if wr.LeaseEpoch == 0 || wr.LeaseEpoch >= low {
			return 0, false
		}
		lag++
		if e := a.heldAt[m].Add(wr.Left); e.After(end) {
			end = e
		}
	}
	if until.Before(end) {
		end = until
	}
	if len(free)+lag < t || !end.After(now) {
		return 0, false
	}
	return end.Sub(now), true
}

// splitSoon says, after a split wait, whether to ask again soon (see
// waitSplit): when at least f+1 members' last answers (so at least one
// honest member's) hold the resource for other identities (their turn, a
// lease, or a vote not yet committed), none for a sibling session of our
// identity (self), and no uncommitted vote among them was met by the last
// split wait too (prev). Otherwise the split pause bounds the rounds:
// sibling sessions of one key split again and again as the members learn
// of them, and asking again soon against a stalled contender's votes would
// take and withdraw our votes at one epoch after another until those time
// out. It returns the uncommitted votes met now, for the next split.
func (a *waitAsks) splitSoon(self protocol.HolderRef, prev map[contender]bool) (bool, map[contender]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	others, siblings, stuck := 0, 0, false
	pending := map[contender]bool{}
	for _, wr := range a.held {
		switch {
		case wr.Holder.IsZero() || wr.Holder == self:
			continue
		case wr.Holder.ID == self.ID:
			siblings++
			continue
		}
		others++
		if wr.Pending && wr.LeaseEpoch > 0 {
			k := contender{wr.Holder, wr.LeaseEpoch}
			pending[k] = true
			stuck = stuck || prev[k]
		}
	}
	return others > a.f && siblings == 0 && !stuck, pending
}

// knownEpoch is the highest epoch a member's answer says it cannot vote
// at for us: its last epoch, or one below its vote for us.
func knownEpoch(wr protocol.WaitReply) uint64 {
	if v := wr.Vote; v != nil {
		return v.Epoch - 1 // a vote's epoch is never 0 (the decoder checks)
	}
	return wr.LastEpoch
}

// ask is the epoch to ask member at (0: none). S5: one above the (f+1)-th
// highest epoch reported and at least the floor, so f liars cannot
// inflate it; but never at or below the member's own report, or the
// member would have to refuse it: an honest member is so asked at most
// one above its own last epoch, and a liar's report raises only what it
// is asked itself. An epoch of a later era is never asked.
func (a *waitAsks) ask(member int) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.floor
	if len(a.known) > a.f {
		es := make([]uint64, 0, len(a.known))
		for _, k := range a.known {
			es = append(es, k)
		}
		sort.Slice(es, func(i, j int) bool { return es[i] > es[j] })
		if es[a.f] < math.MaxUint64 {
			e = max(e, es[a.f]+1)
		}
	}
	if k, ok := a.known[member]; ok && k >= e {
		if k == math.MaxUint64 {
			return 0
		}
		e = k + 1
	}
	if a.era.Beyond(e) {
		return 0
	}
	return e
}

// askedVote drops from a member's answer a vote at another epoch than
// the one asked (asked 0: none was): no honest member sends one.
func askedVote(wr protocol.WaitReply, asked uint64) protocol.WaitReply {
	if wr.Vote != nil && wr.Vote.Epoch != asked {
		log.Debugw("wait answer votes at an epoch not asked", "epoch", wr.Vote.Epoch, "asked", asked)
		wr.Vote = nil
	}
	return wr
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
// free (their answers go into free), or too few can. Each poll asks the
// member's vote at the epoch asks picks for it, with the lease's ttl.
func (c *Client) pollTurn(ctx context.Context, p *planner, req protocol.WaitRequest, ttl time.Duration, free map[int]protocol.WaitReply, asks *waitAsks) error {
	type turn struct {
		index int
		wr    protocol.WaitReply
		err   error // the member cannot say
	}
	turns := make(chan turn, len(c.members))
	polling := 0
	for _, m := range c.members {
		if _, ok := free[m.index]; ok {
			continue
		}
		polling++
		if !c.goFunc(func() {
			r := req // this member's poll: its own epoch
			for ctx.Err() == nil {
				r.Epoch, r.TTL = asks.ask(m.index), 0
				if r.Epoch > 0 {
					r.TTL = ttl
				}
				start := c.cfg.Clock.Now()
				rb, err := c.callFor(ctx, m, protocol.ProtoWait, r.Marshal(), r.MaxWait+c.cfg.RequestTimeout)
				wr, err := c.waitReply(p, rb, err)
				if err == nil {
					wr = askedVote(wr, r.Epoch)
					asks.report(m.index, wr)
				}
				if err != nil || wr.Free {
					turns <- turn{index: m.index, wr: wr, err: err}
					return
				}
				// Not yet: the member held the poll until something
				// changed, its wait ran out, or it moved past the epoch
				// we asked (we are next in line there); ask again (not
				// faster than MinBackoff: a member that does not hold the
				// poll must not make us spin).
				if c.cfg.Clock.Since(start) < c.cfg.MinBackoff && c.sleep(ctx, c.cfg.MinBackoff) != nil {
					break
				}
			}
			turns <- turn{index: m.index, err: ctx.Err()}
		}) {
			return ErrClosed
		}
	}
	failed := map[int]bool{}
	var split <-chan time.Time // set once we hold a member's vote
	var lagUntil time.Time     // how long lagging members are waited for
	for k := 0; len(free) < c.t; k++ {
		if k == polling {
			return errNoTurn
		}
		if split == nil && holdsVote(free) {
			split = c.cfg.Clock.After(waitVoteGrace)
			lagUntil = c.cfg.Clock.Now().Add(waitVoteGrace + c.cfg.RequestTimeout)
		}
		var tn turn
		select {
		case tn = <-turns:
		case <-split:
			d, ok := asks.lagging(free, c.t, failed, lagUntil)
			if !ok {
				return errWaitSplit
			}
			split = c.cfg.Clock.After(d)
			k--
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		if tn.err != nil {
			log.Debugw("wait failed", "node", tn.index, "resource", p.resource, "session", p.holder.Ref().Short(), "err", tn.err)
			if failed[tn.index] = true; len(c.members)-len(failed) < c.t {
				return errNoTurn
			}
			continue
		}
		free[tn.index] = tn.wr
	}
	return nil
}

// waitVotes ends a wait in which t members said free (free): it moves p's
// floor above the (f+1)-th highest epoch they reported (S5: at least one
// honest member is at or above it; a member that voted for us counts one
// below its vote, which it gives again), and if t of them voted at that
// epoch, makes a token of their votes, checks and commits it exactly as
// an Acquire round does (voteRound, commitChecked) and returns the Lock.
// Votes at any other epoch are withdrawn, as after a split round. Without
// a token it returns (nil, nil): the next round asks at p's floor, where
// the voters repeat their votes.
func (c *Client) waitVotes(ctx context.Context, ttl time.Duration, p *planner, free map[int]protocol.WaitReply) (*Lock, error) {
	if x := waitFloor(c.f, free); x < math.MaxUint64 {
		p.from(x + 1)
	}
	epoch := p.floor
	var at []int
	for idx, wr := range free {
		if wr.Vote != nil && wr.Vote.Epoch == epoch {
			at = append(at, idx)
		}
	}
	c.withdrawWaitVotes(p, free, epoch)
	if len(at) < c.t {
		return nil, nil
	}
	sort.Ints(at)
	stmt := c.cfg.Cluster.Statement(p.resource, epoch, p.holder)
	ch := make(chan reply, len(at))
	for _, idx := range at {
		v := free[idx].Vote
		ch <- reply{m: c.members[idx-1], b: protocol.AcquireReply{Kind: protocol.KindVote, Partial: v.Partial, IdentitySig: v.IdentitySig}.Marshal()}
	}
	received := map[int]protocol.SignedVote{}
	defer c.rememberVotes(p.resource, received)
	r := c.newVoteRound(ch, stmt, &ballot{epoch: epoch, era: c.era}, received)
	r.only(at)
	tok := r.collect(ctx, false)
	if tok == nil {
		// Fewer than t valid votes: the Acquire round at this epoch gets
		// the honest voters' votes again and asks the others.
		log.Debugw("votes in the wait answers make no token", "resource", p.resource, "session", p.holder.Ref().Short(), "epoch", epoch, "voters", at)
		return nil, nil
	}
	// If the candidate fails, the round asks the other members at this
	// epoch (voteRound.widen); like an Acquire round's fan-out, the calls
	// end with the client, and votes that come too late are withdrawn.
	rctx, cancel := context.WithCancel(c.ctx)
	widened := false
	r.ask = func(ms []member) <-chan reply {
		widened = true
		req := protocol.AcquireRequest{Cluster: c.cfg.Cluster.ID, Resource: p.resource, Epoch: epoch, Key: p.key, TTL: ttl}.Marshal()
		return c.fanOutTo(rctx, ms, protocol.ProtoAcquire, req)
	}
	tok, lock, err := c.commitChecked(ctx, r, *tok, ttl, p, time.Time{})
	if widened && tok == nil {
		c.drainLate(r.ch, len(c.members)-r.got, stmt, p.key, cancel)
	} else {
		cancel()
	}
	if tok == nil && !p.spent {
		// Nothing was committed (checkThenCommit): the session keeps its
		// place, and the voters' votes are withdrawn as after a failed
		// round.
		c.goFunc(func() { c.abandon(stmt, p.key, r.voters()) })
	}
	if tok == nil || err != nil {
		// No valid token after all, or its commit failed: the leases
		// started for it are released; the next round starts above.
		p.know(epoch)
		return nil, err
	}
	return lock, nil
}

// holdsVote reports whether a Free answer in free carries a vote.
func holdsVote(free map[int]protocol.WaitReply) bool {
	for _, wr := range free {
		if wr.Vote != nil {
			return true
		}
	}
	return false
}

// withdrawWaitVotes abandons the votes the Wait answers in free gave us at
// any epoch but keep (0: all), as after a split round.
func (c *Client) withdrawWaitVotes(p *planner, free map[int]protocol.WaitReply, keep uint64) {
	byEpoch := map[uint64][]int{}
	for idx, wr := range free {
		if wr.Vote != nil && wr.Vote.Epoch != keep {
			byEpoch[wr.Vote.Epoch] = append(byEpoch[wr.Vote.Epoch], idx)
		}
	}
	for e, voters := range byEpoch {
		c.abandon(c.cfg.Cluster.Statement(p.resource, e, p.holder), p.key, voters)
	}
}

// waitFloor is the (f+1)-th highest epoch the members' Free answers say
// they cannot vote at for us (knownEpoch). free holds at least t answers.
func waitFloor(f int, free map[int]protocol.WaitReply) uint64 {
	es := make([]uint64, 0, len(free))
	for _, wr := range free {
		es = append(es, knownEpoch(wr))
	}
	sort.Slice(es, func(i, j int) bool { return es[i] > es[j] })
	return es[min(f, len(es)-1)]
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
