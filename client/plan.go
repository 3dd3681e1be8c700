package client

import (
	"bytes"
	csha256 "crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// This file holds the rules of one acquisition as a pure state machine: a
// planner picks each round's epoch and proof from the statuses, takes the
// round's replies as observations (a ballot), and returns a verdict with
// the pause before the next round. It does no I/O, reads no clock, starts
// no goroutine and needs no mutex: one acquisition owns its planner. The
// driver (Client.acquire and Client.attempt) does the calls, the
// signature checks and the sleeping.

// errRetry marks a round that failed for a reason the next round (with a
// higher epoch) may fix: a stale epoch or split votes. stale says the
// refusals taught the epoch to start from: the next round need not wait.
type errRetry struct {
	err   error
	stale bool
}

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// unwrapRetry strips errRetry's mark, for the error a caller sees.
func unwrapRetry(err error) error {
	var r errRetry
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

// tryRounds bounds the rounds of one TryAcquire to what one attempt
// needs: the first round, one to start above the epoch more than f nodes
// refused as stale, one carrying proof to a node that refused the epoch as
// too far, and one after split votes with another contender or a liar's
// hint. Each round's calls are bounded by Config.RequestTimeout. A held
// lease or too few nodes end TryAcquire after the round that saw it.
// (Before TryAcquire existed, trying once allowed 9 rounds.)
const tryRounds = 4

// verdictKind is what the planner decided after a failed round.
type verdictKind uint8

const (
	verdictFail    verdictKind = iota // give up with the round's error
	verdictRetry                      // stale epoch or split: a higher epoch may work
	verdictBusy                       // a committed lease: wait for its holder
	verdictNoNodes                    // fewer than 2f+1 usable answers: wait for nodes
)

// verdict is the planner's decision after a failed round: retry after
// pause, or give up with err (the round's error). queue says to wait for
// our turn in the nodes' queues first (push handoff): the pause is then
// only what the driver sleeps if the nodes cannot answer that wait.
type verdict struct {
	kind  verdictKind
	pause time.Duration
	queue bool
	err   error
}

// retry reports whether the driver should run another round.
func (v verdict) retry() bool { return v.kind != verdictFail }

// planner is what one acquisition carries from one round to the next, and
// the rules that pick each round's epoch and the pause after it.
type planner struct {
	// resource is the resource acquired; f and t are the cluster's fault
	// bound and threshold; era is this cluster file's era.
	resource string
	f, t     int
	era      protocol.Era
	// wait is set for Acquire (retry until ctx ends) and clear for
	// TryAcquire (at most tryRounds rounds, a held lease ends it).
	wait bool
	// minBackoff and maxBackoff bound the randomised pauses; jitter draws
	// a pause in [0, d] (full jitter desynchronises contenders). It is the
	// planner's only source of randomness and must be deterministic given
	// its seed in tests.
	minBackoff, maxBackoff time.Duration
	jitter                 func(d time.Duration) time.Duration

	// holder is the acquisition's lock session: this client's identity
	// and a session ID drawn for this acquisition alone, used in every
	// round of it (so a node recognises a re-sent request) and in no
	// other acquisition (so two processes sharing one key, or two
	// acquisitions of one process, are distinct holders). A round that
	// sent a Commit and got no lock ends the session (spent): its
	// candidate's leases are released, and a member that took the
	// Commit or the Release queues that session no more, so the rounds
	// after it go on in a new one (renew).
	holder protocol.Holder
	spent  bool
	// waited is set once the session asked the members to queue it (a
	// Wait): if it ends without a lock, it leaves their queues (leave).
	waited bool
	// key is the session's key (holder.Session is key.Session()): it goes
	// in every request that acts on the session (Acquire, Wait, Commit,
	// Abandon, and the Lock's Renew and Release), never in a reply, and
	// only this process knows it. tokenRelease asks the nodes to let the
	// lease be released by token alone too (WithTokenRelease).
	key          protocol.SessionKey
	tokenRelease bool
	// rounds counts the rounds that ended; backoff is the current
	// exponential backoff.
	rounds  int
	backoff time.Duration
	// staleRun counts the rounds in a row that found their epoch taken.
	staleRun int
	// lastRound is how long the last round took.
	lastRound time.Duration
	// split says how the last round's votes split, if they did: whether
	// we are the contender that every client seeing the same replies
	// picks to go next.
	split splitRole
	// pending are the other contenders whose uncommitted votes the last
	// split round met; stuckLeft is how long until the votes of those met
	// twice in a row time out.
	pending   map[contender]bool
	stuckLeft time.Duration
	// waitPending are the uncommitted votes of other contenders that the
	// last split wait met (waitAsks.splitSoon).
	waitPending map[contender]bool
	// floor is the lowest epoch worth trying, learned from refusals. It
	// never decreases.
	floor uint64
	// hint is one above the highest epoch that at most f nodes refused
	// ours as stale with, tried once: those nodes may be honest ones that
	// other contenders moved ahead (we need them when exactly t nodes are
	// up), or liars. hinted says the current round's epoch came from a
	// hint; such a round neither raises the floor (unless more than f
	// nodes voted at its epoch, so an honest one did) nor gives a new
	// hint. So a lie costs one round, refused as too far by honest nodes,
	// and cannot pin the acquisition above every honest node's window
	// (S5).
	hint   uint64
	hinted bool
	// wantProof is set once a node refused an epoch as too far ahead: the
	// next rounds show the nodes the highest certified token and f+1
	// signed votes (S5: a lagging node catches up only from proof).
	wantProof bool
}

// begin starts a round: the last round's split no longer applies.
func (p *planner) begin() { p.split = splitNone }

// know records an epoch the resource certainly reached (this client's
// last token, or the (f+1)-th highest epoch nodes reported): rounds start
// above it. S5: such an epoch is one an honest node reached, so starting
// above it lets no liar inflate ours.
func (p *planner) know(epoch uint64) {
	if epoch > 0 && epoch < math.MaxUint64 && epoch+1 > p.floor {
		p.floor = epoch + 1
	}
}

// from raises the floor to epoch: the next round asks there, or above
// (the epoch of the votes a wait brought, see Client.waitVotes). The
// caller picked epoch as know would: above an epoch an honest node
// reached, S5.
func (p *planner) from(epoch uint64) {
	if epoch > p.floor {
		p.floor = epoch
	}
}

// learned is the highest epoch the acquisition knows the resource
// reached, 0 if none: the client's next acquisition starts above it.
func (p *planner) learned() uint64 {
	if p.floor == 0 {
		return 0
	}
	return p.floor - 1
}

// blind reports whether the round can skip the status round: the floor
// already says where to start (the client's last token, or refusals), and
// no node has asked for proof. A stale start costs no more than a status
// round would have: the refusals teach the epoch.
func (p *planner) blind() bool { return p.floor > 0 && !p.wantProof }

// needsProof reports whether the round should verify the certified tokens
// nodes report: a reported token costs a pairing check, so only if it
// would raise the epoch we pick, or if a node needs it to catch up.
func (p *planner) needsProof(sts []NodeStatus) bool {
	return p.wantProof || highestClaim(p.resource, sts) > nextEpoch(p.f, sts, nil, 0)-1
}

// pick returns the round's epoch from the statuses (none in a blind
// round) and the verified proof (nil if none), using the floor and the
// hint; the hint is used once.
func (p *planner) pick(sts []NodeStatus, proof *protocol.Token) uint64 {
	plain := p.floor
	if len(sts) > 0 {
		plain = nextEpoch(p.f, sts, proof, p.floor)
	}
	epoch := max(plain, p.hint)
	p.hinted, p.hint = epoch > plain, 0
	return epoch
}

// observe takes what the round's replies showed, whether it acquired or
// not: a too-far refusal makes every later round carry proof.
func (p *planner) observe(b *ballot) {
	if b.tooFar {
		p.wantProof = true
	}
}

// ended records that a round ended after took.
func (p *planner) ended(took time.Duration) {
	p.rounds++
	p.lastRound = took
}

// renew goes on in the session key owns: the last one is spent.
func (p *planner) renew(key protocol.SessionKey) {
	p.key, p.holder.Session, p.spent, p.waited = key, key.Session(), false, false
}

// next decides, after a round that ended with err (from the status, the
// vote or the commit step, see outcome), whether to run another round and
// after what pause.
func (p *planner) next(err error) verdict {
	v := p.decide(err)
	v.err = unwrapRetry(err)
	return v
}

// decide is next without the error.
func (p *planner) decide(err error) verdict {
	var busy *BusyError
	var stale errRetry
	if !errors.As(err, &stale) || !stale.stale {
		p.staleRun = 0
	}
	var retry errRetry
	switch {
	case errors.As(err, &busy) && p.wait:
		// Wait about as long as the holder has left, jittered.
		p.backoff = max(p.minBackoff, min(busy.Left, p.maxBackoff))
		return verdict{kind: verdictBusy, pause: p.jitter(p.backoff), queue: true}
	case errors.As(err, &retry) && retry.stale && (p.wait || p.rounds < tryRounds):
		// A stale epoch (a blind round that started below others' last
		// acquisition): the refusals raised the floor; go again at once.
		// An Acquire whose rounds keep finding the epoch taken is losing
		// races for a resource that changes hands between its rounds
		// (the lease starts at the vote, so holders cycle fast): from the
		// second stale round in a row it also joins the nodes' queues,
		// which serve waiters in one order (scenario seed 63: a client
		// found four epochs in a row taken and was passed over).
		p.staleRun++
		return verdict{kind: verdictRetry, queue: p.wait && p.staleRun >= 2}
	case errors.As(err, &retry) && (p.wait || p.rounds < tryRounds):
		// Split votes: back off exponentially in
		// units of the round time (a fixed cap shorter than a round
		// keeps contenders in lockstep), ordered by the split.
		// Acquire joins the nodes' queues instead, which order the
		// contenders alike at every node (a split needs no backoff).
		p.backoff = min(2*p.backoff, max(p.maxBackoff, 8*p.lastRound))
		return verdict{kind: verdictRetry, pause: p.splitPause(), queue: p.wait}
	case errors.Is(err, ErrNotEnoughNodes) && p.wait:
		p.backoff = min(2*p.backoff, p.maxBackoff)
		return verdict{kind: verdictNoNodes, pause: p.jitter(p.backoff)}
	default:
		return verdict{kind: verdictFail}
	}
}

// splitPause is how long to wait before the next round after a retryable
// one. After a split, every contender that saw the same replies agrees on
// one of them to go next (see tally): it retries at once, and the others
// wait two round times more, enough for it to finish; they then find its
// lease and wait for it as for any holder. Without an agreed order,
// contenders that need every honest node (exactly t of them up) split again
// and again.
func (p *planner) splitPause() time.Duration {
	switch p.split {
	case splitFirst:
		return p.jitter(p.minBackoff)
	case splitLater:
		return 2*p.lastRound + p.jitter(p.backoff)
	case splitStuck:
		return max(p.minBackoff, min(p.stuckLeft, p.maxBackoff)) + p.jitter(p.minBackoff)
	default:
		return p.jitter(p.backoff)
	}
}

// busyReply is a busy answer and the index of the node that sent it.
type busyReply struct {
	index int
	protocol.AcquireReply
}

// ballot is what one round's replies other than valid votes showed. The
// driver counts the valid votes itself (it combines them).
type ballot struct {
	// epoch is the round's epoch; era is this cluster file's era.
	epoch uint64
	era   protocol.Era
	// failed is every node that did not vote, with why.
	failed []*NodeError
	// busy are the busy answers: committed leases and other contenders'
	// uncommitted votes.
	busy []busyReply
	// stale are the last epochs of nodes that refused our epoch as stale
	// or too far.
	stale []uint64
	// hard are refusals retrying cannot fix.
	hard []*NodeError
	// tooFar is set once a node refused the epoch as too far ahead.
	tooFar bool
}

// suspects are the nodes that sent something no honest node sends
// (errBadVote): evidence for operators, reported by Lock.Suspects.
func (b *ballot) suspects() []int {
	var out []int
	for _, e := range b.failed {
		if errors.Is(e.Err, errBadVote) {
			out = append(out, e.Index)
		}
	}
	return out
}

// decided reports whether the replies so far already say why the round
// failed, whatever the rest say: more than f nodes refused for good, found
// the epoch stale, or hold a committed lease, or t name one session's
// lease or vote (votedFor; see planner.outcome).
func (b *ballot) decided(f, t int) bool {
	held := 0
	for _, r := range b.busy {
		if !r.Pending {
			held++
		}
	}
	return len(b.hard) > f || len(b.stale) > f || held > f || b.votedFor(t) != nil
}

// votedFor returns the busy replies of t members that name one other
// session at one epoch, committed or not, or nil. Its votes are at t
// members, so they combine into its token: the session holds the lock
// (the lease starts at the vote) though some members have not seen its
// Commit yet, as while that Commit is on its way. So it is Busy, as a
// committed lease at more than f members is, not a split to retry
// above: a waiter that took it for a split went on by Acquire rounds at
// a later epoch instead of taking its turn from its Wait answers
// (TestWaitGivesLaggingMembersTime). Fewer replies with uncommitted votes
// may be a split, and are treated as one. f Byzantine members that name
// a session falsely make it at most a wait for its votes to lapse.
func (b *ballot) votedFor(t int) []busyReply {
	by := map[contender][]busyReply{}
	for _, r := range b.busy {
		if r.Kind == protocol.KindBusy {
			k := contender{r.Holder, r.LeaseEpoch}
			by[k] = append(by[k], r)
			if len(by[k]) >= t {
				return by[k]
			}
		}
	}
	return nil
}

// fail records a node that gave no usable answer.
func (b *ballot) fail(m member, err error) {
	b.failed = append(b.failed, &NodeError{Index: m.index, Peer: m.id.String(), Err: err})
}

// observe records a busy or refusal reply of member m (votes are the
// driver's).
func (b *ballot) observe(m member, ar protocol.AcquireReply) {
	switch ar.Kind {
	case protocol.KindBusy:
		b.busy = append(b.busy, busyReply{index: m.index, AcquireReply: ar})
		b.fail(m, fmt.Errorf("busy: held by %s at epoch %d", ar.Holder.Short(), ar.LeaseEpoch))
		return
	case protocol.KindQueued:
		b.busy = append(b.busy, busyReply{index: m.index, AcquireReply: ar})
		b.fail(m, fmt.Errorf("queued: reserved for waiter %s", ar.Holder.Short()))
		return
	}
	if !refusalConsistent(b.era, ar, b.epoch) {
		// A stale epoch is at or below the node's last one, a too-far one
		// above it: a refusal saying otherwise teaches nothing and no
		// honest node sends it.
		b.fail(m, fmt.Errorf("%w: refusal (%s) claims last epoch %d against epoch %d", errBadVote, ar.Code, ar.LastEpoch, b.epoch))
		return
	}
	e := &NodeError{Index: m.index, Peer: m.id.String(), Err: &protocol.RefusedError{Code: ar.Code, LastEpoch: ar.LastEpoch, Message: ar.Message}}
	b.failed = append(b.failed, e)
	switch ar.Code {
	case protocol.CodeTooFar:
		b.tooFar = true
		b.stale = append(b.stale, ar.LastEpoch)
	case protocol.CodeStale:
		b.stale = append(b.stale, ar.LastEpoch)
	case protocol.CodeUnauthorised, protocol.CodeWrongCluster, protocol.CodeBadRequest, protocol.CodeOtherEra:
		b.hard = append(b.hard, e)
	}
}

// outcome explains a round that got votes from votes nodes but no token,
// and moves the plan (floor, hint, split) for the next round. The error is
// an errRetry when a higher epoch may work.
func (p *planner) outcome(b *ballot, votes int) error {
	qe := &QuorumError{Op: fmt.Sprintf("acquire %q at epoch %d", p.resource, b.epoch), Need: p.t, Got: votes, Nodes: b.failed}
	if len(b.hard) > p.f {
		return &RefusedError{Op: qe.Op, Nodes: b.hard}
	}
	if len(b.stale) > p.f {
		// S5: at least one honest node is at or above the (f+1)-th
		// highest reported epoch: start the next round above it.
		stale := append([]uint64(nil), b.stale...)
		sort.Slice(stale, func(i, j int) bool { return stale[i] > stale[j] })
		if next := stale[p.f] + 1; next > p.floor {
			p.floor = next
		}
		return errRetry{err: qe, stale: true}
	}
	var held []busyReply
	for _, r := range b.busy {
		if !r.Pending {
			held = append(held, r)
		}
	}
	if len(held) > p.f {
		return busyError(p.resource, held)
	}
	if voted := b.votedFor(p.t); voted != nil {
		return busyError(p.resource, voted)
	}
	if votes > 0 || len(b.busy) > 0 || len(b.stale) > 0 {
		// Split votes: nobody can finish this epoch; try a higher one, in
		// the order the split suggests.
		p.learnSplit(p.f, b.epoch, votes, b.stale)
		p.tally(p.resource, b.epoch, votes, b.busy)
		return errRetry{err: qe}
	}
	return qe
}

// busyError reports a committed lease, or a reservation for waiters ahead
// of us (KindQueued), that more than f nodes hold: the holder the busy
// nodes name most, with the shortest time left among them.
func busyError(resource string, held []busyReply) *BusyError {
	count := map[protocol.HolderRef]int{}
	be := &BusyError{Resource: resource}
	for _, b := range held {
		be.Nodes = append(be.Nodes, b.index)
		count[b.Holder]++
		if count[b.Holder] > count[be.Holder] {
			be.Holder, be.Epoch, be.Queued = b.Holder, b.LeaseEpoch, b.Kind == protocol.KindQueued
		}
	}
	for _, b := range held {
		if b.Holder == be.Holder && (be.Left == 0 || b.Left < be.Left) {
			be.Left = b.Left
		}
	}
	return be
}

// learnSplit sets where the next round starts after a split round at
// epoch with our votes from votes nodes and at most f stale or too-far
// refusals (their last epochs). A plain round moves the floor past epoch,
// which our own votes may have used up, and hints one above the stale
// refusals. A hinted round may have been a liar's: it moves the floor
// only if more than f nodes voted, so an honest one took the epoch, and
// hints nothing, so liars cannot keep every round hinted (S5).
func (p *planner) learnSplit(f int, epoch uint64, votes int, stale []uint64) {
	if p.hinted && votes <= f {
		return
	}
	p.floor = max(p.floor, epoch+1)
	if p.hinted {
		return
	}
	for _, e := range stale {
		if e < math.MaxUint64 {
			p.hint = max(p.hint, e+1)
		}
	}
}

// refusalConsistent reports whether an acquire refusal of our epoch agrees
// with itself and with our era: an honest node refuses as stale only an
// epoch at or below its last epoch, and as too far only one above it, and
// no node of our era has a last epoch beyond it (a liar's stale refusal
// there would make us hint an epoch every honest node refuses; S5).
func refusalConsistent(era protocol.Era, ar protocol.AcquireReply, epoch uint64) bool {
	if (ar.Code == protocol.CodeStale || ar.Code == protocol.CodeTooFar) && era.Beyond(ar.LastEpoch) {
		return false
	}
	switch ar.Code {
	case protocol.CodeStale:
		return ar.LastEpoch >= epoch
	case protocol.CodeTooFar:
		return ar.LastEpoch < epoch
	}
	return true
}

// splitRole is a contender's place in the order after a split round.
type splitRole uint8

const (
	splitNone  splitRole = iota // the round did not split
	splitFirst                  // we retry first
	splitLater                  // another contender retries first
	splitStuck                  // votes of a contender that stopped block us
)

// contender is one acquisition round: a holder (a lock session) asking at
// an epoch.
type contender struct {
	holder protocol.HolderRef
	epoch  uint64
}

// tally sets the split role from a failed round of our session
// (p.holder): our votes, and the uncommitted votes that busy nodes report
// for other contenders. The contender with the most votes goes first; ties
// go to the lowest hash of (resource, epoch, holder reference: identity
// and session hash, all a Busy reply shows of a holder), which every client
// computes alike and which changes from epoch to epoch, so no client always
// wins ties. Contenders that saw the same replies agree on the order
// without talking to each other. f Byzantine nodes inventing a contender
// can at worst make everyone wait, which is the behaviour without an order.
//
// A live contender withdraws the votes of a failed round at once (abandon),
// so votes of one contender met in two rounds in a row are stuck: a client
// that crashed or stalled mid-round. Then the role is splitStuck and we
// wait for those votes to time out rather than burn epochs against them.
func (p *planner) tally(resource string, epoch uint64, votes int, busy []busyReply) {
	self := p.holder.Ref() // replies name holders by reference only
	count := map[contender]int{}
	if votes > 0 {
		count[contender{self, epoch}] = votes
	}
	prev := p.pending
	p.pending = map[contender]bool{}
	p.stuckLeft = 0
	for _, b := range busy {
		if !b.Pending || b.Holder == self {
			continue
		}
		k := contender{b.Holder, b.LeaseEpoch}
		count[k]++
		p.pending[k] = true
		if prev[k] && (p.stuckLeft == 0 || b.Left < p.stuckLeft) {
			p.stuckLeft = b.Left
		}
	}
	switch {
	case p.stuckLeft > 0:
		p.split = splitStuck
		return
	case len(count) == 0:
		p.split = splitNone
		return
	}
	rank := func(k contender) [csha256.Size]byte {
		h := csha256.New()
		h.Write([]byte(resource))
		h.Write(binary.BigEndian.AppendUint64(nil, k.epoch))
		h.Write([]byte(k.holder.ID))
		h.Write(k.holder.Session[:])
		return [csha256.Size]byte(h.Sum(nil))
	}
	var first contender
	var firstRank [csha256.Size]byte
	for k, n := range count {
		r := rank(k)
		if n > count[first] || (n == count[first] && bytes.Compare(r[:], firstRank[:]) < 0) {
			first, firstRank = k, r
		}
	}
	p.split = splitLater
	if first.holder == self {
		p.split = splitFirst
	}
}

// highestClaim is the highest epoch of a certified token some node
// reports for resource (unverified).
func highestClaim(resource string, sts []NodeStatus) uint64 {
	var h uint64
	for _, s := range sts {
		if t := s.Certified; t != nil && t.Resource == resource && t.Epoch > h {
			h = t.Epoch
		}
	}
	return h
}

// nextEpoch picks the epoch to ask for: one above the (f+1)-th highest
// reported epoch (S5: at least one honest node is at or above it, so f
// liars cannot inflate it), above any verified token and the floor.
func nextEpoch(f int, sts []NodeStatus, proof *protocol.Token, floor uint64) uint64 {
	es := make([]uint64, len(sts))
	for i, s := range sts {
		es[i] = s.LastEpoch
	}
	sort.Slice(es, func(i, j int) bool { return es[i] > es[j] })
	base := es[min(f, len(es)-1)]
	if proof != nil && proof.Epoch > base {
		base = proof.Epoch
	}
	if floor > base+1 {
		return floor
	}
	return base + 1
}

// errLaterEra marks a status that reports an epoch at or above the next
// era's floor. No node of this cluster file's era ever votes or learns an
// epoch there: it comes from a group reshared after ours. A Byzantine node
// that relays such a (valid) token would otherwise make us ask for an
// epoch every honest node of our group refuses; if most nodes report it,
// our cluster file is out of date.
var errLaterEra = errors.New("reports an epoch of a later era: the cluster was reshared; use the new cluster.json")

// checkEra refuses a status from a later era than this client's cluster
// file (protocol.Era). S5: the client never asks for an epoch beyond its
// era.
func checkEra(era protocol.Era, st protocol.StatusReply) error {
	e := st.LastEpoch
	if st.Certified != nil {
		e = max(e, st.Certified.Epoch)
	}
	if era.Beyond(e) {
		return fmt.Errorf("%w (epoch %d)", errLaterEra, e)
	}
	return nil
}
