package cli

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParseLockArgs: lock's flags come before RESOURCE or between it and
// "--"; the first word after RESOURCE that is not a flag, or whatever
// follows "--", starts COMMAND, whose own flags stay its own.
func TestParseLockArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		ttl  time.Duration
	}{
		{"flags first", []string{"--ttl", "3s", "r", "--", "cmd", "-x"}, []string{"r", "cmd", "-x"}, 3 * time.Second},
		{"flags between", []string{"r", "--ttl", "3s", "--", "cmd", "--ttl", "9s"}, []string{"r", "cmd", "--ttl", "9s"}, 3 * time.Second},
		{"no dashes", []string{"r", "cmd", "--ttl", "9s"}, []string{"r", "cmd", "--ttl", "9s"}, 10 * time.Second},
		{"dashes in COMMAND", []string{"r", "--", "cmd", "--", "x"}, []string{"r", "cmd", "--", "x"}, 10 * time.Second},
		{"dashes before RESOURCE", []string{"--", "r", "cmd", "-x"}, []string{"r", "cmd", "-x"}, 10 * time.Second},
		{"COMMAND named like a flag", []string{"r", "--", "-weird"}, []string{"r", "-weird"}, 10 * time.Second},
		{"RESOURCE only", []string{"r", "--ttl", "3s"}, []string{"r"}, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"PALISADE_CLUSTER", "PALISADE_IDENTITY", "PALISADE_TTL", "PALISADE_WAIT", "PALISADE_GRACE"} {
				t.Setenv(k, "")
			}
			c := DefaultConfig()
			fs := flag.NewFlagSet("lock", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			lockFlags(fs, &c)
			pos, _, err := parseFlagsN(fs, tt.args, ownArgs["lock"])
			require.NoError(t, err)
			require.Equal(t, tt.pos, pos)
			require.Equal(t, tt.ttl, c.TTL)
			require.Equal(t, 10*time.Second, c.Grace)
		})
	}
}
