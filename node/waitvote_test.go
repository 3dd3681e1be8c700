package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/testwait"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Tests of the vote in the Wait answer (issue 20, handoff speed): a
// member that answers Free to the waiter it reserves the free resource for
// votes as it would for that session's Acquire at the asked epoch, durably
// before the answer leaves, and never for anyone else.

// gatedStore is a VoteStore whose Saves can be held (hold) or made to
// fail (fail), to see what leaves the node before a vote is durable.
type gatedStore struct {
	*MemStore
	hold    chan struct{} // if not nil, Save waits until it is closed
	entered chan struct{} // receives once per held Save
	fail    error         // if not nil, Save returns it and writes nothing
}

var errGatedSave = errors.New("gated store: save refused")

func (g *gatedStore) Save(ctx context.Context, rec Record, audit ...AuditEntry) error {
	if hold := g.hold; hold != nil {
		g.entered <- struct{}{}
		<-hold
	}
	if g.fail != nil {
		return g.fail
	}
	return g.MemStore.Save(ctx, rec, audit...)
}

// startNode1Store is node 1 on store and clock.
func (lc *limitsCluster) startNode1Store(t testing.TB, store VoteStore, clock clockwork.Clock) *Node {
	t.Helper()
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[0]}, store, h, clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// waitAsk sends a Wait answered at once (MaxWait 0) that asks a vote at
// epoch.
func (d nodeDriver) waitAsk(from peer.ID, res string, h protocol.Holder, epoch uint64) protocol.WaitReply {
	d.t.Helper()
	r, err := protocol.UnmarshalWaitReply(d.call(from, protocol.ProtoWait, d.waitReq(res, h, epoch, 0).Marshal()))
	require.NoError(d.t, err)
	return r
}

func (d nodeDriver) waitReq(res string, h protocol.Holder, epoch uint64, maxWait time.Duration) protocol.WaitRequest {
	req := protocol.WaitRequest{Cluster: d.lc.cluster.ID, Resource: res, Key: keyOf(h), MaxWait: maxWait, Epoch: epoch}
	if epoch > 0 {
		req.TTL = 10 * time.Second
	}
	return req
}

// requireWaitVote checks that r carries node 1's valid vote for h at
// epoch: the partial over the statement and the identity signature.
func (d nodeDriver) requireWaitVote(r protocol.WaitReply, res string, h protocol.Holder, epoch uint64) {
	d.t.Helper()
	require.True(d.t, r.Free, "a vote comes only in a Free answer")
	require.NotNil(d.t, r.Vote, "the reserved waiter's answer carries the vote")
	require.Equal(d.t, epoch, r.Vote.Epoch)
	require.Equal(d.t, epoch, r.LastEpoch)
	st := d.lc.cluster.Statement(res, epoch, h)
	require.Equal(d.t, 1, r.Vote.Partial.Index)
	require.NoError(d.t, d.lc.cluster.Key.VerifyPartial(st.SignedBytes(), r.Vote.Partial))
	ok, err := d.lc.ids[0].GetPublic().Verify(st.VoteBytes(), r.Vote.IdentitySig)
	require.NoError(d.t, err)
	require.True(d.t, ok, "the identity signature is over the statement's vote bytes")
}

// heldLease has a commit a lease at epoch 1 of res on d's node.
func (d nodeDriver) heldLease(a peer.ID, ha protocol.Holder, res string) protocol.Token {
	d.t.Helper()
	require.Equal(d.t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	tok := d.token(d.lc.cluster.Statement(res, 1, ha))
	require.Equal(d.t, protocol.CodeOK, d.commit(a, tok).Code)
	return tok
}

// TestWaitVoteOnlyForReservedWaiter: while a lease lives no Wait gets a
// vote; once it is released, the waiter the free resource is reserved for
// gets the node's vote at its asked epoch in its answer, the vote is the
// record's (the same one an Acquire of that session would get), and the
// other waiter gets neither a vote nor a Free answer.
func TestWaitVoteOnlyForReservedWaiter(t *testing.T) {
	lc := newLimitsCluster(t)
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clockwork.NewFakeClock())}
	a, b := lc.everything, lc.ordersOnly
	ha, hb, hc := limitsHolder(a.String()), keyHolder(b.String(), 9), keyHolder(a.String(), 12)
	const res = "orders-wv"
	tok := d.heldLease(a, ha, res)

	for _, w := range []struct {
		from peer.ID
		h    protocol.Holder
	}{{b, hb}, {a, hc}} {
		r := d.waitAsk(w.from, res, w.h, 2)
		require.False(t, r.Free, "a lease holds the resource")
		require.Nil(t, r.Vote, "no vote while a lease lives")
	}
	require.EqualValues(t, 1, d.record(res).LastEpoch)

	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
	ref, _ := d.n.Reserved(res)
	first, firstFrom, other, otherFrom := hb, b, hc, a
	if ref == hc.Ref() {
		first, firstFrom, other, otherFrom = hc, a, hb, b
	}
	require.Equal(t, first.Ref(), ref)

	r := d.waitAsk(otherFrom, res, other, 2)
	require.False(t, r.Free, "reserved for the other waiter")
	require.Nil(t, r.Vote, "never a vote for a waiter the resource is not reserved for")
	require.EqualValues(t, 1, d.record(res).LastEpoch, "no epoch used for it")

	r = d.waitAsk(firstFrom, res, first, 2)
	d.requireWaitVote(r, res, first, 2)
	rec := d.record(res)
	require.EqualValues(t, 2, rec.LastEpoch)
	require.Equal(t, first, rec.VoteHolder)
	require.Equal(t, r.Vote.Partial, rec.Vote)
	require.Equal(t, r.Vote.IdentitySig, rec.VoteIDSig)
	require.False(t, rec.Lease.Committed)
	require.Equal(t, first, rec.Lease.Holder, "the vote holds the resource as an Acquire's does")

	// The same session's Acquire at that epoch gets the same vote again
	// (the client's round after a wait whose votes made no token).
	ar := d.acquire(firstFrom, first, res, 2)
	require.Equal(t, protocol.KindVote, ar.Kind)
	require.Equal(t, r.Vote.Partial, ar.Partial)
	require.Equal(t, r.Vote.IdentitySig, ar.IdentitySig)
	// The statement commits like any other.
	require.Equal(t, protocol.CodeOK, d.commit(firstFrom, d.token(lc.cluster.Statement(res, 2, first))).Code)
}

