package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// withBoltCheckpoint sets when the store moves its logged Saves into the
// bbolt file.
func withBoltCheckpoint(bytes int64, idle time.Duration) BoltOption {
	return func(c *boltConfig) { c.checkpointBytes, c.checkpointIdle = bytes, idle }
}

// walTestCrash copies a running store's files (the bbolt file and its log)
// into a new directory, as a crash would leave them: every Save that
// returned is in them, fdatasynced; nothing was checkpointed at Close.
func walTestCrash(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{path, path + walSuffix} {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o600))
	}
	return filepath.Join(dir, filepath.Base(path))
}

// walTestSave saves n records r-0..r-(n-1) at epoch epoch, one audit
// entry each, one at a time.
func walTestSave(t *testing.T, s *BoltStore, n int, epoch uint64) {
	t.Helper()
	for i := range n {
		res := fmt.Sprintf("r-%d", i)
		require.NoError(t, s.Save(context.Background(), storeTestRecord(res, epoch), storeTestEntry(AuditVote, res, epoch)))
	}
}

// walTestCheck requires the store at path to hold r-0..r-(n-1) at epoch and
// an audit log of exactly entries 1..entries.
func walTestCheck(t *testing.T, s *BoltStore, n int, epoch uint64, entries int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		res := fmt.Sprintf("r-%d", i)
		got, ok, err := s.Load(ctx, res)
		require.NoError(t, err)
		require.True(t, ok, res)
		storeRequireRecordEqual(t, storeTestRecord(res, epoch), got)
	}
	log, err := s.Audit(ctx, 1, 10*entries+10)
	require.NoError(t, err)
	require.Len(t, log, entries)
	for i, e := range log {
		require.Equal(t, uint64(i+1), e.Seq)
	}
}

// TestBoltStoreCrashReplay: Saves that returned survive a crash (no Close,
// no checkpoint) through the log alone, and the reopened store numbers
// audit entries on from them.
func TestBoltStoreCrashReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "votes.db")
	s := storeTestOpenBolt(t, path, withBoltCheckpoint(1<<40, time.Hour))
	walTestSave(t, s, 5, 3)
	require.Zero(t, walTestBoltRecords(t, s), "nothing checkpointed yet")

	crashed := walTestCrash(t, path)
	c := storeTestOpenBolt(t, crashed)
	walTestCheck(t, c, 5, 3, 5)
	require.Equal(t, 5, walTestBoltRecords(t, c), "replayed into the bbolt file")
	walTestSave(t, c, 1, 4)
	walTestCheck(t, c, 1, 4, 6)

	// The offline reader sees the logged entries too.
	crashed = walTestCrash(t, path)
	var seqs []uint64
	sum, err := ReadAudit(filepath.Dir(crashed), func(e AuditEntry) error { seqs = append(seqs, e.Seq); return nil })
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, seqs)
}

// walTestBoltRecords counts the records in the bbolt file itself.
func walTestBoltRecords(t *testing.T, s *BoltStore) int {
	t.Helper()
	n := 0
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(boltBucketRecords).ForEach(func(_, _ []byte) error { n++; return nil })
	}))
	return n
}

// TestBoltStoreCrashAfterCheckpoints: with checkpoints every few frames,
// the log is rewritten from its start many times over; frames left from
// before a checkpoint are never replayed, and a crash at any point keeps
// every Save that returned, with a gapless audit log.
func TestBoltStoreCrashAfterCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "votes.db")
	s := storeTestOpenBolt(t, path, withBoltCheckpoint(3000, time.Hour))
	total := 0
	for round := range 6 {
		n := 3 + round*2
		walTestSave(t, s, n, uint64(round+1))
		total += n
		// Records of earlier rounds with higher indexes keep their epoch.
		crashed := walTestCrash(t, path)
		c, err := OpenBoltStore(crashed)
		require.NoError(t, err)
		walTestCheck(t, c, n, uint64(round+1), total)
		require.NoError(t, c.Close())
	}
	require.Positive(t, walTestBoltRecords(t, s), "checkpoints ran")
}

