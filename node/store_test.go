package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/palisade-dev/palisade/protocol"
)

// TestVoteStoreConformance runs the same suite against every VoteStore
// implementation.
func TestVoteStoreConformance(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s VoteStore)
	}{
		{"LoadMissing", testStoreLoadMissing},
		{"SaveLoad", testStoreSaveLoad},
		{"Overwrite", testStoreOverwrite},
		{"NoAliasing", testStoreNoAliasing},
		{"AuditSeqAndPaging", testStoreAuditSeqAndPaging},
		{"ConcurrentSavesGapFree", testStoreConcurrentSavesGapFree},
		{"RejectedSaveWritesNothing", testStoreRejectedSaveWritesNothing},
		{"CancelledContext", testStoreCancelledContext},
		{"Closed", testStoreClosed},
	}
	for _, impl := range storeTestImpls {
		t.Run(impl.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) { tt.fn(t, impl.open(t)) })
			}
		})
	}
}

func testStoreLoadMissing(t *testing.T, s VoteStore) {
	rec, ok, err := s.Load(context.Background(), "missing")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, Record{}, rec)
}

func testStoreSaveLoad(t *testing.T, s VoteStore) {
	ctx := context.Background()
	want := storeTestRecord("orders-db", 3)
	want.Lease.Expires = time.Now().Add(time.Minute) // local zone, monotonic reading
	require.NoError(t, s.Save(ctx, want))

	got, ok, err := s.Load(ctx, "orders-db")
	require.NoError(t, err)
	require.True(t, ok)
	storeRequireRecordEqual(t, want, got)
	require.NotNil(t, got.Certified)
	require.True(t, got.Vote.Equal(want.Vote))
	require.True(t, got.Certified.Signature.Equal(want.Certified.Signature))
	require.Equal(t, want.Certified.Digest(), got.Certified.Digest())

	// A record with nothing optional set round-trips too.
	bare := Record{Resource: "bare", LastEpoch: 1}
	require.NoError(t, s.Save(ctx, bare))
	got, ok, err = s.Load(ctx, "bare")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, got.Lease.Expires.IsZero())
	storeRequireRecordEqual(t, bare, got)
}

func testStoreOverwrite(t *testing.T, s VoteStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, storeTestRecord("r", 3)))
	other := storeTestRecord("other", 1)
	require.NoError(t, s.Save(ctx, other))

	// The new record replaces the old one entirely: no stale token or vote.
	next := Record{Resource: "r", LastEpoch: 4, Lease: Lease{Holder: protocol.Holder{ID: "h2", Session: protocol.SessionID{2}}, Epoch: 4}}
	require.NoError(t, s.Save(ctx, next))
	got, ok, err := s.Load(ctx, "r")
	require.NoError(t, err)
	require.True(t, ok)
	storeRequireRecordEqual(t, next, got)
	require.Nil(t, got.Certified)

	got, ok, err = s.Load(ctx, "other")
	require.NoError(t, err)
	require.True(t, ok)
	storeRequireRecordEqual(t, other, got)
}

func testStoreNoAliasing(t *testing.T, s VoteStore) {
	ctx := context.Background()
	rec := storeTestRecord("r", 3)
	want := storeTestRecord("r", 3)
	entries := []AuditEntry{storeTestEntry(AuditVote, "r", 3)}
	wantEntries := []AuditEntry{storeTestEntry(AuditVote, "r", 3)}
	wantEntries[0].Seq = 1
	require.NoError(t, s.Save(ctx, rec, entries...))

	// Mutating what was saved changes nothing stored.
	rec.Certified.Epoch = 99
	rec.Certified.Holder.ID = "mallory"
	entries[0].Detail = "changed"
	require.Zero(t, entries[0].Seq, "Save must not write into the caller's entries")

	got, _, err := s.Load(ctx, "r")
	require.NoError(t, err)
	storeRequireRecordEqual(t, want, got)

	// Mutating what was loaded changes nothing stored either.
	got.Certified.Epoch = 100
	got.Certified.Signature[0] ^= 1
	again, _, err := s.Load(ctx, "r")
	require.NoError(t, err)
	storeRequireRecordEqual(t, want, again)

	log, err := s.Audit(ctx, 1, 10)
	require.NoError(t, err)
	log[0].Detail = "changed"
	log, err = s.Audit(ctx, 1, 10)
	require.NoError(t, err)
	storeRequireEntriesEqual(t, wantEntries, log)
}

