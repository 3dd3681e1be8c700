// Package barriertest is the conformance suite for verifier.BarrierStore.
// Every store (memory, bbolt, SQL) runs the same cases, so the S4 check and
// raise behaves the same whichever one a resource embeds:
//
//	func TestBoltStoreConformance(t *testing.T) {
//		barriertest.Run(t, func(t *testing.T, dir string) verifier.BarrierStore {
//			s, err := verifier.OpenBoltStore(filepath.Join(dir, "barriers.db"))
//			require.NoError(t, err)
//			return s
//		}, barriertest.Options{Durable: true})
//	}
//
// Most cases drive BarrierStore.Guard with plain epochs, without signing
// a token for each (their Admissions name no holder); the fork cases
// present real tokens of a dealt cluster (verifiertest). It checks that
//
//   - a stale epoch is refused with a *verifier.StaleError, without running
//     the write;
//   - an equal epoch is admitted and leaves the barrier;
//   - at the barrier epoch, the holder whose token set it is admitted
//     again and again, and another holder (another session of the same
//     identity too) is refused with a *verifier.ForkError whose proof
//     verifies, without running the write; the first proof per epoch is
//     kept (verifier.ForkLister, if the store lists them), at most
//     verifier.MaxForksPerResource per resource; a fork below the
//     barrier is just stale; a barrier with no holder known takes the
//     holder of the next token at its epoch;
//   - a higher epoch raises the barrier together with the write, across the
//     whole uint64 range;
//   - a failed or panicking write leaves barrier and data unchanged;
//   - racing writers with different epochs are serialised: admissions are
//     in non-decreasing epoch order, no write lands below a committed
//     barrier, no update is lost, and the final barrier is the highest
//     admitted epoch;
//   - data versions (verifier.PutIfVersion and friends) compare and set
//     inside the transaction, a failed check rolls back the barrier too,
//     and racing read-modify-write clients lose no update;
//   - writers cancelled at random moments (short deadlines) never leave a
//     trace: a Guard that returns an error changed neither data nor barrier,
//     unless the error is verifier.ErrOutcomeUnknown;
//   - barriers, data, the barrier's holder and the fork records survive
//     closing and reopening (durable stores).
package barriertest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"path"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/internal/mint"
)

// OpenFunc opens the store kept under dir, a directory private to one test
// case. The suite calls it again with the same dir after closing the store
// to check durability. It closes every store it opens.
type OpenFunc func(t *testing.T, dir string) verifier.BarrierStore

// Options describe the store under test.
type Options struct {
	// Durable says that barriers and data survive Close and a reopen of the
	// same dir. Stores used in production must be durable; the memory store
	// is not, and skips those cases.
	Durable bool
}

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, open OpenFunc, opts Options) {
	cases := []struct {
		name    string
		durable bool
		run     func(t *testing.T, h *harness)
	}{
		{"FreshResourceAdmitsAnyEpochAndSetsBarrier", false, testFresh},
		{"StaleRefusedWithoutRunningWrite", false, testStale},
		{"EqualEpochAdmittedBarrierUnchanged", false, testEqual},
		{"HigherEpochRaisesBarrierWithWrite", false, testHigher},
		{"WholeEpochRange", false, testEpochRange},
		{"FailedWriteLeavesBarrierAndDataUnchanged", false, testFailedWrite},
		{"PanickingWriteRollsBack", false, testPanic},
		{"TxSemantics", false, testTx},
		{"RacingWritersSerialised", false, testRace},
		{"LowerEpochsQueuedBehindHigherAreRefused", false, testQueuedBehind},
		{"IndependentResources", false, testIndependent},
		{"DataVersions", false, testVersions},
		{"FailedVersionCheckLeavesBarrierAndDataUnchanged", false, testVersionAbort},
		{"RacingVersionedWritersSerialised", false, testVersionRace},
		{"RefusesEmptyResourceAndDoneContext", false, testArgs},
		{"CancelledWritesLeaveNoTrace", false, testCancelled},
		{"BarrierSurvivesReopen", true, testDurable},
		{"ForkSameHolderReadmitted", false, testForkSameHolder},
		{"ForkOtherHolderRefusedWithProof", false, testForkRefused},
		{"ForkOtherSessionOfSameIdentity", false, testForkSession},
		{"ForkBelowBarrierIsStale", false, testForkStale},
		{"ForkBarrierWithoutHolderTakesTheFirst", false, testForkUnknownHolder},
		{"ForkRecordsBounded", false, testForkBound},
		{"ForkNeedsOneCluster", false, testForkOtherCluster},
		{"ForkSurvivesReopen", true, testForkDurable},
		{"UseAfterClose", false, testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.durable && !opts.Durable {
				t.Skip("store is not durable")
			}
			c.run(t, newHarness(t, open))
		})
	}
}

