package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestRecordCacheBoundedUnderDistinctNames: one authorised client asks
// about 200,000 names nobody ever used (Status, Renew, Abandon, and some
// Releases with tokens that do not verify). Nothing is
// cached for them and the heap does not grow with the number of names. On
// e7342e7 every name stayed cached: about 100 MB for 200,000 names.
func TestRecordCacheBoundedUnderDistinctNames(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, storeTestOpenBolt(t, ""), Limits{}, "")
	ctx := context.Background()
	const names = 200_000
	const maxGrowth = 8 << 20 // bytes; e7342e7 grew by about 100 MB
	from := lc.everything
	_, badTok := storeTestCrypto() // signed by another group key
	before := heapInUse()
	for i := 0; i < names; i++ {
		res := fmt.Sprintf("flood/%d", i)
		var proto string
		var req []byte
		switch {
		case i%200 == 199:
			// A Release needs a token; this one's signature does not
			// verify (the sender's budget refuses most unchecked).
			tok := badTok
			tok.Statement = lc.cluster.Statement(res, 1, limitsHolder(from.String()))
			proto, req = protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok}.Marshal()
		case i%3 == 0:
			proto, req = protocol.ProtoStatus, protocol.StatusRequest{Resource: res}.Marshal()
		case i%3 == 1:
			proto, req = protocol.ProtoRenew, protocol.RenewRequest{Cluster: lc.cluster.ID, Resource: res, Epoch: 1, Key: testKey(7), TTL: time.Second}.Marshal()
		default:
			proto, req = protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: res, Epoch: 1, Key: testKey(7)}.Marshal()
		}
		_, err := n.serve(ctx, proto, from, req)
		require.NoError(t, err, "request %d", i)
	}
	after := heapInUse()
	growth := int64(after) - int64(before)
	cached := n.cacheLen()
	t.Logf("%d distinct unknown names: heap growth %.2f MB, %d records cached (cap %d)", names, float64(growth)/(1<<20), cached, DefaultLimits.RecordCache)
	require.Zero(t, cached, "a never-seen, unchanged resource is not cached")
	require.Less(t, growth, int64(maxGrowth), "heap growth after %d distinct names", names)
}

// TestRecordCacheCapKeepsDurableState: records that do exist are cached up
// to the cap; evicted ones are read back from the vote store unchanged,
// also while transitions run concurrently on the same resources (a
// transition holds its shard lock from load to save, so eviction never
// drops an update in flight).
func TestRecordCacheCapKeepsDurableState(t *testing.T) {
	lc := newLimitsCluster(t)
	const capRecords = 128 // 2 per shard
	n := lc.startNode1(t, NewMemStore(), Limits{RecordCache: capRecords}, "")
	ctx := context.Background()
	bump := func(res string) error {
		_, err := n.apply(ctx, res, func(rec Record, now time.Time) (Outcome, error) {
			return n.cfg.Rules.SeeVotes(rec, rec.Seen+1, now), nil
		})
		return err
	}
	const resources = 2000
	for i := 0; i < resources; i++ {
		require.NoError(t, bump(fmt.Sprintf("r/%d", i)))
	}
	require.LessOrEqual(t, n.cacheLen(), capRecords, "records cached")

	// Concurrent transitions and reads on a small set, with the cache
	// thrashing: every increment must survive eviction.
	const workers, rounds, hot = 8, 200, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				res := fmt.Sprintf("r/%d", (w*rounds+r)%hot)
				if err := bump(res); err != nil {
					errs <- err
					return
				}
				if _, err := n.Record(ctx, fmt.Sprintf("r/%d", hot+(w*rounds+r)%(resources-hot))); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var total uint64
	for i := 0; i < resources; i++ {
		rec, err := n.Record(ctx, fmt.Sprintf("r/%d", i))
		require.NoError(t, err)
		total += rec.Seen
		if i >= hot {
			require.EqualValues(t, 1, rec.Seen, "r/%d", i)
		}
	}
	require.EqualValues(t, resources+workers*rounds, total, "no update lost to eviction")
	t.Logf("%d records, cache cap %d: %d cached", resources, capRecords, n.cacheLen())
	require.LessOrEqual(t, n.cacheLen(), capRecords, "records cached")
}

