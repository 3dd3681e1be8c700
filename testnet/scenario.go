package testnet

// Seeded scenarios with an invariant oracle, after raft's fuzzy suite and
// etcd's robustness tests. One seed fixes the plan: cluster size, which
// nodes are Byzantine and how, the clients' operations and the fault
// schedule (crash/restart, cut-off/reconnect, delays; Byzantine, crashed
// and cut-off nodes together never exceed f). The clients run it against
// real nodes on loopback with a real clock and short leases; every token
// they get, every guarded write at the fences and, at the end, every
// honest node's audit log and records go to the oracle, which checks:
//
//   - S1: one holder per (resource, epoch) over every token seen (clients'
//     and honest nodes' certified ones), every honest commit, and every
//     write a fence admitted;
//   - S2: every token verifies under the group key and carries the votes
//     of at least t-b honest nodes (b Byzantine), so no f nodes made one;
//   - S3: an honest node's votes per resource strictly rise and name one
//     holder per epoch, across its crashes;
//   - S4: a fence admits only epoch >= barrier, refuses below, and its
//     barrier never falls (read before and after each guarded write);
//   - S5: an honest node votes at most MaxEpochStep above what it knew
//     (replayed from its audit log), and ends at most MaxEpochStep above the
//     highest certified epoch;
//   - liveness: every client acquires within a bound.
//
// Two kinds come from issue 10, where real deployments broke what the
// generator never produced. Shared identities (about 60% of seeds): some
// clients use one client key, as replicas of one service with one
// credential do. The oracle treats every Acquire call as its own lock
// object: no two may be handed the same lock session, the same token, or
// tokens for one (resource, epoch), and fence writes are labelled by lock
// object, so two of them admitted at one epoch are an S1 violation.
// Reshares (about 20%, see scenario_era.go): the cluster is reshared with a
// real DKG while the old group keeps running, up to f old members relay
// the new era to the honest old nodes (EraRelay), and clients are split
// between the two cluster files; the oracle checks S1 across both groups
// and that each group stays inside its era. TestScenarioKinds pins seeds
// of each kind.
//
// L2 with exactly t honest nodes reachable (f crashed, cut off or
// Byzantine): every round needs all of them, so contenders on one resource
// used to split their votes round after round. Three client changes end
// that (client round.tally, drainLate and round.hint): busy replies say
// whether they are an uncommitted vote, so after a split the contenders
// agree who retries first; votes that arrive after a round gave up are
// withdrawn too; and a node refusing as stale is retried above its epoch.
// Seeds 7440, 7650, 8080, 8795, 9007, 9304, 9334, 11547, 11854, 12405,
// 12475, 12801, 12806, 13245, 13363 and 13858 missed the bound before.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// ErrViolation is what a ScenarioError unwraps to: the oracle saw a safety
// invariant (S1–S5) or liveness broken.
var ErrViolation = errors.New("testnet: scenario: invariant violated")

// ScenarioError lists the invariant violations of one scenario run.
type ScenarioError struct {
	Seed       int64
	Violations []string
}

// Error lists the violations.
func (e *ScenarioError) Error() string {
	return fmt.Sprintf("testnet: scenario seed %d: %d violation(s):\n  %s", e.Seed, len(e.Violations), strings.Join(e.Violations, "\n  "))
}

// Is makes errors.Is(err, ErrViolation) true.
func (e *ScenarioError) Is(target error) bool { return target == ErrViolation }

// Safety reports whether a safety invariant (not only liveness) was
// violated.
func (e *ScenarioError) Safety() bool {
	for _, v := range e.Violations {
		if !strings.HasPrefix(v, "liveness:") {
			return true
		}
	}
	return false
}

// NamedBehaviour is one entry of the table Byzantine behaviours are drawn
// from.
type NamedBehaviour struct {
	Name string
	New  func() Behaviour
}

// ScenarioBehaviours is the default table of Byzantine behaviours a
// scenario draws from.
func ScenarioBehaviours() []NamedBehaviour {
	return []NamedBehaviour{
		{"equivocate", Equivocate},
		{"forge-partials", ForgePartials},
		{"lie-in-status", LieInStatus},
		{"replay", Replay},
		{"garbage", Garbage},
		{"slow", func() Behaviour { return Slow(scenarioSlow) }},
		{"silent", Silent},
	}
}

// ScenarioConfig pins parts of a scenario; the zero value lets the seed
// choose everything, with Byzantine nodes and faults.
type ScenarioConfig struct {
	// Dir receives keys and node stores; empty: a temporary directory that
	// is removed at the end.
	Dir string
	// N pins the cluster size (the seed picks 4, 7 or 10, 4 most often).
	N int
	// Clients (2–4) and Resources (1–3) pin K and R.
	Clients, Resources int
	// NoByzantine keeps every node honest.
	NoByzantine bool
	// NoFaults turns off crashes, cut-offs and delays.
	NoFaults bool
	// NoSharedIdentities gives every client a key of its own.
	NoSharedIdentities bool
	// NoReshare never reshares the cluster during the run.
	NoReshare bool
	// Behaviours is the table Byzantine behaviours are drawn from (default
	// ScenarioBehaviours()).
	Behaviours []NamedBehaviour
	// LivenessBound is how long after the workload starts every client
	// must have acquired at least once (default 5 s, times TimeScale).
	LivenessBound time.Duration
	// TimeScale multiplies the clients' request timeout and acquire wait,
	// the liveness bound and the hard time limit, for slow builds such as
	// -race (default 1). Leases and vote timeouts do not change.
	TimeScale int
	// Logf receives the plan and notable events (e.g. t.Logf).
	Logf func(format string, args ...any)

	// newStore replaces the fences' MemoryStore (tests of the oracle).
	newStore func() verifier.BarrierStore
}

// ScenarioReport is what one scenario did and what the oracle checked.
type ScenarioReport struct {
	Seed                     int64
	N, F, Clients, Resources int
	MaxEpochStep             uint64
	Byzantine                []string // "node 3: silent"
	FaultSteps               int      // crash, restart, cut, reconnect and delay steps applied
	Acquired                 []int    // per client
	AcquireErrors            int      // acquisitions that failed (busy past the wait, quorum lost)
	Tokens                   int      // distinct tokens checked (S1, S2)
	Writes                   int      // writes admitted by the fences
	StaleRefused             int      // writes with a kept, ended lock's token refused as stale
	StaleAdmitted            int      // such writes admitted (epoch still >= barrier)
	HolderRefused            int      // writes of a live holder refused as stale (advisory lease overlap)
	Elapsed                  time.Duration

	// Keys is how many client keys the K clients use; SharedIdentity is
	// set when some clients share one.
	Keys           int
	SharedIdentity bool
	// Reshare describes the resharing during the run ("" if none).
	Reshare string
	// ReshareTook is how long the resharing (DKG) took.
	ReshareTook time.Duration
	// EraRelays is how many old Byzantine members relayed the new era.
	EraRelays int
	// EraTokens counts the distinct tokens of the new era.
	EraTokens int
	// EraSent and EraRefused count the relays' requests to honest old
	// nodes and the CodeOtherEra refusals among them.
	EraSent, EraRefused int
	// EraOther counts the relays' other outcomes: refusal codes (for
	// example a bad request when fewer than f+1 distinct new-era voters
	// were at hand) and "no reply" (crashed or cut-off targets).
	EraOther map[string]int
}

