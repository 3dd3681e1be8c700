package testnet

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Issue 20 (F4, borrowed sessions): a sibling process that shares a
// client's identity key must not end, extend or take over the sessions of
// that client's other processes. The sibling here is a raw libp2p host
// with the same identity key (its own process state: no session key),
// which sends exactly the requests the owner would, with one lie each;
// each subtest runs the same request without the lie (the owner, who has
// the session's key) as its control.

// keyTap is a client's source of session keys (client.Config.SessionKeys)
// that remembers what it handed out, so a test can act on the client's
// session as its owner from outside the Lock.
type keyTap struct {
	mu  sync.Mutex
	buf []byte
}

func (k *keyTap) Read(p []byte) (int, error) {
	n, err := crand.Read(p)
	k.mu.Lock()
	k.buf = append(k.buf, p[:n]...)
	k.mu.Unlock()
	return n, err
}

// last is the last session key drawn.
func (k *keyTap) last(t testing.TB) protocol.SessionKey {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.GreaterOrEqual(t, len(k.buf), protocol.SessionKeySize, "no session key drawn")
	return protocol.SessionKey(k.buf[len(k.buf)-protocol.SessionKeySize:])
}

// rawPeer sends hand-built requests to the members as client identity ci.
type rawPeer struct {
	t  testing.TB
	nw *Network
	h  host.Host
}

func newRawPeer(t testing.TB, nw *Network, ci int) *rawPeer {
	t.Helper()
	h, err := liarHost(nw, ci)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return &rawPeer{t: t, nw: nw, h: h}
}

func (r *rawPeer) call(ni int, proto string, req []byte) []byte {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := transport.Call(ctx, r.h, r.nw.Member(ni).PeerID, proto, req, protocol.MaxFrameSize)
	require.NoError(r.t, err)
	return b
}

// acks sends req to every member and returns their acks.
func (r *rawPeer) acks(proto string, req []byte) []protocol.Ack {
	r.t.Helper()
	var out []protocol.Ack
	for i := range r.nw.Members {
		a, err := protocol.UnmarshalAck(r.call(i+1, proto, req))
		require.NoError(r.t, err)
		out = append(out, a)
	}
	return out
}

func (r *rawPeer) status(ni int, resource string) (protocol.StatusReply, []byte) {
	r.t.Helper()
	b := r.call(ni, protocol.ProtoStatus, protocol.StatusRequest{Resource: resource}.Marshal())
	st, err := protocol.UnmarshalStatusReply(b)
	require.NoError(r.t, err)
	return st, b
}

// requireLeaseAt checks that each member listed holds a live lease of
// holder at epoch (committed or not as committed says).
func requireLeaseAt(t testing.TB, nw *Network, members []int, resource string, holder protocol.Holder, epoch uint64, committed bool, why string) {
	t.Helper()
	for _, i := range members {
		rec, err := nw.Node(i).Record(context.Background(), resource)
		require.NoError(t, err)
		require.Equal(t, holder, rec.Lease.Holder, "node %d: %s", i, why)
		require.Equal(t, epoch, rec.Lease.Epoch, "node %d: %s", i, why)
		require.Equal(t, committed, rec.Lease.Committed, "node %d: %s", i, why)
		require.True(t, rec.Lease.Expires.After(time.Now()), "node %d: %s: the lease is live", i, why)
	}
}

// committedAt returns the members that hold holder's committed, live
// lease of resource at epoch: the ones at which a check that the lease
// survives an attack means something. Once a Lock is Committed, 2f+1
// members acknowledged its Commit. The others apply theirs when it
// arrives, or never: if the client closes first (Close cancels the Commit
// still in flight, as a process that exits after acquiring does), or if
// the member voted for a later epoch meanwhile (the Commit is stale
// there). Such a member holds the session's uncommitted vote, or nothing
// if the round had its 2f+1 votes before that member's (the rest are
// cancelled). So at least 2f+1 members hold the lease, and which of them
// do is read here, before the attack.
func committedAt(t testing.TB, nw *Network, resource string, holder protocol.Holder, epoch uint64) []int {
	t.Helper()
	var at []int
	for i := range nw.Members {
		rec, err := nw.Node(i+1).Record(context.Background(), resource)
		require.NoError(t, err)
		if l := rec.Lease; l.Holder == holder && l.Epoch == epoch && l.Committed && l.Expires.After(time.Now()) {
			at = append(at, i+1)
		}
	}
	_, th := crypto.FaultThreshold(len(nw.Members))
	require.GreaterOrEqual(t, len(at), th, "the members that acknowledged the Commit hold the lease (held at %v)", at)
	return at
}