func testStoreAuditSeqAndPaging(t *testing.T, s VoteStore) {
	ctx := context.Background()
	empty, err := s.Audit(ctx, 1, 10)
	require.NoError(t, err)
	require.Empty(t, empty)

	var want []AuditEntry
	saves := [][]AuditEntry{
		nil, // a Save without entries appends nothing
		{storeTestEntry(AuditVote, "a", 1), storeTestEntry(AuditCommit, "a", 1)},
		{storeTestEntry(AuditVote, "b", 7)},
		{storeTestEntry(AuditRenew, "a", 1), storeTestEntry(AuditRelease, "a", 1)},
	}
	for i, entries := range saves {
		require.NoError(t, s.Save(ctx, Record{Resource: fmt.Sprintf("r%d", i), LastEpoch: 1}, entries...))
		for _, e := range entries {
			e.Seq = uint64(len(want) + 1)
			want = append(want, e)
		}
	}
	require.Len(t, want, 5)

	pages := []struct {
		from      uint64
		limit     int
		wantFirst int // index into want
		wantN     int
	}{
		{from: 0, limit: 100, wantFirst: 0, wantN: 5}, // 0 reads from the start
		{from: 1, limit: 100, wantFirst: 0, wantN: 5},
		{from: 1, limit: 2, wantFirst: 0, wantN: 2},
		{from: 3, limit: 2, wantFirst: 2, wantN: 2},
		{from: 5, limit: 2, wantFirst: 4, wantN: 1},
		{from: 6, limit: 2, wantN: 0},
		{from: 1 << 62, limit: 2, wantN: 0},
		{from: 1, limit: 0, wantN: 0},
		{from: 1, limit: -1, wantN: 0},
	}
	for _, p := range pages {
		got, err := s.Audit(ctx, p.from, p.limit)
		require.NoError(t, err, "from %d limit %d", p.from, p.limit)
		storeRequireEntriesEqual(t, want[p.wantFirst:p.wantFirst+p.wantN], got)
	}

	// Paging through the whole log one page at a time gives it all.
	var all []AuditEntry
	for from := uint64(1); ; {
		page, err := s.Audit(ctx, from, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		from = page[len(page)-1].Seq + 1
	}
	storeRequireEntriesEqual(t, want, all)
}

func testStoreConcurrentSavesGapFree(t *testing.T, s VoteStore) {
	const writers, perWriter = 32, 20
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			res := fmt.Sprintf("res-%d", w)
			for i := range perWriter {
				epoch := uint64(i + 1)
				errs <- s.Save(ctx, storeTestRecord(res, epoch), storeTestEntry(AuditVote, res, epoch))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	log, err := s.Audit(ctx, 1, 10*writers*perWriter)
	require.NoError(t, err)
	require.Len(t, log, writers*perWriter)
	next := make(map[string]uint64) // each writer's entries appear in its order
	for i, e := range log {
		require.Equal(t, uint64(i+1), e.Seq, "Seq must be 1..%d without gaps", len(log))
		next[e.Resource]++
		require.Equal(t, next[e.Resource], e.Epoch, "entry %d out of order for %s", e.Seq, e.Resource)
	}
	for w := range writers {
		res := fmt.Sprintf("res-%d", w)
		require.Equal(t, uint64(perWriter), next[res])
		got, ok, err := s.Load(ctx, res)
		require.NoError(t, err)
		require.True(t, ok)
		storeRequireRecordEqual(t, storeTestRecord(res, perWriter), got)
	}
}

func testStoreRejectedSaveWritesNothing(t *testing.T, s VoteStore) {
	ctx := context.Background()
	badToken := storeTestRecord("bad-token", 1)
	tok := *badToken.Certified
	tok.Holder.ID = "has space" // fails Token.MarshalText
	badToken.Certified = &tok
	tests := []struct {
		name  string
		rec   Record
		audit []AuditEntry
	}{
		{"EmptyResource", Record{LastEpoch: 1}, []AuditEntry{storeTestEntry(AuditVote, "", 1)}},
		{"InvalidToken", badToken, []AuditEntry{storeTestEntry(AuditVote, "bad-token", 1)}},
		{"UnencodableAuditTime", storeTestRecord("bad-time", 1), []AuditEntry{
			storeTestEntry(AuditVote, "bad-time", 1),
			{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Kind: AuditCommit, Resource: "bad-time"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, s.Save(ctx, tt.rec, tt.audit...))
			_, ok, err := s.Load(ctx, tt.rec.Resource)
			require.NoError(t, err)
			require.False(t, ok, "a rejected Save must write nothing")
			log, err := s.Audit(ctx, 0, 10)
			require.NoError(t, err)
			require.Empty(t, log, "a rejected Save must append nothing")
		})
	}
	// The sequence did not move.
	require.NoError(t, s.Save(ctx, Record{Resource: "ok"}, storeTestEntry(AuditVote, "ok", 1)))
	log, err := s.Audit(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, uint64(1), log[0].Seq)
}

func testStoreCancelledContext(t *testing.T, s VoteStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Save(ctx, storeTestRecord("r", 1), storeTestEntry(AuditVote, "r", 1))
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = s.Load(ctx, "r")
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Audit(ctx, 1, 10)
	require.ErrorIs(t, err, context.Canceled)

	_, ok, err := s.Load(context.Background(), "r")
	require.NoError(t, err)
	require.False(t, ok, "a Save with a cancelled ctx must write nothing")
	log, err := s.Audit(context.Background(), 1, 10)
	require.NoError(t, err)
	require.Empty(t, log)
}

func testStoreClosed(t *testing.T, s VoteStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, storeTestRecord("r", 1), storeTestEntry(AuditVote, "r", 1)))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	_, _, err := s.Load(ctx, "r")
	require.ErrorIs(t, err, ErrStoreClosed)
	require.ErrorIs(t, s.Save(ctx, storeTestRecord("r", 2)), ErrStoreClosed)
	_, err = s.Audit(ctx, 1, 10)
	require.ErrorIs(t, err, ErrStoreClosed)
}

