package testnet

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// node, client and host must stop with its owner.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Process-wide libp2p and logging singletons, started once.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}