// requireNoLeaseAt checks that none of the members listed holds a lease
// of resource. A Release returns once t members acknowledged it; the
// others apply it when their copy of the request arrives, so each member
// is given until a hang ceiling (not a speed bound) to show it.
func requireNoLeaseAt(t testing.TB, nw *Network, members []int, resource, why string) {
	t.Helper()
	for _, i := range members {
		ok := assert.Eventually(t, func() bool {
			rec, err := nw.Node(i).Record(context.Background(), resource)
			return err == nil && rec.Lease.Holder.IsZero()
		}, 30*time.Second, 2*time.Millisecond)
		if !ok {
			rec, err := nw.Node(i).Record(context.Background(), resource)
			require.NoError(t, err)
			require.Fail(t, "a lease is left", "node %d: %s: lease %+v", i, why, rec.Lease)
		}
	}
}

func requireCodes(t testing.TB, acks []protocol.Ack, ok func(protocol.Code) bool, why string) {
	t.Helper()
	for i, a := range acks {
		require.True(t, ok(a.Code), "node %d: %s: %s %q", i+1, why, a.Code, a.Message)
	}
}

// requireCodesAt is requireCodes for the acks of the members listed (acks
// holds every member's, in order).
func requireCodesAt(t testing.TB, acks []protocol.Ack, members []int, ok func(protocol.Code) bool, why string) {
	t.Helper()
	for _, i := range members {
		a := acks[i-1]
		require.True(t, ok(a.Code), "node %d: %s: %s %q", i, why, a.Code, a.Message)
	}
}

func refusedCode(c protocol.Code) bool {
	return c == protocol.CodeNotHolder || c == protocol.CodeBadRequest
}

func okCode(c protocol.Code) bool { return c == protocol.CodeOK }