type harness struct {
	open OpenFunc
	dir  string
	s    verifier.BarrierStore
	ctx  context.Context
}

func newHarness(t *testing.T, open OpenFunc) *harness {
	h := &harness{open: open, dir: t.TempDir(), ctx: context.Background()}
	h.s = open(t, h.dir)
	t.Cleanup(func() { _ = h.s.Close() })
	return h
}

func (h *harness) reopen(t *testing.T) {
	t.Helper()
	require.NoError(t, h.s.Close())
	h.s = h.open(t, h.dir)
}

// barrier returns the barrier, or -1 when the resource has none.
func (h *harness) barrier(t *testing.T, resource string) int64 {
	t.Helper()
	e, ok, err := h.s.Barrier(h.ctx, resource)
	require.NoError(t, err)
	if !ok {
		return -1
	}
	require.LessOrEqual(t, e, uint64(math.MaxInt64), "use small epochs with this helper")
	return int64(e)
}

// put writes key=value pairs at epoch and requires admission.
func (h *harness) put(t *testing.T, resource string, epoch uint64, kv ...string) {
	t.Helper()
	require.NoError(t, h.s.Guard(h.ctx, admit(resource, epoch), func(tx verifier.Tx) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tx.Put(kv[i], []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	}))
}

// read returns the present keys among keys, reading at the current barrier
// so that the read changes nothing. The resource must have a barrier.
func (h *harness) read(t *testing.T, resource string, keys ...string) map[string]string {
	t.Helper()
	b := h.barrier(t, resource)
	require.GreaterOrEqual(t, b, int64(0), "read needs a barrier")
	out := map[string]string{}
	require.NoError(t, h.s.Guard(h.ctx, admit(resource, uint64(b)), func(tx verifier.Tx) error {
		for _, k := range keys {
			v, ok, err := tx.Get(k)
			if err != nil {
				return err
			}
			if ok {
				out[k] = string(v)
			}
		}
		return nil
	}))
	require.Equal(t, b, h.barrier(t, resource), "reading at the barrier changed it")
	return out
}

func testFresh(t *testing.T, h *harness) {
	for i, epoch := range []uint64{0, 1, 42, math.MaxUint64} {
		res := fmt.Sprintf("fresh-%d", i)
		_, ok, err := h.s.Barrier(h.ctx, res)
		require.NoError(t, err)
		require.False(t, ok)
		ran := false
		require.NoError(t, h.s.Guard(h.ctx, admit(res, epoch), func(tx verifier.Tx) error {
			ran = true
			return tx.Put("k", []byte("v"))
		}))
		require.True(t, ran)
		got, ok, err := h.s.Barrier(h.ctx, res)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, epoch, got)
	}
	// A nil write only admits the epoch.
	require.NoError(t, h.s.Guard(h.ctx, admit("nil-write", 3), nil))
	require.EqualValues(t, 3, h.barrier(t, "nil-write"))
	require.NoError(t, h.s.Guard(h.ctx, admit("nil-write", 4), nil))
	require.EqualValues(t, 4, h.barrier(t, "nil-write"))
}

func testStale(t *testing.T, h *harness) {
	h.put(t, "r", 10, "k", "v10")
	for _, epoch := range []uint64{9, 1, 0} {
		ran := false
		err := h.s.Guard(h.ctx, admit("r", epoch), func(tx verifier.Tx) error {
			ran = true
			return tx.Put("k", []byte("stale"))
		})
		require.ErrorIs(t, err, verifier.ErrStale)
		var se *verifier.StaleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, verifier.StaleError{Resource: "r", Epoch: epoch, Barrier: 10}, *se)
		require.False(t, ran, "write ran for a stale epoch")
	}
	require.EqualValues(t, 10, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "v10"}, h.read(t, "r", "k"))
}

