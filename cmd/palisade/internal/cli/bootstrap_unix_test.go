//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestWriteSharedOwner: what bootstrap writes to the shared directory
// takes the directory's owner, so that a host user who made it can read
// and remove what containers running as root wrote there. As root the
// test gives the directory another owner; otherwise the files stay the
// user's own.
func TestWriteSharedOwner(t *testing.T) {
	shared := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 12345, 23456
		require.NoError(t, os.Chown(shared, uid, gid))
	}
	require.NoError(t, mkdirShared(shared, "peers"))
	require.NoError(t, writeShared(shared, "peers/node1.json", []byte("{}\n"), 0o644))
	_, created, err := loadOrCreateIdentity(filepath.Join(shared, "client.key"), shared)
	require.NoError(t, err)
	require.True(t, created)
	for _, name := range []string{"peers", "peers/node1.json", "client.key"} {
		st, err := os.Stat(filepath.Join(shared, name))
		require.NoError(t, err)
		require.Equal(t, uid, fileUID(t, st), name)
		require.Equal(t, gid, fileGID(t, st), name)
	}
	st, err := os.Stat(filepath.Join(shared, "client.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(filepath.Join(shared, "peers"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
}

func fileUID(t *testing.T, st os.FileInfo) int {
	t.Helper()
	s, ok := st.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	return int(s.Uid)
}

func fileGID(t *testing.T, st os.FileInfo) int {
	t.Helper()
	s, ok := st.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	return int(s.Gid)
}

// TestClientsEditKeepsOwner: "palisade clients add" run as root on a
// node's cluster.json (owned by the service user) leaves the file that
// user's, not root's, with its mode. Not as root, the file is the
// user's own before and after.
func TestClientsEditKeepsOwner(t *testing.T) {
	keys := pinKeys(t, "acme-locks")
	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, keys.Cluster.File.Save(path))
	require.NoError(t, os.Chmod(path, 0o640))
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 12345, 23456
		require.NoError(t, os.Chown(path, uid, gid))
	}
	code, _, errs := runCmd(t, "clients", "add", "--cluster", path, "--patterns", "billing-*", "billing", "12D3KooWDbxn283zfwuZ73ViRSUhhfPQsJPfTYNpa2yKjWWVp2kg")
	require.Equal(t, 0, code, errs)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, uid, fileUID(t, st))
	require.Equal(t, gid, fileGID(t, st))
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	c, err := protocol.LoadCluster(path)
	require.NoError(t, err)
	require.Len(t, c.File.Clients, len(keys.Cluster.File.Clients)+1)
}
