package transport

import (
	"testing"
)

// BenchmarkPoolCall measures one request and its reply on a reused
// stream over loopback TCP, Noise and yamux: the transport's share of
// every round a client makes.
func BenchmarkPoolCall(b *testing.B) {
	ctx, server, _, pl := poolFixture(b, 0, 4)
	msg := make([]byte, 400)
	for b.Loop() {
		if _, err := pl.Call(ctx, server.ID(), echoProto, msg, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
