package testnet

// Hostile clients in the scenario generator (issue 20): clients that lie
// about their place in a queue, grind sessions, flood queues, pin a free
// resource, or share an honest client's key and forge the ends of its
// lease. The plan draws them last (liarPlan, scenario_plan.go); each runs
// here, through its identity's own libp2p host with raw protocol
// requests, in loops bounded by a count and by the run's context (which
// ends when the honest clients are done). What they do is deterministic
// from the seed up to timing: keys and choices come from the liar's own
// seeded source. What they get is reported to the oracle: grants of
// liars (never counted as honest grants by the fairness check), and every
// answer to a forged request (scenario_fairness.go: no honest member may
// accept one).

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	mrand "math/rand"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// liarMode is what a hostile client does.
type liarMode int

const (
	// liarJump queues a fresh session at each handoff and claims an
	// earlier place: forged signatures, too few places (f), or the real
	// places of another session of its own (replayed).
	liarJump liarMode = iota
	// liarGrind acquires legitimately and, while it holds, starts waiting
	// with many sessions ground for the best order before it releases.
	liarGrind
	// liarFlood opens up to 64 waiting sessions on one resource.
	liarFlood
	// liarPin waits for its turn and never takes it, or takes the votes
	// and never commits (and sometimes abandons them, or re-sends the
	// same Acquire every quarter vote timeout to hold them), again and
	// again.
	liarPin
	// liarBorrow shares an honest client's key (a sibling process): it
	// reads Status and sends Release with a garbage-signature token,
	// Renew and Abandon with its own session key for the honest client's
	// live epoch, and Release with the real token without the key.
	liarBorrow
)

var liarModeNames = [...]string{"jump", "grind", "flood", "pin", "borrow"}

func (m liarMode) String() string { return liarModeNames[m] }

// liarPlan is one hostile client of a scenario.
type liarPlan struct {
	mode liarMode
	// key is the client key it sends with: its own (after the honest
	// clients' and the era colluder's), or, for liarBorrow, that of the
	// honest client victim.
	key      int
	victim   int
	resource int
	seed     int64
}

func (l liarPlan) String() string {
	if l.mode == liarBorrow {
		return fmt.Sprintf("%s(key%d of client%d, %s)", l.mode, l.key, l.victim, resourceName(l.resource))
	}
	return fmt.Sprintf("%s(key%d, %s)", l.mode, l.key, resourceName(l.resource))
}

// Bounds of the liars' loops, besides the run's context.
const (
	liarRounds     = 40                      // attack rounds per liar
	liarPoll       = 1500 * time.Millisecond // how long one session waits for its turn
	liarSessions   = 64                      // sessions a flooder opens
	liarGrindTries = 300                     // keys ground per session
	liarResends    = 16                      // re-sends of one Acquire by a pinner
)

// liarHost is a libp2p host with client key ci that dials only the
// members of nw: a client process that speaks the protocol by hand.
func liarHost(nw *Network, ci int) (host.Host, error) {
	var ids []peer.ID
	for _, m := range nw.Members {
		ids = append(ids, m.PeerID)
	}
	h, err := transport.NewHost(nw.Keys.Clients[ci], nil, transport.NewGater(ids...))
	if err != nil {
		return nil, err
	}
	for _, m := range nw.Members {
		if err := transport.AddPeer(h, m.PeerID, m.Dir.Listen); err != nil {
			_ = h.Close()
			return nil, err
		}
	}
	return h, nil
}

// liarPeer sends raw protocol requests as one client identity.
type liarPeer struct {
	nw      *Network
	h       host.Host
	id      peer.ID
	timeout time.Duration // per request
	mu      sync.Mutex    // guards rnd
	rnd     *mrand.Rand
}

func newLiarPeer(nw *Network, ci int, seed int64, timeout time.Duration) (*liarPeer, error) {
	h, err := liarHost(nw, ci)
	if err != nil {
		return nil, err
	}
	return &liarPeer{nw: nw, h: h, id: h.ID(), timeout: timeout, rnd: mrand.New(mrand.NewSource(seed))}, nil
}

