package barriertest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// The fork cases drive the store with real tokens, verified by a real
// Verifier: a fork is two of them, and its proof must verify.

// forkCluster is the dealt cluster whose tokens the fork cases present,
// and a verifier for it. Its verified-token cache spares the pairings of
// tokens presented again, in later cases and for other stores.
type forkCluster struct {
	d *verifiertest.Dealer
	v *verifier.Verifier

	mu     sync.Mutex
	tokens map[protocol.Statement]protocol.Token
}

var (
	forks = sync.OnceValue(func() *forkCluster {
		d := verifiertest.NewDealer("barriertest-forks", 21)
		return &forkCluster{d: d, v: verifier.New(d.Cluster), tokens: map[protocol.Statement]protocol.Token{}}
	})
	// otherForks is another cluster, whose verifier shares a store with
	// forks' in testForkOtherCluster.
	otherForks = sync.OnceValue(func() *forkCluster {
		d := verifiertest.NewDealer("barriertest-other", 22)
		return &forkCluster{d: d, v: verifier.New(d.Cluster), tokens: map[protocol.Statement]protocol.Token{}}
	})
)

// otherSession is the session of the second process of one identity.
var otherSession = protocol.SessionID{2}

// token returns the cluster's token for resource at epoch, held by the
// identity holder in verifiertest.Session, or in session if given.
func (c *forkCluster) token(t *testing.T, resource string, epoch uint64, holder string, session ...protocol.SessionID) protocol.Token {
	t.Helper()
	h := protocol.Holder{ID: holder, Session: verifiertest.Session}
	if len(session) > 0 {
		h.Session = session[0]
	}
	st := c.d.Cluster.Statement(resource, epoch, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok, ok := c.tokens[st]; ok {
		return tok
	}
	sig, err := c.d.Sign(st)
	require.NoError(t, err)
	tok := protocol.Token{Statement: st, Signature: sig}
	c.tokens[st] = tok
	return tok
}

// guard verifies tok for its resource and runs write under it, reporting
// whether write ran.
func (h *harness) guard(t *testing.T, tok protocol.Token, write func(verifier.Tx) error) (ran bool, err error) {
	t.Helper()
	v := forks().v
	if tok.Cluster == otherForks().d.Cluster.ID {
		v = otherForks().v
	}
	adm, err := v.Admit(tok, tok.Resource)
	require.NoError(t, err, "the suite's tokens verify")
	require.Equal(t, tok, adm.Token())
	err = h.s.Guard(h.ctx, adm, func(tx verifier.Tx) error {
		ran = true
		if write == nil {
			return nil
		}
		return write(tx)
	})
	return ran, err
}

// putWith writes key=value under tok and requires admission.
func (h *harness) putWith(t *testing.T, tok protocol.Token, key, value string) {
	t.Helper()
	ran, err := h.guard(t, tok, func(tx verifier.Tx) error { return tx.Put(key, []byte(value)) })
	require.NoError(t, err)
	require.True(t, ran)
}

// requireFork checks that tok was refused as a fork with the holder of
// barrier, without running its write, that the proof is the two tokens
// and verifies for the cluster, and whether this refusal kept it.
func (h *harness) requireFork(t *testing.T, tok, barrier protocol.Token, kept bool) {
	t.Helper()
	ran, err := h.guard(t, tok, func(tx verifier.Tx) error { return tx.Put("k", []byte("forked")) })
	require.ErrorIs(t, err, verifier.ErrFork)
	require.NotErrorIs(t, err, verifier.ErrStale)
	require.False(t, ran, "the write of a forked token ran")
	var fe *verifier.ForkError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, barrier.Holder, fe.Barrier)
	require.Equal(t, tok.Holder, fe.Refused)
	require.True(t, fe.Fork.Equal(protocol.Fork{A: barrier, B: tok}), "the proof is the barrier's token and the refused one")
	require.NoError(t, protocol.VerifyFork(forks().d.Cluster, fe.Fork), "the proof verifies with the cluster file")
	require.Equal(t, kept, fe.Kept, "kept the proof")
	require.Contains(t, err.Error(), tok.Resource)
}

