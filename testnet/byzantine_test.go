package testnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	mrand "math/rand"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3/share"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// byzOracle is the invariant oracle of the Byzantine tests. It sees every
// token clients get and every write they make to the guarded resource, and
// checks S1 (one holder per resource and epoch), S4 (every admitted write
// is at or above the barrier; the barrier never decreases) and, at the end,
// S5 on the honest nodes. Its lock and write run on clients' goroutines
// too, so they only record what they find; report, on the test goroutine,
// fails the test with it (checkS5 reports first, and a cleanup reports
// what is left).
type byzOracle struct {
	t     *testing.T
	nw    *Network
	v     *verifier.Verifier
	store *verifier.MemoryStore
	fence *verifier.Fence
	byz   []int

	mu       sync.Mutex
	holders  map[string]protocol.Holder // resource/epoch -> holder
	barriers map[string]uint64          // last barrier observed per resource
	tokens   int
	admitted int
	stale    int

	// fmu guards failures alone: write records them while the fence's
	// store holds its lock, and takes mu after the store's.
	fmu      sync.Mutex
	failures []string
}

func newByzOracle(t *testing.T, nw *Network, byz []int) *byzOracle {
	store := verifier.NewMemoryStore()
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	v := verifier.New(nw.Keys.Cluster)
	o := &byzOracle{t: t, nw: nw, v: v, store: store, fence: verifier.NewFence(v, store), byz: byz,
		holders: map[string]protocol.Holder{}, barriers: map[string]uint64{}}
	t.Cleanup(o.report)
	return o
}

// fail records a violation for report; any goroutine may call it.
func (o *byzOracle) fail(format string, args ...any) {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	o.failures = append(o.failures, fmt.Sprintf(format, args...))
}

// report fails the test with every violation recorded since the last
// report. Only the test goroutine calls it.
func (o *byzOracle) report() {
	o.t.Helper()
	o.fmu.Lock()
	fs := o.failures
	o.failures = nil
	o.fmu.Unlock()
	for _, f := range fs {
		o.t.Error(f)
	}
}

// lock records a lock's token: it verifies, it is the only holder of its
// (resource, epoch), and the lock suspects only Byzantine nodes.
func (o *byzOracle) lock(l *client.Lock) {
	tok := l.Token()
	if err := o.v.VerifyFor(tok, tok.Resource); err != nil {
		o.fail("token %s/%d does not verify: %v", tok.Resource, tok.Epoch, err)
	}
	for _, s := range l.Suspects() {
		if !slices.Contains(o.byz, s) {
			o.fail("lock on %s/%d suspects honest node %d (Byzantine: %v)", tok.Resource, tok.Epoch, s, o.byz)
		}
	}
	key := fmt.Sprintf("%s/%d", tok.Resource, tok.Epoch)
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.holders[key]; ok && h != tok.Holder {
		o.fail("S1 violated: %s held by %s and %s", key, h, tok.Holder)
	}
	o.holders[key] = tok.Holder
	o.tokens++
}