func testEqual(t *testing.T, h *harness) {
	h.put(t, "r", 7, "a", "1")
	for i := range 3 {
		ran := false
		require.NoError(t, h.s.Guard(h.ctx, admit("r", 7), func(tx verifier.Tx) error {
			ran = true
			return tx.Put(fmt.Sprint("n", i), []byte("x"))
		}))
		require.True(t, ran)
		require.EqualValues(t, 7, h.barrier(t, "r"))
	}
	require.Equal(t, map[string]string{"a": "1", "n0": "x", "n1": "x", "n2": "x"},
		h.read(t, "r", "a", "n0", "n1", "n2"))
}

func testHigher(t *testing.T, h *harness) {
	h.put(t, "r", 3, "k", "v3", "only3", "x")
	h.put(t, "r", 8, "k", "v8")
	require.EqualValues(t, 8, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "v8", "only3": "x"}, h.read(t, "r", "k", "only3"))
	require.ErrorIs(t, h.s.Guard(h.ctx, admit("r", 3), nil), verifier.ErrStale)
	h.put(t, "r", 1<<40, "k", "big")
	require.EqualValues(t, 1<<40, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "big"}, h.read(t, "r", "k"))
}

func testFailedWrite(t *testing.T, h *harness) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		prior bool // resource has barrier 5 and data before the failing write
		epoch uint64
	}{
		{"fresh resource", false, 5},
		{"equal epoch", true, 5},
		{"higher epoch", true, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := "r/" + tt.name
			if tt.prior {
				h.put(t, res, 5, "k", "a", "gone", "z")
			}
			err := h.s.Guard(h.ctx, admit(res, tt.epoch), func(tx verifier.Tx) error {
				if err := tx.Put("k", []byte("b")); err != nil {
					return err
				}
				if err := tx.Put("new", []byte("c")); err != nil {
					return err
				}
				if err := tx.Delete("gone"); err != nil {
					return err
				}
				return boom
			})
			require.ErrorIs(t, err, boom, "Guard must wrap the write's error")
			require.NotErrorIs(t, err, verifier.ErrStale)
			if !tt.prior {
				require.EqualValues(t, -1, h.barrier(t, res), "failed write created a barrier")
				require.ErrorIs(t, h.s.Guard(h.ctx, admit(res, 0), func(tx verifier.Tx) error {
					for _, k := range []string{"k", "new", "gone"} {
						_, ok, err := tx.Get(k)
						require.NoError(t, err)
						require.False(t, ok, "key %q of a failed write is visible", k)
					}
					return errReadOnly
				}), errReadOnly)
				return
			}
			require.EqualValues(t, 5, h.barrier(t, res), "failed write moved the barrier")
			require.Equal(t, map[string]string{"k": "a", "gone": "z"}, h.read(t, res, "k", "new", "gone"))
		})
	}
}

func testPanic(t *testing.T, h *harness) {
	h.put(t, "r", 5, "k", "a")
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = h.s.Guard(h.ctx, admit("r", 9), func(tx verifier.Tx) error {
			if err := tx.Put("k", []byte("b")); err != nil {
				return err
			}
			panic("write panicked")
		})
	}()
	require.Equal(t, "write panicked", recovered, "the panic must propagate")
	require.EqualValues(t, 5, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "a"}, h.read(t, "r", "k"))
	h.put(t, "r", 6, "k", "c") // the store is still usable
	require.Equal(t, map[string]string{"k": "c"}, h.read(t, "r", "k"))
}

func testTx(t *testing.T, h *harness) {
	var leaked verifier.Tx
	require.NoError(t, h.s.Guard(h.ctx, admit("r", 1), func(tx verifier.Tx) error {
		leaked = tx
		_, ok, err := tx.Get("k")
		require.NoError(t, err)
		require.False(t, ok)

		v := []byte("v1")
		require.NoError(t, tx.Put("k", v))
		v[0] = 'X' // the store must have copied it
		got, ok, err := tx.Get("k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "v1", string(got))
		got[0] = 'Y' // and must hand out copies
		got, _, err = tx.Get("k")
		require.NoError(t, err)
		require.Equal(t, "v1", string(got))

		require.NoError(t, tx.Put("empty", nil))
		got, ok, err = tx.Get("empty")
		require.NoError(t, err)
		require.True(t, ok, "an empty value is present")
		require.Empty(t, got)

		require.NoError(t, tx.Put("del", []byte("d")))
		require.NoError(t, tx.Delete("del"))
		_, ok, err = tx.Get("del")
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, tx.Delete("never-existed"))

		require.Error(t, tx.Put("", []byte("x")), "empty key")
		return nil
	}))
	require.Equal(t, map[string]string{"k": "v1", "empty": ""}, h.read(t, "r", "k", "empty", "del"))
	require.NoError(t, h.s.Guard(h.ctx, admit("r", 1), func(tx verifier.Tx) error {
		return tx.Delete("k")
	}))
	require.Equal(t, map[string]string{"empty": ""}, h.read(t, "r", "k", "empty"))

	// A Tx must not write outside its transaction.
	require.Error(t, leaked.Put("late", []byte("x")))
	require.Error(t, leaked.Delete("empty"))
	require.Equal(t, map[string]string{"empty": ""}, h.read(t, "r", "late", "empty"))
}