// TestACLAppliesToEveryResourceRequest: Status, Renew, Abandon, Commit and
// Release about a resource are refused to a client whose patterns do not
// allow it and to a peer outside the cluster file; members may ask. A
// refused Status tells nothing about the resource (StatusReply has no
// refusal code, so it is the reply of an unused resource). On e7342e7
// Status answered anyone.
func TestACLAppliesToEveryResourceRequest(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, NewMemStore(), Limits{}, "")
	ctx := context.Background()
	for _, res := range []string{"orders-1", "payroll"} {
		_, err := n.apply(ctx, res, func(rec Record, now time.Time) (Outcome, error) {
			return n.cfg.Rules.SeeVotes(rec, 40, now), nil
		})
		require.NoError(t, err)
		_, err = n.apply(ctx, res, func(rec Record, now time.Time) (Outcome, error) {
			o := n.cfg.Rules.Acquire(rec, limitsHolder(lc.everything.String()), 41, time.Minute, nil, now)
			require.Equal(t, protocol.KindVote, o.Kind)
			return o, nil
		})
		require.NoError(t, err)
	}
	status := func(from peer.ID, res string) protocol.StatusReply {
		b, err := n.serve(ctx, protocol.ProtoStatus, from, protocol.StatusRequest{Resource: res}.Marshal())
		require.NoError(t, err)
		st, err := protocol.UnmarshalStatusReply(b)
		require.NoError(t, err)
		return st
	}
	member := peerOf(t, lc.cluster.File.Nodes[1].PeerID)
	for _, ok := range []struct {
		from peer.ID
		res  string
	}{{lc.ordersOnly, "orders-1"}, {lc.everything, "payroll"}, {member, "payroll"}} {
		st := status(ok.from, ok.res)
		require.EqualValues(t, 41, st.LastEpoch, "%s may see %s", ok.from, ok.res)
		require.Equal(t, lc.everything.String(), st.Holder.ID)
	}
	for _, no := range []struct {
		from peer.ID
		res  string
	}{{lc.ordersOnly, "payroll"}, {lc.stranger, "orders-1"}} {
		st := status(no.from, no.res)
		require.Zero(t, st.LastEpoch, "%s may not see %s", no.from, no.res)
		require.Zero(t, st.Holder, "%s may not see %s", no.from, no.res)
		require.Nil(t, st.Vote, "%s may not see %s", no.from, no.res)
	}

	_, tok := storeTestCrypto() // a well-formed token (another key)
	tok.Statement = lc.cluster.Statement("payroll", 41, limitsHolder(lc.ordersOnly.String()))
	for _, c := range []struct {
		proto string
		req   []byte
	}{
		{protocol.ProtoRenew, protocol.RenewRequest{Cluster: lc.cluster.ID, Resource: "payroll", Epoch: 41, Key: testKey(7)}.Marshal()},
		{protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: "payroll", Epoch: 41, Key: testKey(7)}.Marshal()},
		{protocol.ProtoCommit, protocol.CommitRequest{Token: tok}.Marshal()},
		{protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok}.Marshal()},
	} {
		b, err := n.serve(ctx, c.proto, lc.ordersOnly, c.req)
		require.NoError(t, err, c.proto)
		a, err := protocol.UnmarshalAck(b)
		require.NoError(t, err, c.proto)
		require.Equal(t, protocol.CodeUnauthorised, a.Code, "%s: %s", c.proto, a.Message)
	}
}

// TestEvidenceCappedPerMember: a Byzantine member hands an honest node
// 10,000 distinct pairs of its own conflicting votes. The node checks and
// writes at most Limits.EvidencePerMember of them; the rest are dropped
// before any signature check or disk write. Evidence against another
// member still gets in. On e7342e7 every pair was verified and fsynced.
func TestEvidenceCappedPerMember(t *testing.T) {
	lc := newLimitsCluster(t)
	path := filepath.Join(t.TempDir(), EvidenceFileName)
	n := lc.startNode1(t, NewMemStore(), Limits{}, path)
	ctx := context.Background()
	pair := func(member int, res string) []byte {
		vote := func(holder string) protocol.SignedVote {
			st := lc.cluster.Statement(res, 7, limitsHolder(holder))
			sig, err := lc.ids[member-1].Sign(st.VoteBytes())
			require.NoError(t, err)
			return protocol.SignedVote{Node: member, Statement: st, IdentitySig: sig}
		}
		return protocol.Evidence{A: vote("holder-a"), B: vote("holder-b")}.Marshal()
	}
	const flood = 10_000
	limit := DefaultLimits.EvidencePerMember
	for i := 0; i < flood; i++ {
		b, err := n.serve(ctx, protocol.ProtoEvidence, lc.everything, pair(2, fmt.Sprintf("res-%d", i)))
		require.NoError(t, err)
		a, err := protocol.UnmarshalAck(b)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeOK, a.Code, a.Message)
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	onePair := len(pair(2, fmt.Sprintf("res-%d", flood))) // binary; a line holds it in hex
	bound := int64(limit * (2*onePair + 64))
	t.Logf("%d pairs against one member: evidence.jsonl %d bytes (bound %d), %d signature checks", flood, st.Size(), bound, n.evidenceChecks())
	require.LessOrEqual(t, st.Size(), bound, "bytes on disk")
	require.LessOrEqual(t, n.evidenceChecks(), uint64(limit), "evidence signature checks")

	// Another member's evidence is not crowded out.
	b, err := n.serve(ctx, protocol.ProtoEvidence, lc.everything, pair(3, "other"))
	require.NoError(t, err)
	a, err := protocol.UnmarshalAck(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeOK, a.Code, a.Message)
	evs, err := parseEvidenceFile(path)
	require.NoError(t, err)
	require.Equal(t, limit+1, len(evs), "pieces on disk")
	require.Equal(t, 3, evs[limit].A.Node)
}

