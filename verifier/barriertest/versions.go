package barriertest

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
)

// testEpochRange walks the barrier up through the edges of the uint64 range
// (around 2^63, where a signed encoding would wrap): each epoch is admitted
// and refuses every lower one.
func testEpochRange(t *testing.T, h *harness) {
	steps := []uint64{0, 1, math.MaxInt64 - 1, math.MaxInt64, 1 << 63, 1<<63 + 1, math.MaxUint64 - 1, math.MaxUint64}
	for i, epoch := range steps {
		require.NoError(t, h.s.Guard(h.ctx, admit("range", epoch), func(tx verifier.Tx) error {
			return tx.Put("k", []byte(strconv.FormatUint(epoch, 10)))
		}))
		got, ok, err := h.s.Barrier(h.ctx, "range")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, epoch, got)
		for _, lower := range steps[:i] {
			if lower == epoch {
				continue
			}
			err := h.s.Guard(h.ctx, admit("range", lower), func(tx verifier.Tx) error {
				return tx.Put("k", []byte("stale"))
			})
			var se *verifier.StaleError
			require.ErrorAs(t, err, &se, "epoch %d below barrier %d", lower, epoch)
			require.Equal(t, verifier.StaleError{Resource: "range", Epoch: lower, Barrier: epoch}, *se)
		}
	}
	require.NoError(t, h.s.Guard(h.ctx, admit("range", math.MaxUint64), func(tx verifier.Tx) error {
		v, ok, err := tx.Get("k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, strconv.FormatUint(math.MaxUint64, 10), string(v))
		return nil
	}))
}

// versionGuard runs fn on resource "r" at epoch and returns Guard's error.
func (h *harness) versionGuard(epoch uint64, fn func(tx verifier.Tx) error) error {
	return h.s.Guard(h.ctx, admit("r", epoch), fn)
}

// getVersioned reads a versioned key of "r" at epoch.
func (h *harness) getVersioned(t *testing.T, epoch uint64, key string) (string, uint64) {
	t.Helper()
	var (
		value   []byte
		version uint64
	)
	require.NoError(t, h.versionGuard(epoch, func(tx verifier.Tx) error {
		var err error
		value, version, err = verifier.GetVersioned(tx, key)
		return err
	}))
	return string(value), version
}

// requireMismatch checks that err is the *VersionError for key.
func requireMismatch(t *testing.T, err error, key string, expected, current uint64) {
	t.Helper()
	require.ErrorIs(t, err, verifier.ErrVersionMismatch)
	require.NotErrorIs(t, err, verifier.ErrStale)
	var ve *verifier.VersionError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, verifier.VersionError{Key: key, Expected: expected, Current: current}, *ve)
}