// requireForks checks the fork records the store lists for resource, if
// it lists them (verifier.ForkLister).
func (h *harness) requireForks(t *testing.T, resource string, want ...protocol.Fork) {
	t.Helper()
	fl, ok := h.s.(verifier.ForkLister)
	if !ok {
		t.Logf("the store keeps no fork records (no verifier.ForkLister): not checked")
		return
	}
	got, err := fl.Forks(h.ctx, resource)
	require.NoError(t, err)
	require.Len(t, got, len(want), "fork records of %q", resource)
	for i := range want {
		require.True(t, want[i].Equal(got[i]), "fork record %d of %q: got epoch %d, want %d", i, resource, got[i].Epoch(), want[i].Epoch())
	}
}

func mustFork(t *testing.T, a, b protocol.Token) protocol.Fork {
	t.Helper()
	f, err := protocol.NewFork(a, b)
	require.NoError(t, err)
	return f
}

// testForkSameHolder: the holder whose token set the barrier writes again
// and again at that epoch, also after a reopen of a durable store.
func testForkSameHolder(t *testing.T, h *harness) {
	c := forks()
	alice := c.token(t, "r", 5, "alice")
	for i := range 3 {
		h.putWith(t, alice, fmt.Sprint("k", i), "a")
	}
	require.EqualValues(t, 5, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k0": "a", "k1": "a", "k2": "a"}, h.read(t, "r", "k0", "k1", "k2"))
	h.requireForks(t, "r")
}

// testForkRefused: another holder's token at the barrier epoch is refused
// with the proof, which is kept once (the first fork at the epoch wins);
// the barrier's holder goes on writing, and higher epochs go on raising
// the barrier.
func testForkRefused(t *testing.T, h *harness) {
	c := forks()
	alice, bob, carol := c.token(t, "r", 5, "alice"), c.token(t, "r", 5, "bob"), c.token(t, "r", 5, "carol")
	h.putWith(t, alice, "k", "alice")
	h.requireFork(t, bob, alice, true)
	h.requireFork(t, bob, alice, false)
	h.requireFork(t, carol, alice, false)
	require.EqualValues(t, 5, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "alice"}, h.read(t, "r", "k"))
	h.requireForks(t, "r", mustFork(t, alice, bob))

	h.putWith(t, alice, "k", "alice again")
	require.Equal(t, map[string]string{"k": "alice again"}, h.read(t, "r", "k"))

	// A higher epoch is admitted and takes the barrier; at that epoch too
	// only its holder writes.
	dave, carol6 := c.token(t, "r", 6, "dave"), c.token(t, "r", 6, "carol")
	h.putWith(t, dave, "k", "dave")
	h.requireFork(t, carol6, dave, true)
	h.requireForks(t, "r", mustFork(t, alice, bob), mustFork(t, dave, carol6))
	// Forks are per resource.
	h.putWith(t, c.token(t, "other", 5, "bob"), "k", "bob")
	h.requireForks(t, "other")
}

// testForkSession: a second session of the barrier holder's identity (a
// replica sharing its key) is another holder.
func testForkSession(t *testing.T, h *harness) {
	c := forks()
	first, second := c.token(t, "r", 3, "alice"), c.token(t, "r", 3, "alice", otherSession)
	h.putWith(t, first, "k", "first")
	h.requireFork(t, second, first, true)
	h.requireForks(t, "r", mustFork(t, first, second))
}