// TestBorrowedSession: the attacks of issue 20 by a sibling process sharing
// the owner's identity key, each refused, and each control (the owner,
// with its session key) accepted.
func TestBorrowedSession(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tap := &keyTap{}
	owner := newClient(t, nw, 0, client.Config{SessionKeys: tap})
	sibling := newRawPeer(t, nw, 0)
	sibClient := newClient(t, nw, 0, client.Config{}) // the same identity, its own process state
	require.Equal(t, owner.ID(), sibClient.ID())

	t.Run("GarbageSignatureRelease", func(t *testing.T) {
		const res = "borrow/garbage"
		lock, err := owner.TryAcquire(ctx, res)
		require.NoError(t, err)
		awaitCommit(t, lock)
		tok := lock.Token()
		key := tap.last(t)
		require.Equal(t, key.Session(), tok.Holder.Session)
		id := tok.Holder.Session
		// The owner's Commit may still be on its way to one member (or be
		// refused there as stale, if the sibling's acquisition below gets
		// that member's vote first): the checks of the lease are made
		// where it is held.
		held := committedAt(t, nw, res, tok.Holder, tok.Epoch)

		// What the sibling learns from Busy and Status: the holder's
		// identity and a hash of its session, never the session ID.
		_, err = sibClient.TryAcquire(ctx, res)
		var be *client.BusyError
		require.ErrorAs(t, err, &be)
		require.Equal(t, tok.Holder.ID, be.Holder.ID)
		require.True(t, be.Holder.Is(tok.Holder), "the owner recognises its own session")
		require.NotEqual(t, id[:protocol.SessionHashSize], be.Holder.Session[:], "a Busy reply names a hash, not the session ID")
		busy := acquireDirectAs(t, nw, 0, held[0], res, tok.Epoch+1, protocol.SessionKey{0x51})
		require.Equal(t, protocol.KindBusy, busy.Kind)
		require.False(t, bytes.Contains(busy.Marshal(), id[:]), "the session ID is nowhere in a Busy reply")
		var learned protocol.Statement
		for _, i := range held {
			st, _ := sibling.status(i, res)
			require.Equal(t, tok.Holder.Ref(), st.Holder, "node %d", i)
			require.NotEqual(t, id[:protocol.SessionHashSize], st.Holder.Session[:])
			// Tokens and signed votes name the session ID: it is public,
			// and no longer enough to act on the session.
			switch {
			case st.Certified != nil:
				learned = st.Certified.Statement
			case st.Vote != nil && st.Vote.Statement.Epoch == tok.Epoch:
				learned = st.Vote.Statement
			}
		}
		require.Equal(t, tok.Statement, learned, "the sibling reads the live statement off Status")

		// The attack: the live statement with a garbage signature (one
		// byte of the real one flipped), released without a key.
		forged := protocol.Token{Statement: learned, Signature: tok.Signature}
		forged.Signature[len(forged.Signature)-1] ^= 0x01
		acks := sibling.acks(protocol.ProtoRelease, protocol.ReleaseRequest{Token: forged}.Marshal())
		requireCodes(t, acks, refusedCode, "a garbage-signature Release without the session key")
		requireLeaseAt(t, nw, held, res, tok.Holder, tok.Epoch, true, "the lease survives the forged Release")

		// The sibling's own key for the owner's token: refused too.
		acks = sibling.acks(protocol.ProtoRelease, protocol.ReleaseRequest{Token: forged, Key: protocol.SessionKey{0x52}}.Marshal())
		requireCodes(t, acks, func(c protocol.Code) bool { return c == protocol.CodeNotHolder }, "a Release with another session's key")
		requireLeaseAt(t, nw, held, res, tok.Holder, tok.Epoch, true, "the lease survives a Release with the wrong key")

		// Control: the owner renews fine afterwards, and its Release ends
		// the lease.
		acks = sibling.acks(protocol.ProtoRenew, protocol.RenewRequest{Cluster: tok.Cluster, Resource: res, Epoch: tok.Epoch, Key: key, TTL: 10 * time.Second}.Marshal())
		requireCodesAt(t, acks, held, okCode, "the owner's Renew with its key")
		require.NoError(t, lock.Release(ctx))
		requireNoLeaseAt(t, nw, held, res, "the owner's Release")
	})

	t.Run("RenewAbandonWithOwnKey", func(t *testing.T) {
		const res = "borrow/renew"
		lock, err := owner.TryAcquire(ctx, res)
		require.NoError(t, err)
		awaitCommit(t, lock)
		tok := lock.Token()
		key := tap.last(t)
		mine := protocol.SessionKey{0x53}
		held := committedAt(t, nw, res, tok.Holder, tok.Epoch) // as in GarbageSignatureRelease

		// Renew of the live session's epoch with the sibling's own key:
		// the key names the sibling's session, which holds nothing.
		acks := sibling.acks(protocol.ProtoRenew, protocol.RenewRequest{Cluster: tok.Cluster, Resource: res, Epoch: tok.Epoch, Key: mine, TTL: protocol.MaxTTL}.Marshal())
		requireCodes(t, acks, func(c protocol.Code) bool { return c == protocol.CodeNotHolder }, "a Renew with the sibling's key")
		requireLeaseAt(t, nw, held, res, tok.Holder, tok.Epoch, true, "the lease is unchanged")
		for i := range nw.Members {
			rec, err := nw.Node(i+1).Record(ctx, res)
			require.NoError(t, err)
			require.Less(t, time.Until(rec.Lease.Expires), protocol.MaxTTL/2, "node %d: the sibling's Renew extended nothing", i+1)
		}
		// Abandon of a committed lease: refused whoever asks.
		acks = sibling.acks(protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: tok.Cluster, Resource: res, Epoch: tok.Epoch, Key: mine}.Marshal())
		requireCodes(t, acks, func(c protocol.Code) bool { return c == protocol.CodeNotHolder }, "an Abandon with the sibling's key")
		requireLeaseAt(t, nw, held, res, tok.Holder, tok.Epoch, true, "the lease is unchanged")

		// Control: the same Renew with the owner's key.
		acks = sibling.acks(protocol.ProtoRenew, protocol.RenewRequest{Cluster: tok.Cluster, Resource: res, Epoch: tok.Epoch, Key: key, TTL: 10 * time.Second}.Marshal())
		requireCodesAt(t, acks, held, okCode, "the owner's Renew")
		require.NoError(t, lock.Release(ctx))

		// An uncommitted vote: the sibling's Abandon with its own key is
		// refused; the owner's (the key that acquired) drops it.
		const res2 = "borrow/abandon"
		ownerKey := protocol.SessionKey{0x54}
		vote := acquireDirectAs(t, nw, 0, 2, res2, 1, ownerKey)
		require.Equal(t, protocol.KindVote, vote.Kind)
		ack := func(k protocol.SessionKey) protocol.Ack {
			a, err := protocol.UnmarshalAck(sibling.call(2, protocol.ProtoAbandon, protocol.AbandonRequest{Cluster: tok.Cluster, Resource: res2, Epoch: 1, Key: k}.Marshal()))
			require.NoError(t, err)
			return a
		}
		require.Equal(t, protocol.CodeNotHolder, ack(mine).Code)
		rec, err := nw.Node(2).Record(ctx, res2)
		require.NoError(t, err)
		require.Equal(t, ownerKey.Session(), rec.Lease.Holder.Session, "the vote stays")
		require.Equal(t, protocol.CodeOK, ack(ownerKey).Code, "control: the owner abandons its vote")
		rec, err = nw.Node(2).Record(ctx, res2)
		require.NoError(t, err)
		require.True(t, rec.Lease.Holder.IsZero())
	})

	t.Run("TokenReleaseOnlyIfAskedFor", func(t *testing.T) {
		// A library Lock's lease: the real token (tokens travel to
		// resources, so the sibling may have it) without the key is
		// refused.
		const res = "borrow/lib"
		lock, err := owner.TryAcquire(ctx, res)
		require.NoError(t, err)
		awaitCommit(t, lock)
		tok := lock.Token()
		held := committedAt(t, nw, res, tok.Holder, tok.Epoch)
		err = sibClient.Release(ctx, tok)
		var re *client.RefusedError
		require.True(t, errors.As(err, &re), "%v", err)
		acks := sibling.acks(protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok}.Marshal())
		requireCodes(t, acks, func(c protocol.Code) bool { return c == protocol.CodeNotHolder }, "a token-only Release of a library Lock's lease")
		requireLeaseAt(t, nw, held, res, tok.Holder, tok.Epoch, true, "the library lease survives")
		require.NoError(t, lock.Release(ctx), "control: the Lock releases with its key")
		requireNoLeaseAt(t, nw, held, res, "the Lock's Release")

		// A command-line style acquisition (WithTokenRelease; the process
		// exits without releasing): another process with only the token
		// ends it; a garbage signature still does not. Nothing renews the
		// lease once its client is closed, so it is taken for MaxTTL: no
		// stall of a loaded machine runs it out before the checks below,
		// and a lease found gone was ended by a Release.
		const cliRes = "borrow/cli"
		cli, err := nw.NewClient(0, client.Config{Seed: 9})
		require.NoError(t, err)
		l2, err := cli.TryAcquire(ctx, cliRes, client.WithTokenRelease(), client.WithTTL(protocol.MaxTTL))
		require.NoError(t, err)
		awaitCommit(t, l2) // as palisade acquire does before it exits
		tok2 := l2.Token()
		require.NoError(t, cli.Close()) // as palisade acquire exits
		// Close cancelled any Commit still in flight: the lease is held
		// where committedAt finds it, and must survive at every one.
		held = committedAt(t, nw, cliRes, tok2.Holder, tok2.Epoch)
		forged := tok2
		forged.Signature[3] ^= 0x20
		acks = sibling.acks(protocol.ProtoRelease, protocol.ReleaseRequest{Token: forged}.Marshal())
		requireCodes(t, acks, refusedCode, "a garbage token-only Release")
		requireLeaseAt(t, nw, held, cliRes, tok2.Holder, tok2.Epoch, true, "the lease survives the garbage token")
		require.NoError(t, sibClient.Release(ctx, tok2), "palisade release TOKEN from another process")
		// A member the Commit never reached keeps its uncommitted vote
		// until the vote times out: a token alone never ends a vote, only
		// the session's key does.
		requireNoLeaseAt(t, nw, held, cliRes, "the token release")
	})
}