// TestBoltStoreReopen checks that records and the audit log survive Close
// and reopening the file, and that Seq continues without a gap.
func TestBoltStoreReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "votes.db")
	s, err := OpenBoltStore(path)
	require.NoError(t, err)
	r1, r2 := storeTestRecord("r1", 5), storeTestRecord("r2", 7)
	want := []AuditEntry{
		storeTestEntry(AuditVote, "r1", 5),
		storeTestEntry(AuditCommit, "r1", 5),
		storeTestEntry(AuditVote, "r2", 7),
		storeTestEntry(AuditCatchUp, "r3", 1),
	}
	for i := range want {
		want[i].Seq = uint64(i + 1)
	}
	require.NoError(t, s.Save(ctx, r1, want[0], want[1]))
	require.NoError(t, s.Save(ctx, r2, want[2]))
	require.NoError(t, s.Close())

	s = storeTestOpenBolt(t, path)
	for _, rec := range []Record{r1, r2} {
		got, ok, err := s.Load(ctx, rec.Resource)
		require.NoError(t, err)
		require.True(t, ok)
		storeRequireRecordEqual(t, rec, got)
	}
	require.NoError(t, s.Save(ctx, Record{Resource: "r3", LastEpoch: 1}, want[3]))
	log, err := s.Audit(ctx, 1, 10)
	require.NoError(t, err)
	storeRequireEntriesEqual(t, want, log)
}

