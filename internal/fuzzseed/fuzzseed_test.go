package fuzzseed

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "FuzzX")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stale"), []byte(Bytes(nil)), 0o644))
	in := map[string][]byte{"valid": {0, 1, 0xff, '"', '\n'}, "empty": {}, "text": []byte("pt3.A\r")}
	files := map[string]string{"valid": Bytes(in["valid"]), "empty": Bytes(in["empty"]), "text": String(string(in["text"]))}
	require.NoError(t, Write(dir, files))
	got, err := Read(dir)
	require.NoError(t, err)
	require.Equal(t, in, got, "the stale file is gone and every argument reads back")
}

func TestParseRefuses(t *testing.T) {
	for _, raw := range []string{
		"", "go test fuzz v1\n", "go test fuzz v2\n[]byte(\"\")\n",
		"go test fuzz v1\nint(3)\n", "go test fuzz v1\n[]byte(\"a\")\n[]byte(\"b\")\n",
		"go test fuzz v1\n[]byte(\"a)\n",
	} {
		_, err := Parse([]byte(raw))
		require.ErrorIs(t, err, ErrFormat, "%q", raw)
	}
}

func TestSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "FuzzX")
	files := map[string]string{"a": Bytes([]byte("a")), "b": String("b")}
	require.ErrorIs(t, Sync(dir, files, false), ErrStale, "nothing written yet")
	require.NoError(t, Sync(dir, files, true))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "found-by-fuzzing"), []byte(Bytes(nil)), 0o644))
	require.NoError(t, Sync(dir, files, false), "other files are left alone")
	files["b"] = String("changed")
	require.ErrorIs(t, Sync(dir, files, false), ErrStale)
	got, err := Read(dir)
	require.NoError(t, err)
	require.Len(t, got, 3)
}
