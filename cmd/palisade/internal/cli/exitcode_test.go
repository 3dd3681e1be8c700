package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
		{"command's status", &commandExit{code: 7}, 7},
		{"command killed", &commandExit{code: 137}, 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ExitCode(tt.err))
		})
	}
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
