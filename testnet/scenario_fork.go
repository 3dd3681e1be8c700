package testnet

// Forks in the scenario generator (issue 21): a kind in which more than f
// nodes misbehave, so S1 can break, and the oracle checks what is left to
// check when it does. The plan draws it last (forkPlan): c nodes, f+1 to
// 2f of them, either collude (they vote for anything and acknowledge
// commits they never record) or are forgetful (restarted from copies of
// their vote stores taken before they voted). Two quorums of t = 2f+1
// meet in at least f+1 nodes, so a fork needs at least f+1 double
// signers; with c of them the other N-c nodes are split into two halves
// of at least t-c each, one per victim client, by a partition between the
// victims and the honest nodes (a network fault, which no safety property
// may depend on).
//
// The adversary steers, as a real one would. Once the workload is done
// and the cluster healed, a victim client A acquires and releases the
// resource with every node reachable, so that every node knows its epoch
// e0; the forgetful nodes' stores are copied then. With the partition in
// place A acquires again (at e0+1: the c misbehaving nodes and its half
// vote) and writes through the resource's fence; then the forgetful nodes
// are restarted from their copies, and victim B, which reaches the c
// nodes and the other half, none of which remembers A's epoch, acquires
// at e0+1 too (or again, epoch by epoch, until it reaches A's, at most
// forkClimb times) and writes: the fence has seen both tokens and must
// refuse B with verifier.ErrFork. A writes once more (its holder set the
// barrier: admitted), both release, the partition is lifted, and the
// oracle runs forensics over the members for every fork (see
// oracle.judgeForensics for the rule).

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// forkMode is how the fork kind's misbehaving nodes sign twice.
type forkMode int

const (
	// forkCollude: the nodes vote for every Acquire of the victims,
	// whatever they voted before, and acknowledge the victims' commits,
	// renewals and releases without recording them, so that neither their
	// status nor their records give the first token away.
	forkCollude forkMode = iota
	// forkForget: the nodes run the honest code but are restarted from
	// copies of their vote stores taken before they voted for A, so they
	// vote again at the same epoch for B.
	forkForget
)

var forkModeNames = [...]string{"collude", "forget"}

func (m forkMode) String() string { return forkModeNames[m] }

// scenarioForkPercent is the chance, in percent, that a seed draws the
// fork kind (issue 21); seeds that reshare never do (the attack runs on
// the original cluster, and a resharing's relays are Byzantine nodes of
// their own).
const scenarioForkPercent = 12

// forkPlan is the fork kind of a scenario.
type forkPlan struct {
	mode     forkMode
	resource int
	// bad are the c misbehaving nodes (every Byzantine node of the plan
	// among them), halfA and halfB the others, split: victim A reaches
	// bad and halfA, victim B bad and halfB.
	bad, halfA, halfB []int
	// keyA and keyB are the victims' client keys, after every other.
	keyA, keyB int
}

func (fp *forkPlan) String() string {
	return fmt.Sprintf("%s by nodes %v on %s, halves %v | %v", fp.mode, fp.bad, resourceName(fp.resource), fp.halfA, fp.halfB)
}

// planFork fills in the fork kind from the draws made for it: mode,
// resource, extra (how many nodes above f+1 misbehave) and seed (the
// choice and split of the nodes). The Byzantine nodes of the plan are all
// among the c misbehaving ones (c > f >= their number).
func (p *scenarioPlan) planFork(mode forkMode, resource, extra int, seed int64) {
	rng := mrand.New(mrand.NewSource(seed))
	c := p.f + 1 + extra%p.f // f+1 .. 2f: at least f+1 nodes stay honest
	bad := sortedKeys(p.byz)
	var honest []int
	for _, i := range rng.Perm(p.n) {
		if _, byz := p.byz[i+1]; !byz {
			honest = append(honest, i+1)
		}
	}
	bad = append(bad, honest[:c-len(bad)]...)
	rest := honest[c-len(p.byz):]
	sort.Ints(bad)
	fp := &forkPlan{mode: mode, resource: resource, bad: bad}
	need := p.t - c // each victim needs t votes: c bad ones and need of its half
	fp.halfA = slices.Sorted(slices.Values(rest[:need]))
	fp.halfB = slices.Sorted(slices.Values(rest[need:]))
	fp.keyA = p.clientKeys()
	fp.keyB = fp.keyA + 1
	p.fork = fp
}

