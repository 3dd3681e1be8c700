package testnet

// The fairness oracle (issue 20) and its checks on hostile clients
// (scenario_liars.go). Fairness is liveness only (DESIGN "Fairness"): the
// vote rules never depend on it, but it is checked like safety, by an
// oracle, with clients that lie. Violations are prefixed "fairness:" (a
// class of its own: not safety, and not the liveness bound either) and
// "forge:" (a liar's forged request accepted, or an honest lock ended
// under a liar: safety of the session). Every verdict is final: nothing
// is retried, so what the oracle cannot attribute to the queue it must
// leave out rather than hope a second run goes better.
//
// Fairness, exactly. A wait is one honest Acquire call, from the call
// (start) to its return with a lock (end, the grant); "honest" grants are
// those of the scenario's clients, never a liar's. For a wait W on
// resource R (of one cluster file: after a resharing the two groups keep
// separate queues):
//
//   - served(W) is the number of honest grants on R to other Acquire
//     calls that returned between W's start and W's end;
//   - ahead(W) is the number of other honest Acquire calls on R that
//     started before cutoff(W) and had not returned by W's start (still
//     waiting then, or started later), where cutoff(W) is the earlier of
//     W's end and the time of the (1+s)-th grant on R (any grant, a
//     liar's included: each commit starts a lease generation) after W's
//     start. The queue orders waiters by the lease generation (cohort)
//     they first waited behind, and by a per-slot draw over the identities
//     within one.
//     W joins the queue with its first Wait (registered: the first
//     member to get one, see watchRegistrations), after a first round
//     that met the resource held; that round may span handoffs (members
//     slowed or lying), and a client that asked later but whose round was
//     quicker may be served in them. Members may place a Wait that
//     arrives around a handoff one generation apart (a claim then moves
//     it up at most one): so W's cohort is the generation at its
//     registration or the next one, and every waiter that started before
//     the second grant after W's registration (its start if it never
//     waited) may share it (s = 1). An identity holding the live lease waits behind
//     it (node's cohortFor, holderLeased): when W's key is shared with
//     another honest client, one more generation (s = 2).
//   - The bound (the issue's): W is served within ahead(W)+1 grants,
//     counting its own: served(W) <= ahead(W).
//   - A shared key: the queue is fair between identities (its turns are
//     an identity's, and processes sharing a key are one client to it),
//     and which session of one identity goes first is a hash of the
//     sessions. So for W's key shared with another honest client, grants
//     to W's own identity (its siblings', or a liar's that borrowed the
//     key) are not counted in served(W), W's siblings are not counted in
//     ahead(W), and since each such grant puts W behind that lease, the
//     (1+s) grants of the cutoff count from the last of them.
//
// Only windows the queue controls are judged. Excluded are waits that
// failed (timed out), the liveness retry loop's Acquire calls, and windows
// [start, end] that overlap
//
//   - a crash, restart, restore from backup, cut-off or reconnect, from
//     the step to fairSettle after it (queues live in memory: a restarted
//     node forgets them, a cut-off node misses registrations and commits;
//     re-registering takes a long poll);
//   - a resharing, from its start to the end of the run (the old group
//     keeps running, with relays, and clients move between groups);
//   - a lease on R that may have ended by its TTL rather than a release:
//     an honest lock lost before its Release or whose Release 2f+1 members
//     did not acknowledge, an Acquire that failed (it may have left votes
//     or a lease behind), a liar's failed Release; from its grant (or the
//     failure) to one TTL after.
//
// Byzantine nodes (up to f) are not excluded, because they cannot break
// the bound: a client acquires only after t members said free for its
// session (or voted), and at least t-f = f+1 of them are honest, each of
// which answers free (and votes) only for the first waiter of its own
// queue; a Byzantine member can sign a false place, but a claim needs f+1
// places and moves a waiter at most one generation up, to the cohort the
// (f+1)-th lowest place (an honest member's) gives, which the one
// generation of slack above covers. What they can do is delay everyone
// alike (Silent, Slow), which the bound does not measure.
//
// And a wait whose turn came at some honest member, which told it so, but
// was not taken within the turn: its session lapsed there (a slow
// machine, a split round, votes never committed) and lost its place, by
// the queue's rules, not by unfairness. A turn the member never told the
// waiter of (Lapse.Told false: a member hiding turns) excuses nothing. The oracle reads every honest
// node's record of recent lapses (Node.RecentLapses) while the run goes
// (watchLapses) and leaves out a granted wait whose session (the granted
// token's holder session: the last of the Acquire call's) lapsed at any
// honest node. Without this the verdict would depend on the machine's
// load.
//
// Forgeries. Every answer an honest member (not Byzantine, not restored
// from a backup) gives to a borrowing liar's Release with a garbage
// signature (without a key, or with its own key), or Renew or Abandon
// with its own key for the honest client's live epoch, must be a refusal:
// CodeOK is "forge: accepted". And in runs with liars, an honest lock's
// lease must not end under it: a Lock lost because more than f honest
// members refused its renewal as not-holder, or whose Release more than f
// honest members refused as not-holder, while a liar ran and no crash, restart, restore, cut-off
// or reconnect fell between its grant and its Release (plus fairSettle),
// is "forge: ... ended under ...". (A Lock that only missed its renewal
// deadline, or whose Release began or returned past its Deadline, is not
// judged: that is timing. A member that acknowledged the Lock's last
// renewal keeps the lease past the Deadline, so its not-holder refusal of
// a Release that returned before the Deadline is no timing.)

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// fairSettle is how long after a fault step the queues are taken to be
// disturbed: a restarted node is up again and the waiters' next long polls
// (at most a request timeout apart) have registered them anew.
const fairSettle = 500 * time.Millisecond

