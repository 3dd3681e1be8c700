package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateNodeAddr: a member's announced address is a TCP multiaddr
// whose host is an IP address or a DNS name (dns4, dns6, dns); what can
// only be listened on, or not dialled over TCP, is refused with the reason.
func TestValidateNodeAddr(t *testing.T) {
	for _, a := range []string{
		"/ip4/203.0.113.7/tcp/4001",
		"/ip4/127.0.0.1/tcp/65535",
		"/ip6/2001:db8::7/tcp/4001",
		"/ip6/::1/tcp/1",
		"/dns4/node-a.example/tcp/4001",
		"/dns6/node-a.example/tcp/4001",
		"/dns/node-a.example/tcp/4001",
		"/dns4/node-a.example./tcp/4001",
		"/dns4/localhost/tcp/4001",
		"/dns/_node.internal/tcp/4001",
		"/dns4/" + strings.Repeat("a", 63) + ".example/tcp/1",
	} {
		require.NoError(t, ValidateNodeAddr(a), a)
	}
	for _, tt := range []struct{ addr, want string }{
		{"10.0.0.1:4001", "want /ip4|/ip6|/dns4|/dns6|/dns/HOST/tcp/PORT"},
		{"/ip4/10.0.0.1/udp/4001", "want /ip4"},
		{"/ip4/10.0.0.1/tcp/4001/p2p/12D3KooW", "want /ip4"},
		{"ip4/10.0.0.1/tcp/4001/", "want /ip4"},
		{"/ip4/2001:db8::7/tcp/4001", "not an IPv4 address"},
		{"/ip6/10.0.0.1/tcp/4001", "not an IPv6 address"},
		{"/ip6/fe80::1%eth0/tcp/4001", "not an IPv6 address"},
		{"/ip4/0.0.0.0/tcp/4001", "node.json's listen"},
		{"/ip6/::/tcp/4001", "node.json's listen"},
		{"/ip4/node-a.example/tcp/4001", "not an IPv4 address"},
		{"/dnsaddr/node-a.example/tcp/4001", `protocol "dnsaddr"`},
		{"/unix/sock/tcp/1", `protocol "unix"`},
		{"/dns4//tcp/4001", "1 to 253 characters"},
		{"/dns4/a..example/tcp/4001", `DNS label ""`},
		{"/dns4/-a.example/tcp/4001", "starts or ends with '-'"},
		{"/dns4/a b.example/tcp/4001", `character ' '`},
		{"/dns4/bücher.example/tcp/4001", "punycode"},
		{"/dns4/" + strings.Repeat("a", 64) + ".example/tcp/1", "1 to 63 characters"},
		{"/dns4/" + strings.Repeat("a.", 127) + "ab/tcp/1", "1 to 253 characters"},
		{"/dns4/node-a.example/tcp/0", `TCP port "0"`},
		{"/dns4/node-a.example/tcp/65536", `TCP port "65536"`},
		{"/dns4/node-a.example/tcp/04001", `TCP port "04001"`},
		{"/dns4/node-a.example/tcp/+1", `TCP port "+1"`},
		{"", "want /ip4"},
	} {
		err := ValidateNodeAddr(tt.addr)
		require.Error(t, err, tt.addr)
		require.Contains(t, err.Error(), tt.want, tt.addr)
		require.Contains(t, err.Error(), "address "+`"`, tt.addr)
	}
}

// TestClusterFileNodeAddrs: a cluster file whose members announce DNS
// names loads; one with an address no node can be dialled at is refused,
// naming the node.
func TestClusterFileNodeAddrs(t *testing.T) {
	f := testClusterFile(t)
	f.Nodes[0].Addrs = []string{"/dns4/node-a.example/tcp/4001", "/ip6/2001:db8::1/tcp/4001"}
	f.Nodes[1].Addrs = []string{"/dns6/node-b.example/tcp/4001"}
	f.Nodes[2].Addrs = []string{"/dns/node-c.example/tcp/4001"}
	c, err := saveLoad(t, f)
	require.NoError(t, err)
	require.Equal(t, f.Nodes[0].Addrs, c.File.Nodes[0].Addrs)

	f.Nodes[3].Addrs = []string{"/ip4/0.0.0.0/tcp/4004"}
	_, err = saveLoad(t, f)
	require.ErrorIs(t, err, ErrBadClusterFile)
	require.ErrorContains(t, err, `node 4: address "/ip4/0.0.0.0/tcp/4004"`)
}
