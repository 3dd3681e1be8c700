package testnet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/palisade-dev/palisade/internal/testwait"
)

// requireWaitersQueued waits until at least k running members hold a
// waiter in their wait queues (node.QueueStats().Waiters >= 1): an
// acquisition waiting through push handoff is then registered with k
// members. Tests use it before a release that must wake a waiter, so the
// release cannot come before the wait.
func requireWaitersQueued(t testing.TB, nw *Network, k int, what string) {
	t.Helper()
	queuedAt := func() (at []int) {
		for _, m := range nw.Members {
			if r := nw.Node(m.Index); r != nil && r.QueueStats().Waiters >= 1 {
				at = append(at, m.Index)
			}
		}
		return at
	}
	if !assert.Eventually(t, func() bool { return len(queuedAt()) >= k }, testwait.HangCeiling, 5*time.Millisecond, what) {
		t.Fatalf("%s: a waiter is queued at nodes %v, want at least %d nodes within %v", what, queuedAt(), k, testwait.HangCeiling)
	}
}
