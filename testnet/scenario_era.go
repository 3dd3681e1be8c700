package testnet

// Resharing during a scenario (issue 10, item 2). At the planned time the
// cluster is reshared with a real DKG over loopback (Reshare): same group
// key and cluster ID, new shares, a new cluster file whose epoch_floor is
// protocol.NextEpochFloor of the old one. The old group keeps running,
// with its faults and Byzantine members; some of those are EraRelay
// behaviours that show the honest old nodes the new era's tokens and
// signed votes. Clients move to the new cluster file at their planned
// operation; the fences keep the original cluster file. The oracle then
// checks S1 across both groups (any two valid tokens for one (resource,
// epoch) with different holders, whichever group issued them), that old
// tokens lie below the new floor and new ones above it, and that no
// honest old node voted or learnt anything at or above the new floor.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"sync"
	"sync/atomic"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// scenarioRelayEvery is how often an EraRelay member sends the new era's
// tokens and votes to the honest old nodes.
const scenarioRelayEvery = 50 * time.Millisecond

// scenarioReshareTimeout bounds each DKG phase of a scenario's resharing
// (plus a second per TimeScale above 1); it is only waited out if a member
// stalls. Phases take
// well under a second here, but one wait is routine: a leaving old member
// lingers only until the new members fetched its justifications, so a
// leaving member still pulling them from it can wait out a whole phase
// (internal/dkg runner.linger). At the default 10 s that cost a seed 11 s;
// at 3 s a 10-member resharing under load came close to timing out a
// phase for real (which fails the scenario as a liveness violation).
const scenarioReshareTimeout = 5 * time.Second

// reshareFunc is Reshare's signature, for a test's stand-in.
type reshareFunc func(ctx context.Context, dir string, old *Keys, o DKGOptions) (*Keys, error)

// eraRun is the resharing of one scenario.
type eraRun struct {
	plan     *eraPlan
	p        scenarioPlan
	old      *Network
	dir      string
	seed     int64
	feed     *EraFeed
	relays   map[int]*EraRelayer // old member index -> its behaviour
	newFloor uint64
	timeout  time.Duration // DKG phase timeout
	reshare  reshareFunc   // Reshare, or a test's stand-in

	ready chan struct{} // closed once nw runs or the resharing failed
	nw    *Network      // the new group; set before ready closes
	err   error         // set before ready closes
	wrong string        // set with err when the DKG made a wrong cluster file (a violation)
	took  time.Duration
	// late is the scheduling lateness the process accrued while the DKG
	// ran (latenessProbe): what the load took from its phase timeouts.
	late time.Duration
	// began is when the resharing started (UnixNano, 0 before), for the
	// liveness budget of the clients still trying meanwhile.
	began atomic.Int64

	mu      sync.Mutex
	clients map[int]*client.Client // scenario client -> its client on the new cluster file
	closed  bool
}

func newEraRun(p scenarioPlan, old *Network, dir string, seed int64, scale time.Duration) *eraRun {
	e := &eraRun{plan: p.era, p: p, old: old, dir: dir, seed: seed, feed: NewEraFeed(), timeout: scenarioReshareTimeout + (scale-1)*time.Second,
		relays: map[int]*EraRelayer{}, ready: make(chan struct{}), clients: map[int]*client.Client{}, reshare: Reshare}
	var colluder lcrypto.PrivKey
	if p.era.colluder >= 0 {
		colluder = old.Keys.Clients[p.era.colluder]
	}
	for _, i := range p.era.relays {
		e.relays[i] = EraRelay(e.feed, colluder)
	}
	// The one definition of the next floor; Reshare's DKG uses it too.
	e.newFloor, e.err = protocol.NextEpochFloor(old.Keys.Cluster.File.EpochFloor)
	return e
}

// tookSoFar is how long the resharing took once it ended, or has taken
// while it runs (0 before it starts, or with no resharing): the slack of
// the liveness budget.
func (e *eraRun) tookSoFar() time.Duration {
	if e == nil {
		return 0
	}
	select {
	case <-e.ready:
		return e.took
	default:
	}
	if b := e.began.Load(); b != 0 {
		return time.Since(time.Unix(0, b))
	}
	return 0
}

// floor is the new group's epoch floor.
func (e *eraRun) floor() uint64 { return e.newFloor }

