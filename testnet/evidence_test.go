package testnet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// votesForAnyone votes for every Acquire (any epoch, any holder) and shows
// its latest such vote in Status: an equivocating node that does not hide.
type votesForAnyone struct {
	mu   sync.Mutex
	last map[string]protocol.SignedVote
}

func (b *votesForAnyone) Request(_ context.Context, m *Member, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	switch proto {
	case protocol.ProtoAcquire:
		r, err := protocol.UnmarshalAcquireRequest(req)
		if err != nil {
			return nil, false, nil
		}
		st := m.Dir.Cluster.Statement(r.Resource, r.Epoch, protocol.Holder{ID: from.String(), Session: r.Key.Session()})
		p, err := m.Dir.Share.Sign(st.SignedBytes())
		if err != nil {
			return nil, true, err
		}
		sig, err := m.Dir.Identity.Sign(st.VoteBytes())
		if err != nil {
			return nil, true, err
		}
		b.mu.Lock()
		b.last[r.Resource] = protocol.SignedVote{Node: m.Index, Statement: st, IdentitySig: sig}
		b.mu.Unlock()
		return protocol.AcquireReply{Kind: protocol.KindVote, Partial: p, IdentitySig: sig}.Marshal(), true, nil
	}
	return nil, false, nil
}

func (b *votesForAnyone) Reply(_ *Member, proto string, _ peer.ID, reply []byte) []byte {
	if proto != protocol.ProtoStatus {
		return reply
	}
	st, err := protocol.UnmarshalStatusReply(reply)
	if err != nil {
		return reply
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.last {
		v := v
		st.Vote = &v
	}
	return st.Marshal()
}

// TestEquivocationEvidence: node 1 votes for two holders at one epoch. The
// first holder sees the other vote in Status, builds Evidence that verifies
// offline with node 1's public identity key alone, and every honest node
// records it in its evidence file.
func TestEquivocationEvidence(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	nw.SetBehaviour(1, &votesForAnyone{last: map[string]protocol.SignedVote{}})
	nw.SetDelay(4, 300*time.Millisecond) // so node 1's vote is among A's first three
	ctx := context.Background()
	a := newClient(t, nw, 0, client.Config{})
	l, err := a.TryAcquire(ctx, "res")
	require.NoError(t, err)
	// Client B asks node 1 alone for the same epoch: it votes again.
	reply := acquireDirect(t, nw, 1, 1, "res", l.Epoch())
	require.Equal(t, protocol.KindVote, reply.Kind)

	_, err = a.Status(ctx, "res")
	require.NoError(t, err)
	evs := a.Evidence()
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, 1, ev.A.Node)
	require.NoError(t, ev.Check())
	require.NoError(t, protocol.VerifyEvidence(nw.Keys.Cluster, ev), "checkable offline")
	// Round trip through its wire form, as an operator would receive it.
	back, err := protocol.UnmarshalEvidence(ev.Marshal())
	require.NoError(t, err)
	require.NoError(t, protocol.VerifyEvidence(nw.Keys.Cluster, back))

	// Tampered evidence does not verify.
	bad := ev
	bad.B.Statement.Holder.Session[0] ^= 1
	require.ErrorIs(t, protocol.VerifyEvidence(nw.Keys.Cluster, bad), protocol.ErrBadVote)

	// Honest nodes got it and wrote it down.
	require.Eventually(t, func() bool {
		for i := 2; i <= 4; i++ {
			got, err := node.ReadEvidence(nw.Member(i).Dir.Path)
			if err != nil || len(got) != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, l.Release(ctx))
}

// TestLaggingNodesCatchUpFromSignedVotes: an authorised client pushes f+1
// nodes far ahead with uncommitted votes (no token exists there). The other
// nodes refuse every epoch that high as too far; shown f+1 signed votes
// they catch up, and an honest client acquires. S5's bound on the epoch it
// gets is counted in the client's rounds, not in time: a round votes at
// most one above what an honest node reached, and the wait after a round
// (Acquire queues at the holder) at most one above that. A slow machine
// that costs rounds raises the bound with them; inflation (a jump past
// what the rounds explain) still fails.
func TestLaggingNodesCatchUpFromSignedVotes(t *testing.T) {
	nw := startNet(t, 4, 2, Options{})
	step := nw.Keys.Cluster.File.MaxEpochStep
	for _, e := range []uint64{step, 2 * step} {
		for _, i := range []int{1, 2} {
			r := acquireDirect(t, nw, 1, i, "res", e)
			require.Equal(t, protocol.KindVote, r.Kind, "node %d epoch %d", i, e)
		}
	}
	rc := newRoundClock()
	c := newClient(t, nw, 0, client.Config{Clock: rc})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := acquireWait(ctx, c, 15*time.Second, "res")
	require.NoError(t, err)
	rounds := uint64(rc.rounds.Load())
	require.Positive(t, rounds, "the round counter saw the client's rounds")
	t.Logf("epoch %d after %d rounds (step %d)", l.Epoch(), rounds, step)
	require.Greater(t, l.Epoch(), 2*step)
	require.LessOrEqual(t, l.Epoch(), 2*step+2*rounds, "no epoch inflation: at most two epochs per round and its wait")
	for i := 1; i <= 4; i++ {
		rec, err := nw.Node(i).Record(ctx, "res")
		require.NoError(t, err)
		require.LessOrEqual(t, rec.LastEpoch, 2*step+step, "S5 on node %d", i)
	}
	require.NoError(t, l.Release(context.Background()))
}
