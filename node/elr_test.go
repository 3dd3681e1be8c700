package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestEarlyLockRelease: with a store that queues Saves (AsyncVoteStore),
// a resource's shard lock is held to compute a transition and queue its
// Save, not across the fsync; yet nothing that depends on the new state
// leaves before it is durable (S3). The first write is held in its fsync:
// meanwhile the shard's lock is free, a vote on another resource of the
// shard is computed and queued behind it (one fsync can then carry both),
// and neither vote nor a Status showing the first vote comes back until
// the write is released.
func TestEarlyLockRelease(t *testing.T) {
	d, store, gate, me, h := newGatedDriver(t, 0)
	const r1 = "orders-1"
	r2 := ""
	for i := 0; r2 == ""; i++ {
		if name := fmt.Sprintf("orders-%d", i+2); d.n.shard(name) == d.n.shard(r1) {
			r2 = name
		}
	}
	var released atomic.Bool
	type result struct {
		kind     protocol.ReplyKind
		released bool
	}
	acquire := func(res string, out chan<- result) {
		r := d.acquire(me, h, res, 1)
		out <- result{r.Kind, released.Load()}
	}
	first := make(chan result, 1)
	go acquire(r1, first)
	<-gate.entered // the vote's Save is in its fsync, held

	sh := d.n.shard(r1)
	require.Eventually(t, func() bool {
		if !sh.mu.TryLock() {
			return false
		}
		sh.mu.Unlock()
		return true
	}, 10*time.Second, time.Millisecond, "the shard lock is free while the Save is held")

	second := make(chan result, 1)
	go acquire(r2, second)
	storeTestWaitQueued(t, store, 1) // r2's vote was computed and queued
	status := make(chan bool, 1)
	go func() {
		req := protocol.StatusRequest{Resource: r1}
		st, err := protocol.UnmarshalStatusReply(d.call(me, protocol.ProtoStatus, req.Marshal()))
		require.NoError(t, err)
		require.NotNil(t, st.Vote, "Status shows the vote")
		status <- released.Load()
	}()

	released.Store(true)
	gate.open()
	for _, ch := range []chan result{first, second} {
		r := <-ch
		require.Equal(t, protocol.KindVote, r.kind)
		require.True(t, r.released, "a vote left before its Save was durable")
	}
	require.True(t, <-status, "Status showed a vote before its Save was durable")
	require.Equal(t, uint64(1), d.record(r1).VoteEpoch)
	require.Equal(t, uint64(1), d.record(r2).VoteEpoch)
}

// TestEarlyLockReleaseFailedSave: a queued Save that fails fails the
// transition, and the node forgets the state it had cached: the next
// request reads what the store holds (S3: a vote whose Save failed never
// left, and is not assumed afterwards).
func TestEarlyLockReleaseFailedSave(t *testing.T) {
	d, store, gate, me, h := newGatedDriver(t, 1)
	const res = "orders-1"
	gate.open()
	r := d.acquire(me, h, res, 1)
	require.NotEqual(t, protocol.KindVote, r.Kind, "the vote's Save failed: no vote leaves")
	sh := d.n.shard(res)
	sh.mu.Lock()
	_, unsynced := sh.unsynced[res]
	_, cached := sh.recs[res]
	sh.mu.Unlock()
	require.False(t, unsynced)
	require.False(t, cached, "the failed state is not kept")
	_, ok, err := store.Load(context.Background(), res)
	require.NoError(t, err)
	require.False(t, ok, "nothing was written")
}

// newGatedDriver starts node 1 on a bolt store whose first write waits for
// the gate and whose write number failOn fails (0: none), with a client
// allowed everything and one of its holders.
func newGatedDriver(t *testing.T, failOn int32) (nodeDriver, *BoltStore, *storeTestGate, peer.ID, protocol.Holder) {
	store, gate := storeTestOpenGated(t, failOn)
	lc := newLimitsCluster(t)
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1(t, store, Limits{}, "")}
	return d, store, gate, lc.everything, limitsHolder(lc.everything.String())
}
