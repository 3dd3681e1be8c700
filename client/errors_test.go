package client

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestQuorumErrorConcurrentError: Error lists nodes in index order without
// sorting the error's own slice, so goroutines may log one error at once
// (run with -race).
func TestQuorumErrorConcurrentError(t *testing.T) {
	nodes := []*NodeError{{Index: 3, Err: errors.New("c")}, {Index: 1, Err: errors.New("a")}, {Index: 2, Err: errors.New("b")}}
	qe := &QuorumError{Op: "commit", Need: 3, Got: 1, Nodes: nodes}
	want := "client: commit: 1 of 3 needed nodes answered: node 1 (): a; node 2 (): b; node 3 (): c"
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if got := qe.Error(); got != want {
					t.Errorf("Error() = %q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, []int{3, 1, 2}, []int{nodes[0].Index, nodes[1].Index, nodes[2].Index}, "the caller's order is kept")
	require.Equal(t, []int{1, 2, 3}, qe.Failed())
}

func TestErrorsCompose(t *testing.T) {
	refused := &RefusedError{Op: `acquire "x" at epoch 4`, Nodes: []*NodeError{
		{Index: 2, Err: &protocol.RefusedError{Code: protocol.CodeUnauthorised}},
		{Index: 1, Err: &protocol.RefusedError{Code: protocol.CodeUnauthorised}},
	}}
	require.ErrorIs(t, refused, ErrRefused)
	require.NotErrorIs(t, refused, ErrNotEnoughNodes)
	require.Equal(t, `client: refused: acquire "x" at epoch 4: node 1 (): `+refused.Nodes[1].Err.Error()+`; node 2 (): `+refused.Nodes[0].Err.Error(), refused.Error())

	local := fmt.Errorf("client: acquire %q: %w", "x", ErrHeldLocally)
	require.ErrorIs(t, local, ErrHeldLocally)
	require.ErrorIs(t, local, ErrBusy, "a local hold is a kind of busy")
	var be *BusyError
	require.False(t, errors.As(local, &be), "no node reported a holder")
	require.NotErrorIs(t, &BusyError{}, ErrHeldLocally)
}