// TestEvidenceCapCountsWhatIsOnDisk: a node restarted from its directory
// counts the evidence its file already holds, so a restart does not make
// room for another round of the same member's pairs.
func TestEvidenceCapCountsWhatIsOnDisk(t *testing.T) {
	lc := newLimitsCluster(t)
	d := lc.loadDir1(t)
	path := filepath.Join(d.Path, EvidenceFileName)
	ctx := context.Background()
	pair := func(res string) []byte {
		vote := func(holder string) protocol.SignedVote {
			st := lc.cluster.Statement(res, 7, limitsHolder(holder))
			sig, err := lc.ids[1].Sign(st.VoteBytes())
			require.NoError(t, err)
			return protocol.SignedVote{Node: 2, Statement: st, IdentitySig: sig}
		}
		return protocol.Evidence{A: vote("holder-a"), B: vote("holder-b")}.Marshal()
	}
	limit := DefaultLimits.EvidencePerMember
	for run := 0; run < 2; run++ {
		r, err := d.Start(clockwork.NewRealClock())
		require.NoError(t, err)
		for i := 0; i < 3*limit; i++ {
			_, err := r.serve(ctx, protocol.ProtoEvidence, lc.everything, pair(fmt.Sprintf("run%d-%d", run, i)))
			require.NoError(t, err)
		}
		checks := r.evidenceChecks()
		require.NoError(t, r.Close())
		evs, err := parseEvidenceFile(path)
		require.NoError(t, err)
		require.Equal(t, limit, len(evs), "pieces on disk after run %d", run)
		if run > 0 {
			require.Zero(t, checks, "signature checks after a restart")
		}
	}
}

// TestBadSignatureBudgetPerPeer: one peer's stream of bad-signature
// Commits costs at most BadSigBurst pairings (plus BadSigRate a second);
// the same bad token from another peer costs none (negative cache); and
// another peer's valid token is still checked and accepted.
func TestBadSignatureBudgetPerPeer(t *testing.T) {
	lc := newLimitsCluster(t)
	n := lc.startNode1(t, NewMemStore(), Limits{}, "")
	ctx := context.Background()
	sign := func(st protocol.Statement) protocol.Token {
		var ps []crypto.PartialSig
		for _, sh := range lc.shares[:3] {
			p, err := sh.Sign(st.SignedBytes())
			require.NoError(t, err)
			ps = append(ps, p)
		}
		sig, _, err := lc.cluster.Key.Combine(st.SignedBytes(), ps)
		require.NoError(t, err)
		return protocol.Token{Statement: st, Signature: sig}
	}
	good := sign(lc.cluster.Statement("orders-1", 5, limitsHolder(lc.ordersOnly.String())))
	commit := func(from peer.ID, tok protocol.Token) protocol.Ack {
		b, err := n.serve(ctx, protocol.ProtoCommit, from, protocol.CommitRequest{Token: tok}.Marshal())
		require.NoError(t, err)
		a, err := protocol.UnmarshalAck(b)
		require.NoError(t, err)
		return a
	}
	const flood = 200
	start := time.Now()
	var first protocol.Token
	for i := 0; i < flood; i++ {
		bad := good
		bad.Statement = lc.cluster.Statement("orders-1", uint64(100+i), limitsHolder(lc.everything.String()))
		if i == 0 {
			first = bad
		}
		require.Equal(t, protocol.CodeBadRequest, commit(lc.everything, bad).Code)
	}
	st := n.LimitStats()
	allowed := uint64(DefaultLimits.BadSigBurst) + uint64(time.Since(start).Seconds()*DefaultLimits.BadSigRate) + 1
	t.Logf("%d bad-signature commits from one peer: %d pairings, %d refused unchecked", flood, st.TokenChecks, st.ThrottledTokens)
	require.LessOrEqual(t, st.TokenChecks, allowed, "pairings spent on one peer's bad signatures")

	require.Equal(t, protocol.CodeBadRequest, commit(lc.ordersOnly, first).Code, "a known bad token")
	require.Equal(t, st.TokenChecks, n.LimitStats().TokenChecks, "a known bad token costs no pairing")
	require.Equal(t, protocol.CodeOK, commit(lc.ordersOnly, good).Code, "another peer's valid token")
	require.Equal(t, st.TokenChecks+1, n.LimitStats().TokenChecks)
}