// testForkStale: a fork at an epoch below the barrier is just stale.
func testForkStale(t *testing.T, h *harness) {
	c := forks()
	h.putWith(t, c.token(t, "r", 5, "alice"), "k", "alice")
	h.putWith(t, c.token(t, "r", 7, "dave"), "k", "dave")
	ran, err := h.guard(t, c.token(t, "r", 5, "bob"), nil)
	require.ErrorIs(t, err, verifier.ErrStale)
	require.NotErrorIs(t, err, verifier.ErrFork)
	require.False(t, ran)
	var se *verifier.StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, verifier.StaleError{Resource: "r", Epoch: 5, Barrier: 7}, *se)
	h.requireForks(t, "r")
}

// testForkUnknownHolder: a barrier whose holder the store does not know
// (as barriers written before stores kept holders read; here set by an
// Admission without a token) admits the next token at its epoch and
// keeps its holder, so the next different holder is refused.
func testForkUnknownHolder(t *testing.T, h *harness) {
	c := forks()
	h.put(t, "r", 5, "k", "before")
	bob, alice := c.token(t, "r", 5, "bob"), c.token(t, "r", 5, "alice")
	h.putWith(t, bob, "k", "bob")
	h.putWith(t, bob, "k", "bob again")
	h.requireFork(t, alice, bob, true)
	require.Equal(t, map[string]string{"k": "bob again"}, h.read(t, "r", "k"))
	h.requireForks(t, "r", mustFork(t, bob, alice))

	// A barrier raised without a token names nobody again.
	h.put(t, "r", 6, "k", "six")
	h.putWith(t, c.token(t, "r", 6, "alice"), "k", "alice")
	h.requireFork(t, c.token(t, "r", 6, "bob"), c.token(t, "r", 6, "alice"), true)
}

// testForkBound: the store keeps at most MaxForksPerResource fork
// records per resource, the first ones; later forks are still refused.
func testForkBound(t *testing.T, h *harness) {
	c := forks()
	var want []protocol.Fork
	for e := uint64(1); e <= verifier.MaxForksPerResource+2; e++ {
		alice, bob := c.token(t, "r", e, "alice"), c.token(t, "r", e, "bob")
		h.putWith(t, alice, "k", "alice")
		kept := e <= verifier.MaxForksPerResource
		h.requireFork(t, bob, alice, kept)
		if kept {
			want = append(want, mustFork(t, alice, bob))
		}
	}
	h.requireForks(t, "r", want...)
}

// testForkDurable: the holder kept with the barrier, and the fork record,
// survive closing and reopening the store.
func testForkDurable(t *testing.T, h *harness) {
	c := forks()
	alice, bob, carol := c.token(t, "r", 5, "alice"), c.token(t, "r", 5, "bob"), c.token(t, "r", 5, "carol")
	h.putWith(t, alice, "k", "alice")
	h.reopen(t)
	h.requireFork(t, bob, alice, true)
	h.reopen(t)
	h.requireForks(t, "r", mustFork(t, alice, bob))
	h.requireFork(t, bob, alice, false)
	h.requireFork(t, carol, alice, false)
	h.putWith(t, alice, "k", "alice again")
	require.Equal(t, map[string]string{"k": "alice again"}, h.read(t, "r", "k"))
	h.requireForks(t, "r", mustFork(t, alice, bob))
}

// testForkOtherCluster: tokens of two clusters never fork (there is no
// proof to give). A store that a verifier of another cluster used keeps
// that cluster's token at the barrier; a token of this cluster at the
// same epoch takes its place, as equal epochs were admitted before
// stores kept holders, and fences the next holder from then on.
func testForkOtherCluster(t *testing.T, h *harness) {
	theirs := otherForks().token(t, "r", 5, "alice")
	h.putWith(t, theirs, "k", "theirs")
	bob, carol := forks().token(t, "r", 5, "bob"), forks().token(t, "r", 5, "carol")
	h.putWith(t, bob, "k", "bob")
	h.putWith(t, bob, "k", "bob again")
	h.requireFork(t, carol, bob, true)
	require.Equal(t, map[string]string{"k": "bob again"}, h.read(t, "r", "k"))
}
