package testnet

// The scenario generator: everything a seed decides (cluster size,
// Byzantine nodes, the clients' operations, the fault schedule, shared
// identities and a resharing), drawn from one math/rand source before
// anything runs. The order of the draws is part of every pinned seed
// (TestScenarioRegressions, TestScenarioKinds): add new draws after the
// existing ones, never between them.

import (
	"fmt"
	mrand "math/rand"
	"slices"
	"sort"
	"time"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// Fault kinds of the plan.
type faultKind int

const (
	faultCrash faultKind = iota
	faultRestart
	faultCut
	faultReconnect
	faultDelay
	faultUndelay
	// faultBackup copies the node's vote store; faultRestore restarts the
	// crashed node from that copy (see scenarioPlan.restored).
	faultBackup
	faultRestore
)

var faultNames = [...]string{"crash", "restart", "cut", "reconnect", "delay", "undelay", "backup", "restore from backup"}

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
	// restored, if not 0, is the node restarted from an old backup of its
	// vote store (faultBackup, then faultRestore in place of a restart):
	// from its crash on it has forgotten votes, so it counts against f
	// like a Byzantine node, for the fault budget and for the oracle.
	restored int
	// liars are hostile clients (scenario_liars.go).
	liars []liarPlan
	// fork, if set, is the fork kind (scenario_fork.go), drawn last: more
	// than f nodes misbehave after the workload, and two victim clients
	// are led into a fork.
	fork *forkPlan
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

// clientKeys is how many client keys the scenario's key set needs: the
// honest clients', the era colluder's, the liars' own, then the fork
// victims'.
func (p scenarioPlan) clientKeys() int {
	n := p.nids
	if p.era != nil && p.era.colluder >= 0 {
		n = p.era.colluder + 1
	}
	for _, l := range p.liars {
		n = max(n, l.key+1)
	}
	if p.fork != nil {
		n = max(n, p.fork.keyB+1)
	}
	return n
}

// sharedIdentities reports whether some clients share one key.
func (p scenarioPlan) sharedIdentities() bool { return p.nids < p.k }

// Chance, in percent, that a seed draws each new kind (issue 10).
const (
	scenarioSharedPercent  = 60 // clients sharing a client key
	scenarioResharePercent = 20 // a resharing with the old group left running
	scenarioRestorePercent = 40 // a node restarted from a backup of its store
	scenarioLiarPercent    = 35 // hostile clients (issue 20), scenario_liars.go
	// scenarioForkPercent (issue 21) is in scenario_fork.go.
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
	faulty := func() int { return len(faultySet(p.byz, crashed, cut)) }
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

	// A restart from backup, drawn last for the same reason.
	restore := rng.Intn(100) < scenarioRestorePercent
	pick, backupAt := rng.Intn(1<<20), rng.Float64()
	if restore && !cfg.NoRestore && !cfg.NoFaults {
		p.planRestore(pick, backupAt)
	}

	// Hostile clients (issue 20), drawn last for the same reason: one or
	// two, each with a mode, a resource, the honest client whose key a
	// borrower shares, and a seed of its own. Both are always drawn.
	liars := rng.Intn(100) < scenarioLiarPercent
	nliars := 1 + rng.Intn(2)
	var drawn [2]liarPlan
	for j := range drawn {
		drawn[j] = liarPlan{mode: liarMode(rng.Intn(len(liarModeNames))), resource: rng.Intn(p.r), victim: rng.Intn(p.k), seed: rng.Int63()}
	}
	if liars && !cfg.NoLiars {
		key := p.clientKeys() // after the honest clients' and the colluder's
		for _, l := range drawn[:nliars] {
			if l.mode == liarBorrow {
				l.key = p.ident[l.victim] // a sibling process of that client
				l.resource = p.ops[l.victim][0].resource
			} else {
				l.key, key = key, key+1
			}
			p.liars = append(p.liars, l)
		}
	}

	// Forks (issue 21), drawn last for the same reason: whether, the
	// mode, the resource, how many nodes above f+1 misbehave, and a seed
	// for choosing and splitting the nodes. All are always drawn.
	fork := rng.Intn(100) < scenarioForkPercent
	mode, fres, extra, fseed := forkMode(rng.Intn(len(forkModeNames))), rng.Intn(p.r), rng.Intn(1<<20), rng.Int63()
	if fork && !cfg.NoFork && p.era == nil {
		p.planFork(mode, fres, extra, fseed)
	}
	return p
}

// planRestore makes one honest node restart from a backup of its vote
// store taken earlier (at backupAt, a fraction of the time to its crash),
// if the fault budget allows the node to stay faulty from that crash to
// the end: Byzantine, crashed, cut-off and restored nodes together never
// exceed f. It turns a planned crash and restart into one (pick chooses
// among those that qualify) or, with none, adds a crash and a restore of
// an honest node at backupAt's share of the fault window. With no budget
// left, the plan stays as it is.
func (p *scenarioPlan) planRestore(pick int, backupAt float64) {
	type candidate struct{ crash, restart int }
	var cands []candidate
	for j, s := range p.faults {
		if _, byz := p.byz[s.node]; byz || s.kind != faultCrash {
			continue
		}
		k := slices.IndexFunc(p.faults[j+1:], func(r faultStep) bool { return r.kind == faultRestart && r.node == s.node })
		if k >= 0 && p.maxFaulty(s.node, j) <= p.f {
			cands = append(cands, candidate{crash: j, restart: j + 1 + k})
		}
	}
	if len(cands) == 0 {
		// A crash of 40 ms somewhere in the first 250 ms of the workload.
		crashAt := 10*time.Millisecond + time.Duration(backupAt*float64(240*time.Millisecond))
		for try := 0; try < p.n && len(cands) == 0; try++ {
			i := 1 + (pick+try)%p.n
			if _, byz := p.byz[i]; byz {
				continue
			}
			q := *p
			q.faults = slices.Clone(p.faults)
			c := sort.Search(len(q.faults), func(k int) bool { return q.faults[k].at > crashAt })
			q.faults = slices.Insert(q.faults, c, faultStep{at: crashAt, kind: faultCrash, node: i})
			r := sort.Search(len(q.faults), func(k int) bool { return q.faults[k].at > crashAt+40*time.Millisecond })
			q.faults = slices.Insert(q.faults, r, faultStep{at: crashAt + 40*time.Millisecond, kind: faultRestart, node: i})
			if q.maxFaulty(i, c) <= p.f && !q.crashedAt(i, c) && !q.crashesBetween(i, c, r) {
				p.faults = q.faults
				cands = append(cands, candidate{crash: c, restart: r})
			}
		}
		if len(cands) == 0 {
			return
		}
	}
	c := cands[pick%len(cands)]
	i := p.faults[c.crash].node
	p.restored = i
	p.faults[c.restart].kind = faultRestore
	at := time.Duration(backupAt * float64(p.faults[c.crash].at))
	pos := sort.Search(len(p.faults), func(k int) bool { return p.faults[k].at > at })
	p.faults = slices.Insert(p.faults, pos, faultStep{at: at, kind: faultBackup, node: i})
}

// crashedAt reports whether node i is down (crashed) just before step j.
func (p *scenarioPlan) crashedAt(i, j int) bool {
	down := false
	for _, s := range p.faults[:j] {
		if s.node != i {
			continue
		}
		switch s.kind {
		case faultCrash:
			down = true
		case faultRestart, faultRestore:
			down = false
		}
	}
	return down
}

// crashesBetween reports whether a step strictly between steps from and
// to crashes or restarts node i.
func (p *scenarioPlan) crashesBetween(i, from, to int) bool {
	return slices.ContainsFunc(p.faults[from+1:to], func(s faultStep) bool {
		return s.node == i && (s.kind == faultCrash || s.kind == faultRestart)
	})
}

// maxFaulty replays the fault schedule with node i faulty from step from
// on, and returns the most nodes faulty at once (Byzantine, crashed, cut
// off, or i).
func (p *scenarioPlan) maxFaulty(i, from int) int {
	crashed, cut := map[int]bool{}, map[int]bool{}
	most := 0
	for j, s := range p.faults {
		switch s.kind {
		case faultCrash:
			crashed[s.node] = true
		case faultRestart, faultRestore:
			delete(crashed, s.node)
		case faultCut:
			cut[s.node] = true
		case faultReconnect:
			delete(cut, s.node)
		}
		faulty := faultySet(p.byz, crashed, cut)
		if j >= from {
			faulty[i] = true
		}
		most = max(most, len(faulty))
	}
	return most
}

// faultySet is the set of nodes that are Byzantine (keys of byz) or in
// any of sets.
func faultySet(byz map[int]int, sets ...map[int]bool) map[int]bool {
	out := map[int]bool{}
	for i := range byz {
		out[i] = true
	}
	for _, set := range sets {
		for i := range set {
			out[i] = true
		}
	}
	return out
}

// faulty are the nodes the oracle does not hold to the honest nodes'
// rules: the Byzantine ones, the one restored from a backup, and the
// fork kind's misbehaving nodes.
func (p scenarioPlan) faulty() map[int]int {
	out := make(map[int]int, len(p.byz)+1)
	for i, b := range p.byz {
		out[i] = b
	}
	if p.restored != 0 {
		out[p.restored] = -1
	}
	if p.fork != nil {
		for _, i := range p.fork.bad {
			if _, ok := out[i]; !ok {
				out[i] = -2
			}
		}
	}
	return out
}

func (p scenarioPlan) rules() node.Rules {
	return node.Rules{MaxEpochStep: p.step, VoteTimeout: scenarioVoteTimeout, DefaultTTL: scenarioDefaultTTL, MaxTTL: protocol.MaxTTL}
}

func resourceName(r int) string { return fmt.Sprintf("res-%d", r) }

func sortedKeys(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