// TestWaitVoteKeepsS1: a vote in a Wait answer and an Acquire's vote at
// the same epoch are never both given to different holders, whichever
// comes first; an epoch at or below the node's last one, or too far above
// what it knows, gets a Free answer without a vote and the node's last
// epoch.
func TestWaitVoteKeepsS1(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly

	t.Run("wait vote first", func(t *testing.T) {
		d := d
		d.t = t
		const res = "orders-s1-a"
		ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 20)
		tok := d.heldLease(a, ha, res)
		require.False(t, d.waitAsk(b, res, hb, 2).Free)
		require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
		d.requireWaitVote(d.waitAsk(b, res, hb, 2), res, hb, 2)
		// Another holder's Acquire at epoch 2, once the vote is abandoned
		// (the resource is free again): stale, never a second vote.
		require.Equal(t, protocol.CodeOK, d.ack(b, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: res, Epoch: 2, Key: keyOf(hb)}.Marshal()).Code)
		other := keyHolder(a.String(), 21)
		ar := d.acquire(a, other, res, 2)
		require.Equal(t, protocol.KindRefuse, ar.Kind)
		require.Equal(t, protocol.CodeStale, ar.Code)
		require.Equal(t, hb, d.record(res).VoteHolder)
	})

	t.Run("acquire vote first", func(t *testing.T) {
		d := d
		d.t = t
		const res = "orders-s1-b"
		ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 30)
		// a votes at 1 by Acquire (nobody waits) and abandons; b, now
		// the waiter the free resource is reserved for, asks epoch 1.
		require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
		require.Equal(t, protocol.CodeOK, d.ack(a, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: lc.cluster.ID, Resource: res, Epoch: 1, Key: keyOf(ha)}.Marshal()).Code)
		r := d.waitAsk(b, res, hb, 1)
		require.True(t, r.Free, "reserved for b")
		require.Nil(t, r.Vote, "epoch 1 went to a: no second vote there")
		require.EqualValues(t, 1, r.LastEpoch, "the answer says where the node stands")
		require.Equal(t, ha, d.record(res).VoteHolder)
		// Asked again above it, b gets its vote.
		d.requireWaitVote(d.waitAsk(b, res, hb, 2), res, hb, 2)
	})

	t.Run("stale and too far", func(t *testing.T) {
		d := d
		d.t = t
		const res = "orders-s1-c"
		ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 40)
		tok := d.heldLease(a, ha, res)
		require.False(t, d.waitAsk(b, res, hb, 5).Free)
		require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
		for _, epoch := range []uint64{1, 2 + d.n.cfg.Rules.MaxEpochStep} {
			r := d.waitAsk(b, res, hb, epoch)
			require.True(t, r.Free, "epoch %d", epoch)
			require.Nil(t, r.Vote, "epoch %d", epoch)
			require.EqualValues(t, 1, r.LastEpoch, "epoch %d", epoch)
		}
		rec := d.record(res)
		require.EqualValues(t, 1, rec.LastEpoch)
		require.Equal(t, ha, rec.VoteHolder, "no vote recorded")
	})
}

