package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// newTestHost starts a closed libp2p host as node and client use, listening
// on listen (none: a client), admitting allow.
func newTestHost(t *testing.T, listen []string, allow ...peer.ID) host.Host {
	t.Helper()
	id, err := transport.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	h, err := transport.NewHost(id, listen, transport.NewGater(allow...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// TestNodeReasonFromLibp2p: what libp2p reports for a node that is down
// (a multi-line dial report) and for one whose gater refuses us folds to
// one short reason each.
func TestNodeReasonFromLibp2p(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A node that is not running: nothing listens on its port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	downID, err := transport.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	down, err := peer.IDFromPrivateKey(downID)
	require.NoError(t, err)
	c := newTestHost(t, nil, down)
	require.NoError(t, transport.AddPeer(c, down, []string{closedAddr}))
	_, err = transport.Call(ctx, c, down, protocol.ProtoStatus, []byte{1}, 1024)
	require.Error(t, err)
	require.Contains(t, err.Error(), "\n", "libp2p reports a dial failure on several lines")
	require.Equal(t, reasonRefused, nodeReason(err), "from %q", err)

	// A node that does not admit the client: its gater drops the
	// connection once the client's peer ID is known.
	node := newTestHost(t, []string{"/ip4/127.0.0.1/tcp/0"}) // admits nobody
	c2 := newTestHost(t, nil, node.ID())
	c2.Peerstore().AddAddrs(node.ID(), node.Addrs(), time.Hour)
	_, err = transport.Call(ctx, c2, node.ID(), protocol.ProtoStatus, []byte{1}, 1024)
	require.Error(t, err)
	require.Equal(t, reasonDropped, nodeReason(err), "from %q", err)
}

func TestNodeReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp4", Err: fmt.Errorf("connect: %w", errConnRefused)}
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("open stream: %w", refused), reasonRefused},
		{fmt.Errorf("read reply: %w (%v)", context.DeadlineExceeded, "i/o timeout"), reasonTimeout},
		{&protocol.RefusedError{Code: protocol.CodeStale, LastEpoch: 9}, "stale epoch"},
		{errors.New("busy: held by 12D3KooW…/abcd at epoch 3"), reasonBusy},
		{&net.DNSError{Name: "node3.example", Err: "no such host"}, "cannot resolve node3.example"},
		{errors.New("protocol: malformed encoding: frame\n  * second line"), "malformed encoding: frame"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, nodeReason(tt.err), "%q", tt.err)
	}
}

// TestNotEnoughNodes: the nodes are listed in index order, each with its
// reason, whatever order they answered in, then the likeliest fix.
func TestNotEnoughNodes(t *testing.T) {
	d := verifiertest.NewDealer("c", 1)
	qe := &client.QuorumError{Op: "status", Need: 3, Got: 1, Nodes: []*client.NodeError{
		{Index: 4, Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)},
		{Index: 2, Err: &net.OpError{Op: "dial", Err: errConnRefused}},
		{Index: 3, Err: &net.OpError{Op: "dial", Err: errConnRefused}},
	}}
	tg := target{op: `acquire "r"`, resource: "r", clusterPath: "c.json", cluster: d.Cluster, waits: true}
	err := explainRequest(tg, qe)
	require.Equal(t, `acquire "r": not enough nodes: 3 of 4 needed, 1 usable answer (node 2: connection refused; node 3: connection refused; node 4: timed out): start the nodes, or check their addresses in c.json; --wait D waits for them`, err.Error())
	require.Equal(t, []int{4, 2, 3}, []int{qe.Nodes[0].Index, qe.Nodes[1].Index, qe.Nodes[2].Index}, "the client's error is not reordered")
	require.ErrorIs(t, err, client.ErrNotEnoughNodes)

	// A release: no --wait to suggest.
	tg.op, tg.waits = `release "r"`, false
	require.NotContains(t, explainRequest(tg, qe).Error(), "--wait")
}

