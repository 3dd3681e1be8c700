package cli

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// TestForensicsConvicts makes the fork of issue 21 with real nodes: two
// tokens of one (resource, epoch), one signed by members 1, 3 and 4, the
// other by 2, 3 and 4 (members 3 and 4 voting twice, as restored or
// colluding nodes would), committed with their certificates to node 1 and
// node 2 respectively. palisade forensics names members 3 and 4, and only
// them, exits 7, and hands their evidence and the fork of the two tokens
// to every member; with no fork it says so and exits 0.
func TestForensicsConvicts(t *testing.T) {
	dir := t.TempDir()
	nw, err := testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Rand: rand.New(rand.NewSource(21))}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	cluster := filepath.Join(dir, node.ClusterFileName)
	identity := filepath.Join(dir, testnet.ClientKeyFileName)
	c := nw.Keys.Cluster
	self, err := peer.IDFromPrivateKey(nw.Keys.Clients[0])
	require.NoError(t, err)

	// forge signs st as members do: partials of signers combined into a
	// token, and their identity signatures as its certificate.
	forge := func(st protocol.Statement, signers ...int) protocol.CommitRequest {
		var ps []crypto.PartialSig
		var votes []protocol.CertVote
		for _, i := range signers {
			d := nw.Member(i).Dir
			p, err := d.Share.Sign(st.SignedBytes())
			require.NoError(t, err)
			ps = append(ps, p)
			sig, err := d.Identity.Sign(st.VoteBytes())
			require.NoError(t, err)
			votes = append(votes, protocol.CertVote{Node: i, Sig: sig})
		}
		sig, _, err := c.Key.Combine(st.SignedBytes(), ps)
		require.NoError(t, err)
		return protocol.CommitRequest{Token: protocol.Token{Statement: st, Signature: sig}, TTL: time.Second, Certificate: votes}
	}
	h, err := transport.NewHost(nw.Keys.Clients[0], nil, transport.NewGater(memberIDs(t, c)...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	commitTo := func(i int, req protocol.CommitRequest) {
		m := nw.Member(i)
		require.NoError(t, transport.AddPeer(h, m.PeerID, c.File.Nodes[i-1].Addrs))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := transport.Call(ctx, h, m.PeerID, protocol.ProtoCommit, req.Marshal(), protocol.MaxFrameSize)
		require.NoError(t, err)
		ack, err := protocol.UnmarshalAck(b)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeOK, ack.Code, ack.Message)
	}
	holderA := protocol.Holder{ID: self.String(), Session: protocol.SessionID{0xa}}
	holderB := protocol.Holder{ID: self.String(), Session: protocol.SessionID{0xb}}
	commitTo(1, forge(c.Statement("orders-db", 1, holderA), 1, 3, 4))
	commitTo(2, forge(c.Statement("orders-db", 1, holderB), 2, 3, 4))

	code, out, errs := runCmd(t, "forensics", "--cluster", cluster, "--identity", identity, "orders-db", "1")
	require.Equal(t, ExitConvicted, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "signers=1,3,4\n")
	require.Contains(t, out, "signers=2,3,4\n")
	require.Equal(t, 2, strings.Count(out, "culprit "), out)
	for _, i := range []int{3, 4} {
		require.Contains(t, out, fmt.Sprintf("culprit node=%d peer=%s resource=orders-db epoch=1 ", i, c.File.Nodes[i-1].PeerID))
	}
	require.Contains(t, out, "fork at orders-db epoch 1: 2 members convicted")
	require.Contains(t, errs, "2 members voted for two holders")
	// The report does not depend on the order the members answer in:
	// certificates, votes and tokens are sorted (holder A's first).
	require.Less(t, strings.Index(out, "signers=1,3,4\n"), strings.Index(out, "signers=2,3,4\n"), out)
	for range 2 {
		code2, out2, _ := runCmd(t, "forensics", "--cluster", cluster, "--identity", identity, "orders-db", "1")
		require.Equal(t, ExitConvicted, code2)
		require.Equal(t, out, out2, "the same records, the same report")
	}

	// The members' certified tokens fork too: forensics prints the fork
	// and shows it to every member. Node 1 held only A's token and node 2
	// only B's; both now list the fork, which palisade fork checks.
	require.Regexp(t, `(?m)^fork id=[0-9a-f]{64} resource=orders-db epoch=1 holders=\S+,\S+ fork=pf3\.\S+$`, out)
	for _, dir := range nw.Keys.NodeDirs[:2] {
		code, ev, errs := runCmd(t, "evidence", "--dir", dir)
		require.Equal(t, 0, code, errs)
		require.Regexp(t, `(?m)^fork id=[0-9a-f]{64} resource=orders-db epoch=1 `, ev, dir)
	}

	// The culprits' evidence reached the members: palisade evidence on
	// node 1 (which never saw the second token) lists both.
	require.Eventually(t, func() bool {
		code, out, _ := runCmd(t, "evidence", "--dir", nw.Keys.NodeDirs[0])
		return code == 0 && strings.Contains(out, "node=3 ") && strings.Contains(out, "node=4 ") && !strings.Contains(out, "node=1 ") && !strings.Contains(out, "node=2 ")
	}, 10*time.Second, 50*time.Millisecond)

	// Tokens that fork, committed without their certificates (as a client
	// of an earlier release would): the fork is proven and shown, its
	// culprits are not named, exit 8.
	noCert := func(req protocol.CommitRequest) protocol.CommitRequest {
		req.Certificate = nil
		return req
	}
	commitTo(1, noCert(forge(c.Statement("orders-db", 3, holderA), 1, 3, 4)))
	commitTo(2, noCert(forge(c.Statement("orders-db", 3, holderB), 2, 3, 4)))
	code, out, errs = runCmd(t, "forensics", "--cluster", cluster, "--identity", identity, "orders-db", "3")
	require.Equal(t, ExitForkUnnamed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Regexp(t, `(?m)^fork id=[0-9a-f]{64} resource=orders-db epoch=3 `, out)
	require.NotContains(t, out, "culprit")
	require.Contains(t, errs, "certificates do not name the culprits")

	// No fork at another epoch: said so, exit 0.
	commitTo(3, forge(c.Statement("orders-db", 2, holderA), 1, 2, 3))
	code, out, errs = runCmd(t, "forensics", "--cluster", cluster, "--identity", identity, "orders-db", "2")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "no fork found")
	require.NotContains(t, out, "culprit")

	code, _, errs = runCmd(t, "forensics", "--cluster", cluster, "--identity", identity, "orders-db", "zero")
	require.Equal(t, ExitUsage, code, errs)
}

func memberIDs(t *testing.T, c *protocol.Cluster) []peer.ID {
	t.Helper()
	var ids []peer.ID
	for _, n := range c.File.Nodes {
		id, err := peer.Decode(n.PeerID)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}
