package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// mintToken signs (resource, epoch, holder) with the shares of members 1
// to 3 of nw, as t colluding (or restored) members would.
func mintToken(t *testing.T, nw *testnet.Network, resource string, epoch uint64, h protocol.Holder) protocol.Token {
	t.Helper()
	c := nw.Keys.Cluster
	st := c.Statement(resource, epoch, h)
	var parts []crypto.PartialSig
	for i := 1; i <= 3; i++ {
		p, err := nw.Member(i).Dir.Share.Sign(st.SignedBytes())
		require.NoError(t, err)
		parts = append(parts, p)
	}
	sig, _, err := c.Key.Combine(st.SignedBytes(), parts)
	require.NoError(t, err)
	return protocol.Token{Statement: st, Signature: sig}
}

// reportCertified makes member i report tok as its certified token in
// every Status reply (nil: honest again).
func reportCertified(t *testing.T, nw *testnet.Network, i int, tok *protocol.Token) {
	if tok == nil {
		nw.SetReplyFilter(i, nil)
		return
	}
	nw.SetReplyFilter(i, func(proto string, reply []byte) []byte {
		if proto != protocol.ProtoStatus {
			return reply
		}
		st, err := protocol.UnmarshalStatusReply(reply)
		if err != nil {
			t.Errorf("member %d: status reply: %v", i, err)
			return reply
		}
		st.Certified = tok
		st.LastEpoch = max(st.LastEpoch, tok.Epoch)
		return st.Marshal()
	})
}

// TestAcquireStopsAtFork: when the status round before an acquisition
// shows two certified tokens for one epoch with different holders, both
// valid, Acquire fails with ErrFork carrying the fork, rather than acquire
// above it; the client sends the fork to the members, which record it. A
// claim whose signature does not verify is no fork: the client acquires.
func TestAcquireStopsAtFork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nw, err := testnet.Start(t.TempDir(), testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 2}})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw.Close()) }()
	c, err := client.New(client.Config{Cluster: nw.Keys.Cluster, Identity: nw.Keys.Clients[0]})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	other, err := peer.IDFromPrivateKey(nw.Keys.Clients[1])
	require.NoError(t, err)
	holder := func(b byte) protocol.Holder {
		return protocol.Holder{ID: other.String(), Session: protocol.SessionKey{0: b}.Session()}
	}

	// A forged second claim: not a fork; the acquisition goes ahead.
	tokA := mintToken(t, nw, "orders-forged", 3, holder(1))
	forged := mintToken(t, nw, "orders-forged", 3, holder(2))
	forged.Signature = tokA.Signature
	for i := 1; i <= 4; i++ {
		tok := &tokA
		if i > 2 {
			tok = &forged
		}
		reportCertified(t, nw, i, tok)
	}
	lock, err := c.TryAcquire(ctx, "orders-forged")
	require.NoError(t, err)
	require.Greater(t, lock.Token().Epoch, uint64(3))
	require.NoError(t, lock.Release(ctx))

	// A real fork at epoch 3 of orders-db: members 1 and 2 hold a's token,
	// 3 and 4 b's. Any t of them show both.
	tokA = mintToken(t, nw, "orders-db", 3, holder(1))
	tokB := mintToken(t, nw, "orders-db", 3, holder(2))
	for i := 1; i <= 4; i++ {
		tok := &tokA
		if i > 2 {
			tok = &tokB
		}
		reportCertified(t, nw, i, tok)
	}
	_, acqErr := c.Acquire(ctx, "orders-db")
	require.ErrorIs(t, acqErr, client.ErrFork)
	var fe *client.ForkError
	require.True(t, errors.As(acqErr, &fe))
	want, err := protocol.NewFork(tokA, tokB)
	require.NoError(t, err)
	require.True(t, fe.Fork.Equal(want))
	require.NoError(t, protocol.VerifyFork(nw.Keys.Cluster, fe.Fork))
	require.Contains(t, acqErr.Error(), want.ID())
	for i := 1; i <= 4; i++ {
		reportCertified(t, nw, i, nil)
	}

	// The client told the members; each records the fork once, in its
	// fork file.
	for i := 1; i <= 4; i++ {
		for {
			fs, err := node.ReadForks(nw.Member(i).Dir.Path)
			require.NoError(t, err)
			if len(fs) > 0 {
				require.Len(t, fs, 1, "member %d", i)
				require.True(t, fs[0].Equal(want))
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("member %d never recorded the fork", i)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for i := 1; i <= 4; i++ {
		require.Equal(t, 1, nw.Node(i).Forks(), "member %d counts the fork once", i)
	}
}
