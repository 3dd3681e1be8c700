package protocol

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Locks messages keep their fuzz targets and seed corpus here, beside
// the other decoders' (fuzz_test.go), with the same rules: every seed is
// named valid-… or invalid-…, decodes exactly when it says so, and the
// committed files under testdata/fuzz/<Target> match locksSeeds.

var locksFuzzTargets = []string{"FuzzLocksRequest", "FuzzLocksReply"}

// locksSeeds returns the seeds of the Locks fuzz targets.
func locksSeeds(tb testing.TB) map[string][]seed {
	tb.Helper()
	fx := testFixture(tb)
	out := map[string][]seed{}
	add := func(target, name string, data []byte) {
		out[target] = append(out[target], seed{name: name, data: data})
	}
	addValid := func(target, name string, data []byte) {
		add(target, "valid-"+name, data)
		add(target, "invalid-truncated-"+name, data[:len(data)-1])
		add(target, "invalid-trailing-"+name, append(append([]byte(nil), data...), 0))
	}
	cl := fx.stmt.Cluster
	addValid("FuzzLocksRequest", "first", LocksRequest{Cluster: cl}.Marshal())
	addValid("FuzzLocksRequest", "after", LocksRequest{Cluster: cl, After: "orders-db", Limit: 10}.Marshal())
	add("FuzzLocksRequest", "invalid-after-space", wire(cl[:], wstr("a b"), wu64(1)))
	add("FuzzLocksRequest", "invalid-limit-out-of-range", wire(cl[:], wstr(""), wu64(1<<32)))

	h := testHolder.Session.Hash()
	page := LocksReply{Leases: []LeaseInfo{
		{Resource: "a", HolderID: testHolder.ID, Session: h, Epoch: 3, Left: 1500 * time.Millisecond},
		{Resource: "bücher/日本", HolderID: otherHolder.ID, Session: otherHolder.Session.Hash(), Epoch: 9, Left: time.Hour},
	}, Next: "c"}
	addValid("FuzzLocksReply", "page", page.Marshal())
	addValid("FuzzLocksReply", "empty-end", LocksReply{}.Marshal())
	addValid("FuzzLocksReply", "refused", LocksReply{Code: CodeWrongCluster, Message: "request is for another cluster"}.Marshal())
	lease := func(resource, holder string) []byte {
		return bytes.Join([][]byte{wstr(resource), wstr(holder), h[:], wu64(1), wu64(1000)}, nil)
	}
	add("FuzzLocksReply", "invalid-unsorted", wire(wu8(0), wu64(2), lease("b", "h"), lease("a", "h"), wstr(""), wstr("")))
	add("FuzzLocksReply", "invalid-same-resource-twice", wire(wu8(0), wu64(2), lease("a", "h"), lease("a", "h"), wstr(""), wstr("")))
	add("FuzzLocksReply", "invalid-after-next", wire(wu8(0), wu64(1), lease("z", "h"), wstr("m"), wstr("")))
	add("FuzzLocksReply", "invalid-too-many", wire(wu8(0), wu64(MaxLocksPerPage+1)))
	add("FuzzLocksReply", "invalid-empty-holder", wire(wu8(0), wu64(1), lease("a", ""), wstr(""), wstr("")))
	add("FuzzLocksReply", "invalid-resource-rlo", wire(wu8(0), wu64(1), lease("orders-\u202egpj.exe", "h"), wstr(""), wstr("")))
	return out
}

// TestWriteLocksSeedCorpus checks that testdata/fuzz holds the Locks
// targets' seed corpus; with -write-corpus it writes it (see
// TestWriteSeedCorpus).
func TestWriteLocksSeedCorpus(t *testing.T) {
	syncSeedCorpus(t, locksSeeds(t), locksFuzzTargets, "TestWriteLocksSeedCorpus")
}

// TestLocksSeedsClassified checks each Locks seed decodes exactly when it
// is named valid.
func TestLocksSeedsClassified(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"FuzzLocksRequest": func(b []byte) error { _, err := UnmarshalLocksRequest(b); return err },
		"FuzzLocksReply":   func(b []byte) error { _, err := UnmarshalLocksReply(b); return err },
	}
	requireSeedsClassified(t, locksSeeds(t), decoders)
}

// TestLargestLocksReplyFitsFrame: a full page with every field at its
// limit fits one frame.
func TestLargestLocksReplyFitsFrame(t *testing.T) {
	var m LocksReply
	for i := 0; i < MaxLocksPerPage; i++ {
		r := strings.Repeat("r", MaxResourceLen-3) + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "z"
		m.Leases = append(m.Leases, LeaseInfo{Resource: r, HolderID: strings.Repeat("h", MaxHolderLen), Epoch: ^uint64(0), Left: MaxTTL})
	}
	m.Next = strings.Repeat("z", MaxResourceLen)
	m.Message = strings.Repeat("m", MaxMessageLen)
	b := m.Marshal()
	require.LessOrEqual(t, len(b), MaxFrameSize)
	got, err := UnmarshalLocksReply(b)
	require.NoError(t, err)
	require.Len(t, got.Leases, MaxLocksPerPage)
}

// TestSessionHash: the hash is fixed, differs between sessions and does
// not contain the session ID.
func TestSessionHash(t *testing.T) {
	a, b := testHolder.Session.Hash(), sameIDHolder.Session.Hash()
	require.NotEqual(t, a, b)
	require.Equal(t, a, testHolder.Session.Hash())
	require.NotContains(t, testHolder.Session.String(), a.String())
	require.Len(t, a.String(), 2*SessionHashSize)
}

// fuzzLocks is fuzzDecoder over the Locks seeds.
func fuzzLocks[M any](f *testing.F, target string, decode func([]byte) (M, error), encode func(M) []byte) {
	for _, s := range locksSeeds(f)[target] {
		if s.valid() {
			f.Add(s.data)
		}
	}
	fuzzRoundTrip(f, decode, encode)
}

func FuzzLocksRequest(f *testing.F) {
	fuzzLocks(f, "FuzzLocksRequest", UnmarshalLocksRequest, marshalOf[LocksRequest])
}

func FuzzLocksReply(f *testing.F) {
	fuzzLocks(f, "FuzzLocksReply", UnmarshalLocksReply, marshalOf[LocksReply])
}