// forkWire keeps the vote certificates the victims' Commit requests
// carried, as the nodes that received them saw them on the wire: the
// second source of forensics (oracle.judgeForensics).
type forkWire struct {
	mu      sync.Mutex
	victims map[peer.ID]bool
	certs   map[resEpoch][]protocol.Certificate
}

// commit records the certificate of a victim's Commit request.
func (w *forkWire) commit(from peer.ID, proto string, req []byte) {
	if !w.victims[from] || (proto != protocol.ProtoCommit && proto != protocol.ProtoCommitV2) {
		return
	}
	cr, err := protocol.UnmarshalCommitRequest(req)
	if err != nil {
		return
	}
	cert, ok := cr.Cert()
	if !ok {
		return
	}
	k := resEpoch{cert.Statement.Resource, cert.Statement.Epoch}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.ContainsFunc(w.certs[k], cert.Equal) {
		w.certs[k] = append(w.certs[k], cert)
	}
}

// at returns the certificates seen for k.
func (w *forkWire) at(k resEpoch) []protocol.Certificate {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.certs[k])
}

// forkWall is the partition at an honest node: it drops every request of
// the victim on the other side (the stream reset, as a cut link would)
// and records the certificates of the victims' commits it lets through.
type forkWall struct {
	passThrough
	block peer.ID
	wire  *forkWire
}

var errForkWall = errors.New("testnet: fork scenario: partitioned from this client")

func (w *forkWall) Request(_ context.Context, _ *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	if from == w.block {
		return nil, true, errForkWall
	}
	w.wire.commit(from, proto, req)
	return nil, false, nil
}

// forkColluder is a colluding node of the fork kind: it votes for every
// Acquire of the victims (as Equivocate does) and acknowledges their
// Commit, Renew and Release requests without passing them to the node,
// so that the node's records and status never show the first token.
// Everything else (other peers, Status, Forensics) goes to the node.
type forkColluder struct {
	passThrough
	wire *forkWire
}

func (cl *forkColluder) Request(ctx context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	if !cl.wire.victims[from] {
		return nil, false, nil
	}
	cl.wire.commit(from, proto, req)
	switch proto {
	case protocol.ProtoAcquire:
		return equivocator{}.Request(ctx, m, proto, from, req)
	case protocol.ProtoCommit, protocol.ProtoCommitV2:
		ttl := time.Second
		if cr, err := protocol.UnmarshalCommitRequest(req); err == nil && cr.TTL > 0 {
			ttl = cr.TTL
		}
		return protocol.Ack{Code: protocol.CodeOK, Left: ttl}.Marshal(), true, nil
	case protocol.ProtoRenew, protocol.ProtoRelease:
		return protocol.Ack{Code: protocol.CodeOK}.Marshal(), true, nil
	}
	return nil, false, nil
}

// forkClimb bounds B's acquisitions in the fork attack (forkRun.run).
const forkClimb = 8

// forkRun is the fork attack of one scenario run.
type forkRun struct {
	plan   *forkPlan
	nw     *Network
	o      *oracle
	fences []*verifier.Fence
	tm     scenarioTiming
	seed   int64
	logf   func(string, ...any)
	wire   *forkWire
	// convict replaces protocol.Convict in the forensics (tests of the
	// oracle: a broken forensics).
	convict func(*protocol.Cluster, string, uint64, []protocol.Certificate) protocol.Verdict
}