// TestBusyNamesHolder: a holder is named by its client name when the
// cluster file has one, else by its peer ID.
func TestBusyNamesHolder(t *testing.T) {
	self, other := peerIDString(t), peerIDString(t)
	cf := verifiertest.NewDealer("c", 1).Cluster.File
	cf.Clients = []protocol.ClientInfo{{Name: "billing-2", PeerID: other, Resources: []string{"*"}}}
	cluster, err := protocol.NewCluster(cf)
	require.NoError(t, err)
	be := &client.BusyError{Resource: "orders-db", Holder: protocol.HolderRef{ID: other, Session: protocol.SessionHash{0x63, 0x53, 0x8d, 0x48}}, Epoch: 7, Left: 4200 * time.Millisecond, Nodes: []int{3, 1}}
	tg := target{op: `acquire "orders-db"`, cluster: cluster, self: self, waits: true}
	msg := explainRequest(tg, be).Error()
	want := fmt.Sprintf(`acquire "orders-db": "orders-db" is held by billing-2 (%s/63538d48) at epoch 7, 4.2s left: wait for it with --wait 5s, or have its holder run "palisade release"`, shortPeer(other))
	require.Equal(t, want, msg)

	be.Holder.ID = self // unnamed, and this identity's own
	msg = explainRequest(tg, be).Error()
	require.Contains(t, msg, fmt.Sprintf("is held by %s/63538d48 at epoch 7, 4.2s left (another lock session of this identity)", shortPeer(self)))
}

func peerIDString(t *testing.T) string {
	t.Helper()
	k, err := client.GenerateIdentity()
	require.NoError(t, err)
	id, err := client.HolderID(k)
	require.NoError(t, err)
	return id
}

// TestRefusalByCode: each refusal code the nodes give has its remedy.
func TestRefusalByCode(t *testing.T) {
	cluster := verifiertest.NewDealer("c", 1).Cluster
	tg := target{op: `acquire "payments"`, resource: "payments", clusterPath: "c.json", cluster: cluster}
	refused := func(code protocol.Code, idx ...int) *client.RefusedError {
		re := &client.RefusedError{Op: "acquire"}
		for _, i := range idx {
			re.Nodes = append(re.Nodes, &client.NodeError{Index: i, Err: &protocol.RefusedError{Code: code, Message: "m"}})
		}
		return re
	}
	require.Equal(t, `acquire "payments": refused by nodes 2, 3 (unauthorised): the nodes' cluster.json does not let this client acquire "payments", though --cluster c.json does: give every node the same cluster.json and send them SIGHUP`,
		explainRequest(tg, refused(protocol.CodeUnauthorised, 3, 2)).Error())
	require.Contains(t, explainRequest(tg, refused(protocol.CodeWrongCluster, 1, 2)).Error(), "(wrong cluster): these nodes run another cluster than --cluster c.json")
	require.Contains(t, explainRequest(tg, refused(protocol.CodeOtherEra, 1, 2)).Error(), "the cluster was reshared")
	require.Contains(t, explainRequest(tg, refused(protocol.CodeNotHolder, 1, 2, 4)).Error(), "refused by nodes 1, 2, 4 (not the holder): the lease already ended")
	require.Contains(t, explainRequest(tg, refused(protocol.CodeBadRequest, 1, 2)).Error(), "(bad request: m): check that the nodes and this client run the same palisade version")
}