func (l *liarPeer) close() error { return l.h.Close() }

// key draws a session key from the liar's seeded source.
func (l *liarPeer) key() protocol.SessionKey {
	var k protocol.SessionKey
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.rnd.Read(k[:])
	return k
}

func (l *liarPeer) read(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.rnd.Read(b)
}

func (l *liarPeer) intn(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rnd.Intn(n)
}

func (l *liarPeer) holder(k protocol.SessionKey) protocol.Holder {
	return protocol.Holder{ID: l.id.String(), Session: k.Session()}
}

// call sends one request to member i, within timeout (plus extra, for a
// long poll the member may hold).
func (l *liarPeer) call(ctx context.Context, i int, proto string, req []byte, extra time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout+extra)
	defer cancel()
	return transport.Call(ctx, l.h, l.nw.Member(i).PeerID, proto, req, protocol.MaxFrameSize)
}

// wait sends one Wait to member i.
func (l *liarPeer) wait(ctx context.Context, i int, res string, k protocol.SessionKey, claim []protocol.SignedPlace, maxWait time.Duration) (protocol.WaitReply, error) {
	req := protocol.WaitRequest{Cluster: l.nw.Keys.Cluster.ID, Resource: res, Key: k, MaxWait: maxWait, Claim: claim}
	b, err := l.call(ctx, i, protocol.ProtoWait, req.Marshal(), maxWait)
	if err != nil {
		return protocol.WaitReply{}, err
	}
	return protocol.UnmarshalWaitReply(b)
}

