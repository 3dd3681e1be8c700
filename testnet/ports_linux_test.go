package testnet

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/transport"
)

// TestReservedPortsStayOurs: a reserved port is refused to a plain
// listener (another process's probe or server) and never handed out as an
// automatic port, while our libp2p node still listens on it; with the
// node stopped a dial is refused; released, it is free for anyone.
func TestReservedPortsStayOurs(t *testing.T) {
	ports, err := ReservePorts(1)
	require.NoError(t, err)
	p := ports[0]
	addr := "127.0.0.1:" + strconv.Itoa(p)
	_, err = net.Listen("tcp", addr)
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "a plain listener on a reserved port: %v", err)
	for range 2000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		got := l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
		require.NotEqual(t, p, got, "an automatic port was a reserved one")
	}

	id, err := transport.GenerateIdentity(nil)
	require.NoError(t, err)
	h, err := transport.NewHost(id, []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(p)}, transport.NewGater())
	require.NoError(t, err, "our node listens on its reserved port")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err, "the node answers")
	require.NoError(t, c.Close())
	require.NoError(t, h.Close())
	_, err = net.Dial("tcp", addr)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "a stopped node's reserved port refuses dials: %v", err)

	ReleasePorts(p)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "released, the port is anyone's")
	require.NoError(t, l.Close())
}