// TestTokenRejected: verify's reasons are one line without the packages'
// prefixes, each with what to do.
func TestTokenRejected(t *testing.T) {
	d := verifiertest.NewDealer("c", 1)
	v := verifier.New(d.Cluster)
	tok, err := d.Issue("orders-db", 3, peerIDString(t))
	require.NoError(t, err)
	check := func(text string) string {
		_, err := v.ParseAndVerify(text)
		require.Error(t, err)
		msg := tokenRejected("c.json", err).Error()
		require.NotRegexp(t, `\b(verifier|protocol|crypto|bls12381): `, msg)
		require.NotContains(t, msg, "\n")
		return msg
	}
	b, err := tok.MarshalBinary()
	require.NoError(t, err)
	sigAt := len(b) - crypto.SignatureSize
	withSig := func(sig []byte) string {
		bb := append(append([]byte(nil), b[:sigAt]...), sig...)
		return protocol.TokenTextPrefix + base64.RawURLEncoding.EncodeToString(bb)
	}

	// The signature's bytes break the encoding's byte-level rules, which
	// parsing checks (as when a token is damaged in copying).
	noFlag := append([]byte(nil), tok.Signature[:]...)
	noFlag[0] &^= 0x80
	require.Equal(t, `token rejected: malformed token (its signature is not a valid point encoding: compression flag not set): pass the whole text acquire printed, starting with "pt3."`,
		check(withSig(noFlag)))
	require.Equal(t, `token rejected: malformed token (its signature is not a valid point encoding: the point at infinity): pass the whole text acquire printed, starting with "pt3."`,
		check(withSig(bls12381test.Identity(crypto.SignatureSize))))
	// They pass those rules but are no point of G1, which only the full
	// decoding at verification finds.
	notOnCurve := bls12381test.NotOnCurveG1(1)
	require.Equal(t, `token rejected: invalid token signature: its signature is not a point of the signature group G1 (not on the curve; damaged in copying?): pass the whole text acquire printed, starting with "pt3."`,
		check(withSig(notOnCurve[:])))
	outside := bls12381test.NonSubgroupG1(1)
	require.Equal(t, `token rejected: invalid token signature: its signature is not a point of the signature group G1 (outside the prime-order subgroup; damaged in copying?): pass the whole text acquire printed, starting with "pt3."`,
		check(withSig(outside[:])))
	require.Equal(t, `token rejected: malformed token (token text: illegal base64 data at input byte 1): pass the whole text acquire printed, starting with "pt3."`,
		check("pt3.g!rbage"))

	// Tokens of earlier versions name their version and what to do.
	require.Equal(t, "token rejected: version 2 tokens are signed on the bn256 curve, which this release no longer verifies; the cluster must run a new DKG on BLS12-381 (palisade dkg), then acquire a new token",
		check("pt2."+strings.TrimPrefix(tok.String(), protocol.TokenTextPrefix)))
	require.Equal(t, "token rejected: version 1 tokens name no lock session and are no longer accepted; acquire a new token", check("pt1.AQAAAA"))

	changed := tok
	changed.Epoch++
	require.Equal(t, "token rejected: invalid token signature: its fields or signature were changed after it was issued; acquire a new token", check(changed.String()))
	other, err := verifiertest.NewDealer("other", 2).Issue("orders-db", 3, tok.Holder.ID)
	require.NoError(t, err)
	require.Equal(t, "token rejected: token for another cluster than --cluster c.json: verify it with its own cluster's cluster.json", check(other.String()))
}

// TestEarlierReleaseExplained: a cluster file, share file or vote store of
// an earlier release is explained in one line naming the file, its version
// and what to do, and the explanation still unwraps to the sentinel.
func TestEarlierReleaseExplained(t *testing.T) {
	dir := t.TempDir()
	cluster := fmt.Errorf("%s: %w", dir+"/cluster.json", fmt.Errorf("%w: version 1 holds a bn256 group key, which this release no longer uses; run a new DKG (palisade dkg) to make a BLS12-381 key and a version 2 cluster file", protocol.ErrClusterFileVersion))
	share := fmt.Errorf("%s: %w", dir+"/share.key", fmt.Errorf("%w: a version 1 (bn256) share, written by an earlier release (34 bytes, no header); this release signs on BLS12-381 and cannot use it: run a new DKG (palisade dkg) into an empty node directory", node.ErrShareFileVersion))
	store := fmt.Errorf("node: bolt store: open x: %w", fmt.Errorf("%w: a version 1 store, which an earlier release wrote", node.ErrStoreVersion))

	err := explainNodeLoad(dir, cluster)
	require.ErrorIs(t, err, protocol.ErrClusterFileVersion)
	require.Equal(t, "node: "+dir+" was made by another release: its cluster.json: version 1 holds a bn256 group key, which this release no longer uses; run a new DKG (palisade dkg) to make a BLS12-381 key and a version 2 cluster file", err.Error())
	err = explainNodeLoad(dir, share)
	require.ErrorIs(t, err, node.ErrShareFileVersion)
	require.Equal(t, "node: "+dir+" was made by another release: its share.key: a version 1 (bn256) share, written by an earlier release (34 bytes, no header); this release signs on BLS12-381 and cannot use it: run a new DKG (palisade dkg) into an empty node directory", err.Error())
	err = explainNodeStart(2, dir, store)
	require.ErrorIs(t, err, node.ErrStoreVersion)
	require.Equal(t, "node 2: "+dir+" was made by another release: its votes.db: a version 1 store, which an earlier release wrote", err.Error())

	err = clusterLoadError("status", "c.json", cluster)
	require.ErrorIs(t, err, protocol.ErrClusterFileVersion)
	require.Equal(t, "status: --cluster c.json was written by an earlier release: version 1 holds a bn256 group key, which this release no longer uses; run a new DKG (palisade dkg) to make a BLS12-381 key and a version 2 cluster file", err.Error())
	plain := errors.New("boom")
	require.Equal(t, "status: boom", clusterLoadError("status", "c.json", plain).Error())
}