// write sends one guarded write with tok through the fence. Inside the
// transaction it checks the write's epoch against the highest epoch
// admitted so far (kept in the resource's own data, so it commits with the
// barrier); afterwards it checks that the barrier did not go down.
func (o *byzOracle) write(ctx context.Context, tok protocol.Token) error {
	err := o.fence.Admit(ctx, tok, tok.Resource, func(tx verifier.Tx) error {
		prev, ok, err := tx.Get("epoch")
		if err != nil {
			return err
		}
		if ok {
			var last uint64
			_, _ = fmt.Sscan(string(prev), &last)
			if tok.Epoch < last {
				o.fail("S4 violated: write at epoch %d admitted after epoch %d", tok.Epoch, last)
			}
		}
		if err := tx.Put("epoch", []byte(fmt.Sprint(tok.Epoch))); err != nil {
			return err
		}
		return tx.Put("holder", []byte(tok.Holder.String()))
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok, berr := o.store.Barrier(ctx, tok.Resource)
	if berr != nil {
		o.fail("barrier of %q: %v", tok.Resource, berr)
	}
	if ok && b < o.barriers[tok.Resource] {
		o.fail("S4 violated: barrier of %q went down from %d to %d", tok.Resource, o.barriers[tok.Resource], b)
	}
	if ok {
		o.barriers[tok.Resource] = b
	}
	switch {
	case err == nil:
		o.admitted++
		if !ok || b < tok.Epoch {
			o.fail("S4 violated: write at epoch %d admitted but barrier is %d", tok.Epoch, b)
		}
	case errors.Is(err, verifier.ErrStale):
		o.stale++
	}
	return err
}

// checkS5 asserts that no honest node's epoch for a resource is more than
// MaxEpochStep above the highest certified epoch it knows.
func (o *byzOracle) checkS5(resources ...string) {
	o.t.Helper()
	o.report()
	ctx := context.Background()
	step := byzStep(o.nw)
	for _, m := range o.nw.Members {
		if slices.Contains(o.byz, m.Index) {
			continue
		}
		r := o.nw.Node(m.Index)
		if r == nil {
			continue
		}
		for _, res := range resources {
			rec, err := r.Record(ctx, res)
			require.NoError(o.t, err)
			var known uint64
			if rec.Certified != nil {
				known = rec.Certified.Epoch
				require.NoError(o.t, o.v.VerifyFor(*rec.Certified, res), "node %d keeps an invalid token", m.Index)
			}
			require.LessOrEqual(o.t, rec.LastEpoch, known+step,
				"S5: honest node %d is at epoch %d on %q, certified %d, step %d", m.Index, rec.LastEpoch, res, known, step)
			require.LessOrEqual(o.t, rec.Seen, known+step,
				"S5: honest node %d was shown votes at epoch %d on %q, certified %d, step %d", m.Index, rec.Seen, res, known, step)
		}
	}
}

// byzStep is the nodes' MaxEpochStep.
func byzStep(nw *Network) uint64 {
	if nw.rules.MaxEpochStep != 0 {
		return nw.rules.MaxEpochStep
	}
	return node.DefaultRules(nw.Keys.Cluster).MaxEpochStep
}

// byzPick chooses the f Byzantine nodes of an n-node network from the
// test's seed.
func byzPick(t *testing.T, n int) []int {
	f := (n - 1) / 3
	rng := mrand.New(mrand.NewSource(seedFor(t)))
	var out []int
	for _, i := range rng.Perm(n)[:f] {
		out = append(out, i+1)
	}
	sort.Ints(out)
	t.Logf("Byzantine nodes %v of %d", out, n)
	return out
}

func byzHonest(n int, byz []int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if !slices.Contains(byz, i) {
			out = append(out, i)
		}
	}
	return out
}

// byzWorkload: K clients contend for one resource, each acquiring it
// rounds times (waiting while busy), writing through the fence with the
// new token and again with its previous one (a paused ex-holder), then
// releasing. f nodes run mk's behaviour. Every acquire must succeed; the
// oracle checks S1, S4 and S5.
func byzWorkload(t *testing.T, n int, mk func() Behaviour, cfg client.Config) {
	const clients, rounds = 3, 3
	const resource = "byz/orders"
	nw := startNet(t, n, clients, Options{})
	byz := byzPick(t, n)
	for _, i := range byz {
		nw.SetBehaviour(i, mk())
	}
	o := newByzOracle(t, nw, byz)
	if cfg.MaxBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 30*time.Millisecond
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	// Each client's goroutine sends back what it did; the test goroutine
	// asserts (the oracle records, see byzOracle).
	type clientRun struct {
		acquired int
		errs     []string // failures
		notes    []string // logged only
	}
	runs := make(chan clientRun, clients)
	for i := 0; i < clients; i++ {
		c := newClient(t, nw, i, cfg)
		go func() {
			var run clientRun
			defer func() { runs <- run }()
			var prev *protocol.Token
			for r := 0; r < rounds; r++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := acquireWait(ctx, c, 25*time.Second, resource, client.WithTTL(10*time.Second))
				if err != nil {
					cancel()
					run.errs = append(run.errs, fmt.Sprintf("client %d round %d: %v", i, r, err))
					return
				}
				o.lock(l)
				tok := l.Token()
				if err := o.write(ctx, tok); err != nil {
					run.errs = append(run.errs, fmt.Sprintf("client %d: the holder's own write at epoch %d was refused: %v", i, tok.Epoch, err))
				}
				if prev != nil {
					if err := o.write(ctx, *prev); err != nil && !errors.Is(err, verifier.ErrStale) {
						run.errs = append(run.errs, fmt.Sprintf("client %d: old token: want admitted or ErrStale, got %v", i, err))
					}
				}
				prev = &tok
				run.acquired++
				if err := l.Release(ctx); err != nil {
					run.notes = append(run.notes, fmt.Sprintf("client %d: release: %v", i, err)) // liveness only
				}
				cancel()
			}
		}()
	}
	acquired := 0
	for _, run := range testwait.RecvAll(t, runs, clients, rounds*30*time.Second+testwait.HangCeiling, "the clients' runs") {
		for _, n := range run.notes {
			t.Log(n)
		}
		for _, e := range run.errs {
			t.Error(e)
		}
		acquired += run.acquired
	}
	o.report()
	require.Equal(t, clients*rounds, acquired, "every client acquired every round")
	require.Len(t, o.holders, clients*rounds, "every token has its own epoch")
	o.checkS5(resource)
	t.Logf("%d tokens, %d writes admitted, %d stale writes refused", o.tokens, o.admitted, o.stale)
}

// byzSizes runs fn for N=4 (f=1) and, unless the test is short, N=7 (f=2).
func byzSizes(t *testing.T, fn func(t *testing.T, n int)) {
	for _, n := range []int{4, 7} {
		if n > 4 && testing.Short() {
			continue
		}
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) { fn(t, n) })
	}
}

func TestByzEquivocateKeepsSafety(t *testing.T) {
	byzSizes(t, func(t *testing.T, n int) { byzWorkload(t, n, Equivocate, client.Config{}) })
}

func TestByzForgePartialsKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, ForgePartials, client.Config{}) // N=7: TestForgedPartialsNamedAsSuspects
}

func TestByzLieInStatusKeepsSafety(t *testing.T) {
	byzSizes(t, func(t *testing.T, n int) { byzWorkload(t, n, LieInStatus, client.Config{}) })
}

func TestByzReplayKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, Replay, client.Config{})
}

func TestByzGarbageKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, Garbage, client.Config{})
}

func TestByzOversizedKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, Oversized, client.Config{})
}

func TestByzSlowKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, func() Behaviour { return Slow(150 * time.Millisecond) }, client.Config{})
}

