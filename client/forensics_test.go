package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// TestCommitCarriesCertificate: an acquisition's Commit carries the vote
// certificate of its token, the members keep it, and Forensics gives it
// back: one certified holder, its t or more signers, and no culprit (no
// fork). An epoch nobody certified shows nothing.
func TestCommitCarriesCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nw, err := testnet.Start(t.TempDir(), testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 1}})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw.Close()) }()
	c, err := client.New(client.Config{Cluster: nw.Keys.Cluster, Identity: nw.Keys.Clients[0]})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	lock, err := c.Acquire(ctx, "orders-db")
	require.NoError(t, err)
	tok := lock.Token()
	require.NoError(t, lock.Release(ctx))

	fx, err := c.Forensics(ctx, "orders-db", tok.Epoch)
	require.NoError(t, err)
	require.Equal(t, 4, fx.Answered)
	require.Empty(t, fx.Failed)
	require.Len(t, fx.Certificates, 1, "every member keeps the same certificate")
	cert := fx.Certificates[0]
	require.Equal(t, tok.Statement, cert.Statement)
	require.NoError(t, protocol.VerifyCertificate(nw.Keys.Cluster, cert))
	require.Equal(t, []protocol.Holder{tok.Holder}, fx.Verdict.Certified)
	require.False(t, fx.Verdict.Fork())
	require.Empty(t, fx.Verdict.Culprits)
	require.Empty(t, fx.Verdict.Rejected)
	require.Empty(t, c.Evidence())

	none, err := c.Forensics(ctx, "orders-db", tok.Epoch+100)
	require.NoError(t, err)
	require.Empty(t, none.Certificates)
	require.Empty(t, none.Verdict.Certified)
}