func TestFaultTolerance(t *testing.T) {
	tests := map[int]string{
		1:  "1 node tolerates no faulty node (f = 0, 1 signature needed)",
		2:  "2 nodes tolerate no faulty node (f = 0, 2 signatures needed); the node beyond 1 adds no fault tolerance, only signatures to collect: 4 nodes tolerate 1 faulty node",
		3:  "3 nodes tolerate no faulty node (f = 0, 2 signatures needed); the extra 2 nodes beyond 1 add no fault tolerance, only signatures to collect: 4 nodes tolerate 1 faulty node",
		4:  "4 nodes tolerate 1 faulty node (f = 1, 3 signatures needed)",
		5:  "5 nodes tolerate 1 faulty node (f = 1, 4 signatures needed); the node beyond 4 adds no fault tolerance, only signatures to collect: 7 nodes tolerate 2 faulty nodes",
		7:  "7 nodes tolerate 2 faulty nodes (f = 2, 5 signatures needed)",
		10: "10 nodes tolerate 3 faulty nodes (f = 3, 7 signatures needed)",
	}
	for n, want := range tests {
		require.Equal(t, want, faultTolerance(n), "n=%d", n)
	}
}

// TestFlagValueErrors: bad durations and numbers say what a good one
// looks like, on the command line and from the environment.
func TestFlagValueErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"acquire", "--ttl", "30", "r"}, want: `invalid value "30" for flag -ttl: a duration needs a unit: 30s, 30ms or 30m`},
		{args: []string{"acquire", "--wait", "soon", "r"}, want: `invalid value "soon" for flag -wait: not a duration: write it like 30s, 1m30s or 500ms`},
		{args: []string{"acquire", "r"}, env: "2.5", want: `PALISADE_WAIT="2.5": a duration needs a unit: 2.5s, 2.5ms or 2.5m`},
		{args: []string{"keygen", "--nodes", "four"}, want: `invalid value "four" for flag -nodes: not a whole number`},
		{args: []string{"demo", "--seed", "-1"}, want: `invalid value "-1" for flag -seed: not a whole number`},
	} {
		t.Setenv("PALISADE_WAIT", tt.env)
		var out, errb strings.Builder
		require.Equal(t, ExitUsage, Run(context.Background(), tt.args, &out, &errb))
		require.Contains(t, errb.String(), tt.want)
	}
}

// errConnRefused is the errno a dial to a closed port fails with.
var errConnRefused = syscall.ECONNREFUSED

// TestInconclusive: a last round that met only busy answers, or that the
// deadline cut short, tells nothing about the nodes, so acquire asks them
// once more before it explains; a node that refused the connection does.
func TestInconclusive(t *testing.T) {
	busy := &client.NodeError{Index: 2, Err: errors.New("busy: held by 12D3KooW…/abcd at epoch 3")}
	late := &client.NodeError{Index: 3, Err: fmt.Errorf("read reply: %w", context.DeadlineExceeded)}
	down := &client.NodeError{Index: 4, Err: &net.OpError{Op: "dial", Err: errConnRefused}}
	require.True(t, inconclusive(&client.QuorumError{Nodes: []*client.NodeError{busy, late}}))
	require.False(t, inconclusive(&client.QuorumError{Nodes: []*client.NodeError{busy, down}}))
}
