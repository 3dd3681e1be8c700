package node

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and its metadata only as needed to read the
// data back (its size when it grew).
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