// testRace runs writers with random epochs on one resource. Every write
// records its epoch and checks, inside the transaction, that it is not below
// the highest epoch committed before it; afterwards the admission order must
// be non-decreasing and the barrier the highest epoch.
func testRace(t *testing.T, h *harness) {
	const (
		writers   = 16
		perWriter = 8
		maxEpoch  = 64
		res       = "contended"
	)
	seed := seedFor(t)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	epochs := make([][]uint64, writers)
	highest := uint64(0)
	for i := range epochs {
		for range perWriter {
			e := 1 + uint64(rng.Intn(maxEpoch))
			epochs[i] = append(epochs[i], e)
			highest = max(highest, e)
		}
	}

	var (
		mu       sync.Mutex
		admitted []uint64
		stale    int
		wg       sync.WaitGroup
		errs     = make(chan error, writers*perWriter)
	)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, epoch := range epochs[i] {
				err := h.s.Guard(h.ctx, admit(res, epoch), func(tx verifier.Tx) error {
					mu.Lock()
					admitted = append(admitted, epoch)
					mu.Unlock()
					n, err := getUint(tx, "count")
					if err != nil {
						return err
					}
					hi, err := getUint(tx, "highest")
					if err != nil {
						return err
					}
					// Yield between read and write, so a store that does
					// not serialise transactions loses updates.
					runtime.Gosched()
					if epoch < hi {
						return fmt.Errorf("admitted epoch %d below committed epoch %d", epoch, hi)
					}
					if err := putUint(tx, "count", n+1); err != nil {
						return err
					}
					return putUint(tx, "highest", epoch)
				})
				var se *verifier.StaleError
				switch {
				case err == nil:
				case errors.As(err, &se):
					if se.Epoch != epoch || se.Barrier <= epoch || se.Resource != res {
						errs <- fmt.Errorf("bad stale error %+v for epoch %d", *se, epoch)
					}
					mu.Lock()
					stale++
					mu.Unlock()
				default:
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, writers*perWriter, len(admitted)+stale)
	require.True(t, slices.IsSorted(admitted), "admission order not non-decreasing: %v", admitted)
	require.EqualValues(t, highest, h.barrier(t, res))
	require.Equal(t, highest, admitted[len(admitted)-1])
	var count, hi uint64
	require.NoError(t, h.s.Guard(h.ctx, admit(res, highest), func(tx verifier.Tx) error {
		var err error
		if count, err = getUint(tx, "count"); err != nil {
			return err
		}
		hi, err = getUint(tx, "highest")
		return err
	}))
	require.EqualValues(t, len(admitted), count, "lost update: writes were not serialised")
	require.Equal(t, highest, hi)
}

func testIndependent(t *testing.T, h *harness) {
	h.put(t, "a", 10, "k", "from-a")
	h.put(t, "b", 3, "k", "from-b") // below a's barrier, but b is fresh
	require.EqualValues(t, 10, h.barrier(t, "a"))
	require.EqualValues(t, 3, h.barrier(t, "b"))
	require.EqualValues(t, -1, h.barrier(t, "c"))

	require.ErrorIs(t, h.s.Guard(h.ctx, admit("a", 3), nil), verifier.ErrStale)
	h.put(t, "b", 4, "only-b", "x")
	require.ErrorIs(t, h.s.Guard(h.ctx, admit("b", 3), nil), verifier.ErrStale)
	require.EqualValues(t, 10, h.barrier(t, "a"))
	require.EqualValues(t, 4, h.barrier(t, "b"))

	require.Equal(t, map[string]string{"k": "from-a"}, h.read(t, "a", "k", "only-b"))
	require.Equal(t, map[string]string{"k": "from-b", "only-b": "x"}, h.read(t, "b", "k", "only-b"))

	// Resource names that are prefixes of each other stay apart.
	h.put(t, "ab", 1, "k", "from-ab")
	require.Equal(t, map[string]string{"k": "from-a"}, h.read(t, "a", "k"))
	require.EqualValues(t, 1, h.barrier(t, "ab"))
}

func testArgs(t *testing.T, h *harness) {
	ran := false
	write := func(verifier.Tx) error { ran = true; return nil }
	require.Error(t, h.s.Guard(h.ctx, admit("", 1), write))
	require.False(t, ran)

	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	require.ErrorIs(t, h.s.Guard(ctx, admit("r", 1), write), context.Canceled)
	require.False(t, ran)
	require.EqualValues(t, -1, h.barrier(t, "r"))
}

// testCancelled runs concurrent writers on a few resources, half of the
// writes under a random deadline of 0 to 3 ms, so that cancellation lands
// at every step of a guarded write: before it starts, while it waits for
// the resource, while it writes, and around its commit. Every write has its
// own epoch (from a shared counter, so most are admitted) and its own key.
// Afterwards a write whose Guard returned an error other than
// ErrOutcomeUnknown must have left no trace: its key is absent, and no
// stale refusal ever named its epoch as the barrier.
func testCancelled(t *testing.T, h *harness) {
	const (
		writers   = 32
		perWriter = 40
		resources = 4
	)
	seed := seedFor(t)
	t.Logf("seed %d", seed)
	type outcome int
	const (
		committed outcome = iota + 1
		failed
		unknown
	)
	type write struct {
		res     string
		epoch   uint64
		key     string
		outcome outcome
		timed   bool
		err     error
	}
	var (
		next    atomic.Uint64
		wg      sync.WaitGroup
		results = make([][]write, writers)
	)
	for i := range writers {
		rng := rand.New(rand.NewSource(seed + int64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perWriter {
				w := write{
					res:   fmt.Sprintf("cancel-%d", rng.Intn(resources)),
					epoch: next.Add(1),
					key:   fmt.Sprintf("w/%d/%d", i, j),
					timed: rng.Intn(2) == 0,
				}
				ctx, cancel := h.ctx, context.CancelFunc(func() {})
				if w.timed {
					ctx, cancel = context.WithTimeout(h.ctx, time.Duration(rng.Int63n(int64(3*time.Millisecond))))
				}
				w.err = h.s.Guard(ctx, admit(w.res, w.epoch), func(tx verifier.Tx) error {
					if err := tx.Put(w.key, []byte("written")); err != nil {
						return err
					}
					n, err := getUint(tx, "count")
					if err != nil {
						return err
					}
					return putUint(tx, "count", n+1)
				})
				cancel()
				switch {
				case w.err == nil:
					w.outcome = committed
				case errors.Is(w.err, verifier.ErrOutcomeUnknown):
					w.outcome = unknown
				default:
					w.outcome = failed
				}
				results[i] = append(results[i], w)
			}
		}()
	}
	wg.Wait()

	// epochOf maps each epoch to its write; the stale errors name the
	// barrier that refused them, which must be the epoch of a write that
	// committed (or may have).
	epochOf := map[uint64]write{}
	var all []write
	for _, ws := range results {
		for _, w := range ws {
			epochOf[w.epoch] = w
			all = append(all, w)
		}
	}
	counts := map[outcome]int{}
	timedFailed, stale := 0, 0
	reported := map[uint64]bool{}
	for _, w := range all {
		counts[w.outcome]++
		if w.outcome == failed && w.timed {
			timedFailed++
		}
		var se *verifier.StaleError
		if errors.As(w.err, &se) {
			stale++
			if b, ok := epochOf[se.Barrier]; ok && b.outcome == failed && !reported[b.epoch] {
				reported[b.epoch] = true
				t.Errorf("write at epoch %d to %s failed (%v), yet its epoch became the barrier that refused epoch %d", b.epoch, b.res, b.err, se.Epoch)
			}
		}
	}
	t.Logf("%d writes: %d committed, %d failed (%d of them under a deadline, %d stale), %d outcome unknown",
		len(all), counts[committed], counts[failed], timedFailed, stale, counts[unknown])

	for r := range resources {
		res := fmt.Sprintf("cancel-%d", r)
		var mine []write
		for _, w := range all {
			if w.res == res {
				mine = append(mine, w)
			}
		}
		barrier, ok, err := h.s.Barrier(h.ctx, res)
		require.NoError(t, err)
		present := map[string]bool{}
		var count uint64
		if ok {
			require.ErrorIs(t, h.s.Guard(h.ctx, admit(res, barrier), func(tx verifier.Tx) error {
				for _, w := range mine {
					_, ok, err := tx.Get(w.key)
					if err != nil {
						return err
					}
					present[w.key] = ok
				}
				var err error
				count, err = getUint(tx, "count")
				if err != nil {
					return err
				}
				return errReadOnly
			}), errReadOnly)
		}
		var highest uint64
		found, maybe := 0, 0
		leaked := 0
		for _, w := range mine {
			switch w.outcome {
			case committed:
				require.True(t, present[w.key], "write at epoch %d to %s returned nil but is absent", w.epoch, res)
				highest = max(highest, w.epoch)
				found++
			case unknown:
				if present[w.key] {
					highest = max(highest, w.epoch)
					maybe++
				}
			case failed:
				if present[w.key] {
					leaked++
					if leaked <= 5 {
						t.Errorf("write at epoch %d to %s returned %q, yet it committed", w.epoch, res, w.err)
					}
				}
			}
		}
		if leaked > 0 {
			t.Errorf("%s: %d writes reported as failed were committed", res, leaked)
		}
		require.EqualValues(t, found+maybe, count, "%s: the counter disagrees with the writes found", res)
		if found+maybe > 0 {
			require.True(t, ok)
			require.Equal(t, highest, barrier, "%s: the barrier is not the highest committed epoch", res)
		} else {
			require.False(t, ok, "%s: a barrier without a committed write", res)
		}
	}
}

func testDurable(t *testing.T, h *harness) {
	h.put(t, "r", 5, "k", "v5")
	h.put(t, "other", 2, "k", "o")
	require.Error(t, h.s.Guard(h.ctx, admit("r", 7), func(tx verifier.Tx) error {
		_ = tx.Put("k", []byte("failed"))
		return errors.New("abort")
	}))
	h.reopen(t)
	require.EqualValues(t, 5, h.barrier(t, "r"))
	require.EqualValues(t, 2, h.barrier(t, "other"))
	require.Equal(t, map[string]string{"k": "v5"}, h.read(t, "r", "k"))
	require.ErrorIs(t, h.s.Guard(h.ctx, admit("r", 4), nil), verifier.ErrStale)
	h.put(t, "r", 6, "k", "v6")
	h.reopen(t)
	require.EqualValues(t, 6, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "v6"}, h.read(t, "r", "k"))
	require.ErrorIs(t, h.s.Guard(h.ctx, admit("r", 5), nil), verifier.ErrStale)
}

func testClosed(t *testing.T, h *harness) {
	h.put(t, "r", 1)
	require.NoError(t, h.s.Close())
	ran := false
	err := h.s.Guard(h.ctx, admit("r", 2), func(verifier.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, verifier.ErrClosed)
	require.False(t, ran)
	_, _, err = h.s.Barrier(h.ctx, "r")
	require.ErrorIs(t, err, verifier.ErrClosed)
	require.NoError(t, h.s.Close(), "a second Close returns nil")
}

func getUint(tx verifier.Tx, key string) (uint64, error) {
	v, ok, err := tx.Get(key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("key %q holds %d bytes", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func putUint(tx verifier.Tx, key string, n uint64) error {
	return tx.Put(key, binary.BigEndian.AppendUint64(nil, n))
}

// errReadOnly aborts a transaction that only reads.
var errReadOnly = errors.New("barriertest: read only, roll back")

// seedFor derives a workload seed from the case name (not the store's test
// name), so a run is reproducible and every store gets the same epochs.
func seedFor(t *testing.T) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(path.Base(t.Name())))
	return int64(h.Sum64() >> 1)
}

// admit is the Admission of a token for resource at epoch: the suite drives
// stores at any epoch without signing a token for each.
func admit(resource string, epoch uint64) verifier.Admission {
	return mint.Admission(resource, epoch).(verifier.Admission)
}