// fairWait is one honest Acquire call.
type fairWait struct {
	client, key int
	res         string
	group       int
	retry       bool // the liveness retry loop's
	ttl         time.Duration
	start, end  time.Time // end: when it returned (zero: never)
	granted     bool
	epoch       uint64
	session     protocol.SessionID // the granted token's holder session
	id          string             // and its identity
	// lapsed names an honest node at which the wait's session let its
	// reservation run out ("" if none did).
	lapsed string
	// registered is when a member first got the session's Wait (zero if
	// it never waited: its rounds won).
	registered time.Time
	// ranOut: the lease may have ended by its TTL (lost before Release,
	// or the Release not acknowledged by 2f+1 members).
	ranOut   bool
	released time.Time
	// endedUnder describes a lease ended by more than f not-holder
	// refusals ("" if not).
	endedUnder string
}

// fairGrant is a liar's grant.
type fairGrant struct {
	res string
	at  time.Time
	who string
	id  string // the identity it holds the lease as (an honest one's, if it borrowed a key)
}

// fairSpan is a time span the fairness check leaves out.
type fairSpan struct {
	from, to time.Time
	why      string
}

func (s fairSpan) overlaps(from, to time.Time) bool { return s.from.Before(to) && from.Before(s.to) }

// fairLog is what the oracle keeps for the fairness and forgery checks
// (under oracle.mu).
type fairLog struct {
	waits      []fairWait
	liarGrants []fairGrant
	liarSpans  []fairSpan // leases of liars that may have run out
	active     []fairSpan // when liars ran
	notes      map[string]int
	forged     int // answers of honest members to forged requests
	// lapses are the sessions whose reservation ran out unused at an
	// honest node, by resource and session, with the first node seen.
	lapses map[fairLapse]int
	// registered is when a member first got a Wait of the session on the
	// resource: when it joined the queue (see judgeFairness).
	registered map[fairLapse]time.Time
	// liarIDs are the identities of the hostile clients that wait with
	// keys of their own; liarTurns are, per resource and such identity,
	// when each of its turns that honest members saw run out ended
	// (liveness: liarTurnsLocked).
	liarIDs   map[string]bool
	liarTurns map[string][]time.Time
}

