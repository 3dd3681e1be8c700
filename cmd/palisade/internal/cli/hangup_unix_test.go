//go:build unix

package cli

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandleHangups: while handleHangups runs, SIGHUP calls reload and
// does not end the process (this test's process would die of it).
func TestHandleHangups(t *testing.T) {
	reloaded := make(chan struct{}, 4)
	stop := handleHangups(func() { reloaded <- struct{}{} })
	defer stop()
	for i := 0; i < 2; i++ {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
		select {
		case <-reloaded:
		case <-time.After(30 * time.Second): // hang ceiling
			t.Fatalf("SIGHUP %d did not reach reload", i+1)
		}
	}
	stop()
	stop() // a second stop does nothing
}