// TestBoltStoreCopy checks that WriteTo copies what was committed before
// it, while the store keeps running, and nothing saved after; and that a
// closed store refuses.
func TestBoltStoreCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storeTestOpenBolt(t, filepath.Join(dir, "votes.db"))
	r1 := storeTestRecord("r1", 5)
	require.NoError(t, s.Save(ctx, r1, storeTestEntry(AuditVote, "r1", 5)))
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	require.NoError(t, s.Save(ctx, storeTestRecord("r2", 7), storeTestEntry(AuditVote, "r2", 7)))

	copyPath := filepath.Join(dir, "copy.db")
	require.NoError(t, os.WriteFile(copyPath, buf.Bytes(), 0o600))
	c := storeTestOpenBolt(t, copyPath)
	got, ok, err := c.Load(ctx, "r1")
	require.NoError(t, err)
	require.True(t, ok)
	storeRequireRecordEqual(t, r1, got)
	_, ok, err = c.Load(ctx, "r2")
	require.NoError(t, err)
	require.False(t, ok, "saved after the copy")
	log, err := c.Audit(ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)

	require.NoError(t, s.Close())
	_, err = s.WriteTo(&buf)
	require.ErrorIs(t, err, ErrStoreClosed)
}

// TestBoltStoreFileMode checks that a new store file is private to its owner.
func TestBoltStoreFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "votes.db")
	storeTestOpenBolt(t, path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, info.Mode().Perm()&0o077, "mode %v", info.Mode().Perm())
}

// TestBoltStoreOpenErrors checks that a bad option and a file locked by
// another open store are refused.
func TestBoltStoreOpenErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "votes.db")
	_, err := OpenBoltStore(path, WithBoltMaxBatch(0))
	require.Error(t, err)

	storeTestOpenBolt(t, path)
	_, err = OpenBoltStore(path, WithBoltOpenTimeout(20*time.Millisecond))
	require.ErrorIs(t, err, bolterrors.ErrTimeout)
}

// TestBoltStoreGroupCommit holds the first transaction open until 63 more
// Saves are queued, then checks they all share the second transaction.
func TestBoltStoreGroupCommit(t *testing.T) {
	const n = 64
	ctx := context.Background()
	s, gate := storeTestOpenGated(t, 0)
	errs := make(chan error, n)
	save := func(i int) {
		res := fmt.Sprintf("r-%d", i)
		errs <- s.Save(ctx, storeTestRecord(res, 1), storeTestEntry(AuditVote, res, 1))
	}
	go save(0)
	<-gate.entered
	for i := 1; i < n; i++ {
		go save(i)
	}
	storeTestWaitQueued(t, s, n-1)
	gate.open()
	for range n {
		require.NoError(t, <-errs)
	}

	st := s.Stats()
	require.Less(t, st.Transactions, st.Saves)
	require.Equal(t, StoreStats{Saves: n, Transactions: 2}, st)
	log, err := s.Audit(ctx, 1, 2*n)
	require.NoError(t, err)
	require.Len(t, log, n)
	for i, e := range log {
		require.Equal(t, uint64(i+1), e.Seq)
	}
}