// fairLapse is a session's lapse on a resource.
type fairLapse struct {
	res     string
	session protocol.SessionID
}

// fairLapsePoll is how often watchLapses reads the nodes' records: far
// more often than their rings (256 lapses each) can fill.
const fairLapsePoll = 100 * time.Millisecond

// watchLapses reads the recent lapses of nw's honest nodes every
// fairLapsePoll until the returned stop is called (any number of times),
// and once more then. A node's record is in memory only, so it is read
// while the node runs (a crash loses what was not read yet, but waits
// around a crash are left out anyway).
func (o *oracle) watchLapses(nw *Network) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(fairLapsePoll)
		defer t.Stop()
		for {
			o.readLapses(nw)
			select {
			case <-done:
				o.readLapses(nw)
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-stopped
	}
}

// watchRegistrations records, for every session, when a member of nw
// first got a Wait of it: when the session joined the queue. The first
// Wait of an Acquire comes after its first round, which met the resource
// held; a round slowed by delayed or lying members may span more than one
// handoff, and the waiter's place is only settled from its registration.
func (o *oracle) watchRegistrations(nw *Network) {
	nw.ObserveRequests(func(_ int, proto string, _ peer.ID, req []byte) {
		if proto != protocol.ProtoWait {
			return
		}
		r, err := protocol.UnmarshalWaitRequest(req)
		if err != nil {
			return
		}
		at := time.Now()
		k := fairLapse{r.Resource, r.Key.Session()}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.fair.registered == nil {
			o.fair.registered = map[fairLapse]time.Time{}
		}
		if _, ok := o.fair.registered[k]; !ok {
			o.fair.registered[k] = at
		}
	})
}

