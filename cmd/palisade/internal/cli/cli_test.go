package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEnvVar(t *testing.T) {
	require.Equal(t, "PALISADE_BASE_PORT", EnvVar("base-port"))
	require.Equal(t, "PALISADE_CLUSTER", EnvVar("cluster"))
}

func TestParseFlags(t *testing.T) {
	newFS := func(c *Config) *flag.FlagSet {
		fs := flag.NewFlagSet("acquire", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		acquireFlags(fs, c)
		return fs
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantPos []string
		want    func(c Config) bool
		wantErr string
	}{
		{name: "flags after positional", args: []string{"res", "--ttl", "3s"}, wantPos: []string{"res"},
			want: func(c Config) bool { return c.TTL == 3*time.Second }},
		{name: "double dash", args: []string{"--wait", "1s", "--", "--not-a-flag"}, wantPos: []string{"--not-a-flag"},
			want: func(c Config) bool { return c.Wait == time.Second }},
		{name: "env fills unset flag", env: map[string]string{"PALISADE_CLUSTER": "/c.json", "PALISADE_TTL": "7s"},
			args: []string{"--ttl", "2s", "r"}, wantPos: []string{"r"},
			want: func(c Config) bool { return c.Cluster == "/c.json" && c.TTL == 2*time.Second }},
		{name: "empty env is unset", env: map[string]string{"PALISADE_IDENTITY": ""}, args: []string{"r"}, wantPos: []string{"r"},
			want: func(c Config) bool { return c.Identity == "" }},
		{name: "bad env value", env: map[string]string{"PALISADE_WAIT": "soon"}, args: []string{"r"}, wantErr: `PALISADE_WAIT="soon"`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"PALISADE_CLUSTER", "PALISADE_IDENTITY", "PALISADE_TTL", "PALISADE_WAIT"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c := DefaultConfig()
			pos, _, err := parseFlags(newFS(&c), tt.args)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantPos, pos)
			require.True(t, tt.want(c), "config %+v", c)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	for name, mod := range map[string]func(c *Config){
		"no nodes":      func(c *Config) { c.Nodes = 0 },
		"empty name":    func(c *Config) { c.Name = "" },
		"empty host":    func(c *Config) { c.Host = " " },
		"port overflow": func(c *Config) { c.BasePort = 65534 },
		"zero ttl":      func(c *Config) { c.TTL = 0 },
		"long ttl":      func(c *Config) { c.TTL = 2 * time.Hour },
		"negative wait": func(c *Config) { c.Wait = -time.Second },
	} {
		c := DefaultConfig()
		mod(&c)
		require.Error(t, c.Validate(), name)
	}
}

func TestNodeAddrs(t *testing.T) {
	addrs, listen, err := nodeAddrs("10.77.0.11, 10.77.0.12,10.77.0.13,10.77.0.14", 4000, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"/ip4/10.77.0.11/tcp/4001", "/ip4/10.77.0.12/tcp/4002", "/ip4/10.77.0.13/tcp/4003", "/ip4/10.77.0.14/tcp/4004"}, addrs)
	require.Equal(t, addrs, listen)

	addrs, listen, err = nodeAddrs("node.example", 9000, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"/dns4/node.example/tcp/9001", "/dns4/node.example/tcp/9002"}, addrs)
	require.Equal(t, []string{"/ip4/0.0.0.0/tcp/9001", "/ip4/0.0.0.0/tcp/9002"}, listen)

	addrs, _, err = nodeAddrs("::1", 0, 3)
	require.NoError(t, err)
	require.Len(t, addrs, 3)
	require.True(t, strings.HasPrefix(addrs[0], "/ip6/::1/tcp/"))

	for _, bad := range []struct {
		host string
		port int
	}{{"a,b", 4000}, {"10.0.0.1", 0}, {"bad host!", 4000}, {"a,,b,c", 4000}} {
		_, _, err := nodeAddrs(bad.host, bad.port, 4)
		require.Error(t, err, bad.host)
	}
}

func TestRunExitCodes(t *testing.T) {
	ctx := context.Background()
	var out, errb bytes.Buffer
	require.Equal(t, 0, Run(ctx, []string{"help"}, &out, &errb))
	require.Contains(t, out.String(), "Example:")
	for _, cmd := range []string{"keygen", "node", "testnet", "acquire", "verify", "demo", "help"} {
		out.Reset()
		require.Equal(t, 0, Run(ctx, []string{"help", cmd}, &out, &errb), cmd)
		require.Contains(t, out.String(), "Usage:\n    palisade "+cmd, cmd)
		require.Contains(t, out.String(), "Example:", cmd)
	}
	errb.Reset()
	require.Equal(t, 1, Run(ctx, []string{"verify", "--cluster", "/nonexistent/cluster.json", "pt1.x"}, &out, &errb))
	require.True(t, strings.HasPrefix(errb.String(), "palisade: error: "), errb.String())
}