// TestBoltStoreTornFrame: a frame cut short or damaged by a crash (it was
// never acknowledged) is dropped with everything after it; the frames
// before it are replayed.
func TestBoltStoreTornFrame(t *testing.T) {
	for name, damage := range map[string]func(b []byte, at int){
		"cut":     func(b []byte, at int) { clear(b[at+walHeaderSize+5:]) },
		"flipped": func(b []byte, at int) { b[len(b)-1] ^= 1; b[at+walHeaderSize+3] ^= 0x40 },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "votes.db")
			s := storeTestOpenBolt(t, path, withBoltCheckpoint(1<<40, time.Hour))
			walTestSave(t, s, 2, 1)
			last := int(s.walOff)
			walTestSave(t, s, 3, 2) // r-0..r-2 at epoch 2, audit 3..5: the third frame is damaged
			crashed := walTestCrash(t, path)
			b, err := os.ReadFile(crashed + walSuffix)
			require.NoError(t, err)
			// The frames of epoch 2 start at last; damage the third one.
			at := last
			for range 2 {
				at += walHeaderSize + int(uint32(b[at+8])<<24|uint32(b[at+9])<<16|uint32(b[at+10])<<8|uint32(b[at+11]))
			}
			end := at + walHeaderSize + int(uint32(b[at+8])<<24|uint32(b[at+9])<<16|uint32(b[at+10])<<8|uint32(b[at+11]))
			damage(b[:end], at)
			require.NoError(t, os.WriteFile(crashed+walSuffix, b, 0o600))
			c := storeTestOpenBolt(t, crashed)
			walTestCheck(t, c, 2, 2, 4)
			_, ok, err := c.Load(context.Background(), "r-2")
			require.NoError(t, err)
			require.False(t, ok, "the torn frame's Save is gone")
			require.Equal(t, uint64(4), c.lsn, "numbering goes on from the last whole frame")
		})
	}
}

// TestBoltStoreLogOfAnotherStore: a log that belongs to another store
// (copied in beside a file) is not replayed.
func TestBoltStoreLogOfAnotherStore(t *testing.T) {
	dir := t.TempDir()
	a := storeTestOpenBolt(t, filepath.Join(dir, "a.db"), withBoltCheckpoint(1<<40, time.Hour))
	walTestSave(t, a, 2, 1)
	b := storeTestOpenBolt(t, filepath.Join(dir, "b.db"))
	require.NoError(t, b.Close())
	log, err := os.ReadFile(filepath.Join(dir, "a.db"+walSuffix))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.db"+walSuffix), log, 0o600))
	c := storeTestOpenBolt(t, filepath.Join(dir, "b.db"))
	_, ok, err := c.Load(context.Background(), "r-0")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestBoltStoreBatchOrder: the Saves of one frame are applied in arrival
// order, in memory and on replay: the later of two Saves of a resource in
// one batch wins, and audit numbers follow arrival.
func TestBoltStoreBatchOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "votes.db")
	s, gate := storeTestOpenGated(t, 0, withBoltCheckpoint(1<<40, time.Hour))
	_ = path
	first := make(chan error, 1)
	go func() { first <- s.Save(ctx, storeTestRecord("x", 1), storeTestEntry(AuditVote, "x", 1)) }()
	<-gate.entered
	errs := make(chan error, 1)
	// Queued one after the other, so their order is known.
	go func() { errs <- s.Save(ctx, storeTestRecord("x", 2), storeTestEntry(AuditVote, "x", 2)) }()
	storeTestWaitQueued(t, s, 1)
	go func() { errs <- s.Save(ctx, storeTestRecord("x", 3), storeTestEntry(AuditVote, "x", 3)) }()
	storeTestWaitQueued(t, s, 2)
	gate.open()
	require.NoError(t, <-first)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.Equal(t, StoreStats{Saves: 3, Transactions: 2}, s.Stats())
	check := func(s *BoltStore) {
		got, ok, err := s.Load(ctx, "x")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, uint64(3), got.LastEpoch)
		log, err := s.Audit(ctx, 1, 10)
		require.NoError(t, err)
		require.Len(t, log, 3)
		for i, e := range log {
			require.Equal(t, uint64(i+1), e.Seq)
			require.Equal(t, uint64(i+1), e.Epoch)
		}
	}
	check(s)
	c := storeTestOpenBolt(t, walTestCrash(t, s.walPath[:len(s.walPath)-len(walSuffix)]))
	check(c)
}