func TestByzSilentKeepsSafety(t *testing.T) {
	byzWorkload(t, 4, Silent, client.Config{RequestTimeout: time.Second, MinBackoff: 5 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
}

// byzDelayRest delays every node above the first t, so the votes of nodes
// 1..t reach a client first; it returns an undo.
func byzDelayRest(nw *Network, d time.Duration) func() {
	n := len(nw.Members)
	_, th := crypto.FaultThreshold(n)
	for i := th + 1; i <= n; i++ {
		nw.SetDelay(i, d)
	}
	return func() {
		for i := th + 1; i <= n; i++ {
			nw.SetDelay(i, 0)
		}
	}
}

// TestEquivocatorVotesTwiceButS1Holds: the f equivocators (nodes 1..f)
// vote for two holders at one epoch. The client's combination may well use
// an equivocator's partial (its partial is valid), and the two votes with
// their identity signatures are evidence against it; but the honest nodes
// refuse the second holder, so only f partials exist for it and no second
// token can be made.
func TestEquivocatorVotesTwiceButS1Holds(t *testing.T) {
	byzSizes(t, func(t *testing.T, n int) {
		f, th := crypto.FaultThreshold(n)
		nw := startNet(t, n, 2, Options{})
		var eq []int
		for i := 1; i <= f; i++ {
			eq = append(eq, i)
			nw.SetBehaviour(i, Equivocate())
		}
		honest := byzHonest(n, eq)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		keysA := &keyTap{} // to ask the nodes again in A's session
		cA := newClient(t, nw, 0, client.Config{SessionKeys: keysA})
		cB := newClient(t, nw, 1, client.Config{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})

		// The equivocators and f+1 honest nodes answer first.
		undo := byzDelayRest(nw, 300*time.Millisecond)
		lA, err := cA.TryAcquire(ctx, "eq")
		require.NoError(t, err)
		undo()
		verify(t, nw, lA.Token())
		require.Empty(t, lA.Suspects())
		e := lA.Epoch()
		for _, i := range honest {
			require.Eventually(t, func() bool {
				rec, err := nw.Node(i).Record(ctx, "eq")
				return err == nil && rec.LastEpoch >= e
			}, 5*time.Second, 5*time.Millisecond, "honest node %d learns epoch %d", i, e)
		}

		// Holder A is lA's lock session: the honest nodes' votes at e are
		// for it, and only they re-send them.
		sessA := keysA.last(t)
		require.Equal(t, lA.Token().Holder.Session, sessA.Session())
		stA := nw.Keys.Cluster.Statement("eq", e, lA.Token().Holder)
		stB := nw.Keys.Cluster.Statement("eq", e, protocol.Holder{ID: cB.ID(), Session: directSession(1)})
		require.NotEqual(t, stA.VoteBytes(), stB.VoteBytes())
		var partsA, partsB []crypto.PartialSig
		for _, i := range eq {
			vA := acquireDirectAs(t, nw, 0, i, "eq", e, sessA)
			vB := acquireDirect(t, nw, 1, i, "eq", e)
			require.Equal(t, protocol.KindVote, vA.Kind)
			require.Equal(t, protocol.KindVote, vB.Kind, "the equivocator votes for a second holder at epoch %d", e)
			// The evidence material: two identity signatures of node i over
			// vote bytes that differ only in the holder.
			pub, err := nw.Member(i).PeerID.ExtractPublicKey()
			require.NoError(t, err)
			okA, err := pub.Verify(stA.VoteBytes(), vA.IdentitySig)
			require.NoError(t, err)
			okB, err := pub.Verify(stB.VoteBytes(), vB.IdentitySig)
			require.NoError(t, err)
			require.True(t, okA && okB, "both votes of node %d are attributable to it", i)
			require.NoError(t, nw.Keys.Cluster.Key.VerifyPartial(stA.SignedBytes(), vA.Partial))
			require.NoError(t, nw.Keys.Cluster.Key.VerifyPartial(stB.SignedBytes(), vB.Partial))
			partsA = append(partsA, vA.Partial)
			partsB = append(partsB, vB.Partial)
		}
		// Honest nodes give holder A its vote again (idempotent) and refuse
		// holder B at the same epoch.
		for _, i := range honest {
			if r := acquireDirect(t, nw, 1, i, "eq", e); r.Kind != protocol.KindRefuse || r.Code != protocol.CodeStale {
				t.Fatalf("honest node %d answered holder B at epoch %d with %+v", i, e, r)
			}
			if r := acquireDirectAs(t, nw, 0, i, "eq", e, sessA); r.Kind == protocol.KindVote {
				partsA = append(partsA, r.Partial)
			}
		}
		require.GreaterOrEqual(t, len(partsA), th)
		// A combination that uses the equivocators' partials gives A's
		// token (BLS signatures are unique).
		sig, bad, err := nw.Keys.Cluster.Key.Combine(stA.SignedBytes(), partsA[:th])
		require.NoError(t, err)
		require.Empty(t, bad)
		require.Equal(t, lA.Token().Signature, sig)
		// For B only the f equivocators' partials exist.
		_, _, err = nw.Keys.Cluster.Key.Combine(stB.SignedBytes(), partsB)
		require.ErrorIs(t, err, crypto.ErrNotEnoughPartials)
		_, _, err = nw.Keys.Cluster.Key.Combine(stB.SignedBytes(), append(append([]crypto.PartialSig(nil), partsB...), partsA[f:]...))
		require.ErrorIs(t, err, crypto.ErrNotEnoughPartials)

		// Through the client, B waits for A and gets a later epoch.
		type acquired struct {
			l   *client.Lock
			err error
		}
		done := make(chan acquired, 1)
		go func() {
			l, err := acquireWait(ctx, cB, 15*time.Second, "eq")
			done <- acquired{l, err}
		}()
		// B's Acquire finds A's lease and waits by push handoff: it joins
		// every member's wait queue (the equivocators pass Wait on to the
		// honest node), where nothing else waits in this test. Release only
		// once t members queue it, so the release comes after the wait.
		requireWaitersQueued(t, nw, th, "B's waiting Acquire")
		require.NoError(t, lA.Release(ctx))
		b := testwait.Recv(t, done, testwait.HangCeiling, "B's waiting Acquire")
		assertNoErr(t, b.err)
		lB := b.l
		require.NotNil(t, lB)
		verify(t, nw, lB.Token())
		require.Greater(t, lB.Epoch(), e)
		require.NoError(t, lB.Release(ctx))
	})
}

// TestForgedPartialsNamedAsSuspects: nodes 1..f forge their partials and
// answer among the first t. Each round forces one kind of forgery: a
// partial over the wrong message, a partial under another index, or one of
// the BLS12-381 encoding attacks on the node's honest partial. The client
// refuses every one, makes its token from honest partials, and names the
// forger: a vote that does not decode, carries another index or holds a
// partial that fails its check is something no honest node sends (the
// byte-level attacks are refused with the reply, the curve and subgroup
// ones when the combination decodes the partial, the wrong message and the
// negated point by the pairing). An honest node is never named, and every
// token verifies.
func TestForgedPartialsNamedAsSuspects(t *testing.T) {
	byzSizes(t, func(t *testing.T, n int) {
		f, _ := crypto.FaultThreshold(n)
		nw := startNet(t, n, 1, Options{})
		forgers := map[int]*partialForger{}
		var idx []int
		for i := 1; i <= f; i++ {
			p := ForgePartials().(*partialForger)
			forgers[i] = p
			idx = append(idx, i)
			nw.SetBehaviour(i, p)
		}
		defer byzDelayRest(nw, 300*time.Millisecond)()
		o := newByzOracle(t, nw, idx)
		c := newClient(t, nw, 0, client.Config{})
		modes := map[forgery]int{}
		// Each round forces one kind of forgery, so every kind is tried
		// however many attempts a round takes (a drawn kind could be spent
		// on an attempt that made no token).
		cycle := append([]forgery{forgeWrongMessage, forgeOtherIndex}, encodingAttacks...)
		for r, mode := range cycle {
			for _, p := range forgers {
				p.force(mode)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := fmt.Sprintf("forge/%d", r)
			l, err := c.TryAcquire(ctx, res)
			require.NoError(t, err, "round %d (%v)", r, mode)
			o.lock(l)
			tok := l.Token()
			for i, p := range forgers {
				fs := p.forgeries(tok.Resource, tok.Epoch, tok.Holder)
				require.NotEmpty(t, fs, "forger %d saw the vote request", i)
				for _, m := range fs {
					require.Equal(t, mode, m, "round %d: forger %d", r, i)
					modes[m]++
				}
				require.Contains(t, l.Suspects(), i, "round %d: forger %d sent %v", r, i, fs)
			}
			require.NoError(t, l.Release(ctx))
			cancel()
		}
		o.report()
		for _, m := range cycle {
			require.Positive(t, modes[m], "%v was sent in a round that made a token", m)
		}
		t.Logf("forgeries: %v", modes)
	})
}

// TestForgedCandidateNeverCommitted (scenario seed 838): a candidate
// token that a forged partial spoils is never committed while the votes
// in hand cannot complete a token. Node 1 forges; node 4 is cut off,
// standing for an honest member that is, for the moment, voting for
// another waiter. A Commit that members take serves the session, which
// leaves their queues for good, so a client that committed the candidate
// while checking it (as it did) lost a waiter's place. Here no Commit
// reaches any member while node 4 is away; once it is back, the same
// client acquires from the honest votes.
func TestForgedCandidateNeverCommitted(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	forger := ForgePartials().(*partialForger)
	forger.force(forgeWrongMessage)
	nw.SetBehaviour(1, forger)
	var mu sync.Mutex
	commits := 0
	nw.ObserveRequests(func(_ int, proto string, _ peer.ID, _ []byte) {
		if proto == protocol.ProtoCommit {
			mu.Lock()
			commits++
			mu.Unlock()
		}
	})
	committed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return commits
	}
	nw.CutOff(4)
	c := newClient(t, nw, 0, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := c.TryAcquire(ctx, "forge/uncommitted")
	cancel()
	require.Error(t, err, "no token can be made from two honest votes")
	require.Positive(t, forger.statements(), "the forger answered with forged partials")
	require.Zero(t, committed(), "a candidate that does not verify was committed")

	nw.Reconnect(4)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, "forge/uncommitted")
	require.NoError(t, err)
	awaitCommit(t, l)
	tok := l.Token()
	require.NoError(t, verifier.New(nw.Keys.Cluster).VerifyFor(tok, tok.Resource))
	require.Positive(t, committed(), "the token made of honest votes was committed")
	require.NoError(t, l.Release(ctx))
}

// TestVouchedForgerSpendsOneSession bounds what is left of seed 838: a
// member whose partials made a valid token is vouched for, so a candidate
// holding its partial is handed out at the vote and committed while it is
// checked; if it then forges, with node 4 cut off so that no token can be
// made, the client spends that one session (its Commit went out): the
// Lock it handed out is lost with ErrBadToken, and its token does not
// verify. The client checks the forger's partials first from then on: no
// later round hands out or commits anything.
func TestVouchedForgerSpendsOneSession(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	var mu sync.Mutex
	committed := map[uint64]bool{} // epochs of the Commits members got
	nw.ObserveRequests(func(_ int, proto string, _ peer.ID, req []byte) {
		if proto != protocol.ProtoCommit {
			return
		}
		if cr, err := protocol.UnmarshalCommitRequest(req); err == nil {
			mu.Lock()
			committed[cr.Token.Epoch] = true
			mu.Unlock()
		}
	})
	// epochs lists the committed epochs other than skip. A Commit the
	// first acquisition sent to the delayed member may land after it
	// returned, so the second phase counts the epochs it made, not the
	// Commits it saw.
	epochs := func(skip uint64) []uint64 {
		mu.Lock()
		defer mu.Unlock()
		var out []uint64
		for e := range committed {
			if e != skip {
				out = append(out, e)
			}
		}
		slices.Sort(out)
		return out
	}
	c := newClient(t, nw, 0, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	undelay := byzDelayRest(nw, time.Second) // nodes 1..3 vote first, even under load
	l, err := c.TryAcquire(ctx, "forge/vouched")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	undelay()
	first := l.Epoch()
	require.Empty(t, epochs(first), "the honest acquisition committed its own token alone")

	forger := ForgePartials().(*partialForger)
	forger.force(forgeWrongMessage)
	nw.SetBehaviour(1, forger)
	nw.CutOff(4)
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	bad, err := c.TryAcquire(actx, "forge/vouched")
	require.NoError(t, err, "a candidate of vouched members is handed out at the vote")
	testwait.Recv(t, bad.Lost(), testwait.HangCeiling, "Lost of the Lock whose token does not verify")
	require.ErrorIs(t, bad.Err(), client.ErrBadToken)
	require.ErrorIs(t, bad.Err(), client.ErrLost)
	require.Error(t, verifier.New(nw.Keys.Cluster).VerifyFor(bad.Token(), bad.Token().Resource), "the resource refuses it")
	// Acquire, not TryAcquire: the spent session's release may still be
	// on its way, and the rounds after it are what this checks.
	_, err = c.Acquire(actx, "forge/vouched")
	acancel()
	require.Error(t, err, "no token can be made from two honest votes")
	require.Greater(t, forger.statements(), 1, "the forger answered more than one round")
	require.Len(t, epochs(first), 1, "only the first round's candidate, vouched for, was committed")
}

// TestEncodingAttacksRefused: the bytes ForgePartials sends for each
// encoding attack differ from the honest vote in the partial alone, and
// nothing accepts them where it would matter. Strict decoding refuses all
// but the sort flag, whose point (the negated partial) fails the pairing;
// the byte-level attacks do not even decode as a vote; VerifyPartial
// refuses each; Combine names the forger's index and makes the token from
// the others (or none without them); the unchecked interpolation never
// yields a signature that verifies; and the verifier refuses the token
// encoded with each attack. x+p, where it fits, is the same residue as x:
// the kind of non-canonical encoding of the honest point that kyber's
// bn256 decoder accepted, which is why the decoders must be strict.
func TestEncodingAttacksRefused(t *testing.T) {
	const n = 4
	keys, err := Keygen(t.TempDir(), KeygenOptions{N: n, Rand: mrand.New(mrand.NewSource(seedFor(t))), Clients: 1})
	require.NoError(t, err)
	gk := keys.Cluster.Key
	_, th := crypto.FaultThreshold(n)
	members := make([]*Member, n)
	for i, d := range keys.NodeDirs {
		nd, err := node.LoadDir(d)
		require.NoError(t, err)
		members[i] = &Member{Index: i + 1, Dir: nd}
	}
	forger := members[0]
	from := mustDecode(t, keys.Cluster.File.Clients[0].PeerID)
	v := verifier.New(keys.Cluster)
	g1 := bls12381.NewSuite().G1()

	// wantDecode is the reason strict decoding gives for each attack
	// (nil: it decodes, to the negated partial).
	wantDecode := map[forgery]error{
		forgeXNotBelowP:   bls12381.ErrEncoding,
		forgeSortFlag:     nil,
		forgeUncompressed: bls12381.ErrEncoding,
		forgeIdentity:     bls12381.ErrIdentity,
		forgeInfinityFlag: bls12381.ErrEncoding,
		forgeNonSubgroup:  bls12381.ErrNotInSubgroup,
		forgeNotOnCurve:   bls12381.ErrEncoding,
	}
	require.Len(t, wantDecode, len(encodingAttacks))
	sameResidue, otherX := 0, 0
	for _, mode := range encodingAttacks {
		t.Run(mode.String(), func(t *testing.T) {
			p := ForgePartials().(*partialForger)
			p.force(mode)
			votes := 4
			if mode == forgeXNotBelowP {
				votes = 24 // x+p fits for about a quarter of the partials
			}
			for e := uint64(1); e <= uint64(votes); e++ {
				key := protocol.SessionKey{byte(e), byte(mode), 1}
				session := key.Session()
				req := protocol.AcquireRequest{Cluster: keys.Cluster.ID, Resource: "enc", Epoch: e, Key: key, TTL: time.Second}
				_, _, err := p.Request(context.Background(), forger, protocol.ProtoAcquire, from, req.Marshal())
				require.NoError(t, err)
				holder := protocol.Holder{ID: from.String(), Session: session}
				honest, stmt, err := byzVote(forger, "enc", e, holder)
				require.NoError(t, err)
				hb := honest.Marshal()
				out := p.Reply(forger, protocol.ProtoAcquire, from, hb)
				require.Equal(t, []forgery{mode}, p.forgeries("enc", e, holder))

				// Only the partial's signature bytes changed.
				off := bytes.Index(hb, honest.Partial.Marshal())
				require.GreaterOrEqual(t, off, 0)
				require.Len(t, out, len(hb))
				sigAt := off + crypto.PartialSize - crypto.SignatureSize
				require.Equal(t, hb[:sigAt], out[:sigAt])
				require.Equal(t, hb[off+crypto.PartialSize:], out[off+crypto.PartialSize:])
				var sig crypto.Signature
				copy(sig[:], out[sigAt:off+crypto.PartialSize])
				require.NotEqual(t, honest.Partial.Sig, sig)
				forged := crypto.PartialSig{Index: forger.Index, Sig: sig}

				// Strict decoding.
				honestPt, err := bls12381.DecodeG1(honest.Partial.Sig[:])
				require.NoError(t, err)
				pt, err := bls12381.DecodeG1(sig[:])
				if want := wantDecode[mode]; want != nil {
					require.ErrorIs(t, err, want)
				} else {
					require.NoError(t, err)
					require.True(t, pt.Equal(g1.Point().Neg(honestPt)), "the sort flag names the negated partial")
				}
				// The kyber adapter accepts the identity (kyber needs it);
				// everything else it refuses as strict decoding does.
				kp := g1.Point()
				switch err := kp.UnmarshalBinary(sig[:]); mode {
				case forgeSortFlag:
					require.NoError(t, err)
				case forgeIdentity:
					require.NoError(t, err)
					require.True(t, kp.Equal(g1.Point().Null()))
				default:
					require.Error(t, err)
				}
				if mode == forgeXNotBelowP {
					if x, ok := bls12381test.AddModulus(honest.Partial.Sig[:]); ok {
						require.Equal(t, x, sig[:], "x+p when it fits")
						sameResidue++
					} else {
						otherX++
					}
				}

				// The vote as the client decodes it.
				ar, err := protocol.UnmarshalAcquireReply(out)
				_, perr := crypto.ParsePartial(forged.Marshal())
				if mode.byteLevel() {
					require.ErrorIs(t, err, protocol.ErrMalformed)
					require.ErrorIs(t, perr, crypto.ErrMalformedPoint)
				} else {
					require.NoError(t, err)
					require.NoError(t, perr)
					require.Equal(t, forged, ar.Partial)
				}

				// The partial's check, the combination, the token.
				msg := stmt.SignedBytes()
				err = gk.VerifyPartial(msg, forged)
				if mode == forgeSortFlag {
					require.ErrorIs(t, err, crypto.ErrInvalidSignature)
				} else {
					require.ErrorIs(t, err, crypto.ErrMalformedPoint)
				}
				if mode == forgeNonSubgroup {
					require.ErrorIs(t, err, crypto.ErrNotInSubgroup)
				}
				ps := []crypto.PartialSig{forged}
				for _, m := range members[1:] {
					vm, _, err := byzVote(m, "enc", e, holder)
					require.NoError(t, err)
					ps = append(ps, vm.Partial)
				}
				good, bad, err := gk.Combine(msg, ps)
				require.NoError(t, err, "t honest partials make the token")
				require.Equal(t, []int{forger.Index}, bad, "the forger's index is named")
				require.NoError(t, gk.Verify(msg, good))
				_, bad, err = gk.Combine(msg, ps[:th])
				require.ErrorIs(t, err, crypto.ErrNotEnoughPartials, "t-1 honest partials make none")
				require.Equal(t, []int{forger.Index}, bad)
				if cand, _, err := gk.Interpolate(ps[:th]); err == nil {
					require.Error(t, gk.Verify(msg, cand), "an interpolation over the forged partial is no signature")
				}
				tok := protocol.Token{Statement: stmt, Signature: good}
				require.NoError(t, v.Verify(tok))
				tok.Signature = malleate(mode, good, e)
				require.ErrorIs(t, v.Verify(tok), verifier.ErrInvalidToken, "the token encoded with %v", mode)
			}
		})
	}
	require.Positive(t, sameResidue, "x+p fitted for some partial")
	require.Positive(t, otherX, "x+p did not fit for some partial")
}

// TestLieInStatusCannotInflateEpoch: with f nodes claiming huge epochs and
// forged tokens, the epoch a client picks is at most one above the highest
// epoch an honest node knows.
func TestLieInStatusCannotInflateEpoch(t *testing.T) {
	byzSizes(t, func(t *testing.T, n int) {
		nw := startNet(t, n, 2, Options{})
		liars := byzPick(t, n)
		for _, i := range liars {
			nw.SetBehaviour(i, LieInStatus())
		}
		honest := byzHonest(n, liars)
		o := newByzOracle(t, nw, liars)
		clients := []*client.Client{newClient(t, nw, 0, client.Config{}), newClient(t, nw, 1, client.Config{})}
		resources := []string{"lie/a", "lie/b"}
		honestMax := func(res string) uint64 {
			var h uint64
			for _, i := range honest {
				rec, err := nw.Node(i).Record(context.Background(), res)
				require.NoError(t, err)
				h = max(h, rec.LastEpoch)
				if rec.Certified != nil {
					h = max(h, rec.Certified.Epoch)
				}
			}
			return h
		}
		for r := 0; r < 6; r++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := resources[r%2]
			before := honestMax(res)
			l, err := clients[r%2].Acquire(ctx, res)
			require.NoError(t, err)
			o.lock(l)
			require.LessOrEqual(t, l.Epoch(), before+1, "round %d: epoch inflated above honest max %d", r, before)
			require.NoError(t, o.write(ctx, l.Token()))
			require.NoError(t, l.Release(ctx))
			cancel()
		}
		o.checkS5(resources...)
		for _, res := range resources {
			require.Less(t, honestMax(res), uint64(16), "no honest node was pushed far on %q", res)
		}
	})
}

// TestColludingSharesCannotMint: f nodes pool their shares (with any
// client's help: honest partials for other statements) and try to make a
// token. Combine refuses, and every signature they can interpolate is
// refused by the verifier and the fence (S2). So is every encoding attack
// on a signature: on the target statement, and on a real token's own
// signature (a non-canonical or negated encoding is not the token).
func TestColludingSharesCannotMint(t *testing.T) {
	for _, n := range []int{4, 7} {
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			f, th := crypto.FaultThreshold(n)
			rng := mrand.New(mrand.NewSource(seedFor(t)))
			keys, err := Keygen(t.TempDir(), KeygenOptions{N: n, Rand: rng, Clients: 2})
			require.NoError(t, err)
			shares := make([]*crypto.Share, n)
			for i, d := range keys.NodeDirs {
				nd, err := node.LoadDir(d)
				require.NoError(t, err)
				shares[i] = nd.Share
			}
			gk := keys.Cluster.Key
			v := verifier.New(keys.Cluster)
			store := verifier.NewMemoryStore()
			defer store.Close()
			fence := verifier.NewFence(v, store)
			suite := bls12381.NewSuite()
			colluders := shares[:f]
			sign := func(s *crypto.Share, st protocol.Statement) crypto.PartialSig {
				p, err := s.Sign(st.SignedBytes())
				require.NoError(t, err)
				return p
			}
			// interpolate is Lagrange interpolation in the exponent, with no
			// check of the result. ok is false if the kyber adapter refuses
			// a partial's point (it accepts the identity, nothing outside
			// the subgroup): such a fake cannot even be interpolated.
			interpolate := func(ps []crypto.PartialSig) (crypto.Signature, bool) {
				var s crypto.Signature
				pubs := make([]*share.PubShare, len(ps))
				for i, p := range ps {
					pt := suite.G1().Point()
					if err := pt.UnmarshalBinary(p.Sig[:]); err != nil {
						return s, false
					}
					pubs[i] = &share.PubShare{I: p.Index - 1, V: pt}
				}
				pt, err := share.RecoverCommit(suite.G1(), pubs, th, n)
				require.NoError(t, err)
				b, err := pt.MarshalBinary()
				require.NoError(t, err)
				copy(s[:], b)
				return s, true
			}
			refused := func(tok protocol.Token, what string) {
				t.Helper()
				require.ErrorIs(t, v.Verify(tok), verifier.ErrInvalidToken, what)
				err := fence.Admit(context.Background(), tok, tok.Resource, func(verifier.Tx) error {
					t.Errorf("%s: forged token admitted", what)
					return nil
				})
				require.ErrorIs(t, err, verifier.ErrInvalidToken, what)
			}

			holderA := protocol.Holder{ID: keys.Cluster.File.Clients[0].PeerID, Session: protocol.SessionID{0xa}}
			holderB := protocol.Holder{ID: keys.Cluster.File.Clients[1].PeerID, Session: protocol.SessionID{0xb}}
			// A legitimate token for A at epoch 7, as honest nodes would make.
			stA := keys.Cluster.Statement("orders-db", 7, holderA)
			var all []crypto.PartialSig
			for _, s := range shares[f:] {
				all = append(all, sign(s, stA))
			}
			sigA, _, err := gk.Combine(stA.SignedBytes(), all)
			require.NoError(t, err)
			require.NoError(t, v.Verify(protocol.Token{Statement: stA, Signature: sigA}))
			// A's signature written with each encoding attack is not A's
			// token, although the verifier has just cached A's (its cache
			// is keyed by the signature's bytes).
			for i, mode := range encodingAttacks {
				refused(protocol.Token{Statement: stA, Signature: malleate(mode, sigA, uint64(i+1))}, "A's signature, "+mode.String())
			}

			for _, target := range []protocol.Statement{
				keys.Cluster.Statement("orders-db", 7, holderB),              // A's epoch for B
				keys.Cluster.Statement("orders-db", math.MaxUint64, holderB), // exhaust epochs
			} {
				msg := target.SignedBytes()
				var real []crypto.PartialSig
				for _, s := range colluders {
					real = append(real, sign(s, target))
				}
				_, _, err := gk.Combine(msg, real)
				require.ErrorIs(t, err, crypto.ErrNotEnoughPartials, "f partials")

				// Fakes for the missing t-f indices (the honest nodes').
				missing := make([]int, 0, th-f)
				for i := f + 1; len(missing) < th-f; i++ {
					missing = append(missing, i)
				}
				otherEpoch := keys.Cluster.Statement(target.Resource, 3, target.Holder)
				fakes := map[string]func(idx int) crypto.PartialSig{
					"colluder partial relabelled": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: real[0].Sig}
					},
					"colluder partial over another message": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: sign(colluders[0], stA).Sig}
					},
					"random point": func(idx int) crypto.PartialSig {
						b, err := suite.G1().Point().Mul(suite.G1().Scalar().SetInt64(rng.Int63()+1), nil).MarshalBinary()
						require.NoError(t, err)
						var s crypto.Signature
						copy(s[:], b)
						return crypto.PartialSig{Index: idx, Sig: s}
					},
					"colluder partial negated": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: malleate(forgeSortFlag, real[0].Sig, 1)}
					},
					"identity": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: malleate(forgeIdentity, crypto.Signature{}, 1)}
					},
					"point outside the subgroup": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: malleate(forgeNonSubgroup, crypto.Signature{}, uint64(idx))}
					},
					"x with no point": func(idx int) crypto.PartialSig {
						return crypto.PartialSig{Index: idx, Sig: malleate(forgeNotOnCurve, crypto.Signature{}, uint64(idx))}
					},
					"honest partial for another holder, x not below p": func(idx int) crypto.PartialSig {
						p := sign(shares[idx-1], stA)
						return crypto.PartialSig{Index: idx, Sig: malleate(forgeXNotBelowP, p.Sig, 1)}
					},
					"honest partial for another holder": func(idx int) crypto.PartialSig {
						return sign(shares[idx-1], stA)
					},
					"honest partial for another epoch": func(idx int) crypto.PartialSig {
						return sign(shares[idx-1], otherEpoch)
					},
				}
				names := make([]string, 0, len(fakes))
				for name := range fakes {
					names = append(names, name)
				}
				sort.Strings(names)
				for _, name := range names {
					ps := append([]crypto.PartialSig(nil), real...)
					for _, idx := range missing {
						ps = append(ps, fakes[name](idx))
					}
					_, bad, err := gk.Combine(msg, ps)
					require.ErrorIs(t, err, crypto.ErrNotEnoughPartials, name)
					for _, idx := range missing {
						require.Contains(t, bad, idx, name)
					}
					if sig, ok := interpolate(ps); ok {
						refused(protocol.Token{Statement: target, Signature: sig}, name)
					}
				}
				// Other signatures they hold: a partial as the group
				// signature, A's real signature, the zero value; and the
				// encoding attacks on A's signature.
				refused(protocol.Token{Statement: target, Signature: real[0].Sig}, "a partial as signature")
				refused(protocol.Token{Statement: target, Signature: sigA}, "another token's signature")
				refused(protocol.Token{Statement: target}, "zero signature")
				for i, mode := range encodingAttacks {
					refused(protocol.Token{Statement: target, Signature: malleate(mode, sigA, uint64(i+1))}, "another token's signature, "+mode.String())
				}
			}
			_, ok, err := store.Barrier(context.Background(), "orders-db")
			require.NoError(t, err)
			require.False(t, ok, "no forged token raised the barrier")
		})
	}
}