func testVersions(t *testing.T, h *harness) {
	put := func(key, value string, expected uint64) (uint64, error) {
		var v uint64
		err := h.versionGuard(1, func(tx verifier.Tx) error {
			var err error
			v, err = verifier.PutIfVersion(tx, key, []byte(value), expected)
			return err
		})
		return v, err
	}
	del := func(key string, expected uint64) error {
		return h.versionGuard(1, func(tx verifier.Tx) error {
			return verifier.DeleteIfVersion(tx, key, expected)
		})
	}

	value, v0 := h.getVersioned(t, 1, "k")
	require.Equal(t, "", value)
	require.Equal(t, verifier.NoVersion, v0)

	// Create only if absent.
	v1, err := put("k", "a", verifier.NoVersion)
	require.NoError(t, err)
	require.NotEqual(t, verifier.NoVersion, v1)
	_, err = put("k", "b", verifier.NoVersion)
	requireMismatch(t, err, "k", verifier.NoVersion, v1)

	// Compare and set.
	v2, err := put("k", "b", v1)
	require.NoError(t, err)
	require.Greater(t, v2, v1)
	_, err = put("k", "stale data", v1)
	requireMismatch(t, err, "k", v1, v2)
	value, v := h.getVersioned(t, 1, "k")
	require.Equal(t, "b", value)
	require.Equal(t, v2, v)

	// Compare and delete.
	requireMismatch(t, del("k", v1), "k", v1, v2)
	require.NoError(t, del("k", v2))
	value, v = h.getVersioned(t, 1, "k")
	require.Equal(t, "", value)
	require.Equal(t, verifier.NoVersion, v)
	require.NoError(t, del("k", verifier.NoVersion), "absent and expected absent")
	requireMismatch(t, del("k", v2), "k", v2, verifier.NoVersion)

	// A recreated key never reuses a version (no ABA).
	v3, err := put("k", "c", verifier.NoVersion)
	require.NoError(t, err)
	require.Greater(t, v3, v2)
	_, err = put("k", "stale data", v2)
	requireMismatch(t, err, "k", v2, v3)

	// Unconditional writes still assign versions; another key's write moves
	// the resource's counter too.
	v4, err := put("k", "d", verifier.AnyVersion)
	require.NoError(t, err)
	require.Greater(t, v4, v3)
	w1, err := put("other", "", verifier.NoVersion)
	require.NoError(t, err)
	require.Greater(t, w1, v4)
	value, v = h.getVersioned(t, 1, "other")
	require.Equal(t, "", value, "an empty versioned value")
	require.Equal(t, w1, v)
	require.NoError(t, del("other", verifier.AnyVersion))
	value, v = h.getVersioned(t, 1, "other")
	require.Equal(t, "", value)
	require.Equal(t, verifier.NoVersion, v)

	// Plain values are not versioned; reserved and empty keys are refused.
	require.NoError(t, h.versionGuard(1, func(tx verifier.Tx) error {
		require.NoError(t, tx.Put("plain", []byte("x")))
		_, _, err := verifier.GetVersioned(tx, "plain")
		require.ErrorIs(t, err, verifier.ErrNotVersioned)
		_, err = verifier.PutIfVersion(tx, "plain", []byte("y"), verifier.AnyVersion)
		require.ErrorIs(t, err, verifier.ErrNotVersioned)
		_, err = verifier.PutIfVersion(tx, verifier.VersionCounterKey, []byte("y"), verifier.AnyVersion)
		require.Error(t, err)
		require.Error(t, verifier.DeleteIfVersion(tx, verifier.ReservedKeyPrefix+"x", verifier.AnyVersion))
		_, _, err = verifier.GetVersioned(tx, "")
		require.Error(t, err)
		return nil
	}))
	require.EqualValues(t, 1, h.barrier(t, "r"))
}

// testVersionAbort: a failed compare-and-set, returned from the write,
// rolls back the whole transaction: the barrier is not raised and the
// write's other changes (data and versions) are not applied.
func testVersionAbort(t *testing.T, h *harness) {
	var v1 uint64
	require.NoError(t, h.versionGuard(5, func(tx verifier.Tx) error {
		var err error
		v1, err = verifier.PutIfVersion(tx, "k", []byte("a"), verifier.NoVersion)
		return err
	}))
	var v2 uint64
	require.NoError(t, h.versionGuard(5, func(tx verifier.Tx) error {
		var err error
		v2, err = verifier.PutIfVersion(tx, "k", []byte("b"), v1)
		return err
	}))

	// A holder with a fresh token (epoch 9) but stale data (version v1).
	err := h.versionGuard(9, func(tx verifier.Tx) error {
		if _, err := verifier.PutIfVersion(tx, "side", []byte("s"), verifier.NoVersion); err != nil {
			return err
		}
		if err := tx.Put("plain", []byte("p")); err != nil {
			return err
		}
		_, err := verifier.PutIfVersion(tx, "k", []byte("stale data"), v1)
		return err
	})
	requireMismatch(t, err, "k", v1, v2)
	require.EqualValues(t, 5, h.barrier(t, "r"), "a failed version check raised the barrier")
	value, v := h.getVersioned(t, 5, "k")
	require.Equal(t, "b", value)
	require.Equal(t, v2, v)
	value, v = h.getVersioned(t, 5, "side")
	require.Equal(t, "", value)
	require.Equal(t, verifier.NoVersion, v)
	require.Equal(t, map[string]string{}, h.read(t, "r", "plain"))

	// The same holder re-reads and succeeds, raising the barrier with it.
	var v3 uint64
	require.NoError(t, h.versionGuard(9, func(tx verifier.Tx) error {
		_, cur, err := verifier.GetVersioned(tx, "k")
		if err != nil {
			return err
		}
		v3, err = verifier.PutIfVersion(tx, "k", []byte("c"), cur)
		return err
	}))
	require.Greater(t, v3, v2)
	require.EqualValues(t, 9, h.barrier(t, "r"))
}