// run carries out the attack (see the file comment); what it gets goes
// to the oracle. It never fails the scenario itself: a step that does not
// work out (the victim does not acquire, a restore fails) is logged, and
// the seed then simply makes no fork.
func (fr *forkRun) run(ctx context.Context) {
	fp, nw, o := fr.plan, fr.nw, fr.o
	res := resourceName(fp.resource)
	fr.logf("fork attack: %v", fp)
	cfg := func(n uint64) client.Config {
		return client.Config{RequestTimeout: fr.tm.request, DefaultTTL: scenarioDefaultTTL,
			MinBackoff: 2 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Seed: uint64(fr.seed)*1000 + 900 + n}
	}
	ca, err := nw.NewClient(fp.keyA, cfg(1))
	if err != nil {
		fr.logf("fork attack: no client A: %v", err)
		return
	}
	defer ca.Close()
	cb, err := nw.NewClient(fp.keyB, cfg(2))
	if err != nil {
		fr.logf("fork attack: no client B: %v", err)
		return
	}
	defer cb.Close()
	fr.wire = &forkWire{victims: map[peer.ID]bool{}, certs: map[resEpoch][]protocol.Certificate{}}
	for _, c := range []*client.Client{ca, cb} {
		id, err := peer.Decode(c.ID())
		if err != nil {
			fr.logf("fork attack: client ID %q: %v", c.ID(), err)
			return
		}
		fr.wire.victims[id] = true
	}
	idA, _ := peer.Decode(ca.ID())
	idB, _ := peer.Decode(cb.ID())
	o.forkVictims(ca.ID(), cb.ID())

	acquire := func(c *client.Client, label string) (*client.Lock, bool) {
		actx, cancel := context.WithTimeout(ctx, fr.tm.wait)
		defer cancel()
		l, err := c.Acquire(actx, res, client.WithTTL(scenarioDefaultTTL))
		if err != nil {
			fr.logf("fork attack: %s: acquire %q failed: %v", label, res, err)
			return nil, false
		}
		fr.logf("fork attack: %s got %q epoch %d", label, res, l.Token().Epoch)
		if o.badLock(label, l) {
			return nil, false
		}
		o.forkAcquired(label, l.Token())
		return l, true
	}
	write := func(l *client.Lock, label string) {
		err := fr.fences[fp.resource].Admit(ctx, l.Token(), res, putHolder(label))
		o.forkWrite(label, l.Token(), err)
	}
	release := func(l *client.Lock) {
		rctx, cancel := context.WithTimeout(ctx, 2*fr.tm.request)
		defer cancel()
		_ = l.Release(rctx) // the colluders acknowledge; a forgetful node may refuse
	}

	// 1. Every node learns e0.
	if l, ok := acquire(ca, "forkA#prime"); ok {
		write(l, "forkA#prime")
		release(l)
	}
	// 2. The misbehaving nodes get their parts, the honest ones the wall.
	backups := map[int][]byte{}
	for _, i := range fp.bad {
		switch fp.mode {
		case forkCollude:
			nw.SetBehaviour(i, &forkColluder{wire: fr.wire})
		case forkForget:
			nw.SetBehaviour(i, &forkWall{wire: fr.wire}) // honest code, records certificates
			b, err := nw.Backup(i)
			if err != nil {
				fr.logf("fork attack: back up node %d: %v", i, err)
				continue
			}
			backups[i] = b
		}
	}
	for _, i := range fp.halfA {
		nw.SetBehaviour(i, &forkWall{block: idB, wire: fr.wire})
	}
	for _, i := range fp.halfB {
		nw.SetBehaviour(i, &forkWall{block: idA, wire: fr.wire})
	}
	// 3. A acquires through the bad nodes and its half, and writes.
	la, okA := acquire(ca, "forkA")
	if okA {
		write(la, "forkA")
	}
	// 4. The forgetful nodes forget.
	for _, i := range fp.bad {
		b, ok := backups[i]
		if !ok {
			continue
		}
		if err := nw.Stop(i); err != nil {
			fr.logf("fork attack: stop node %d: %v", i, err)
		}
		if err := nw.RestoreBackup(i, b); err != nil {
			fr.logf("fork attack: restore node %d: %v", i, err)
		}
	}
	// 5. B acquires through the bad nodes and the other half, and writes
	// where A wrote; then A writes again.
	lb, okB := acquire(cb, "forkB")
	// B's epoch comes from the nodes it reaches, none of which knows A's;
	// if it lies below A's (A's first round lost to a late release, or a
	// node of A's half was ahead), B takes the lock again, one epoch
	// higher each time, until it reaches A's, as an adversary that saw
	// A's token would have it do.
	for try := 2; okA && okB && lb.Token().Epoch < la.Token().Epoch && try <= forkClimb; try++ {
		release(lb)
		lb, okB = acquire(cb, fmt.Sprintf("forkB#%d", try))
	}
	if okB {
		write(lb, "forkB")
	}
	if okA {
		write(la, "forkA")
		release(la)
	}
	if okB {
		release(lb)
	}
	// 6. The partition is lifted (the bad nodes stay as they are).
	for _, i := range slices.Concat(fp.halfA, fp.halfB) {
		nw.SetBehaviour(i, nil)
	}
	if err := heal(nw); err != nil {
		fr.logf("fork attack: heal: %v", err)
	}
	fr.o.judgeForensics(ctx, ca, fr.wire, fr.convict)
}

