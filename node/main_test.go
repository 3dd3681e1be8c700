package node

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the node starts is owned and stopped by Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