// run reshares at the planned time, starts the new group, then, until
// done, feeds the new era's signed votes and tokens to the relays and
// lets them relay.
func (e *eraRun) run(ctx context.Context, wstart time.Time, done <-chan struct{}, tm scenarioTiming, logf func(string, ...any)) {
	ready := false
	defer func() {
		if !ready {
			close(e.ready)
		}
	}()
	if e.err != nil {
		return
	}
	t := time.NewTimer(time.Until(wstart.Add(e.plan.at)))
	select {
	case <-ctx.Done():
		t.Stop()
		e.err = ctx.Err()
		return
	case <-t.C:
	}
	start, late := time.Now(), scenarioProbe.total()
	e.began.Store(start.UnixNano())
	progress := &lockedBuffer{}
	keys, err := e.reshare(ctx, e.dir, e.old.Keys, DKGOptions{N: e.plan.n, Keep: e.plan.keep, PhaseTimeout: e.timeout,
		Rand: mrand.New(mrand.NewSource(e.seed ^ 0x5e5a)), Progress: &stampedWriter{start: start, w: progress}})
	e.took, e.late = time.Since(start), scenarioProbe.total()-late
	if err != nil || e.took > e.timeout/2 {
		logf("reshare progress (took %v, lateness %v):\n%s", e.took.Round(time.Millisecond), e.late.Round(time.Millisecond), progress.String())
	}
	if err != nil {
		e.err = fmt.Errorf("reshare: %w", err)
		return
	}
	if keys.Cluster.File.EpochFloor != e.newFloor || keys.Cluster.ID != e.old.Keys.Cluster.ID {
		e.wrong = fmt.Sprintf("era: the reshared cluster file has floor %d and ID %s, want protocol.NextEpochFloor's %d and the original %s", keys.Cluster.File.EpochFloor, keys.Cluster.ID, e.newFloor, e.old.Keys.Cluster.ID)
		e.err = errors.New(e.wrong)
		return
	}
	nw, err := StartKeys(keys, Options{Rules: e.p.rules()})
	if err != nil {
		e.err = fmt.Errorf("reshare: start the new group: %w", err)
		return
	}
	e.nw = nw
	ready = true
	close(e.ready)
	logf("reshared %d->%d (keep %d) in %v: new floor %d", e.p.n, e.plan.n, e.plan.keep, e.took.Round(time.Millisecond), e.newFloor)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
		case <-rctx.Done():
		}
		cancel()
	}()
	var targets []int
	for _, m := range e.old.Members {
		if _, byz := e.p.byz[m.Index]; !byz {
			targets = append(targets, m.Index)
		}
	}
	var wg sync.WaitGroup
	for i, r := range e.relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(rctx, e.old, e.old.Member(i), targets, scenarioRelayEvery, tm.request)
		}()
	}
	e.watch(rctx)
	wg.Wait()
}

// watch copies the kept members' signed votes and the new group's tokens
// into the feed until ctx ends: what anyone can read from the new group's
// Status replies. Only members that kept their identity have votes that
// check against the old cluster file.
func (e *eraRun) watch(ctx context.Context) {
	if len(e.relays) == 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(scenarioRelayEvery / 2)
	defer t.Stop()
	for {
		for i := 1; i <= e.plan.keep; i++ {
			r := e.nw.Node(i)
			if r == nil {
				continue
			}
			for res := 0; res < e.p.r; res++ {
				rec, err := r.Record(ctx, resourceName(res))
				if err != nil {
					break
				}
				if rec.Certified != nil {
					e.feed.AddToken(*rec.Certified)
				}
				if rec.VoteEpoch > 0 && len(rec.VoteIDSig) > 0 {
					e.feed.AddVote(protocol.SignedVote{Node: i, Statement: e.nw.Keys.Cluster.Statement(rec.Resource, rec.VoteEpoch, rec.VoteHolder), IdentitySig: rec.VoteIDSig})
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// awaitToken waits until the new group has issued a token, the resharing
// failed, or at most d.
func (e *eraRun) awaitToken(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return
	case <-t.C:
		return
	}
	if e.err != nil {
		return
	}
	select {
	case <-e.feed.First():
	case <-ctx.Done():
	case <-t.C:
	}
}

// relayFinal has every relay send one more round to the honest old nodes
// (run has returned), so that each era seed exercises them at least once
// the new group has a token.
func (e *eraRun) relayFinal(ctx context.Context, tm scenarioTiming) {
	if e.nw == nil || e.err != nil {
		return
	}
	var targets []int
	for _, m := range e.old.Members {
		if _, byz := e.p.byz[m.Index]; !byz {
			targets = append(targets, m.Index)
		}
	}
	for i, r := range e.relays {
		r.RelayOnce(ctx, e.old, e.old.Member(i), targets, tm.request)
	}
}

// stampedWriter prefixes each write with the time since start.
type stampedWriter struct {
	start time.Time
	w     io.Writer
}

func (s *stampedWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(s.w, "%6dms %s", time.Since(s.start).Milliseconds(), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers (DKG
// progress lines of several members).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// errEraClosed: the run ended before the client could move.
var errEraClosed = errors.New("testnet: scenario: resharing closed")

// client returns scenario client i's client on the new cluster file (key
// ident), waiting for the new group.
func (e *eraRun) client(ctx context.Context, i, ident int, cfg client.Config) (*client.Client, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errEraClosed
	}
	if c, ok := e.clients[i]; ok {
		return c, nil
	}
	c, err := e.nw.NewClient(ident, cfg)
	if err != nil {
		return nil, fmt.Errorf("testnet: scenario: client %d on the new cluster file: %w", i, err)
	}
	e.clients[i] = c
	return c, nil
}

// report adds the relays' counts to rep and a violation for every new-era
// item an honest old node accepted.
func (e *eraRun) report(o *oracle, rep *ScenarioReport) {
	for i, r := range e.relays {
		st := r.Stats()
		rep.EraSent += st.Sent
		rep.EraRefused += st.OtherEra
		for c, n := range st.Codes {
			if c != protocol.CodeOtherEra {
				if rep.EraOther == nil {
					rep.EraOther = map[string]int{}
				}
				rep.EraOther[c.String()] += n
			}
		}
		if st.Failed > 0 {
			if rep.EraOther == nil {
				rep.EraOther = map[string]int{}
			}
			rep.EraOther["no reply"] += st.Failed
		}
		for _, a := range st.Accepted {
			o.violate("era: relayed by old node %d: honest old %s (it must refuse with CodeOtherEra)", i, a)
		}
	}
}

// close stops the new clients and the new group; run has returned.
func (e *eraRun) close() error {
	e.mu.Lock()
	e.closed = true
	cs := e.clients
	e.clients = nil
	e.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	for _, r := range e.relays {
		errs = append(errs, r.Close())
	}
	if e.nw != nil {
		errs = append(errs, e.nw.Close())
	}
	return errors.Join(errs...)
}
