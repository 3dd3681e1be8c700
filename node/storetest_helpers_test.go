package node

import (
	"errors"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// storeTestImpl is one VoteStore implementation under the conformance suite.
type storeTestImpl struct {
	name string
	open func(t *testing.T) VoteStore
}

// storeTestImpls lists every VoteStore implementation; each runs the same
// conformance suite.
var storeTestImpls = []storeTestImpl{
	{name: "bolt", open: func(t *testing.T) VoteStore { return storeTestOpenBolt(t, "") }},
	{name: "mem", open: func(t *testing.T) VoteStore {
		s := NewMemStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// storeTestOpenBolt opens a BoltStore at path (a fresh temporary file when
// path is empty) and closes it when the test ends.
func storeTestOpenBolt(tb testing.TB, path string, opts ...BoltOption) *BoltStore {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "votes.db")
	}
	s, err := OpenBoltStore(path, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// withBoltBeforeCommit installs a hook that runs inside every write
// transaction just before it commits; an error rolls it back.
func withBoltBeforeCommit(f func() error) BoltOption {
	return func(c *boltConfig) { c.beforeCommit = f }
}

var errStoreTestInjected = errors.New("injected commit failure")

// storeTestGate is a beforeCommit hook that holds the first transaction
// until released (so requests pile up in the queue deterministically) and
// can fail the transaction with a given call number.
type storeTestGate struct {
	calls   atomic.Int32
	failOn  int32 // 1-based transaction to fail, 0 for none
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newStoreTestGate(failOn int32) *storeTestGate {
	return &storeTestGate{failOn: failOn, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *storeTestGate) hook() error {
	n := g.calls.Add(1)
	if n == 1 {
		close(g.entered)
		<-g.release
	}
	if n == g.failOn {
		return errStoreTestInjected
	}
	return nil
}

// open lets the first transaction commit. It is safe to call twice.
func (g *storeTestGate) open() { g.once.Do(func() { close(g.release) }) }

// storeTestOpenGated opens a BoltStore whose first transaction waits for
// the gate. The gate opens at the latest when the test ends, before the
// store closes.
func storeTestOpenGated(t *testing.T, failOn int32, opts ...BoltOption) (*BoltStore, *storeTestGate) {
	t.Helper()
	g := newStoreTestGate(failOn)
	s := storeTestOpenBolt(t, "", append(opts, withBoltBeforeCommit(g.hook))...)
	t.Cleanup(g.open) // runs before the store's Close
	return s, g
}

// storeTestWaitQueued waits until n Save requests sit in s's queue.
func storeTestWaitQueued(t *testing.T, s *BoltStore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.reqs) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d requests, want %d", len(s.reqs), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// storeTestCrypto is a real vote and token, made once: dealing and signing
// cost milliseconds.
var storeTestCrypto = sync.OnceValues(func() (crypto.PartialSig, protocol.Token) {
	gk, shares, err := crypto.Deal(rand.New(rand.NewSource(1)), 4, 3)
	if err != nil {
		panic(err)
	}
	st := protocol.Statement{
		Cluster:  protocol.NewClusterID("store-test", gk.PublicKey()),
		Resource: "r",
		Epoch:    3,
		Holder:   storeTestHolder,
	}
	msg := st.SignedBytes()
	partials := make([]crypto.PartialSig, 0, 3)
	for _, sh := range shares[:3] {
		p, err := sh.Sign(msg)
		if err != nil {
			panic(err)
		}
		partials = append(partials, p)
	}
	sig, _, err := gk.Combine(msg, partials)
	if err != nil {
		panic(err)
	}
	return partials[0], protocol.Token{Statement: st, Signature: sig}
})

// storeTestRecord returns a fully populated record for resource: a real
// partial signature, a certified token and a lease.
func storeTestRecord(resource string, epoch uint64) Record {
	vote, tok := storeTestCrypto()
	return Record{
		Resource:   resource,
		LastEpoch:  epoch,
		VoteEpoch:  epoch,
		VoteHolder: storeTestHolder,
		Vote:       vote,
		VoteTTL:    10 * time.Second,
		Certified:  &tok,
		Lease: Lease{
			Holder:    storeTestHolder,
			Epoch:     epoch,
			Expires:   time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)),
			Committed: true,
		},
	}
}

// storeTestEntry returns an audit entry (Seq unset) for resource at epoch.
func storeTestEntry(kind AuditKind, resource string, epoch uint64) AuditEntry {
	return AuditEntry{
		Time:     time.Date(2030, 1, 2, 3, 4, 5, int(epoch), time.UTC),
		Kind:     kind,
		Resource: resource,
		Epoch:    epoch,
		Holder:   storeTestHolder.String(),
		Detail:   "test",
	}
}

// storeRequireRecordEqual compares records, times by instant. It also checks
// that the stored time carries no monotonic clock reading.
func storeRequireRecordEqual(t *testing.T, want, got Record) {
	t.Helper()
	require.Truef(t, want.Lease.Expires.Equal(got.Lease.Expires),
		"lease expiry: want %v, got %v", want.Lease.Expires, got.Lease.Expires)
	require.NotContains(t, got.Lease.Expires.String(), "m=", "monotonic reading survived")
	want.Lease.Expires, got.Lease.Expires = time.Time{}, time.Time{}
	require.Equal(t, want, got)
}

// storeRequireEntriesEqual compares audit entries, times by instant.
func storeRequireEntriesEqual(t *testing.T, want, got []AuditEntry) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.Truef(t, w.Time.Equal(g.Time), "entry %d time: want %v, got %v", i, w.Time, g.Time)
		require.False(t, strings.Contains(g.Time.String(), "m="), "monotonic reading survived")
		w.Time, g.Time = time.Time{}, time.Time{}
		require.Equal(t, w, g, "entry %d", i)
	}
}

// storeTestHolder is the lock session the store tests' records name.
var storeTestHolder = protocol.Holder{ID: "h", Session: protocol.SessionID{1, 2, 3}}