// forkAllowed reports whether two holders at one (resource, epoch) are
// a fork the plan made: a fork seed, and both are the victims' sessions.
// Anything else (a fork among the workload's tokens, where at most f
// nodes misbehaved) is an S1 violation as in every other seed.
func (o *oracle) forkAllowed(h1, h2 string) bool {
	if o.p.fork == nil || len(o.victims) == 0 {
		return false
	}
	id1, _, _ := strings.Cut(h1, "/")
	id2, _, _ := strings.Cut(h2, "/")
	return o.victims[id1] && o.victims[id2]
}

// forkVictims tells the oracle the victims' identities.
func (o *oracle) forkVictims(ids ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		o.victims[id] = true
	}
}

// forkAcquired records a token a victim was handed (label names the lock
// object): S1 and S2 as for any token (tokenLocked), a fork the plan
// made recorded instead of an S1 violation.
func (o *oracle) forkAcquired(label string, tok protocol.Token) {
	o.mu.Lock()
	defer o.mu.Unlock()
	hs := tok.Holder.String()
	if l, ok := o.sessionLock[hs]; ok && l != label {
		o.violateLocked("S1: %s and %s were handed the same lock session (%q epoch %d)", l, label, tok.Resource, tok.Epoch)
	} else if !ok {
		o.sessionLock[hs] = label
	}
	o.tokenLocked(label, tok)
}