// readLapses merges the recent lapses of nw's honest nodes.
func (o *oracle) readLapses(nw *Network) {
	faulty := o.p.faulty()
	type got struct {
		node int
		ls   []node.Lapse
	}
	var all []got
	for _, m := range nw.Members {
		if _, bad := faulty[m.Index]; bad {
			continue
		}
		if r := nw.Node(m.Index); r != nil {
			all = append(all, got{m.Index, r.RecentLapses()})
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fair.lapses == nil {
		o.fair.lapses = map[fairLapse]int{}
	}
	for _, g := range all {
		for _, l := range g.ls {
			if o.fair.liarIDs[l.ID] {
				o.liarTurnLocked(l)
			}
			if !l.Told {
				// The node never told the waiter its turn: the waiter
				// could not have used it, so it excuses nothing.
				continue
			}
			k := fairLapse{l.Resource, l.Session}
			if _, ok := o.fair.lapses[k]; !ok {
				o.fair.lapses[k] = g.node
			}
		}
	}
}

// liarIdentity records that identity id is a hostile client's own.
func (o *oracle) liarIdentity(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fair.liarIDs == nil {
		o.fair.liarIDs = map[string]bool{}
	}
	o.fair.liarIDs[id] = true
}

// liarTurnLocked counts l, a lapse of a liar identity's turn at an honest
// member, as a turn of its own unless one of the identity's turns on the
// resource already counted ended within 3/4 of a slot of it: every
// member that reserved the resource for the liar in one slot records the
// turn's end, each when it next looks at its queue, and turns of one
// identity in two slots end at least a slot apart.
func (o *oracle) liarTurnLocked(l node.Lapse) {
	if o.fair.liarTurns == nil {
		o.fair.liarTurns = map[string][]time.Time{}
	}
	k := l.Resource + "\x00" + l.ID
	for _, at := range o.fair.liarTurns[k] {
		if d := l.At.Sub(at); d < scenarioVoteTimeout*3/4 && d > -scenarioVoteTimeout*3/4 {
			return
		}
	}
	o.fair.liarTurns[k] = append(o.fair.liarTurns[k], l.At)
}

// liarTurnsLocked is how many liar turns counted so far ended before
// until on the resources client i acquires: a turn on another resource
// holds nobody off there.
func (o *oracle) liarTurnsLocked(i int, until time.Time) int {
	mine := map[string]bool{}
	if i < len(o.p.ops) {
		for _, op := range o.p.ops[i] {
			mine[resourceName(op.resource)] = true
		}
	}
	n := 0
	for k, ats := range o.fair.liarTurns {
		res, _, _ := strings.Cut(k, "\x00")
		if !mine[res] {
			continue
		}
		for _, at := range ats {
			if at.Before(until) {
				n++
			}
		}
	}
	return n
}

// fairStart records the start of client i's Acquire call on res.
func (o *oracle) fairStart(i int, res string, group int, ttl time.Duration, retry bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := i
	if i < len(o.p.ident) {
		key = o.p.ident[i]
	}
	o.fair.waits = append(o.fair.waits, fairWait{client: i, key: key, res: res, group: group, retry: retry, ttl: ttl, start: time.Now()})
	return len(o.fair.waits) - 1
}

// fairEnd records the return of Acquire call w: a lock, or err.
func (o *oracle) fairEnd(w int, l *client.Lock, err error) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	fw := &o.fair.waits[w]
	fw.end = now
	if err == nil && l != nil {
		o.leaseAtVote(fw.client, l, now)
		tok := l.Token()
		fw.granted, fw.epoch, fw.session, fw.id = true, tok.Epoch, tok.Holder.Session, tok.Holder.ID
	}
}

// leaseAtVote checks the lease of a Lock granted at now (issue 20, point
// 6): until t members acknowledged its Commit it holds only by their
// votes, so its Deadline must be no later than the members' vote timeout,
// minus the client's tenth, after the grant: the votes were all cast
// before it. The caller holds o.mu.
func (o *oracle) leaseAtVote(i int, l *client.Lock, now time.Time) {
	d := l.Deadline() // read before Committed: the commit moves it first
	select {
	case <-l.Committed():
		return
	default:
	}
	o.atVote++
	if hold := scenarioVoteTimeout; d.After(now.Add(hold - hold/10)) {
		tok := l.Token()
		o.violateLocked("lease: client%d's lock on %q epoch %d, handed out before its commit, holds until %v after its grant: past the members' vote timeout %v (less a tenth)",
			i, tok.Resource, tok.Epoch, d.Sub(now).Round(time.Millisecond), hold)
	}
}

// release releases l, the lock of Acquire call w, and records how its
// lease ended (fairReleased). The Release is late if it began or returned
// at or after the Lock's Deadline: a process stalled by the machine's
// load (a run of seed 9327 with 3 s of scheduling lateness in 4.7 s) can
// begin a Release before the Deadline and deliver it after the members'
// leases ran out by their TTL.
func (o *oracle) release(ctx context.Context, w int, l *client.Lock) {
	rctx, cancel := context.WithTimeout(ctx, o.tm.request*2)
	defer cancel()
	lost := l.Err()
	late := !time.Now().Before(l.Deadline())
	err := l.Release(rctx)
	late = late || !time.Now().Before(l.Deadline())
	o.fairReleased(w, lost, late, err)
}

// fairReleased records how the lease of Acquire call w ended: lost is
// the Lock's Err before Release (nil: still held), late whether Release
// began or returned at or after the Lock's Deadline (the lease may have
// run out by its TTL before the Lock noticed: a stalled process), err
// what Release returned.
func (o *oracle) fairReleased(w int, lost error, late bool, err error) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	fw := &o.fair.waits[w]
	fw.released = now
	fw.ranOut = lost != nil || late || err != nil
	// Only honest members' refusals count: a Byzantine one (or one
	// restored from an old copy) refuses what it likes. With one honest
	// member that held no lease of the holder at that epoch, that made
	// "more than f" with no liar near the resource (seed 38, once in four
	// 200-seed runs: a replaying member and one delayed honest member
	// refused a Release on a resource whose only liar never releases).
	switch f, bad := o.p.f, o.p.faulty(); {
	case notHolderRefusals(lost, bad) > f:
		fw.endedUnder = fmt.Sprintf("lost: %v", lost)
	case lost == nil && !late && notHolderRefusals(err, bad) > f:
		fw.endedUnder = fmt.Sprintf("release refused: %v", err)
	}
}

