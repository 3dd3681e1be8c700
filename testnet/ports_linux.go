package testnet

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Port reservations (Linux). A port handed out by ReservePorts stays
// bound, without listening, by a socket with SO_REUSEPORT alone until
// ReleasePorts: the kernel then gives it to no other bind, in this
// process or another (an automatic port, or an explicit one without
// SO_REUSEPORT, conflicts with it), while a libp2p listener of ours, which
// sets SO_REUSEPORT, still binds it. A dial to a reserved port whose node
// is stopped is refused, as with no reservation.
//
// Without it a port is free between the probe that picked it and the
// node that listens on it, and again while a node is stopped. A test
// process running beside another once lost a node's port to the other
// process's node that way: libp2p's listeners set SO_REUSEPORT, so both
// bound it and the kernel shared the connections between two peers
// ("peer id mismatch").

var (
	reservedMu sync.Mutex
	reserved   = map[int]int{} // port -> reserving socket
)

// ReservePorts picks n free ports on 127.0.0.1 and reserves them (see
// above) until ReleasePorts. Only listeners that set SO_REUSEPORT (libp2p's
// TCP transport does) can bind a reserved port: use FreePorts for others.
func ReservePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for len(out) < n {
		p, err := reservePort()
		if err != nil {
			ReleasePorts(out...)
			return nil, fmt.Errorf("testnet: reserve a port: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func reservePort() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = unix.Close(fd)
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return 0, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return 0, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	in4, isIn4 := sa.(*unix.SockaddrInet4)
	if !isIn4 {
		return 0, fmt.Errorf("unexpected socket address %T", sa)
	}
	reservedMu.Lock()
	reserved[in4.Port] = fd
	reservedMu.Unlock()
	ok = true
	return in4.Port, nil
}

// ReleasePorts ends the reservations of ports (those not reserved are
// ignored).
func ReleasePorts(ports ...int) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	for _, p := range ports {
		if fd, ok := reserved[p]; ok {
			_ = unix.Close(fd)
			delete(reserved, p)
		}
	}
}