// testVersionRace runs read-modify-write increments whose read and write
// are separate guarded transactions, as a client reading over the network
// does: the version check must turn every interleaving into a retry, never
// a lost update.
func testVersionRace(t *testing.T, h *harness) {
	const (
		workers     = 6
		perWorker   = 4
		maxAttempts = 1000
	)
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		mismatches int
		errs       = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				if err := increment(h, maxAttempts, func() { mu.Lock(); mismatches++; mu.Unlock() }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d version mismatches retried", mismatches)
	value, _ := h.getVersioned(t, 1, "counter")
	require.Equal(t, strconv.Itoa(workers*perWorker), value, "lost update")
}

// increment adds one to the versioned decimal counter of resource "r".
func increment(h *harness, maxAttempts int, mismatch func()) error {
	for range maxAttempts {
		var (
			value   []byte
			version uint64
		)
		err := h.versionGuard(1, func(tx verifier.Tx) error {
			var err error
			value, version, err = verifier.GetVersioned(tx, "counter")
			return err
		})
		if err != nil {
			return err
		}
		n := 0
		if version != verifier.NoVersion {
			if n, err = strconv.Atoi(string(value)); err != nil {
				return err
			}
		}
		runtime.Gosched()
		err = h.versionGuard(1, func(tx verifier.Tx) error {
			_, err := verifier.PutIfVersion(tx, "counter", []byte(strconv.Itoa(n+1)), version)
			return err
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, verifier.ErrVersionMismatch) {
			return err
		}
		mismatch()
	}
	return fmt.Errorf("no increment after %d attempts", maxAttempts)
}

// testQueuedBehind holds a higher epoch's transaction open while writers
// with lower epochs arrive: once it commits, every one of them must be
// refused. A store that checks the barrier before it waits for the
// resource's lock (read, then write) admits them. The pause only gives the
// lower writers time to reach the store; a correct store refuses them
// whatever the timing.
func testQueuedBehind(t *testing.T, h *harness) {
	const lower = 4
	h.put(t, "r", 1, "k", "v1")
	inHigh, release := make(chan struct{}), make(chan struct{})
	highDone := make(chan error, 1)
	go func() {
		highDone <- h.s.Guard(h.ctx, admit("r", 10), func(tx verifier.Tx) error {
			close(inHigh)
			<-release
			return tx.Put("k", []byte("v10"))
		})
	}()
	<-inHigh
	results := make(chan error, lower)
	for i := range lower {
		go func() {
			results <- h.s.Guard(h.ctx, admit("r", uint64(2+i)), func(tx verifier.Tx) error {
				return tx.Put("k", []byte("low"))
			})
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	require.NoError(t, <-highDone)
	for range lower {
		err := <-results
		var se *verifier.StaleError
		require.ErrorAs(t, err, &se, "a lower epoch queued behind epoch 10 was admitted")
		require.EqualValues(t, 10, se.Barrier)
	}
	require.EqualValues(t, 10, h.barrier(t, "r"))
	require.Equal(t, map[string]string{"k": "v10"}, h.read(t, "r", "k"))
}
