package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// TestExitCode: each documented status comes from the errors that cause
// it, however they are wrapped on the way up.
func TestExitCode(t *testing.T) {
	quorum := &client.QuorumError{Op: "status", Need: 3, Got: 1, Nodes: []*client.NodeError{{Index: 2, Err: errors.New("x")}}}
	busy := &client.BusyError{Resource: "r", Epoch: 3}
	refused := &client.RefusedError{Op: "acquire", Nodes: []*client.NodeError{{Index: 1, Err: &protocol.RefusedError{Code: protocol.CodeUnauthorised}}}}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain", errors.New("open x: no such file"), ExitError},
		{"cancelled", fmt.Errorf("acquire: %w", context.Canceled), ExitError},
		{"usage", usageErrorf("acquire", "acquire: want one RESOURCE"), ExitUsage},
		{"usage wrapped", fmt.Errorf("outer: %w", usageErrorf("", "unknown command")), ExitUsage},
		{"busy", busy, ExitBusy},
		{"held locally", client.ErrHeldLocally, ExitBusy},
		{"busy after --wait", fmt.Errorf("client: acquire: %w (last attempt: %w)", context.DeadlineExceeded, busy), ExitBusy},
		{"busy found by diagnose", fmt.Errorf("%w; then %w", context.DeadlineExceeded, busy), ExitBusy},
		{"quorum", quorum, ExitNoQuorum},
		{"contended", &client.QuorumError{Op: "acquire", Need: 3, Got: 1, Nodes: []*client.NodeError{
			{Index: 2, Err: errors.New("busy: held by 12D3KooW…/abcd at epoch 3")},
			{Index: 4, Err: errors.New("busy: held by 12D3KooW…/abcd at epoch 3")}}}, ExitBusy},
		{"contended, one node down", &client.QuorumError{Op: "acquire", Need: 3, Got: 1, Nodes: []*client.NodeError{
			{Index: 2, Err: errors.New("busy: held by 12D3KooW…/abcd at epoch 3")},
			{Index: 4, Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)}}}, ExitNoQuorum},
		{"quorum after --wait", fmt.Errorf("client: acquire: %w (last attempt: %w)", context.DeadlineExceeded, quorum), ExitNoQuorum},
		{"quorum explained", explainf(quorum, "one line"), ExitNoQuorum},
		{"lease lost", fmt.Errorf("%w: %q epoch %d: deadline passed without renewal", client.ErrLost, "r", 3), ExitNoQuorum},
		{"refused", refused, ExitRefused},
		{"refused explained", explainf(refused, "one line"), ExitRefused},
		{"not the holder", fmt.Errorf("%w: token held by x", client.ErrNotHolder), ExitRefused},
		{"checked before dialling", refusedf("acquire: not a client"), ExitRefused},
		{"lost lock", &exitError{code: ExitNoQuorum, err: explainf(client.ErrLost, "lost")}, ExitNoQuorum},
		// The nodes' gaters drop an identity they do not admit: libp2p's
		// NewStream then finds the connection gone. More than f such
		// nodes are a refusal, whatever --cluster says; fewer are not.
		{"not admitted", dropped(1, 2, 3, 4), ExitRefused},
		{"not admitted, one node down", withDown(dropped(1, 2, 3), 4), ExitRefused},
		{"not admitted after --wait", fmt.Errorf("client: acquire: %w (last attempt: %w)", context.DeadlineExceeded, dropped(1, 2)), ExitRefused},
		{"not admitted explained", explainf(dropped(1, 2, 3, 4), "one line"), ExitRefused},
		{"one node drops, others down", withDown(dropped(1), 2, 3), ExitNoQuorum},
		{"command's status", &commandExit{code: 7}, 7},
		{"command killed", &commandExit{code: 137}, 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ExitCode(tt.err))
		})
	}
}

// dropped is a failed round of a 4-node cluster (t = 3, f = 1) in which
// the nodes given dropped the connection after the handshake, as a node's
// connection gater does to a peer its cluster.json does not list.
func dropped(nodes ...int) *client.QuorumError {
	qe := &client.QuorumError{Op: "acquire", Need: 3}
	for _, i := range nodes {
		qe.Nodes = append(qe.Nodes, &client.NodeError{Index: i, Err: errors.New("open /palisade/acquire/1.0.0 stream: connection failed")})
	}
	return qe
}

// withDown adds nodes that refused the TCP connection (down) to qe.
func withDown(qe *client.QuorumError, nodes ...int) *client.QuorumError {
	for _, i := range nodes {
		qe.Nodes = append(qe.Nodes, &client.NodeError{Index: i, Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)})
	}
	return qe
}

// TestNotAdmittedMessage: a round the nodes refused by dropping the
// connection reads as a refusal naming them and what to do, whether or not
// --cluster lists the identity.
func TestNotAdmittedMessage(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, 0, Run(context.Background(), []string{"keygen", "--nodes", "4", "--dir", dir}, &out, &errb), errb.String())
	cluster, err := protocol.LoadCluster(filepath.Join(dir, "cluster.json"))
	require.NoError(t, err)
	listed := cluster.File.Clients[0].PeerID
	tg := target{op: `acquire "orders-db"`, resource: "orders-db", clusterPath: "c.json", cluster: cluster, self: listed}
	err = explainRequest(tg, withDown(dropped(1, 2, 3), 4))
	require.Equal(t, ExitRefused, ExitCode(err))
	require.Equal(t, `acquire "orders-db": refused: nodes 1, 2, 3 dropped the connection: their cluster.json does not admit identity `+listed+
		` as a client (though --cluster c.json lists it): have every node's operator add it ("palisade clients add") and send the node SIGHUP`, err.Error())
	tg.self = "12D3KooWNotListed"
	err = explainRequest(tg, dropped(2, 4))
	require.Equal(t, ExitRefused, ExitCode(err))
	require.Contains(t, err.Error(), "refused: nodes 2, 4 dropped the connection")
	require.Contains(t, err.Error(), "(nor does --cluster c.json)")
	// One node dropping, the others down: an outage, said as before.
	err = explainRequest(tg, withDown(dropped(1), 2, 3))
	require.Equal(t, ExitNoQuorum, ExitCode(err))
	require.Contains(t, err.Error(), "not enough nodes: 3 of 4 needed")
}

// TestRunExitStatus: Run returns the status and prints one error line,
// except for COMMAND's own status, which it leaves to COMMAND.
func TestRunExitStatus(t *testing.T) {
	ctx := context.Background()
	var out, errb bytes.Buffer
	require.Equal(t, ExitUsage, Run(ctx, []string{"frobnicate"}, &out, &errb))
	require.Contains(t, errb.String(), `palisade: error: unknown command "frobnicate"`)
	errb.Reset()
	require.Equal(t, ExitUsage, Run(ctx, []string{"acquire", "--ttl", "30", "r"}, &out, &errb))
	require.Contains(t, errb.String(), `invalid value "30" for flag -ttl: a duration needs a unit: 30s, 30ms or 30m`)
}
