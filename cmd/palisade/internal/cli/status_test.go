package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTCPHostPort: status reaches its own member (askSelf) at the TCP
// address of a cluster file's multiaddr, IP or DNS name.
func TestTCPHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"/ip4/127.0.0.1/tcp/4001":     "127.0.0.1:4001",
		"/ip6/::1/tcp/4001":           "[::1]:4001",
		"/dns4/node1.example/tcp/443": "node1.example:443",
		"/dns/node2.example/tcp/7001": "node2.example:7001",
	} {
		got, err := tcpHostPort(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"/ip4/127.0.0.1/udp/4001", "not a multiaddr"} {
		_, err := tcpHostPort(bad)
		require.Error(t, err, bad)
	}
}