// register queues session k at every member that answers (a Wait answered
// at once) and returns their replies by member index.
func (l *liarPeer) register(ctx context.Context, res string, k protocol.SessionKey) map[int]protocol.WaitReply {
	var mu sync.Mutex
	out := map[int]protocol.WaitReply{}
	var wg sync.WaitGroup
	for _, m := range l.nw.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := l.wait(ctx, m.Index, res, k, nil, 0); err == nil && r.Code == protocol.CodeOK {
				mu.Lock()
				out[m.Index] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// pollUntilFree long-polls every member with session k (showing claim)
// until t members said free in one sweep, or for at most d. It returns
// whether they did and the highest epoch they reported.
func (l *liarPeer) pollUntilFree(ctx context.Context, res string, k protocol.SessionKey, claim []protocol.SignedPlace, d time.Duration) (bool, uint64) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := l.nw.Keys.Cluster.File.T
	for ctx.Err() == nil {
		var (
			mu    sync.Mutex
			free  int
			epoch uint64
			wg    sync.WaitGroup
		)
		for _, m := range l.nw.Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := l.wait(ctx, m.Index, res, k, claim, 300*time.Millisecond)
				if err == nil && r.Free {
					mu.Lock()
					free++
					epoch = max(epoch, r.LastEpoch)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if free >= t {
			return true, epoch
		}
		if sleepCtx(ctx, 5*time.Millisecond) != nil {
			break
		}
	}
	return false, 0
}

// acks sends req to every member and returns the decoded acks by member
// index (members that did not answer are missing).
func (l *liarPeer) acks(ctx context.Context, proto string, req []byte) map[int]protocol.Ack {
	var mu sync.Mutex
	out := map[int]protocol.Ack{}
	var wg sync.WaitGroup
	for _, m := range l.nw.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := l.call(ctx, m.Index, proto, req, 0)
			if err != nil {
				return
			}
			if a, err := protocol.UnmarshalAck(b); err == nil {
				mu.Lock()
				out[m.Index] = a
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// acquireRaw asks every member for a vote for session k at epoch and
// returns how many voted.
func (l *liarPeer) acquireRaw(ctx context.Context, res string, k protocol.SessionKey, epoch uint64) int {
	req := protocol.AcquireRequest{Cluster: l.nw.Keys.Cluster.ID, Resource: res, Epoch: epoch, Key: k, TTL: time.Second}
	var mu sync.Mutex
	votes := 0
	var wg sync.WaitGroup
	for _, m := range l.nw.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := l.call(ctx, m.Index, protocol.ProtoAcquire, req.Marshal(), 0)
			if err != nil {
				return
			}
			if r, err := protocol.UnmarshalAcquireReply(b); err == nil && r.Kind == protocol.KindVote {
				mu.Lock()
				votes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return votes
}

func (l *liarPeer) status(ctx context.Context, i int, res string) (protocol.StatusReply, error) {
	b, err := l.call(ctx, i, protocol.ProtoStatus, protocol.StatusRequest{Resource: res}.Marshal(), 0)
	if err != nil {
		return protocol.StatusReply{}, err
	}
	return protocol.UnmarshalStatusReply(b)
}

// queueTie is the order node gives the sessions of one identity in one
// cohort (node's tie: SHA-256 over a domain tag and the session): what a
// grinding liar optimises, although it only reorders its own sessions.
func queueTie(s protocol.SessionID) uint64 {
	d := sha256.New()
	d.Write([]byte("palisade/queue-tie/v1\x00"))
	d.Write(s[:])
	return binary.BigEndian.Uint64(d.Sum(nil))
}

// liarRun is one hostile client of a running scenario.
type liarRun struct {
	j    int
	plan liarPlan
	p    *liarPeer
	nw   *Network
	o    *oracle
	res  string
	tm   scenarioTiming
	logf func(string, ...any)
}

// startLiars starts the plan's hostile clients; they stop when ctx ends
// (the honest clients are done) or their rounds are spent. The returned
// function waits for them and closes their hosts.
func startLiars(ctx context.Context, nw *Network, p scenarioPlan, o *oracle, tm scenarioTiming, logf func(string, ...any)) (wait func()) {
	var wg sync.WaitGroup
	if len(p.liars) > 0 {
		logf("liars: %v", p.liars)
	}
	for j, lp := range p.liars {
		lr := &liarRun{j: j, plan: lp, nw: nw, o: o, res: resourceName(lp.resource), tm: tm, logf: logf}
		peer, err := newLiarPeer(nw, lp.key, lp.seed, tm.request)
		if err != nil {
			logf("liar%d %v: no host: %v", j, lp, err)
			continue
		}
		lr.p = peer
		if lp.mode != liarBorrow { // a borrower's key is an honest client's
			o.liarIdentity(peer.id.String())
		}
		o.liarActive(j, lp, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { o.liarActive(j, lp, false) }()
			defer lr.p.close()
			lr.run(ctx)
		}()
	}
	return wg.Wait
}

func (lr *liarRun) run(ctx context.Context) {
	switch lr.plan.mode {
	case liarJump:
		lr.jump(ctx)
	case liarGrind:
		lr.grind(ctx)
	case liarFlood:
		lr.flood(ctx)
	case liarPin:
		lr.pin(ctx)
	case liarBorrow:
		lr.borrow(ctx)
	}
}

// jump: a fresh session per round, claiming one cohort earlier than the
// members gave it, by one of three lies in turn.
func (lr *liarRun) jump(ctx context.Context) {
	l, f := lr.p, lr.nw.Keys.Cluster.F
	var other map[int]protocol.WaitReply // places of another session of the liar's
	for round := 0; round < liarRounds && ctx.Err() == nil; round++ {
		if other == nil || round%4 == 0 {
			other = l.register(ctx, lr.res, l.key()) // left idle: its places are replayed
		}
		k := l.key()
		regs := l.register(ctx, lr.res, k)
		var claim []protocol.SignedPlace
		lie := []string{"forged", "absent", "replayed"}[(round+l.intn(3))%3]
		switch lie {
		case "forged", "absent":
			n := f + 1
			if lie == "absent" {
				n = f
			}
			for m, r := range regs {
				if len(claim) == n || r.Cohort < 2 {
					continue
				}
				sig := make([]byte, protocol.MaxPlaceSigLen)
				l.read(sig)
				claim = append(claim, protocol.SignedPlace{Place: protocol.Place{Cluster: lr.nw.Keys.Cluster.ID, Resource: lr.res, Holder: l.holder(k).Ref(), Cohort: r.Cohort - 1, Member: m}, Sig: sig})
			}
		case "replayed":
			for _, r := range other {
				if r.Place != nil && len(claim) < f+1 {
					claim = append(claim, *r.Place)
				}
			}
		}
		served, _ := l.pollUntilFree(ctx, lr.res, k, claim, liarPoll)
		lr.o.liarNote(lr.j, fmt.Sprintf("jump-%s served %v", lie, served))
	}
}

// grind: acquire with its own identity; while holding, start waiting
// with sessions ground for the best order, then release.
func (lr *liarRun) grind(ctx context.Context) {
	l := lr.p
	c, err := lr.nw.NewClient(lr.plan.key, client.Config{RequestTimeout: lr.tm.request, DefaultTTL: scenarioDefaultTTL,
		MinBackoff: 2 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Seed: uint64(lr.plan.seed)})
	if err != nil {
		lr.logf("liar%d: no client: %v", lr.j, err)
		return
	}
	defer c.Close()
	for round := 0; round < liarRounds/8 && ctx.Err() == nil; round++ {
		actx, cancel := context.WithTimeout(ctx, lr.tm.wait)
		lk, err := c.Acquire(actx, lr.res, client.WithTTL(500*time.Millisecond))
		cancel()
		if err != nil {
			lr.o.liarNote(lr.j, "grind acquire failed")
			continue
		}
		if lr.o.badLock(fmt.Sprintf("liar%d", lr.j), lk) {
			continue
		}
		lr.o.liarGranted(lr.j, lk.Token(), time.Now())
		// Sessions ground for the lowest tie (first among the liar's own)
		// and for the session hash the queue once ranked by.
		sctx, scancel := context.WithTimeout(ctx, liarPoll)
		var wg sync.WaitGroup
		for s := 0; s < 4+l.intn(5); s++ {
			best := l.key()
			for range liarGrindTries {
				if k := l.key(); queueTie(k.Session()) < queueTie(best.Session()) {
					best = k
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				served, _ := l.pollUntilFree(sctx, lr.res, best, nil, liarPoll)
				lr.o.liarNote(lr.j, fmt.Sprintf("grind-session served %v", served))
			}()
		}
		_ = sleepCtx(ctx, 30*time.Millisecond) // the ground sessions queue behind its lease
		rctx, rcancel := context.WithTimeout(ctx, 2*lr.tm.request)
		lr.o.liarReleased(lr.j, lk.Token(), lk.Release(rctx))
		rcancel()
		wg.Wait()
		scancel()
	}
}

// flood: open up to 64 sessions on the resource (each member keeps
// WaitersPerClientPerResource of them), and keep a few polling.
func (lr *liarRun) flood(ctx context.Context) {
	l := lr.p
	for round := 0; round < 3 && ctx.Err() == nil; round++ {
		var keys []protocol.SessionKey
		for s := 0; s < liarSessions && ctx.Err() == nil; s++ {
			k := l.key()
			keys = append(keys, k)
			l.register(ctx, lr.res, k)
		}
		var wg sync.WaitGroup
		for _, k := range keys[:min(4, len(keys))] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				served, _ := l.pollUntilFree(ctx, lr.res, k, nil, liarPoll)
				lr.o.liarNote(lr.j, fmt.Sprintf("flood-session served %v", served))
			}()
		}
		wg.Wait()
		lr.o.liarNote(lr.j, fmt.Sprintf("flood opened %d", len(keys)))
	}
}

// pin: wait for the turn, then leave it unused, or take the votes and
// never commit, or take them and abandon them.
func (lr *liarRun) pin(ctx context.Context) {
	l := lr.p
	for round := 0; round < liarRounds/4 && ctx.Err() == nil; round++ {
		k := l.key()
		served, epoch := l.pollUntilFree(ctx, lr.res, k, nil, liarPoll)
		if !served {
			lr.o.liarNote(lr.j, "pin not served")
			continue
		}
		switch how := l.intn(4); how {
		case 0:
			lr.o.liarNote(lr.j, "pin turn left unused")
		default:
			votes := l.acquireRaw(ctx, lr.res, k, epoch+1)
			what := "never committed"
			switch how {
			case 2:
				l.acks(ctx, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lr.nw.Keys.Cluster.ID, Resource: lr.res, Epoch: epoch + 1, Key: k}.Marshal())
				what = "abandoned"
			case 3:
				// The same Acquire again and again: each re-send the
				// members answer with the vote starts its lease again,
				// until the vote is a vote timeout old.
				for range liarResends {
					if sleepCtx(ctx, scenarioVoteTimeout/4) != nil {
						break
					}
					l.acquireRaw(ctx, lr.res, k, epoch+1)
				}
				what = "re-sent, never committed"
			}
			lr.o.liarNote(lr.j, fmt.Sprintf("pin votes %s (got votes %v)", what, votes > 0))
		}
	}
}

// borrow: the honest client's sibling process. It reads Status for a live
// lease of its identity and sends, for that epoch, a Release with a
// garbage-signature token (without a key and with its own), a Renew and
// an Abandon with its own session key, and a Release with the real token
// (read off Status) without the key. The oracle judges every answer.
func (lr *liarRun) borrow(ctx context.Context) {
	l := lr.p
	cluster := lr.nw.Keys.Cluster.ID
	attacked := map[uint64]int{}
	for round := 0; round < 10*liarRounds && ctx.Err() == nil; round++ {
		if sleepCtx(ctx, time.Duration(5+l.intn(20))*time.Millisecond) != nil {
			return
		}
		st, err := l.status(ctx, 1+l.intn(len(lr.nw.Members)), lr.res)
		if err != nil || st.Holder.ID != l.id.String() || st.LeaseEpoch == 0 || attacked[st.LeaseEpoch] >= 2 {
			continue
		}
		epoch := st.LeaseEpoch
		attacked[epoch]++
		mine := l.key()
		var real *protocol.Token
		if st.Certified != nil && st.Certified.Epoch == epoch && st.Certified.Holder.ID == l.id.String() {
			real = st.Certified
		}
		if real != nil {
			garbage := *real
			garbage.Signature[l.intn(len(garbage.Signature))] ^= byte(1 + l.intn(255))
			lr.forged(ctx, epoch, "Release with a garbage-signature token", protocol.ProtoRelease, protocol.ReleaseRequest{Token: garbage}.Marshal())
			lr.forged(ctx, epoch, "Release with a garbage-signature token and another session's key", protocol.ProtoRelease, protocol.ReleaseRequest{Token: garbage, Key: mine}.Marshal())
		}
		lr.forged(ctx, epoch, "Renew with another session's key", protocol.ProtoRenew, protocol.RenewRequest{Cluster: cluster, Resource: lr.res, Epoch: epoch, Key: mine, TTL: protocol.MaxTTL}.Marshal())
		lr.forged(ctx, epoch, "Abandon with another session's key", protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: cluster, Resource: lr.res, Epoch: epoch, Key: mine}.Marshal())
		if real != nil {
			// The real token without the key: a library Lock's lease must
			// survive it; an OK is also the answer for a lease that was
			// released already, so the honest client's side judges this
			// one (scenario_fairness.go).
			acks := l.acks(ctx, protocol.ProtoRelease, protocol.ReleaseRequest{Token: *real}.Marshal())
			lr.o.liarNote(lr.j, fmt.Sprintf("borrow token-only release: %d replies", len(acks)))
		}
	}
}

// forged sends a forged request to every member and hands the answers to
// the oracle.
func (lr *liarRun) forged(ctx context.Context, epoch uint64, what, proto string, req []byte) {
	acks := lr.p.acks(ctx, proto, req)
	lr.o.forgeAnswered(lr.j, lr.res, epoch, what, acks)
}
