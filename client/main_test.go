package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// goroutine a Client starts is owned by it and stopped by Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