// String is a one-line summary of the run.
func (r ScenarioReport) String() string {
	s := fmt.Sprintf("seed %d: N=%d f=%d K=%d keys=%d R=%d step=%d byz=%v faults=%d acquired=%v acqErr=%d tokens=%d writes=%d staleRefused=%d staleAdmitted=%d holderRefused=%d in %v",
		r.Seed, r.N, r.F, r.Clients, r.Keys, r.Resources, r.MaxEpochStep, r.Byzantine, r.FaultSteps, r.Acquired, r.AcquireErrors,
		r.Tokens, r.Writes, r.StaleRefused, r.StaleAdmitted, r.HolderRefused, r.Elapsed.Round(time.Millisecond))
	if r.Reshare != "" {
		s += fmt.Sprintf("; reshare %s took %v: era tokens=%d relays=%d sent=%d refused other-era=%d other=%v",
			r.Reshare, r.ReshareTook.Round(time.Millisecond), r.EraTokens, r.EraRelays, r.EraSent, r.EraRefused, r.EraOther)
	}
	return s
}

// Scenario timing. Leases and vote timeouts are short so that a scenario
// with contention and faults runs in well under two seconds. The client
// timeouts, the liveness bound and the hard limit scale with TimeScale.
const (
	scenarioVoteTimeout = 200 * time.Millisecond
	scenarioDefaultTTL  = time.Second
	scenarioRequest     = 400 * time.Millisecond // client per-node request timeout
	scenarioWait        = 2 * time.Second        // per-Acquire wait for a busy resource
	scenarioHardLimit   = 30 * time.Second       // whole run, setup included
	scenarioLiveness    = 5 * time.Second
	scenarioSlow        = 50 * time.Millisecond // the Slow behaviour's delay
)

// scenarioTiming are the scaled client timeouts and the liveness bound.
type scenarioTiming struct {
	request, wait, liveness time.Duration
}

// Fault kinds of the plan.
type faultKind int

const (
	faultCrash faultKind = iota
	faultRestart
	faultCut
	faultReconnect
	faultDelay
	faultUndelay
)

var faultNames = [...]string{"crash", "restart", "cut", "reconnect", "delay", "undelay"}

type faultStep struct {
	at    time.Duration // from workload start
	kind  faultKind
	node  int
	delay time.Duration
}

type clientOp struct {
	pause     time.Duration // before acquiring
	resource  int
	ttl       time.Duration
	writes    int
	hold      time.Duration // spread over the writes
	keepStale bool          // keep the token after release and write with it later
	staleLate bool          // … once every client is done, not after the next op
}

// scenarioPlan is everything the seed decides, drawn before anything runs
// so the plan is the same for a seed whatever the interleaving.
type scenarioPlan struct {
	seed          int64
	n, f, t, k, r int
	step          uint64
	byz           map[int]int // node index -> behaviour table index
	ops           [][]clientOp
	faults        []faultStep
	slowDelay     time.Duration
	// ident[c] is the client key client c uses (0..nids-1). When nids < k
	// some clients share one key, as replicas of one service with one
	// credential would: each Acquire is still its own lock session.
	ident []int
	nids  int
	// era, if set, reshares the cluster during the run.
	era *eraPlan
}

// eraPlan is a resharing during a run: at `at` the cluster is reshared to
// n members (old members 1..keep stay with their identities), same group
// key, epoch_floor = protocol.NextEpochFloor(0). The old group keeps
// running; relays (old Byzantine members) show it the new era's tokens and
// votes (EraRelay), and clients move to the new cluster file at their
// switchAt-th operation (len(ops): never).
type eraPlan struct {
	at       time.Duration
	n, keep  int
	relays   []int
	switchAt []int
	// colluder is the client key (index) the relays send Acquire
	// requests with; -1 when there are no relays.
	colluder int
}

// clientKeys is how many client keys the scenario's key set needs.
func (p scenarioPlan) clientKeys() int {
	if p.era != nil && p.era.colluder >= 0 {
		return p.era.colluder + 1
	}
	return p.nids
}

// sharedIdentities reports whether some clients share one key.
func (p scenarioPlan) sharedIdentities() bool { return p.nids < p.k }

// Chance, in percent, that a seed draws each new kind (issue 10).
const (
	scenarioSharedPercent  = 60 // clients sharing a client key
	scenarioResharePercent = 20 // a resharing with the old group left running
)

