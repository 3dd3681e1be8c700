package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Listing live leases (palisade locks). Each member lists its own leases,
// a page at a time in resource order (protocol.ProtoLocks). A lease is
// reported only when t = 2f+1 members report the same resource, holder,
// session hash and epoch: fewer could be f liars, or members that lag or
// were revoked by their operator. Members page independently, so a round
// keeps only what every answering member has covered: the resources up
// to the lowest Next among them.

// DefaultLocksLimit is the number of leases Locks returns when asked for
// none; MaxLocksRounds bounds the request rounds of one Locks call.
const (
	DefaultLocksLimit = 1000
	MaxLocksRounds    = 64
)

// LeaseReport is a live lease that at least t members report alike.
type LeaseReport struct {
	Resource string
	// HolderID is the holder's client identity; Session the hash of its
	// lock session (the session ID itself is never shown).
	HolderID string
	Session  protocol.SessionHash
	Epoch    uint64
	// Left is the t-th longest time left among the reports: at least t
	// members hold the lease at least that long.
	Left time.Duration
	// Reports is how many members reported this lease.
	Reports int
}

// LocksPage is what Locks found.
type LocksPage struct {
	// Leases are the leases t members agree on, in resource order.
	Leases []LeaseReport
	// Unconfirmed counts resources that some member reported a lease on
	// but not t members alike (not in Leases): a lease revoked at some
	// nodes, lagging members, or liars.
	Unconfirmed int
	// Answered is the fewest members that answered a round; Members is N.
	Answered, Members int
	// Next, if not empty, is where the listing stopped (the limit, or
	// MaxLocksRounds rounds): call Locks again with after = Next.
	Next string
}

// Locks lists up to limit (0: DefaultLocksLimit) live leases whose
// resource sorts after after ("" for all), as at least t members report
// them. A client identity sees only the resources its patterns allow;
// the nodes filter (as for Status). Fewer than t answering members fail
// with ErrNotEnoughNodes; a member whose reply breaks the protocol's order
// counts as not answering.
func (c *Client) Locks(ctx context.Context, after string, limit int) (LocksPage, error) {
	if after != "" {
		if err := protocol.ValidateResource(after); err != nil {
			return LocksPage{}, fmt.Errorf("client: locks: %w", err)
		}
	}
	if limit <= 0 {
		limit = DefaultLocksLimit
	}
	ctx, cancel := c.linked(ctx)
	defer cancel()
	page := LocksPage{Members: len(c.members), Answered: len(c.members)}
	cursor := after
	for round := 0; ; round++ {
		if round == MaxLocksRounds {
			page.Next = cursor
			return page, nil
		}
		want := min(limit-len(page.Leases), protocol.MaxLocksPerPage)
		pages, errs := c.locksRound(ctx, cursor, want)
		page.Answered = min(page.Answered, len(pages))
		if len(pages) < c.t {
			return page, c.locksQuorumError(len(pages), errs)
		}
		hi, done := coverage(pages)
		leases, unconfirmed := agree(pages, hi, done, c.t)
		page.Unconfirmed += unconfirmed
		for _, l := range leases {
			if len(page.Leases) == limit {
				page.Next = page.Leases[len(page.Leases)-1].Resource
				return page, nil
			}
			page.Leases = append(page.Leases, l)
		}
		if done {
			return page, nil
		}
		if len(page.Leases) == limit {
			page.Next = hi
			return page, nil
		}
		cursor = hi
	}
}

// locksRound asks every member for one page after cursor; it returns the
// valid pages by member index and each other member's error.
func (c *Client) locksRound(ctx context.Context, cursor string, limit int) (map[int]protocol.LocksReply, map[int]error) {
	req := protocol.LocksRequest{Cluster: c.cfg.Cluster.ID, After: cursor, Limit: uint32(limit)}.Marshal()
	ch := c.fanOut(ctx, protocol.ProtoLocks, req)
	pages, errs := map[int]protocol.LocksReply{}, map[int]error{}
	for range c.members {
		r := <-ch
		if r.err != nil {
			errs[r.m.index] = r.err
			continue
		}
		p, err := protocol.UnmarshalLocksReply(r.b)
		if err == nil {
			err = p.Err()
		}
		if err == nil {
			err = checkPage(p, cursor)
		}
		if err != nil {
			errs[r.m.index] = err
			continue
		}
		pages[r.m.index] = p
	}
	return pages, errs
}

// errBadPage reports a member's page that lists a resource at or before
// the cursor, or makes no progress.
var errBadPage = errors.New("client: locks: member's page is out of range")

// checkPage checks what the decoder cannot: the page lies after cursor
// and moves on.
func checkPage(p protocol.LocksReply, cursor string) error {
	if len(p.Leases) > 0 && p.Leases[0].Resource <= cursor {
		return fmt.Errorf("%w: %q is not after %q", errBadPage, p.Leases[0].Resource, cursor)
	}
	if p.Next != "" && p.Next <= cursor {
		return fmt.Errorf("%w: next %q is not after %q", errBadPage, p.Next, cursor)
	}
	return nil
}

// coverage is how far every page reaches: the lowest Next among them,
// or done when every member looked at every resource.
func coverage(pages map[int]protocol.LocksReply) (hi string, done bool) {
	done = true
	for _, p := range pages {
		if p.Next == "" {
			continue
		}
		if done || p.Next < hi {
			hi = p.Next
		}
		done = false
	}
	return hi, done
}

// leaseKey is what members must agree on.
type leaseKey struct {
	resource, holder string
	session          protocol.SessionHash
	epoch            uint64
}

// agree returns the leases up to hi (all if done) that at least t pages
// report alike, in resource order, and the number of resources reported
// but not agreed on.
func agree(pages map[int]protocol.LocksReply, hi string, done bool, t int) ([]LeaseReport, int) {
	lefts := map[leaseKey][]time.Duration{}
	resources := map[string]bool{}
	for _, p := range pages {
		for _, l := range p.Leases {
			if !done && l.Resource > hi {
				break // sorted: the rest lie beyond what every member covered
			}
			k := leaseKey{l.Resource, l.HolderID, l.Session, l.Epoch}
			lefts[k] = append(lefts[k], l.Left)
			resources[l.Resource] = false
		}
	}
	var out []LeaseReport
	for k, ls := range lefts {
		if len(ls) < t {
			continue
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i] > ls[j] })
		out = append(out, LeaseReport{Resource: k.resource, HolderID: k.holder, Session: k.session, Epoch: k.epoch, Left: ls[t-1], Reports: len(ls)})
		resources[k.resource] = true
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	unconfirmed := 0
	for _, ok := range resources {
		if !ok {
			unconfirmed++
		}
	}
	return out, unconfirmed
}

// locksQuorumError is the QuorumError of a Locks round that got got valid
// pages; errs are the other members' errors.
func (c *Client) locksQuorumError(got int, errs map[int]error) error {
	qe := &QuorumError{Op: "locks", Need: c.t, Got: got}
	for _, m := range c.members {
		if err, ok := errs[m.index]; ok {
			qe.Nodes = append(qe.Nodes, &NodeError{Index: m.index, Peer: m.id.String(), Err: err})
		}
	}
	return qe
}