// notHolderRefusals counts the members err says refused as not-holder,
// leaving out the members in skip.
func notHolderRefusals(err error, skip map[int]int) int {
	var nodes []*client.NodeError
	var qe *client.QuorumError
	var re *client.RefusedError
	switch {
	case errors.As(err, &re):
		nodes = re.Nodes
	case errors.As(err, &qe):
		nodes = qe.Nodes
	}
	n := 0
	for _, ne := range nodes {
		var pe *protocol.RefusedError
		if _, bad := skip[ne.Index]; !bad && errors.As(ne.Err, &pe) && pe.Code == protocol.CodeNotHolder {
			n++
		}
	}
	return n
}

// liarActive records that liar j started (on) or stopped.
func (o *oracle) liarActive(j int, lp liarPlan, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if on {
		for len(o.fair.active) <= j {
			o.fair.active = append(o.fair.active, fairSpan{})
		}
		o.fair.active[j] = fairSpan{from: now, to: now.Add(time.Hour), why: lp.String()}
		return
	}
	o.fair.active[j].to = now
}

// liarNote counts an outcome of a liar's attack (reported, not judged).
func (o *oracle) liarNote(j int, what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fair.notes == nil {
		o.fair.notes = map[string]int{}
	}
	o.fair.notes[what]++
}

// liarGranted records a liar's grant: it starts a lease generation (the
// fairness check's cutoff) but is never counted as served, and its token
// is checked like every other (S1, S2).
func (o *oracle) liarGranted(j int, tok protocol.Token, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fair.liarGrants = append(o.fair.liarGrants, fairGrant{res: tok.Resource, at: at, who: fmt.Sprintf("liar%d", j), id: tok.Holder.ID})
	o.tokenLocked(fmt.Sprintf("liar%d", j), tok)
}