func newScenarioPlan(seed int64, cfg ScenarioConfig, behaviours int) scenarioPlan {
	rng := mrand.New(mrand.NewSource(seed))
	p := scenarioPlan{seed: seed, byz: map[int]int{}}
	// Draw every choice even when pinned, so pinning one keeps the others.
	p.n = []int{4, 4, 4, 7, 7, 10}[rng.Intn(6)]
	p.k = 2 + rng.Intn(3)
	p.r = 1 + rng.Intn(3)
	p.step = []uint64{16, 64, protocol.DefaultMaxEpochStep}[rng.Intn(3)]
	if cfg.N > 0 {
		p.n = cfg.N
	}
	if cfg.Clients > 0 {
		p.k = cfg.Clients
	}
	if cfg.Resources > 0 {
		p.r = cfg.Resources
	}
	p.f, p.t = crypto.FaultThreshold(p.n)

	// Byzantine nodes: f of them most of the time; fewer leaves room in
	// the fault budget for crashing and cutting off honest nodes.
	nbyz := p.f
	if rng.Intn(3) == 0 {
		nbyz = rng.Intn(p.f + 1)
	}
	perm := rng.Perm(p.n)
	// Sometimes they collude: every Byzantine node runs one behaviour.
	colluding := rng.Intn(4) == 0
	if !cfg.NoByzantine && behaviours > 0 {
		shared := rng.Intn(behaviours)
		for _, i := range perm[:nbyz] {
			p.byz[i+1] = rng.Intn(behaviours)
			if colluding {
				p.byz[i+1] = shared
			}
		}
	}

	// Client workloads.
	p.ops = make([][]clientOp, p.k)
	for c := range p.ops {
		nops := 2 + rng.Intn(2)
		for j := 0; j < nops; j++ {
			p.ops[c] = append(p.ops[c], clientOp{
				pause:     time.Duration(rng.Intn(30)) * time.Millisecond,
				resource:  rng.Intn(p.r),
				ttl:       time.Duration(400+rng.Intn(600)) * time.Millisecond,
				writes:    rng.Intn(3),
				hold:      time.Duration(rng.Intn(20)) * time.Millisecond,
				keepStale: rng.Intn(3) == 0,
				staleLate: rng.Intn(2) == 0,
			})
		}
	}

	// Faults, simulated as they are drawn so that Byzantine, crashed and
	// cut-off nodes together never exceed f.
	crashed, cut, delayed := map[int]bool{}, map[int]bool{}, map[int]bool{}
	faulty := func() int {
		s := map[int]bool{}
		for i := range p.byz {
			s[i] = true
		}
		for i := range crashed {
			s[i] = true
		}
		for i := range cut {
			s[i] = true
		}
		return len(s)
	}
	isFaulty := func(i int) bool { _, b := p.byz[i]; return b || crashed[i] || cut[i] }
	if !cfg.NoFaults {
		at := time.Duration(0)
		steps := 3 + rng.Intn(8)
		for s := 0; s < steps; s++ {
			at += time.Duration(10+rng.Intn(70)) * time.Millisecond
			i := 1 + rng.Intn(p.n)
			kind := faultKind(rng.Intn(6))
			d := time.Duration(5+rng.Intn(35)) * time.Millisecond
			switch {
			case kind == faultCrash && crashed[i], kind == faultRestart && !crashed[i]:
				kind = faultRestart
				if !crashed[i] {
					kind = faultCrash
				}
			case kind == faultCut && cut[i], kind == faultReconnect && !cut[i]:
				kind = faultReconnect
				if !cut[i] {
					kind = faultCut
				}
			case kind == faultUndelay && !delayed[i]:
				kind = faultDelay
			}
			if (kind == faultCrash || kind == faultCut) && !isFaulty(i) && faulty() >= p.f {
				kind = faultDelay // no budget left: slow it down instead
			}
			switch kind {
			case faultCrash:
				crashed[i] = true
			case faultRestart:
				delete(crashed, i)
			case faultCut:
				cut[i] = true
			case faultReconnect:
				delete(cut, i)
			case faultDelay:
				delayed[i] = true
			case faultUndelay:
				delete(delayed, i)
			}
			p.faults = append(p.faults, faultStep{at: at, kind: kind, node: i, delay: d})
		}
	}

	// Drawn after everything above, so that the plans of the kinds that
	// existed before stay the same for a seed. Relays are drawn among the
	// Byzantine nodes: with NoByzantine a resharing has none.
	shared := rng.Intn(100) < scenarioSharedPercent
	nids := 1 + rng.Intn(max(1, p.k-1)) // fewer keys than clients: some share
	ident := make([]int, p.k)
	for c := range ident {
		ident[c] = rng.Intn(nids)
	}
	p.nids, p.ident = p.k, make([]int, p.k)
	for c := range p.ident {
		p.ident[c] = c
	}
	if shared && p.k >= 2 && !cfg.NoSharedIdentities {
		p.nids, p.ident = nids, ident
	}
	reshare := rng.Intn(100) < scenarioResharePercent
	e := &eraPlan{at: time.Duration(50+rng.Intn(250)) * time.Millisecond, n: []int{4, 4, 7}[rng.Intn(3)], colluder: -1}
	e.keep = 1 + rng.Intn(min(p.n, e.n))
	byz := sortedKeys(p.byz)
	rng.Shuffle(len(byz), func(i, j int) { byz[i], byz[j] = byz[j], byz[i] })
	if len(byz) > 0 {
		e.relays = append(e.relays, byz[:1+rng.Intn(len(byz))]...)
		sort.Ints(e.relays)
		e.colluder = p.nids
	}
	e.switchAt = make([]int, p.k)
	switched := 0
	for c := range e.switchAt {
		e.switchAt[c] = len(p.ops[c])
		if rng.Intn(2) == 0 {
			e.switchAt[c] = 1 + rng.Intn(len(p.ops[c]))
		}
		if e.switchAt[c] < len(p.ops[c]) {
			switched++
		}
	}
	switch {
	case switched == 0: // someone moves to the new cluster file
		e.switchAt[p.k-1] = 1
	case switched == p.k && p.k > 1: // and someone stays on the old one
		e.switchAt[0] = len(p.ops[0])
	}
	if reshare && !cfg.NoReshare {
		p.era = e
	}
	return p
}

func (p scenarioPlan) rules() node.Rules {
	return node.Rules{MaxEpochStep: p.step, VoteTimeout: scenarioVoteTimeout, DefaultTTL: scenarioDefaultTTL, MaxTTL: protocol.MaxTTL}
}

func resourceName(r int) string { return fmt.Sprintf("res-%d", r) }