// TestWaitVoteDurableBeforeAnswer: the answer carrying the vote leaves
// only after the store has the vote (S3): it waits for a held Save; a
// Save that fails gives an internal error without a vote, and nothing of
// the vote is kept; a node restarted on the store refuses the epoch to
// every other holder.
func TestWaitVoteDurableBeforeAnswer(t *testing.T) {
	lc := newLimitsCluster(t)
	store := &gatedStore{MemStore: NewMemStore()}
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Store(t, store, clock)}
	a, b := lc.everything, lc.ordersOnly
	ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 50)
	const res = "orders-durable"
	tok := d.heldLease(a, ha, res)
	require.False(t, d.waitAsk(b, res, hb, 2).Free)
	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)

	// A Save that fails: no vote leaves, nothing is kept.
	store.fail = errGatedSave
	r, err := protocol.UnmarshalWaitReply(d.call(b, protocol.ProtoWait, d.waitReq(res, hb, 2, 0).Marshal()))
	require.NoError(t, err)
	require.Equal(t, protocol.CodeInternal, r.Code)
	require.Nil(t, r.Vote)
	require.EqualValues(t, 1, d.record(res).LastEpoch, "the failed vote is not in the node's record")
	store.fail = nil

	// A held Save: the answer waits for it.
	hold := make(chan struct{})
	store.hold, store.entered = hold, make(chan struct{}, 1)
	type answer struct {
		b   []byte
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		b, err := d.n.serve(context.Background(), protocol.ProtoWait, b, d.waitReq(res, hb, 2, 0).Marshal())
		answers <- answer{b, err}
	}()
	testwait.Recv(t, store.entered, testwait.HangCeiling, "the vote's Save")
	select {
	case got := <-answers:
		t.Fatalf("the Wait was answered before its vote was saved: %x (err %v)", got.b, got.err)
	default:
	}
	saved, ok, err := store.MemStore.Load(context.Background(), res)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, saved.LastEpoch, "the Save is still held")
	close(hold)
	got := testwait.Recv(t, answers, testwait.HangCeiling, "the Wait answer")
	store.hold = nil
	require.NoError(t, got.err)
	r, err = protocol.UnmarshalWaitReply(got.b)
	require.NoError(t, err)
	d.requireWaitVote(r, res, hb, 2)
	saved, _, err = store.MemStore.Load(context.Background(), res)
	require.NoError(t, err)
	require.EqualValues(t, 2, saved.LastEpoch)
	require.Equal(t, hb, saved.VoteHolder)
	require.Equal(t, r.Vote.Partial, saved.Vote, "the partial that left is the one on record")

	// Restarted on the same store, the node never votes at 2 for anyone
	// else (S1/S3 across a restart).
	require.NoError(t, d.n.Close())
	d2 := nodeDriver{t: t, lc: lc, n: lc.startNode1Store(t, store, clock)}
	other := keyHolder(a.String(), 51)
	ar := d2.acquire(a, other, res, 2)
	require.Equal(t, protocol.KindRefuse, ar.Kind)
	require.Equal(t, protocol.CodeStale, ar.Code)
}

// TestWaitNextInLineAskedAgain: while a lease or vote holds the resource,
// the long poll of the waiter next in line is answered at once when the
// node has moved past the epoch it asks (so it asks again above, and its
// vote can ride in the answer when its turn comes); a poll asking above
// is held until the turn comes, and then carries the vote.
func TestWaitNextInLineAskedAgain(t *testing.T) {
	lc := newLimitsCluster(t)
	clock := clockwork.NewFakeClock()
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1Clock(t, clock)}
	a, b := lc.everything, lc.ordersOnly
	ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 60)
	hc := keyHolder(a.String(), 61) // the holder's identity waits behind its own lease
	const res = "orders-next"
	tok := d.heldLease(a, ha, res)
	require.False(t, d.waitAsk(b, res, hb, 2).Free)
	require.False(t, d.waitAsk(a, res, hc, 2).Free)

	type polled struct {
		r   protocol.WaitReply
		err error
	}
	poll := func(from peer.ID, h protocol.Holder, epoch uint64) <-chan polled {
		out := make(chan polled, 1)
		go func() {
			b, err := d.n.serve(context.Background(), protocol.ProtoWait, from, d.waitReq(res, h, epoch, 3*time.Second).Marshal())
			var r protocol.WaitReply
			if err == nil {
				r, err = protocol.UnmarshalWaitReply(b)
			}
			out <- polled{r, err}
		}()
		return out
	}
	answered := func(ch <-chan polled) protocol.WaitReply {
		t.Helper()
		p := testwait.Recv(t, ch, testwait.HangCeiling, "the Wait long poll")
		require.NoError(t, p.err)
		return p.r
	}

	// b is next and asks epoch 1, which the lease used: answered at once.
	r := answered(poll(b, hb, 1))
	require.False(t, r.Free)
	require.Nil(t, r.Vote)
	require.EqualValues(t, 1, r.LastEpoch)

	// c, not next, asking a used epoch, and b asking above: both held.
	pc, pb := poll(a, hc, 1), poll(b, hb, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.HangCeiling)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 2), "both polls wait on the node's clock")
	require.EqualValues(t, 1, d.record(res).LastEpoch)

	// The release: b's held poll carries the vote; c is then next behind
	// b's vote, and its used epoch gets it answered at once.
	require.Equal(t, protocol.CodeOK, d.release(a, tok).Code)
	d.requireWaitVote(answered(pb), res, hb, 2)
	r = answered(pc)
	require.False(t, r.Free)
	require.Nil(t, r.Vote)
	require.EqualValues(t, 2, r.LastEpoch)
	require.Equal(t, hb.Ref(), r.Holder)
	require.True(t, r.Pending)
}