// liarReleased records a liar's Release; one that failed leaves a lease
// that may run out by its TTL.
func (o *oracle) liarReleased(j int, tok protocol.Token, err error) {
	if err == nil {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fair.liarSpans = append(o.fair.liarSpans, fairSpan{from: now.Add(-time.Second), to: now.Add(time.Second), why: fmt.Sprintf("liar%d's lease of %q epoch %d may have run out", j, tok.Resource, tok.Epoch)})
}

// forgeAnswered judges the members' answers to liar j's forged request
// for the live epoch of res: no honest member may accept it.
func (o *oracle) forgeAnswered(j int, res string, epoch uint64, what string, acks map[int]protocol.Ack) {
	o.mu.Lock()
	defer o.mu.Unlock()
	faulty := o.p.faulty()
	for m, a := range acks {
		if _, bad := faulty[m]; bad {
			continue
		}
		o.fair.forged++
		if a.Code == protocol.CodeOK {
			o.violateLocked("forge: honest node %d accepted liar%d's %s for %q epoch %d", m, j, what, res, epoch)
		}
	}
}

// fairFaultSpans are the spans the run's faults and resharing disturb.
func (o *oracle) fairFaultSpans() []fairSpan {
	var out []fairSpan
	for _, s := range o.p.faults {
		switch s.kind {
		case faultCrash, faultRestart, faultRestore, faultCut, faultReconnect:
			at := o.start.Add(s.at)
			out = append(out, fairSpan{from: at, to: at.Add(fairSettle), why: fmt.Sprintf("%s node %d", faultNames[s.kind], s.node)})
		}
	}
	if o.p.era != nil {
		out = append(out, fairSpan{from: o.start.Add(o.p.era.at), to: o.start.Add(time.Hour), why: "resharing"})
	}
	return out
}

// checkFairness judges the fairness bound over the run's waits and, with
// liars, that no honest lock ended under one. It logs what it checked.
func (o *oracle) checkFairness() {
	o.mu.Lock()
	defer o.mu.Unlock()
	faults := o.fairFaultSpans()
	shared := map[int]bool{}
	seen := map[int]int{}
	for _, k := range o.p.ident {
		seen[k]++
		shared[k] = seen[k] > 1
	}
	for i := range o.fair.waits {
		w := &o.fair.waits[i]
		if n, ok := o.fair.lapses[fairLapse{w.res, w.session}]; ok && w.granted && w.group == 0 {
			w.lapsed = fmt.Sprintf("node %d", n)
		}
		if at, ok := o.fair.registered[fairLapse{w.res, w.session}]; ok && w.granted && w.group == 0 {
			w.registered = at
		}
	}
	v := judgeFairness(o.fair.waits, o.fair.liarGrants, append(append([]fairSpan(nil), faults...), o.fair.liarSpans...), shared)
	for _, s := range v.violations {
		if !o.judgeFairness {
			o.logf("not judged (ScenarioConfig.Fairness off): %s", s)
			continue
		}
		o.violateLocked("%s", s)
	}
	if len(o.p.liars) > 0 {
		for _, w := range o.fair.waits {
			if w.endedUnder == "" || !w.granted {
				continue
			}
			if anySpan(faults, func(s fairSpan) bool { return s.overlaps(w.end.Add(-fairSettle), w.released) }) {
				continue
			}
			if !anySpan(o.fair.active, func(s fairSpan) bool { return s.overlaps(w.start, w.released) }) {
				continue
			}
			o.violateLocked("forge: client%d's lock on %q epoch %d ended under it while liars %v ran: %s", w.client, w.res, w.epoch, o.p.liars, w.endedUnder)
		}
	}
	var notes []string
	for k, n := range o.fair.notes {
		notes = append(notes, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(notes)
	o.logf("fairness check: %d waits checked, %d excluded (%d of them lapsed), %d violations; liars %v: grants %d, forged-request answers %d; %s",
		v.checked, v.excluded, v.lapsed, len(v.violations), o.p.liars, len(o.fair.liarGrants), o.fair.forged, strings.Join(notes, " "))
}

func anySpan(xs []fairSpan, f func(fairSpan) bool) bool {
	for _, x := range xs {
		if f(x) {
			return true
		}
	}
	return false
}

// fairVerdict is what judgeFairness found.
type fairVerdict struct {
	checked, excluded int
	lapsed            int // of excluded: the session let its turn pass
	violations        []string
}

// judgeFairness applies the bound (see the top of this file) to every
// honest wait that ended in a grant: served <= ahead, unless the window
// overlaps one of spans or a lease on its resource that may have run out,
// or its session lapsed at an honest node (fairWait.lapsed).
// liarGrants start lease generations but are never counted as served;
// shared[k] says that client key k is used by more than one honest client.
func judgeFairness(waits []fairWait, liarGrants []fairGrant, spans []fairSpan, shared map[int]bool) fairVerdict {
	var v fairVerdict
	type grant struct {
		at     time.Time
		honest bool
		w      int
		id     string // the identity granted
	}
	type queueKey struct {
		res   string
		group int
	}
	grants := map[queueKey][]grant{}
	for i, w := range waits {
		if w.granted {
			k := queueKey{w.res, w.group}
			grants[k] = append(grants[k], grant{at: w.end, honest: true, w: i, id: w.id})
		}
	}
	for _, g := range liarGrants {
		k := queueKey{g.res, 0} // liars use the original cluster file
		grants[k] = append(grants[k], grant{at: g.at, w: -1, id: g.id})
	}
	for _, gs := range grants {
		sort.Slice(gs, func(a, b int) bool { return gs[a].at.Before(gs[b].at) })
	}
	for i, w := range waits {
		if !w.granted || w.retry {
			continue
		}
		k := queueKey{w.res, w.group}
		if w.lapsed != "" {
			v.excluded++
			v.lapsed++
			continue
		}
		excluded := anySpan(spans, func(s fairSpan) bool { return s.overlaps(w.start, w.end) })
		for j, x := range waits {
			if excluded {
				break
			}
			if j == i || x.res != w.res || x.group != w.group || x.end.IsZero() || !x.end.Before(w.end) {
				continue
			}
			// A lease that may have run out by its TTL: an honest one
			// lost or not released, or one an Acquire that failed may
			// have left behind.
			if (x.granted && x.ranOut) || !x.granted {
				excluded = x.end.Add(x.ttl).After(w.start)
			}
		}
		// One Lock per resource per Client: a call that found its own
		// client holding (or acquiring) the resource waited for it
		// locally, outside the queue, until that lock was released. Its
		// wait in the queue starts then.
		start := w.start
		for j, x := range waits {
			if excluded {
				break
			}
			if j == i || x.client != w.client || x.res != w.res || x.group != w.group || !x.granted || !x.end.Before(w.end) {
				continue
			}
			if x.released.IsZero() {
				// No Release on record: the lock may have been held
				// until its lease ran out.
				excluded = x.end.Add(x.ttl).After(w.start)
				continue
			}
			if x.released.After(start) {
				start = x.released
			}
		}
		if excluded {
			v.excluded++
			continue
		}
		v.checked++
		w.start = start // (w is this loop's copy)
		slack := 1
		if shared[w.key] {
			slack = 2
		}
		// A shared key: fairness is between identities. A grant to W's
		// own identity (a sibling process, or a liar that borrowed the
		// key) is not counted as served, and puts W behind that lease
		// (node's holderLeased), so the generations of slack count from
		// the last such grant; waits of W's own identity are not ahead
		// of it.
		own := func(id string) bool { return shared[w.key] && id != "" && id == w.id }
		from := w.start
		if w.registered.After(from) {
			from = w.registered
		}
		for _, g := range grants[k] {
			if g.at.After(from) && g.at.Before(w.end) && g.w != i && own(g.id) {
				from = g.at
			}
		}
		served, after := 0, 0
		cutoff := w.end
		var jumped []string
		for _, g := range grants[k] {
			if !g.at.After(w.start) {
				continue
			}
			if g.at.After(from) || g.at.Equal(from) && !own(g.id) {
				if after == slack && g.at.Before(cutoff) {
					cutoff = g.at
				}
				after++
			}
			if g.honest && g.w != i && g.at.Before(w.end) && !own(g.id) {
				served++
				jumped = append(jumped, fmt.Sprintf("client%d from %+v", waits[g.w].client, waits[g.w].start.Sub(w.start).Round(time.Millisecond)))
			}
		}
		ahead := 0
		for j, x := range waits {
			if j == i || x.res != w.res || x.group != w.group || (shared[w.key] && x.key == w.key) {
				continue
			}
			if x.start.Before(cutoff) && (x.end.IsZero() || x.end.After(w.start)) {
				ahead++
			}
		}
		if served > ahead {
			v.violations = append(v.violations, fmt.Sprintf("fairness: client%d waited %v on %q (epoch %d): %d honest grants to others before it (who, from when relative to its start: %s), only %d waiters could be ahead of it",
				w.client, w.end.Sub(w.start).Round(time.Millisecond), w.res, w.epoch, served, strings.Join(jumped, " "), ahead))
		}
	}
	return v
}