// byzRawHost starts a libp2p host with client identity ci and returns a
// function that opens a raw stream of proto to node i.
func byzRawHost(t *testing.T, nw *Network, ci int) func(ctx context.Context, i int, proto string) (network.Stream, error) {
	t.Helper()
	var ids []peer.ID
	for _, m := range nw.Members {
		ids = append(ids, m.PeerID)
	}
	h, err := transport.NewHost(nw.Keys.Clients[ci], nil, transport.NewGater(ids...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	for _, m := range nw.Members {
		require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	}
	return func(ctx context.Context, i int, proto string) (network.Stream, error) {
		return h.NewStream(ctx, nw.Member(i).PeerID, lp2pproto.ID(proto))
	}
}

// badFrames are frame headers (and bodies) no honest peer writes.
func badFrames() map[string][]byte {
	big := append([]byte(nil), uvarint(protocol.MaxFrameSize+1)...)
	big = append(big, make([]byte, protocol.MaxFrameSize+1)...)
	return map[string][]byte{
		"announces cap+1 and sends it": big,
		"announces 2^64-1":             uvarint(math.MaxUint64),
		"varint longer than 10 bytes":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"non-minimal length":           {0x81, 0x00, 0x01},
		"truncated body":               append(uvarint(200), make([]byte, 20)...),
	}
}

func uvarint(v uint64) []byte {
	var out []byte
	for v >= 0x80 {
		out = append(out, byte(v)|0x80)
		v >>= 7
	}
	return append(out, byte(v))
}

// TestOversizedRequestFramesRefusedByHonestNode: a client attacks honest
// nodes with frames that are too large, malformed or cut short, on every
// protocol, many at once. Each stream is reset without an answer, and the
// cluster then serves a correct client.
func TestOversizedRequestFramesRefusedByHonestNode(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	open := byzRawHost(t, nw, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	protos := []string{protocol.ProtoStatus, protocol.ProtoAcquire, protocol.ProtoCommit, protocol.ProtoRelease}
	// Each attack's goroutine sends back what the node answered ("" for
	// nothing); the test goroutine asserts.
	answers := make(chan string, 4*len(badFrames())*len(protos))
	sent := 0
	for i := 1; i <= 4; i++ {
		for name, frame := range badFrames() {
			for _, proto := range protos {
				sent++
				go func() {
					answered := ""
					defer func() { answers <- answered }()
					sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
					defer scancel()
					s, err := open(sctx, i, proto)
					if err != nil {
						return // the node may refuse streams while flooded
					}
					defer func() { _ = s.Reset() }()
					_ = s.SetDeadline(time.Now().Add(5 * time.Second))
					_, _ = s.Write(frame)
					_ = s.CloseWrite()
					if b, err := protocol.ReadFrame(s, protocol.MaxFrameSize); err == nil {
						answered = fmt.Sprintf("node %d answered %q on %s with %d bytes", i, name, proto, len(b))
					}
				}()
			}
		}
	}
	for _, a := range testwait.RecvAll(t, answers, sent, 2*testwait.HangCeiling, "the bad frames' streams") {
		if a != "" {
			t.Error(a)
		}
	}
	require.NoError(t, ctx.Err(), "every bad frame was refused before the deadline")

	c := newClient(t, nw, 0, client.Config{})
	o := newByzOracle(t, nw, nil)
	l, err := c.TryAcquire(ctx, "oversized")
	require.NoError(t, err)
	o.lock(l)
	require.NoError(t, o.write(ctx, l.Token()))
	require.NoError(t, l.Release(ctx))
	o.checkS5("oversized")
}

// TestOversizedReplyFramesFromRogueNode: node 1 is replaced by a rogue
// host with its identity and address that answers every request with a
// frame that is too large, malformed or cut short. Clients refuse those
// replies and acquire from the other nodes.
func TestOversizedReplyFramesFromRogueNode(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	m := nw.Member(1)
	require.NoError(t, nw.Stop(1))
	var allowed []peer.ID
	for _, c := range nw.Keys.Cluster.File.Clients {
		allowed = append(allowed, mustDecode(t, c.PeerID))
	}
	var rogue host.Host
	var err error
	for try := 0; try < 50; try++ {
		var h host.Host
		h, err = transport.NewHost(m.Dir.Identity, m.Dir.Listen, transport.NewGater(allowed...))
		if err == nil {
			frames := badFrames()
			names := make([]string, 0, len(frames))
			for k := range frames {
				names = append(names, k)
			}
			sort.Strings(names)
			var mu sync.Mutex
			next := 0
			handler := func(s network.Stream) {
				defer func() { _ = s.Close() }()
				_ = s.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = protocol.ReadFrame(s, protocol.MaxFrameSize)
				mu.Lock()
				f := frames[names[next%len(names)]]
				next++
				mu.Unlock()
				_, _ = s.Write(f)
			}
			for _, p := range []string{protocol.ProtoStatus, protocol.ProtoAcquire, protocol.ProtoCommit, protocol.ProtoRenew, protocol.ProtoRelease, protocol.ProtoAbandon} {
				h.SetStreamHandler(lp2pproto.ID(p), handler)
			}
			rogue = h
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = rogue.Close() })

	o := newByzOracle(t, nw, []int{1})
	c := newClient(t, nw, 0, client.Config{RequestTimeout: 2 * time.Second})
	for r := 0; r < 4; r++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := c.TryAcquire(ctx, "rogue")
		require.NoError(t, err)
		o.lock(l)
		require.NoError(t, o.write(ctx, l.Token()))
		require.NoError(t, l.Release(ctx))
		cancel()
	}
	o.checkS5("rogue")
}

func mustDecode(t *testing.T, s string) peer.ID {
	t.Helper()
	id, err := peer.Decode(s)
	require.NoError(t, err)
	return id
}

// TestLyingRefusalCannotPinAcquisition: with exactly t honest nodes up
// (N=7, f=2: node 1 crashed, node 2 refusing every acquire as stale at a
// huge last epoch), a rival's uncommitted vote at one honest node makes
// our rounds split. A split round hints one above its stale refusals, so
// the client tries the liar's epoch once; honest nodes refuse it as too
// far. That round must not become the floor of the next ones (found by
// scenario seed 6753, where it pinned clients until their deadline): the
// client acquires once the rival's vote times out, at an honest epoch.
func TestLyingRefusalCannotPinAcquisition(t *testing.T) {
	const resource = "pin/res"
	nw := startNet(t, 7, 2, Options{})
	require.NoError(t, nw.Stop(1))
	nw.SetReplyFilter(2, func(proto string, reply []byte) []byte {
		if proto != protocol.ProtoAcquire {
			return reply
		}
		return protocol.AcquireReply{Kind: protocol.KindRefuse, Code: protocol.CodeStale, LastEpoch: math.MaxUint64 - 5, Message: "stale"}.Marshal()
	})

	// The rival (client 1) leaves an uncommitted vote at node 3 only.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := nw.Member(3)
	h, err := transport.NewHost(nw.Keys.Clients[1], nil, transport.NewGater(m.PeerID))
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, transport.AddPeer(h, m.PeerID, m.Dir.Listen))
	req := protocol.AcquireRequest{Cluster: nw.Keys.Cluster.ID, Resource: resource, Epoch: 1, Key: directKey(1), TTL: time.Second}
	b, err := transport.Call(ctx, h, m.PeerID, protocol.ProtoAcquire, req.Marshal(), protocol.MaxFrameSize)
	require.NoError(t, err)
	ar, err := protocol.UnmarshalAcquireReply(b)
	require.NoError(t, err)
	require.Equal(t, protocol.KindVote, ar.Kind, "the rival's vote at node 3")
	planted := time.Now()

	c := newClient(t, nw, 0, client.Config{RequestTimeout: 2 * time.Second, MinBackoff: time.Millisecond, MaxBackoff: 30 * time.Millisecond})
	l, err := acquireWait(ctx, c, 20*time.Second, resource)
	require.NoError(t, err, "pinned above the honest nodes' window")
	t.Logf("acquired at epoch %d, %v after the rival's vote", l.Epoch(), time.Since(planted))
	require.Less(t, l.Epoch(), uint64(1000), "the liar's epoch was kept")
	verify(t, nw, l.Token())
	require.NoError(t, l.Release(ctx))
}