// TestBoltStoreFailedBatch checks that when a batched transaction fails,
// every request in it gets the error and none is applied, and that the
// audit sequence continues without a gap afterwards.
func TestBoltStoreFailedBatch(t *testing.T) {
	const queued = 10
	ctx := context.Background()
	s, gate := storeTestOpenGated(t, 2) // the second transaction fails
	first := make(chan error, 1)
	go func() { first <- s.Save(ctx, storeTestRecord("first", 1), storeTestEntry(AuditVote, "first", 1)) }()
	<-gate.entered
	errs := make(chan error, queued)
	for i := range queued {
		go func() {
			res := fmt.Sprintf("r-%d", i)
			errs <- s.Save(ctx, storeTestRecord(res, 1), storeTestEntry(AuditVote, res, 1))
		}()
	}
	storeTestWaitQueued(t, s, queued)
	gate.open()
	require.NoError(t, <-first)
	for range queued {
		require.ErrorIs(t, <-errs, errStoreTestInjected)
	}
	for i := range queued {
		_, ok, err := s.Load(ctx, fmt.Sprintf("r-%d", i))
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.Equal(t, StoreStats{Saves: 1, Transactions: 1}, s.Stats())

	require.NoError(t, s.Save(ctx, storeTestRecord("after", 1), storeTestEntry(AuditVote, "after", 1)))
	log, err := s.Audit(ctx, 1, 100)
	require.NoError(t, err)
	require.Len(t, log, 2)
	require.Equal(t, []string{"first", "after"}, []string{log[0].Resource, log[1].Resource})
	require.Equal(t, []uint64{1, 2}, []uint64{log[0].Seq, log[1].Seq})
}

// TestBoltStoreBadRequestInBatch checks that a request whose audit entry
// cannot be encoded fails alone, without disturbing its batch.
func TestBoltStoreBadRequestInBatch(t *testing.T) {
	ctx := context.Background()
	s, gate := storeTestOpenGated(t, 0)
	first := make(chan error, 1)
	go func() { first <- s.Save(ctx, Record{Resource: "first"}, storeTestEntry(AuditVote, "first", 1)) }()
	<-gate.entered

	bad := AuditEntry{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), Kind: AuditVote, Resource: "bad"}
	reqs := []struct {
		res   string
		entry AuditEntry
	}{
		{"good-1", storeTestEntry(AuditVote, "good-1", 1)},
		{"bad", bad},
		{"good-2", storeTestEntry(AuditVote, "good-2", 1)},
	}
	errs := make([]chan error, len(reqs))
	for i, r := range reqs {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- s.Save(ctx, Record{Resource: r.res}, r.entry) }()
		storeTestWaitQueued(t, s, i+1) // keep arrival order fixed
	}
	gate.open()
	require.NoError(t, <-first)
	require.NoError(t, <-errs[0])
	err := <-errs[1]
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrStoreClosed)
	require.NoError(t, <-errs[2])

	_, ok, err := s.Load(ctx, "bad")
	require.NoError(t, err)
	require.False(t, ok)
	log, err := s.Audit(ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, log, 3)
	for i, res := range []string{"first", "good-1", "good-2"} {
		require.Equal(t, uint64(i+1), log[i].Seq)
		require.Equal(t, res, log[i].Resource)
	}
	require.Equal(t, StoreStats{Saves: 3, Transactions: 2}, s.Stats())
}

// TestBoltStoreCloseFailsQueued checks that Close lets the transaction in
// progress finish, fails the queued Saves with ErrStoreClosed and stops the
// committer.
func TestBoltStoreCloseFailsQueued(t *testing.T) {
	const queued = 5
	ctx := context.Background()
	s, gate := storeTestOpenGated(t, 0)
	path := s.db.Path()
	first := make(chan error, 1)
	go func() { first <- s.Save(ctx, storeTestRecord("first", 1)) }()
	<-gate.entered
	errs := make(chan error, queued)
	for i := range queued {
		go func() { errs <- s.Save(ctx, storeTestRecord(fmt.Sprintf("r-%d", i), 1)) }()
	}
	storeTestWaitQueued(t, s, queued)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.closing // Close has begun: nothing more can be queued
	gate.open()
	require.NoError(t, <-first, "the transaction in progress completes")
	for range queued {
		require.ErrorIs(t, <-errs, ErrStoreClosed)
	}
	require.NoError(t, <-closed)
	<-s.done // the committer has exited
	require.ErrorIs(t, s.Save(ctx, storeTestRecord("late", 1)), ErrStoreClosed)
	require.Equal(t, StoreStats{Saves: 1, Transactions: 1}, s.Stats())

	// Only the first Save landed.
	s2 := storeTestOpenBolt(t, path)
	_, ok, err := s2.Load(ctx, "first")
	require.NoError(t, err)
	require.True(t, ok)
	for i := range queued {
		_, ok, err := s2.Load(ctx, fmt.Sprintf("r-%d", i))
		require.NoError(t, err)
		require.False(t, ok)
	}
}