// RunScenario runs one seeded scenario: a cluster of N nodes, up to f of
// them Byzantine, K clients contending on R resources guarded by fences,
// crashes, cut-offs and delays at planned times (never more than f faulty
// nodes at once), then an oracle over everything the clients, fences and
// honest nodes recorded. A violated invariant yields a *ScenarioError
// (errors.Is ErrViolation); other errors mean the scenario could not run.
// The seed fixes the plan; the interleaving depends on the real clock.
func RunScenario(ctx context.Context, seed int64, cfg ScenarioConfig) (rep ScenarioReport, err error) {
	start := time.Now()
	table := cfg.Behaviours
	if table == nil {
		table = ScenarioBehaviours()
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	scale := time.Duration(cfg.TimeScale)
	tm := scenarioTiming{request: scenarioRequest * scale, wait: scenarioWait * scale, liveness: cfg.LivenessBound}
	if tm.liveness <= 0 {
		tm.liveness = scenarioLiveness * scale
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := newScenarioPlan(seed, cfg, len(table))
	rep = ScenarioReport{Seed: seed, N: p.n, F: p.f, Clients: p.k, Resources: p.r, MaxEpochStep: p.step, Acquired: make([]int, p.k),
		Keys: p.nids, SharedIdentity: p.sharedIdentities()}
	relays := map[int]bool{}
	if p.era != nil {
		for _, i := range p.era.relays {
			relays[i] = true
		}
		rep.Reshare = fmt.Sprintf("%d->%d keep %d at %v, switch at %v", p.n, p.era.n, p.era.keep, p.era.at, p.era.switchAt)
		rep.EraRelays = len(p.era.relays)
	}
	for _, i := range sortedKeys(p.byz) {
		name := table[p.byz[i]].Name
		if relays[i] {
			name = "era-relay"
		}
		rep.Byzantine = append(rep.Byzantine, fmt.Sprintf("node %d: %s", i, name))
	}
	defer func() { rep.Elapsed = time.Since(start) }()
	logf("scenario seed %d: N=%d f=%d t=%d K=%d R=%d step=%d byzantine=%v faults=%d keys=%d %v reshare=%q", seed, p.n, p.f, p.t, p.k, p.r, p.step, rep.Byzantine, len(p.faults), p.nids, p.ident, rep.Reshare)
	for _, s := range p.faults {
		logf("  fault at %v: %s node %d (delay %v)", s.at, faultNames[s.kind], s.node, s.delay)
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(parent, scenarioHardLimit*scale)
	defer cancel()
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "palisade-scenario-*"); err != nil {
			return rep, fmt.Errorf("testnet: scenario seed %d: %w", seed, err)
		}
		defer os.RemoveAll(dir)
	}
	nw, err := Start(dir, Options{
		Keygen: KeygenOptions{N: p.n, Clients: p.clientKeys(), Rand: mrand.New(mrand.NewSource(seed))},
		Rules:  p.rules(),
	})
	if err != nil {
		return rep, fmt.Errorf("testnet: scenario seed %d: start: %w", seed, err)
	}
	defer func() { err = errors.Join(err, nw.Close()) }()

	o := newOracle(p, nw.Keys.Cluster)
	o.logf = logf
	o.tm = tm
	var era *eraRun
	if p.era != nil {
		era = newEraRun(p, nw, filepath.Join(dir, "reshared"), seed, scale)
		defer func() { err = errors.Join(err, era.close()) }()
		o.era, o.newFloor = era, era.floor()
	}
	for i, b := range p.byz {
		if era != nil && era.relays[i] != nil {
			nw.SetBehaviour(i, era.relays[i])
			continue
		}
		nw.SetBehaviour(i, table[b].New())
	}
	ver := verifier.New(nw.Keys.Cluster) // the original cluster file, whatever the era
	fences := make([]*verifier.Fence, p.r)
	for r := range fences {
		var inner verifier.BarrierStore = verifier.NewMemoryStore()
		if cfg.newStore != nil {
			inner = cfg.newStore()
		}
		st := &observedStore{inner: inner, o: o}
		defer st.Close()
		fences[r] = verifier.NewFence(ver, st)
	}
	ccfg := func(i int) client.Config {
		return client.Config{
			RequestTimeout: tm.request,
			DefaultTTL:     scenarioDefaultTTL,
			MinBackoff:     2 * time.Millisecond,
			MaxBackoff:     100 * time.Millisecond,
			Seed:           uint64(seed)*1000 + uint64(i) + 1,
		}
	}
	clients := make([]*client.Client, p.k)
	for i := range clients {
		c, cerr := nw.NewClient(p.ident[i], ccfg(i))
		if cerr != nil {
			return rep, fmt.Errorf("testnet: scenario seed %d: client %d: %w", seed, i, cerr)
		}
		defer func() { err = errors.Join(err, c.Close()) }()
		clients[i] = c
		o.ids[i] = c.ID()
	}

	// Workload, nemesis and resharing.
	wstart := time.Now()
	o.start = wstart
	done := make(chan struct{})
	var nwg, cwg, opsDone sync.WaitGroup
	opsDone.Add(len(clients))
	nwg.Add(1)
	go func() {
		defer nwg.Done()
		rep.FaultSteps = runNemesis(ctx, nw, p.faults, wstart, done, logf)
	}()
	if era != nil {
		nwg.Add(1)
		go func() {
			defer nwg.Done()
			era.run(ctx, wstart, done, tm, logf)
		}()
	}
	for i := range clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			sc := &scenarioClient{i: i, c: clients[i], ops: p.ops[i], fences: fences, o: o, switchAt: len(p.ops[i])}
			if era != nil {
				sc.era, sc.switchAt, sc.cfg = era, p.era.switchAt[i], ccfg(i)
			}
			sc.run(ctx, &opsDone)
		}()
	}
	cwg.Wait()
	close(done)
	nwg.Wait()
	if err := parent.Err(); err != nil {
		return rep, fmt.Errorf("testnet: scenario seed %d: %w", seed, err)
	}
	if err := ctx.Err(); err != nil {
		o.violate("liveness: the run hit its hard limit of %v: %v", scenarioHardLimit*scale, err)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, 10*time.Second) // still read the nodes
		defer cancel()
	}
	switch {
	case era != nil && era.wrong != "":
		o.violate("%s", era.wrong)
	case era != nil && era.err != nil:
		// A DKG that could not finish in its phase timeouts is a timing
		// failure, like a missed liveness bound (CI retries those once);
		// the old group is still checked.
		o.violate("liveness: the resharing failed: %v", era.err)
	}
	if err := heal(nw); err != nil {
		return rep, fmt.Errorf("testnet: scenario seed %d: heal: %w", seed, err)
	}
	if era != nil {
		era.relayFinal(ctx, tm) // every relay sends at least one round, to every honest old node
	}

	// The oracle's end-of-run checks read the honest nodes' logs and
	// records, of both groups when the cluster was reshared.
	groups := []nodeGroup{{name: "old", nw: nw, byz: p.byz, t: p.t}}
	if era != nil && era.nw != nil {
		groups[0].name = "old-group"
		groups = append(groups, nodeGroup{name: "new-group", nw: era.nw, floor: era.floor(), t: era.nw.Keys.Cluster.File.T})
		era.report(o, &rep)
	}
	if err := o.checkNodes(ctx, groups); err != nil {
		return rep, fmt.Errorf("testnet: scenario seed %d: read nodes: %w", seed, err)
	}
	var slack time.Duration
	if era != nil {
		slack = era.took
	}
	o.checkLiveness(slack)

	o.mu.Lock()
	defer o.mu.Unlock()
	copy(rep.Acquired, o.acquired)
	rep.AcquireErrors = o.acquireErrors
	rep.Tokens = len(o.tokens)
	rep.EraTokens = o.eraTokens
	rep.Writes, rep.StaleRefused, rep.StaleAdmitted, rep.HolderRefused = o.writes, o.staleRefused, o.staleAdmitted, o.holderRefused
	if len(o.violations) > 0 {
		return rep, &ScenarioError{Seed: seed, Violations: append([]string(nil), o.violations...)}
	}
	return rep, nil
}

