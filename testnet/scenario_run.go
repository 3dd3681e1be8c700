package testnet

// The scenario driver: RunScenario starts the cluster, the fences and the
// clients, runs the workload, the nemesis (the planned faults) and the
// resharing, heals the cluster and hands everything to the oracle
// (scenario_oracle.go).

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

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
		Keys: p.nids, SharedIdentity: p.sharedIdentities(), Restored: p.restored}
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

	scenarioProbe.start()
	defer scenarioProbe.done()
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
	o.judgeFairness = cfg.Fairness
	o.logf = logf
	o.tm = tm
	var era *eraRun
	if p.era != nil {
		era = newEraRun(p, nw, filepath.Join(dir, "reshared"), seed, scale)
		if cfg.reshare != nil {
			era.reshare = cfg.reshare
		}
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
	for _, m := range nw.Members { // tests of the fairness oracle
		if _, byz := p.byz[m.Index]; !byz && cfg.everyNode != nil {
			nw.SetBehaviour(m.Index, cfg.everyNode())
		}
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
	for i := range o.clocks {
		o.clocks[i] = newRoundClock()
	}
	ccfg := func(i int) client.Config {
		return client.Config{
			Clock:          o.clocks[i], // counts the client's rounds
			RequestTimeout: tm.request,
			DefaultTTL:     scenarioDefaultTTL,
			MinBackoff:     2 * time.Millisecond,
			MaxBackoff:     100 * time.Millisecond,
			Seed:           uint64(seed)*1000 + uint64(i) + 1,
			VoteTimeout:    cfg.clientVoteTimeout, // zero: the members' (NewClient)
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
	if cfg.mutant != nil {
		for _, m := range nw.Members {
			if _, byz := p.byz[m.Index]; !byz {
				nw.SetBehaviour(m.Index, cfg.mutant(o.ids))
			}
		}
	}
	runLate := scenarioProbe.total()
	wstart := time.Now()
	o.start, o.lateStart = wstart, runLate
	done := make(chan struct{})
	var nwg, cwg, opsDone sync.WaitGroup
	opsDone.Add(len(clients))
	nwg.Add(1)
	go func() {
		defer nwg.Done()
		rep.FaultSteps, rep.RestoreApplied = runNemesis(ctx, nw, p.faults, wstart, done, logf)
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
	o.watchRegistrations(nw)        // when waiters joined the queue, for the fairness check
	stopLapses := o.watchLapses(nw) // the honest nodes' lapses, for the fairness check
	defer stopLapses()
	lctx, stopLiars := context.WithCancel(ctx) // hostile clients, while the honest ones run
	defer stopLiars()
	waitLiars := startLiars(lctx, nw, p, o, tm, logf)
	cwg.Wait()
	stopLiars()
	waitLiars()
	stopLapses()
	close(done)
	nwg.Wait()
	if err := parent.Err(); err != nil {
		return rep, errors.Join(fmt.Errorf("testnet: scenario seed %d: %w", seed, err), o.scenarioError(seed))
	}
	if err := ctx.Err(); err != nil {
		o.violate("liveness: the run hit its hard limit of %v: %v", scenarioHardLimit*scale, err)
	}
	// The final relays and the oracle's reading of the nodes get a time
	// budget of their own, whatever the workload left of the hard limit:
	// a run that ended just inside it must not fail to be read.
	ctx, cancelRead := context.WithTimeout(parent, scenarioReadLimit*scale)
	defer cancelRead()
	if era != nil {
		// Also for a resharing that failed: its time and lateness are
		// what its verdict was judged on.
		rep.ReshareTook, rep.ReshareLate = era.took, era.late
	}
	switch {
	case era != nil && era.wrong != "":
		o.violate("%s", era.wrong)
	case era != nil && era.err != nil:
		o.reshareFailed(era.err, era.took, era.late, era.timeout) // the old group is still checked
	}
	if err := heal(nw); err != nil {
		return rep, errors.Join(fmt.Errorf("testnet: scenario seed %d: heal: %w", seed, err), o.scenarioError(seed))
	}
	if era != nil {
		era.relayFinal(ctx, tm) // every relay sends at least one round, to every honest old node
	}
	if p.fork != nil {
		// The fork kind's attack, on the healed cluster, with a time
		// budget of its own; it heals the cluster again when done.
		rep.Fork = p.fork.String()
		fctx, fcancel := context.WithTimeout(parent, scenarioForkLimit*scale)
		fr := &forkRun{plan: p.fork, nw: nw, o: o, fences: fences, tm: tm, seed: seed, logf: logf, convict: cfg.convict}
		fr.run(fctx)
		fcancel()
	}

	// The oracle's end-of-run checks read the honest nodes' logs and
	// records, of both groups when the cluster was reshared.
	groups := []nodeGroup{{name: "old", nw: nw, byz: p.faulty(), t: p.t}}
	if era != nil && era.nw != nil {
		groups[0].name = "old-group"
		groups = append(groups, nodeGroup{name: "new-group", nw: era.nw, floor: era.floor(), t: era.nw.Keys.Cluster.File.T})
		era.report(o, &rep)
	}
	if err := o.checkNodes(ctx, groups); err != nil {
		return rep, errors.Join(fmt.Errorf("testnet: scenario seed %d: read nodes: %w", seed, err), o.scenarioError(seed))
	}
	var slack time.Duration
	if era != nil {
		slack = era.took
	}
	o.checkLiveness(slack)
	o.checkFairness()
	rep.Lateness, rep.Rounds, rep.FirstLock, rep.LiarTurns = o.livenessFigures()
	rep.Slack = slack
	rep.RunLateness = scenarioProbe.total() - runLate

	o.mu.Lock()
	defer o.mu.Unlock()
	copy(rep.Acquired, o.acquired)
	rep.AcquireErrors = o.acquireErrors
	rep.Tokens = len(o.tokens)
	rep.EraTokens = o.eraTokens
	rep.Writes, rep.StaleRefused, rep.StaleAdmitted, rep.HolderRefused = o.writes, o.staleRefused, o.staleAdmitted, o.holderRefused
	rep.AtVote, rep.BadTokens = o.atVote, o.badTokens
	rep.ReshareExcused = o.reshareExcused
	for _, toks := range o.forks {
		if len(toks) >= 2 {
			rep.Forks++
		}
	}
	rep.ForksRefused, rep.Convicted, rep.ConvictedWire = o.forksRefused, o.convicted, o.convictedWire
	if se := o.scenarioErrorLocked(seed); se != nil {
		return rep, se
	}
	return rep, nil
}

// runNemesis applies the planned faults at their times until the workload
// is done, and returns how many it applied and whether a restore from
// backup was among them.
func runNemesis(ctx context.Context, nw *Network, steps []faultStep, start time.Time, done <-chan struct{}, logf func(string, ...any)) (applied int, restored bool) {
	backups := map[int][]byte{}
	for _, s := range steps {
		t := time.NewTimer(time.Until(start.Add(s.at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return applied, restored
		case <-done:
			t.Stop()
			return applied, restored
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
		case faultBackup:
			backups[s.node], err = nw.Backup(s.node)
		case faultRestore:
			if b, ok := backups[s.node]; ok {
				err = nw.RestoreBackup(s.node, b)
				restored = err == nil
			} else {
				err = nw.Restart(s.node) // the backup failed (logged)
			}
		}
		if err != nil {
			logf("fault %s node %d: %v", faultNames[s.kind], s.node, err)
		}
		applied++
	}
	return applied, restored
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
		fw := o.fairStart(i, res, sc.group, op.ttl, false)
		l, err := c.Acquire(actx, res, client.WithTTL(op.ttl))
		o.fairEnd(fw, l, err)
		cancel()
		if err != nil {
			o.acquireFailed(i, res, err)
			continue
		}
		if o.badLock(fmt.Sprintf("client%d", i), l) {
			o.release(ctx, fw, l) // the Lock is lost; what its Commit started is released
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
		o.release(ctx, fw, l) // may fail under faults; the lease then runs out
		writeStale(soon)
		soon = nil
		switch {
		case op.keepStale && op.staleLate:
			late = append(late, kept{tok: tok, res: op.resource, label: label})
		case op.keepStale:
			soon = append(soon, kept{tok: tok, res: op.resource, label: label})
		}
	}
	// A client that never got the lock keeps trying until its liveness
	// budget (the bound, plus what the measured lateness excuses, up to
	// the ceiling), so that the check is about the bound, not the plan.
	for try := 0; try < 100 && o.count(i) == 0; try++ {
		left := o.budgetLeft(i, o.era.tookSoFar())
		if left <= 0 {
			break
		}
		res := resourceName(sc.ops[0].resource)
		actx, cancel := context.WithTimeout(ctx, left)
		fw := o.fairStart(i, res, sc.group, scenarioDefaultTTL, true)
		l, err := sc.c.Acquire(actx, res)
		o.fairEnd(fw, l, err)
		cancel()
		if err != nil {
			o.acquireFailed(i, res, err)
			if sleepCtx(ctx, 20*time.Millisecond) != nil {
				break
			}
			continue
		}
		if !o.badLock(fmt.Sprintf("client%d", i), l) {
			o.acquired1(i, sc.lockLabel(), sc.group, l.Token())
		}
		o.release(ctx, fw, l)
	}
	o.gaveUp(i) // if it never acquired
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
