package testnet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
)

// TestFairHandoff: clients that all want one resource, each releasing and
// asking again at once, are served in turn (push handoff, DESIGN L2): the
// nodes hold a released resource for the client that waited first, so the
// client that just released, asking again, goes behind everyone who
// waited for it. No client gets three grants while another, waiting all
// along, gets none; every client completes its cycles.
func TestFairHandoff(t *testing.T) {
	const clients, cycles = 4, 6
	nw := startNet(t, 4, clients, Options{})
	var (
		mu    sync.Mutex
		order []int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := make(chan struct{})
	for i := range clients {
		c := newClient(t, nw, i, client.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range cycles {
				l, err := c.Acquire(ctx, "fair")
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("client %d release: %w", i, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("grant order: %v", order)
	require.Len(t, order, clients*cycles)
	// Until a client has finished (and stopped waiting), nobody gets a
	// third grant while another client gets none in between.
	done := map[int]int{}
	for k, c := range order {
		done[c]++
		if done[c] == cycles {
			order = order[:k+1]
			break
		}
	}
	for a := range clients {
		for b := range clients {
			if a == b {
				continue
			}
			run := 0
			for _, c := range order {
				switch c {
				case a:
					run++
					require.Less(t, run, 3, "client %d got 3 grants while client %d, waiting, got none: %v", a, b, order)
				case b:
					run = 0
				}
			}
		}
	}
}

// TestOnePairingPerToken: nodes do not check the signature of a Commit or
// Release from the holder of the statement they voted for; a node that
// did not vote checks it once. Over many cycles the nodes' pairings stay
// below one per token per non-voting node.
func TestOnePairingPerToken(t *testing.T) {
	const cycles = 10
	nw := startNet(t, 4, 1, Options{})
	c := newClient(t, nw, 0, client.Config{})
	ctx := context.Background()
	for range cycles {
		l, err := c.Acquire(ctx, "fast")
		require.NoError(t, err)
		verify(t, nw, l.Token())
		require.NoError(t, l.Release(ctx))
	}
	var checks uint64
	for i := 1; i <= 4; i++ {
		checks += nw.Node(i).LimitStats().TokenChecks
	}
	t.Logf("%d cycles: %d signature checks on the nodes", cycles, checks)
	// Each token reaches at most N - t = 1 node that did not vote.
	require.LessOrEqual(t, checks, uint64(cycles))
}