func sortedKeys(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// runNemesis applies the planned faults at their times until the workload
// is done, and returns how many it applied.
func runNemesis(ctx context.Context, nw *Network, steps []faultStep, start time.Time, done <-chan struct{}, logf func(string, ...any)) int {
	applied := 0
	for _, s := range steps {
		t := time.NewTimer(time.Until(start.Add(s.at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return applied
		case <-done:
			t.Stop()
			return applied
		case <-t.C:
		}
		var err error
		switch s.kind {
		case faultCrash:
			err = nw.Stop(s.node)
		case faultRestart:
			err = nw.Restart(s.node)
		case faultCut:
			nw.CutOff(s.node)
		case faultReconnect:
			nw.Reconnect(s.node)
		case faultDelay:
			nw.SetDelay(s.node, s.delay)
		case faultUndelay:
			nw.SetDelay(s.node, 0)
		}
		if err != nil {
			logf("fault %s node %d: %v", faultNames[s.kind], s.node, err)
		}
		applied++
	}
	return applied
}

// heal restarts crashed nodes and lifts cut-offs and delays. Byzantine
// nodes stay Byzantine.
func heal(nw *Network) error {
	var errs []error
	for _, m := range nw.Members {
		if nw.Node(m.Index) == nil {
			errs = append(errs, nw.Restart(m.Index))
		}
		nw.Reconnect(m.Index)
		nw.SetDelay(m.Index, 0)
	}
	return errors.Join(errs...)
}

// scenarioClient is one scenario client: its planned operations, on the
// old cluster file until its switchAt-th operation and on the reshared
// one from there (era).
type scenarioClient struct {
	i        int
	c        *client.Client
	ops      []clientOp
	fences   []*verifier.Fence
	o        *oracle
	era      *eraRun
	switchAt int
	cfg      client.Config // for the client on the new cluster file
	locks    int           // Acquire calls that returned a lock
	group    int           // 0: old cluster file, 1: the reshared one
}

// lockLabel names the next lock object of the client.
func (sc *scenarioClient) lockLabel() string {
	sc.locks++
	return fmt.Sprintf("client%d#%d", sc.i, sc.locks)
}

// client is the client to use for operation j.
func (sc *scenarioClient) client(ctx context.Context, j int) *client.Client {
	if sc.era == nil || j < sc.switchAt || sc.group == 1 {
		return sc.c
	}
	c, err := sc.era.client(ctx, sc.i, sc.o.p.ident[sc.i], sc.cfg)
	if err != nil {
		sc.o.logf("client%d: stays on the old cluster file: %v", sc.i, err)
		sc.era = nil
		return sc.c
	}
	sc.o.logf("client%d: uses the reshared cluster file from op %d (%v)", sc.i, j, time.Since(sc.o.start).Round(time.Millisecond))
	sc.c, sc.group = c, 1
	return c
}

// run runs the client's planned operations: acquire, write through the
// fence, release. A kept token of an ended lock is written with later, as
// a paused ex-holder would: after the client's next operation, or once
// every client has finished (opsDone).
func (sc *scenarioClient) run(ctx context.Context, opsDone *sync.WaitGroup) {
	i, o, fences := sc.i, sc.o, sc.fences
	type kept struct {
		tok   protocol.Token
		res   int
		label string
	}
	var soon, late []kept
	writeStale := func(ks []kept) {
		for _, k := range ks {
			err := fences[k.res].Admit(ctx, k.tok, k.tok.Resource, putHolder(k.label))
			o.staleWrite(i, k.tok, err)
		}
	}
	signalled := false
	defer func() {
		if !signalled {
			opsDone.Done()
		}
	}()
	for j, op := range sc.ops {
		if sleepCtx(ctx, op.pause) != nil {
			return
		}
		if sc.era != nil && sc.switchAt == len(sc.ops) && j == len(sc.ops)-1 {
			// A client that stays on the old cluster file acquires once
			// more after the new group issued a token, while the relays
			// show it to the old group.
			sc.era.awaitToken(ctx, 2*o.tm.wait)
		}
		c := sc.client(ctx, j)
		res := resourceName(op.resource)
		actx, cancel := context.WithTimeout(ctx, o.tm.wait)
		l, err := c.Acquire(actx, res, client.WithWait(o.tm.wait), client.WithTTL(op.ttl))
		cancel()
		if err != nil {
			o.acquireFailed(i, res, err)
			continue
		}
		tok := l.Token()
		label := sc.lockLabel()
		o.acquired1(i, label, sc.group, tok)
		for w := 0; w < op.writes; w++ {
			lostBefore := isClosed(l.Lost())
			err := fences[op.resource].Admit(ctx, tok, res, putHolder(label))
			o.holderWrite(i, tok, lostBefore, err)
			if sleepCtx(ctx, op.hold/time.Duration(op.writes)) != nil {
				break
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, o.tm.request*2)
		_ = l.Release(rctx) // may fail under faults; the lease then runs out
		rcancel()
		writeStale(soon)
		soon = nil
		switch {
		case op.keepStale && op.staleLate:
			late = append(late, kept{tok: tok, res: op.resource, label: label})
		case op.keepStale:
			soon = append(soon, kept{tok: tok, res: op.resource, label: label})
		}
	}
	// A client that never got the lock keeps trying until the liveness
	// bound, so that the check is about the bound, not the plan.
	for try := 0; try < 10 && o.count(i) == 0; try++ {
		left := time.Until(o.start.Add(o.tm.liveness))
		if left <= 0 {
			break
		}
		res := resourceName(sc.ops[0].resource)
		actx, cancel := context.WithTimeout(ctx, left)
		l, err := sc.c.Acquire(actx, res, client.WithWait(left))
		cancel()
		if err != nil {
			o.acquireFailed(i, res, err)
			continue
		}
		o.acquired1(i, sc.lockLabel(), sc.group, l.Token())
		rctx, rcancel := context.WithTimeout(ctx, o.tm.request*2)
		_ = l.Release(rctx)
		rcancel()
	}
	signalled = true
	opsDone.Done()
	opsDone.Wait()
	writeStale(append(soon, late...))
}

// putHolder is the guarded write: "k" = the writer's lock object (one
// Acquire call; clients sharing a key are told apart).
func putHolder(lock string) func(verifier.Tx) error {
	return func(tx verifier.Tx) error { return tx.Put("k", []byte(lock)) }
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// observedStore is a barrier store that reports each guarded write to the
// oracle: the barrier before and after, and the value of "k" the write saw
// and wrote. It serialises Guard so before and after are exact.
type observedStore struct {
	inner verifier.BarrierStore
	o     *oracle
	mu    sync.Mutex
}

var _ verifier.BarrierStore = (*observedStore)(nil)

func (s *observedStore) Barrier(ctx context.Context, resource string) (uint64, bool, error) {
	return s.inner.Barrier(ctx, resource)
}

func (s *observedStore) Close() error { return s.inner.Close() }

type guardObs struct {
	resource      string
	epoch         uint64
	before, after uint64
	hadBefore     bool
	ran           bool
	prev, wrote   string
	err           error
}

func (s *observedStore) Guard(ctx context.Context, adm verifier.Admission, write func(tx verifier.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	resource := adm.Resource()
	g := guardObs{resource: resource, epoch: adm.Epoch()}
	var err error
	g.before, g.hadBefore, err = s.inner.Barrier(ctx, resource)
	if err != nil {
		return err
	}
	g.err = s.inner.Guard(ctx, adm, func(tx verifier.Tx) error {
		g.ran = true
		if v, ok, err := tx.Get("k"); err == nil && ok {
			g.prev = string(v)
		}
		if write == nil {
			return nil
		}
		return write(&observedTx{Tx: tx, g: &g})
	})
	// Read the barrier even if ctx ended meanwhile.
	g.after, _, _ = s.inner.Barrier(context.Background(), resource)
	s.o.guard(g)
	return g.err
}

type observedTx struct {
	verifier.Tx
	g *guardObs
}

func (t *observedTx) Put(key string, value []byte) error {
	if key == "k" {
		t.g.wrote = string(value)
	}
	return t.Tx.Put(key, value)
}

type resEpoch struct {
	resource string
	epoch    uint64
}

type voteKey struct {
	resource string
	epoch    uint64
	holder   string
}

// oracle records every token, write and node log of a scenario and checks
// the invariants.
type oracle struct {
	p       scenarioPlan
	cluster *protocol.Cluster
	logf    func(string, ...any)
	tm      scenarioTiming
	start   time.Time

	// era is the resharing of the run, if any; newFloor is the new
	// group's epoch floor (0: no resharing).
	era      *eraRun
	newFloor uint64

	mu            sync.Mutex
	ids           []string                    // client i's identity (its key's peer ID)
	holders       map[resEpoch]string         // S1: (resource, epoch) -> holder
	tokens        map[[32]byte]protocol.Token // distinct tokens seen
	lockAt        map[resEpoch]string         // (resource, epoch) -> the lock object handed a token for it
	tokenLock     map[[32]byte]string         // token -> the lock object handed it
	sessionLock   map[string]string           // holder (identity/session) -> the lock object of that session
	eraTokens     int                         // distinct tokens at or above newFloor
	barrier       map[string]uint64           // S4 model: highest admitted epoch
	lastWriter    map[string]string           // holder that wrote "k" last
	acquired      []int
	firstAcquired []time.Duration
	acquireErrors int
	writes        int
	staleRefused  int
	staleAdmitted int
	holderRefused int
	violations    []string
}

func newOracle(p scenarioPlan, c *protocol.Cluster) *oracle {
	return &oracle{p: p, cluster: c, ids: make([]string, p.k),
		holders: map[resEpoch]string{}, tokens: map[[32]byte]protocol.Token{},
		lockAt: map[resEpoch]string{}, tokenLock: map[[32]byte]string{}, sessionLock: map[string]string{},
		barrier: map[string]uint64{}, lastWriter: map[string]string{},
		acquired: make([]int, p.k), firstAcquired: make([]time.Duration, p.k)}
}

const maxViolations = 20

// violate records a violation; the caller may hold o.mu or not, so it
// takes none: use violateLocked under o.mu.
func (o *oracle) violate(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violateLocked(format, args...)
}

func (o *oracle) violateLocked(format string, args ...any) {
	if len(o.violations) < maxViolations {
		o.violations = append(o.violations, fmt.Sprintf(format, args...))
	}
}

// short names a holder for a violation: the lock object (client and
// Acquire call) it was handed to if known, else the key and the start of
// the session. Lock labels pass through.
func (o *oracle) short(holder string) string {
	if l, ok := o.sessionLock[holder]; ok {
		return l
	}
	id, session, ok := strings.Cut(holder, "/")
	if ok && len(session) > 8 {
		return o.short(id) + "/" + session[:8]
	}
	for i, c := range o.ids {
		if c == id {
			if i < len(o.p.ident) {
				return fmt.Sprintf("key%d", o.p.ident[i])
			}
			return fmt.Sprintf("client%d", i)
		}
	}
	if len(id) > 12 {
		return id[:6] + "…" + id[len(id)-6:]
	}
	return id
}

// token checks a token (S1, S2) and remembers it; source names who had it.
func (o *oracle) tokenLocked(source string, tok protocol.Token) {
	d := tok.Digest()
	if _, ok := o.tokens[d]; ok {
		return
	}
	o.tokens[d] = tok
	if o.newFloor > 0 && tok.Epoch >= o.newFloor {
		o.eraTokens++
	}
	if tok.Cluster != o.cluster.ID {
		o.violateLocked("S2: %s has a token of another cluster for %q epoch %d", source, tok.Resource, tok.Epoch)
	}
	if err := o.cluster.Key.Verify(tok.SignedBytes(), tok.Signature); err != nil {
		o.violateLocked("S2: %s has a token for %q epoch %d holder %s that does not verify: %v", source, tok.Resource, tok.Epoch, o.short(tok.Holder.String()), err)
	}
	k := resEpoch{tok.Resource, tok.Epoch}
	if h, ok := o.holders[k]; ok && h != tok.Holder.String() {
		o.violateLocked("S1: %q epoch %d has two holders: %s and %s (seen by %s)", tok.Resource, tok.Epoch, o.short(h), o.short(tok.Holder.String()), source)
	} else if !ok {
		o.holders[k] = tok.Holder.String()
	}
}

// acquired1 checks the token one Acquire call (the lock object named
// lock, of client i, on the cluster file of group: 0 the original, 1 the
// reshared one) was handed. Each Acquire call is its own lock, whether or
// not clients share a key: no two may get the same holder session, the
// same token, or tokens for one (resource, epoch) (S1).
func (o *oracle) acquired1(i int, lock string, group int, tok protocol.Token) {
	if group == 1 && o.era != nil {
		o.era.feed.AddToken(tok) // tokens are public: the relays show it to the old group
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if tok.Holder.ID != o.ids[i] {
		o.violateLocked("S6: client%d got a token naming holder %s", i, o.short(tok.Holder.String()))
	}
	if tok.Holder.Session.IsZero() {
		o.violateLocked("S1: %s got a token for %q epoch %d without a lock session", lock, tok.Resource, tok.Epoch)
	}
	hs := tok.Holder.String()
	if l, ok := o.sessionLock[hs]; ok && l != lock {
		o.violateLocked("S1: %s and %s were handed the same lock session (%q epoch %d)", l, lock, tok.Resource, tok.Epoch)
	} else if !ok {
		o.sessionLock[hs] = lock
	}
	if l, ok := o.tokenLock[tok.Digest()]; ok && l != lock {
		o.violateLocked("S1: %s and %s were handed the same token (%q epoch %d)", l, lock, tok.Resource, tok.Epoch)
	} else if !ok {
		o.tokenLock[tok.Digest()] = lock
	}
	k := resEpoch{tok.Resource, tok.Epoch}
	if l, ok := o.lockAt[k]; ok && l != lock {
		o.violateLocked("S1: %s and %s were both handed tokens for %q epoch %d", l, lock, tok.Resource, tok.Epoch)
	} else if !ok {
		o.lockAt[k] = lock
	}
	if o.newFloor > 0 {
		era := protocol.Era{Floor: o.newFloor}
		switch {
		case group == 0 && tok.Epoch >= o.newFloor:
			o.violateLocked("era: %s on the old cluster file got %q epoch %d, at or above the new group's floor %d", lock, tok.Resource, tok.Epoch, o.newFloor)
		case group == 1 && (tok.Epoch <= o.newFloor || era.Beyond(tok.Epoch)):
			o.violateLocked("era: %s on the reshared cluster file got %q epoch %d, outside the new era above %d", lock, tok.Resource, tok.Epoch, o.newFloor)
		}
	}
	if o.acquired[i] == 0 {
		o.firstAcquired[i] = time.Since(o.start)
	}
	o.acquired[i]++
	o.tokenLocked(fmt.Sprintf("client%d", i), tok)
}

// count is how many times client i acquired.
func (o *oracle) count(i int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acquired[i]
}

func (o *oracle) acquireFailed(i int, res string, err error) {
	o.logf("client%d: acquire %q failed after %v: %v", i, res, time.Since(o.start).Round(time.Millisecond), err)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acquireErrors++
}

// guard checks one guarded write at a fence (S4, and S1 at the resource).
func (o *oracle) guard(g guardObs) {
	o.mu.Lock()
	defer o.mu.Unlock()
	model, modelOK := o.barrier[g.resource]
	if g.hadBefore != modelOK || g.before != model {
		o.violateLocked("S4: %q barrier is %d (set %v) before a write, but the highest admitted epoch is %d (any %v)", g.resource, g.before, g.hadBefore, model, modelOK)
	}
	if g.after < g.before {
		o.violateLocked("S4: %q barrier decreased from %d to %d", g.resource, g.before, g.after)
	}
	switch {
	case g.err == nil:
		if !g.ran {
			o.violateLocked("S4: %q epoch %d admitted without running the write", g.resource, g.epoch)
		}
		if g.hadBefore && g.epoch < g.before {
			o.violateLocked("S4: %q admitted epoch %d below barrier %d", g.resource, g.epoch, g.before)
		}
		if want := max(g.before, g.epoch); g.after != want {
			o.violateLocked("S4: %q barrier is %d after admitting epoch %d over %d, want %d", g.resource, g.after, g.epoch, g.before, want)
		}
		if g.hadBefore && g.epoch == g.before && g.wrote != o.lastWriter[g.resource] {
			o.violateLocked("S1: %q epoch %d admitted writes of two holders: %s and %s", g.resource, g.epoch, o.short(o.lastWriter[g.resource]), o.short(g.wrote))
		}
		if g.prev != o.lastWriter[g.resource] {
			o.violateLocked("S4: %q write saw k=%s, the last admitted write was by %s", g.resource, o.short(g.prev), o.short(o.lastWriter[g.resource]))
		}
		o.barrier[g.resource] = max(model, g.epoch)
		o.lastWriter[g.resource] = g.wrote
		o.writes++
	case errors.Is(g.err, verifier.ErrStale):
		if g.ran {
			o.violateLocked("S4: %q stale epoch %d ran its write", g.resource, g.epoch)
		}
		if !g.hadBefore || g.epoch >= g.before {
			o.violateLocked("S4: %q refused epoch %d as stale with barrier %d (set %v)", g.resource, g.epoch, g.before, g.hadBefore)
		}
		if g.after != g.before {
			o.violateLocked("S4: %q barrier moved from %d to %d on a refused write", g.resource, g.before, g.after)
		}
	default:
		if g.after != g.before {
			o.violateLocked("S4: %q barrier moved from %d to %d on a failed write: %v", g.resource, g.before, g.after, g.err)
		}
	}
}

func (o *oracle) holderWrite(i int, tok protocol.Token, lostBefore bool, err error) {
	if err == nil || !errors.Is(err, verifier.ErrStale) {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			o.violate("S2/S4: client%d's write with its fresh token for %q epoch %d failed: %v", i, tok.Resource, tok.Epoch, err)
		}
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// A holder whose lease is (or was) lost may be fenced off: that is
	// fencing working. A live holder being fenced means leases overlapped;
	// safety does not depend on leases, so it is only counted.
	if !lostBefore {
		o.holderRefused++
	}
}

func (o *oracle) staleWrite(i int, tok protocol.Token, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.staleAdmitted++
	case errors.Is(err, verifier.ErrStale):
		o.staleRefused++
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		o.violateLocked("S2/S4: client%d's kept token for %q epoch %d failed with %v, want admitted or stale", i, tok.Resource, tok.Epoch, err)
	}
}

// nodeGroup is one group of nodes the oracle reads at the end: the
// original cluster, or the group a resharing made (epoch floor floor).
type nodeGroup struct {
	name  string
	nw    *Network
	byz   map[int]int
	floor uint64
	t     int
}

// checkNodes reads every honest node's audit log and records, in every
// group, and checks S1 and S2 against them, S3 (one holder per honest vote
// and epoch, votes strictly rising), S5, and that each node stayed inside
// its era: above its floor, below the next era's (protocol.Era).
func (o *oracle) checkNodes(ctx context.Context, groups []nodeGroup) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	honestVotes := make([]map[voteKey]map[int]bool, len(groups))
	type nodeRecs struct {
		g    string
		i    int
		recs []node.Record
		last map[string]uint64
	}
	var recs []nodeRecs
	for gi, g := range groups {
		honestVotes[gi] = map[voteKey]map[int]bool{}
		era := protocol.Era{Floor: g.floor}
		ceiling, _ := era.Ceiling()
		for _, m := range g.nw.Members {
			if _, byz := g.byz[m.Index]; byz || m.Dir == nil {
				continue
			}
			r := g.nw.Node(m.Index)
			if r == nil {
				return fmt.Errorf("%s node %d is not running", g.name, m.Index)
			}
			// Records first, then the audit log: epochs only rise, so the log
			// read afterwards accounts for everything in the records even if
			// a late request lands in between.
			nr := nodeRecs{g: g.name, i: m.Index}
			for res := 0; res < o.p.r; res++ {
				rec, err := r.Record(ctx, resourceName(res))
				if err != nil {
					return fmt.Errorf("%s node %d: record: %w", g.name, m.Index, err)
				}
				if rec.Certified != nil {
					o.tokenLocked(fmt.Sprintf("honest %s node %d", g.name, m.Index), *rec.Certified)
					if era.Beyond(rec.Certified.Epoch) {
						o.violateLocked("era: honest %s node %d holds a token for %q epoch %d, at or above its era's ceiling %d", g.name, m.Index, rec.Resource, rec.Certified.Epoch, ceiling)
					}
				}
				if era.Beyond(rec.LastEpoch) || era.Beyond(rec.Seen) {
					o.violateLocked("era: honest %s node %d's %q is at last epoch %d (seen %d), at or above its era's ceiling %d", g.name, m.Index, rec.Resource, rec.LastEpoch, rec.Seen, ceiling)
				}
				nr.recs = append(nr.recs, rec)
			}
			entries, err := readAudit(ctx, r)
			if err != nil {
				return fmt.Errorf("%s node %d: audit: %w", g.name, m.Index, err)
			}
			votedAt := map[resEpoch]string{}
			last := map[string]uint64{}  // voted or caught up from a token: never vote at or below
			known := map[string]uint64{} // last, or shown by f+1 signed votes: vote at most step above
			for _, e := range entries {
				if era.Beyond(e.Epoch) {
					o.violateLocked("era: honest %s node %d logged %s at %q epoch %d, at or above its era's ceiling %d (audit seq %d)", g.name, m.Index, e.Kind, e.Resource, e.Epoch, ceiling, e.Seq)
				}
				if _, ok := last[e.Resource]; !ok {
					last[e.Resource], known[e.Resource] = g.floor, g.floor
				}
				switch e.Kind {
				case node.AuditVote:
					k := resEpoch{e.Resource, e.Epoch}
					if h, ok := votedAt[k]; ok && h != e.Holder {
						o.violateLocked("S3: honest %s node %d voted for %s and %s at %q epoch %d", g.name, m.Index, o.short(h), o.short(e.Holder), e.Resource, e.Epoch)
					}
					votedAt[k] = e.Holder
					if e.Epoch <= last[e.Resource] {
						o.violateLocked("S3: honest %s node %d voted at %q epoch %d, not above its last epoch %d (floor %d, audit seq %d)", g.name, m.Index, e.Resource, e.Epoch, last[e.Resource], g.floor, e.Seq)
					}
					if e.Epoch > known[e.Resource]+o.p.step {
						o.violateLocked("S5: honest %s node %d voted at %q epoch %d, more than %d above its known epoch %d (audit seq %d)", g.name, m.Index, e.Resource, e.Epoch, o.p.step, known[e.Resource], e.Seq)
					}
					vk := voteKey{e.Resource, e.Epoch, e.Holder}
					if honestVotes[gi][vk] == nil {
						honestVotes[gi][vk] = map[int]bool{}
					}
					honestVotes[gi][vk][m.Index] = true
				case node.AuditCommit:
					k := resEpoch{e.Resource, e.Epoch}
					if h, ok := o.holders[k]; ok && h != e.Holder {
						o.violateLocked("S1: honest %s node %d committed %q epoch %d for %s, a token names %s", g.name, m.Index, e.Resource, e.Epoch, o.short(e.Holder), o.short(h))
					}
				}
				if e.Kind == node.AuditVote || e.Kind == node.AuditCatchUp {
					last[e.Resource] = max(last[e.Resource], e.Epoch)
				}
				if e.Kind == node.AuditVote || e.Kind == node.AuditCatchUp || e.Kind == node.AuditSeen {
					known[e.Resource] = max(known[e.Resource], e.Epoch)
				}
			}
			for res := 0; res < o.p.r; res++ {
				if _, ok := last[resourceName(res)]; !ok {
					last[resourceName(res)] = g.floor
				}
			}
			nr.last = last
			recs = append(recs, nr)
		}
	}
	// S5 is checked per vote above, as DESIGN defines it (at most
	// MaxEpochStep above what the node had voted, seen certified or been
	// shown by f+1 signed votes). Here: no epoch rose without an audit
	// entry saying why.
	for _, nr := range recs {
		for _, rec := range nr.recs {
			if rec.LastEpoch > nr.last[rec.Resource] {
				o.violateLocked("S5: honest %s node %d's last epoch for %q is %d, but its audit log only accounts for %d", nr.g, nr.i, rec.Resource, rec.LastEpoch, nr.last[rec.Resource])
			}
		}
	}
	// S2 against collusion: every token carries the partials of at least
	// t-b honest nodes (b Byzantine) of the group of its era, each of
	// which logged its vote.
	for _, tok := range o.tokens {
		gi := 0
		if o.newFloor > 0 && tok.Epoch >= o.newFloor {
			gi = 1
		}
		if gi >= len(groups) {
			o.violateLocked("era: a token for %q epoch %d holder %s lies in an era no group of this run has", tok.Resource, tok.Epoch, o.short(tok.Holder.String()))
			continue
		}
		g := groups[gi]
		need := g.t - len(g.byz)
		got := len(honestVotes[gi][voteKey{tok.Resource, tok.Epoch, tok.Holder.String()}])
		if got < need {
			o.violateLocked("S2: token for %q epoch %d holder %s has votes of %d honest %s nodes, a token needs at least %d (t=%d, %d Byzantine)", tok.Resource, tok.Epoch, o.short(tok.Holder.String()), got, g.name, need, g.t, len(g.byz))
		}
	}
	return nil
}

func readAudit(ctx context.Context, r *node.Running) ([]node.AuditEntry, error) {
	var out []node.AuditEntry
	from := uint64(1)
	for page := 0; page < 1000; page++ {
		es, err := r.Audit(ctx, from, 1000)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return out, nil
		}
		out = append(out, es...)
		from = es[len(es)-1].Seq + 1
	}
	return nil, errors.New("audit log too long")
}

// checkLiveness: with at most f faulty nodes at any time every client must
// acquire, and within the bound plus slack. The slack is the wall time of
// a resharing run during the scenario: its DKG (up to 10 members, every
// member's pairings and polynomial work) runs in this process, on the
// same cores as the nodes and clients it is meant to leave alone, where a
// real ceremony runs on the members' own machines.
func (o *oracle) checkLiveness(slack time.Duration) {
	bound := o.tm.liveness + slack
	o.mu.Lock()
	defer o.mu.Unlock()
	total := 0
	for i, n := range o.acquired {
		total += n
		switch {
		case n == 0:
			o.violateLocked("liveness: client%d never acquired (%d ops)", i, len(o.p.ops[i]))
		case o.firstAcquired[i] > bound:
			o.violateLocked("liveness: client%d first acquired after %v, bound %v", i, o.firstAcquired[i].Round(time.Millisecond), bound)
		}
	}
	if total == 0 {
		o.violateLocked("liveness: nothing was acquired")
	}
}
