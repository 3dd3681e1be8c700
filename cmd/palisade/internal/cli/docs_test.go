package cli

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSystemdUnitsUseRealFlags: the example units in docs/systemd run a
// palisade command and set its flags through PALISADE_* variables; every
// variable they set must name a flag of that command, so the examples do
// not go stale when a flag is renamed.
func TestSystemdUnitsUseRealFlags(t *testing.T) {
	units, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "docs", "systemd", "*.service"))
	require.NoError(t, err)
	require.NotEmpty(t, units)
	for _, unit := range units {
		f, err := os.Open(unit)
		require.NoError(t, err)
		var cmd string
		var vars []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if rest, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/palisade "); ok {
				cmd = strings.Fields(rest)[0]
			}
			if rest, ok := strings.CutPrefix(line, "Environment="+EnvPrefix); ok {
				name, _, _ := strings.Cut(rest, "=")
				vars = append(vars, name)
			}
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
		c, ok := commands[cmd]
		require.True(t, ok, "%s runs unknown command %q", unit, cmd)
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		cfg := DefaultConfig()
		c.flags(fs, &cfg)
		for _, v := range vars {
			name := strings.ToLower(strings.ReplaceAll(v, "_", "-"))
			require.NotNil(t, fs.Lookup(name), "%s sets %s%s, which is no flag of %q", unit, EnvPrefix, v, cmd)
		}
	}
}
