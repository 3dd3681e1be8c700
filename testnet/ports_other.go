//go:build !linux

package testnet

// ReservePorts picks n free ports on 127.0.0.1. Only Linux reserves them
// (ports_linux.go); elsewhere they are free again at once, as with
// FreePorts.
func ReservePorts(n int) ([]int, error) { return FreePorts(n) }

// ReleasePorts ends the reservations of ports: nothing to do off Linux.
func ReleasePorts(ports ...int) {}