// forkWrite judges a victim's write through the fence: admitted, refused
// as stale, or refused with ErrFork when the oracle knows the token
// forks; nothing else. A refusal with ErrFork must carry a fork that
// verifies and holds the victim's token.
func (o *oracle) forkWrite(label string, tok protocol.Token, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var fe *verifier.ForkError
	switch {
	case err == nil, errors.Is(err, verifier.ErrStale):
	case errors.As(err, &fe):
		k := resEpoch{tok.Resource, tok.Epoch}
		if len(o.forks[k]) < 2 {
			o.violateLocked("fork: %s's write at %q epoch %d was refused as a fork, but no fork is known there", label, tok.Resource, tok.Epoch)
		}
		if verr := protocol.VerifyFork(o.cluster, fe.Fork); verr != nil {
			o.violateLocked("fork: %s's write at %q epoch %d was refused with a fork that does not verify: %v", label, tok.Resource, tok.Epoch, verr)
		}
		if fe.Fork.A != tok && fe.Fork.B != tok {
			o.violateLocked("fork: %s's write at %q epoch %d was refused with a fork that does not hold its token", label, tok.Resource, tok.Epoch)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		o.violateLocked("fork: %s's write with its token for %q epoch %d failed with %v, want admitted, stale or fork", label, tok.Resource, tok.Epoch, err)
	}
}

// judgeForensics checks forensics for every fork the run made, after the
// attack, with the partition lifted and every node running. The rule:
//
//  1. A client (c, victim A's) asks every member for the certificates it
//     keeps for the fork's (resource, epoch) (client.Forensics) and
//     convicts over them (protocol.Convict, or convict in tests).
//  2. If the members' certificates do not show two holders (the honest
//     nodes that kept one were crashed, or colluders withheld theirs),
//     the certificates the victims' Commit requests carried, as the
//     receiving nodes saw them on the wire (forkWire), are added and the
//     verdict is taken again; the report counts these convictions apart.
//     Certificates a client sent are what any client library could keep.
//  3. The verdict must show the fork (two certified holders) and name at
//     least f+1 culprits, every one of them a node the plan made
//     misbehave (scenarioPlan.faulty): never an honest node. A fork whose
//     certificates cannot be found even so is a violation, never skipped.
func (o *oracle) judgeForensics(ctx context.Context, c *client.Client, wire *forkWire, convict func(*protocol.Cluster, string, uint64, []protocol.Certificate) protocol.Verdict) {
	o.mu.Lock()
	var keys []resEpoch
	for k, toks := range o.forks {
		if len(toks) >= 2 {
			keys = append(keys, k)
		}
	}
	o.mu.Unlock()
	if convict == nil {
		convict = protocol.Convict
	}
	bad := o.p.faulty()
	for _, k := range keys {
		fctx, cancel := context.WithTimeout(ctx, 4*o.tm.request)
		out, err := c.Forensics(fctx, k.resource, k.epoch)
		cancel()
		if err != nil {
			o.logf("fork: forensics for %q epoch %d: %v", k.resource, k.epoch, err)
		}
		v := convict(o.cluster, k.resource, k.epoch, out.Certificates)
		fromWire := false
		if !v.Fork() && wire != nil {
			certs := slices.Clone(out.Certificates)
			for _, wc := range wire.at(k) {
				if !slices.ContainsFunc(certs, wc.Equal) {
					certs = append(certs, wc)
				}
			}
			v, fromWire = convict(o.cluster, k.resource, k.epoch, certs), true
		}
		var named []int
		for _, cu := range v.Culprits {
			named = append(named, cu.Node)
		}
		o.logf("fork: forensics for %q epoch %d: %d members answered, %d certificates, certified %d holders, culprits %v (wire certificates needed %v)",
			k.resource, k.epoch, out.Answered, len(out.Certificates), len(v.Certified), named, fromWire)
		o.mu.Lock()
		ok := true
		if !v.Fork() {
			o.violateLocked("fork: forensics for %q epoch %d found certificates of %d holders, even with the clients' commits (members gave %d certificates)", k.resource, k.epoch, len(v.Certified), len(out.Certificates))
			ok = false
		} else if len(v.Culprits) < o.p.f+1 {
			o.violateLocked("fork: forensics for %q epoch %d names %d culprits %v, want at least f+1 = %d", k.resource, k.epoch, len(v.Culprits), named, o.p.f+1)
			ok = false
		}
		for _, i := range named {
			if _, b := bad[i]; !b {
				o.violateLocked("fork: forensics for %q epoch %d names honest node %d (culprits %v, misbehaving %v)", k.resource, k.epoch, i, named, sortedKeys(bad))
				ok = false
			}
		}
		if ok {
			o.convicted++
			if fromWire {
				o.convictedWire++
			}
		}
		o.mu.Unlock()
	}
}
