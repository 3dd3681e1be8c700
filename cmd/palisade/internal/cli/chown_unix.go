//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// chownLike gives path the owner and group of ref, when they differ. It
// lets files that containers running as root write into a directory the
// host user made stay that user's to read and remove. Without the right
// to change owners (not root) the file stays as it is.
func chownLike(path, ref string) error {
	rst, err := os.Stat(ref)
	if err != nil {
		return err
	}
	pst, err := os.Lstat(path)
	if err != nil {
		return err
	}
	r, ok1 := rst.Sys().(*syscall.Stat_t)
	p, ok2 := pst.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || r.Uid == p.Uid && r.Gid == p.Gid {
		return nil
	}
	err = os.Lchown(path, int(r.Uid), int(r.Gid))
	if errors.Is(err, syscall.EPERM) {
		return nil // not root: the file stays this process's user's
	}
	if err != nil {
		return fmt.Errorf("give %s the owner of %s: %w", path, ref, err)
	}
	return nil
}