// TestBoltStoreSaveContext checks that ctx is obeyed while a Save waits to
// be queued and ignored once it is queued, so a Save that reports an error
// never landed and one that landed never reports an error.
func TestBoltStoreSaveContext(t *testing.T) {
	ctx := context.Background()
	s, gate := storeTestOpenGated(t, 0, WithBoltMaxBatch(1)) // queue of one
	first := make(chan error, 1)
	go func() { first <- s.Save(ctx, storeTestRecord("first", 1)) }()
	<-gate.entered

	// queued fills the queue; its ctx is cancelled after it was queued.
	queuedCtx, cancelQueued := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() { queued <- s.Save(queuedCtx, storeTestRecord("queued", 1)) }()
	storeTestWaitQueued(t, s, 1)
	cancelQueued()

	// waiting cannot enter the full queue; its ctx is cancelled.
	waitingCtx, cancelWaiting := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() { waiting <- s.Save(waitingCtx, storeTestRecord("waiting", 1)) }()
	cancelWaiting()
	require.ErrorIs(t, <-waiting, context.Canceled)

	gate.open()
	require.NoError(t, <-first)
	require.NoError(t, <-queued, "a queued Save waits for its result despite ctx")
	for res, want := range map[string]bool{"first": true, "queued": true, "waiting": false} {
		_, ok, err := s.Load(ctx, res)
		require.NoError(t, err)
		require.Equal(t, want, ok, res)
	}
}

// TestMemStoreCrash checks that a crashed MemStore is closed and its
// successor holds every completed Save.
func TestMemStoreCrash(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore()
	rec := storeTestRecord("r", 3)
	require.NoError(t, m.Save(ctx, rec, storeTestEntry(AuditVote, "r", 3)))

	m2 := m.Crash()
	t.Cleanup(func() { _ = m2.Close() })
	require.ErrorIs(t, m.Save(ctx, storeTestRecord("r", 4)), ErrStoreClosed)
	got, ok, err := m2.Load(ctx, "r")
	require.NoError(t, err)
	require.True(t, ok)
	storeRequireRecordEqual(t, rec, got)

	require.NoError(t, m2.Save(ctx, storeTestRecord("r", 4), storeTestEntry(AuditCommit, "r", 4)))
	log, err := m2.Audit(ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, log, 2)
	require.Equal(t, []uint64{1, 2}, []uint64{log[0].Seq, log[1].Seq})
}

func BenchmarkBoltSave(b *testing.B) {
	s := storeTestOpenBolt(b, "")
	ctx := context.Background()
	rec := storeTestRecord("bench", 1)
	before := s.Stats()
	for b.Loop() {
		rec.LastEpoch++
		if err := s.Save(ctx, rec, storeTestEntry(AuditVote, rec.Resource, rec.LastEpoch)); err != nil {
			b.Fatal(err)
		}
	}
	storeReportBatching(b, before, s.Stats())
}

func BenchmarkBoltSaveParallel(b *testing.B) {
	s := storeTestOpenBolt(b, "")
	ctx := context.Background()
	var mu sync.Mutex
	id := 0
	storeTestCrypto() // deal and sign outside the timer
	b.SetParallelism(8)
	before := s.Stats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		id++
		rec := storeTestRecord(fmt.Sprintf("bench-%d", id), 0)
		mu.Unlock()
		for pb.Next() {
			rec.LastEpoch++
			if err := s.Save(ctx, rec, storeTestEntry(AuditVote, rec.Resource, rec.LastEpoch)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	storeReportBatching(b, before, s.Stats())
}

func storeReportBatching(b *testing.B, before, after StoreStats) {
	saves, txns := after.Saves-before.Saves, after.Transactions-before.Transactions
	if txns > 0 {
		b.ReportMetric(float64(saves)/float64(txns), "saves/txn")
	}
}
