package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// TestVerifyJSON: verify --json prints one JSON object for every verdict,
// with the fields of a token that decodes, and exits 1 on a refusal.
func TestVerifyJSON(t *testing.T) {
	d := verifiertest.NewDealer("json-test", 1)
	other := verifiertest.NewDealer("other", 2)
	clusterFile := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, d.Cluster.File.Save(clusterFile))
	valid := d.Token(t, "orders-db", 7, "app")
	tampered := valid
	tampered.Epoch = 8

	for _, tc := range []struct {
		name, token, code, signature string
		fields                       bool
	}{
		{"valid", valid.String(), "", "valid", true},
		{"tampered epoch", tampered.String(), "invalid_signature", "invalid", true},
		{"another cluster", other.Token(t, "orders-db", 7, "app").String(), "wrong_cluster", "not_checked", true},
		{"garbage", "pt2.garbage", "malformed", "not_checked", false},
		{"version 1", "pt1.AQAAAA", "old_version", "not_checked", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), []string{"verify", "--json", "--cluster", clusterFile, tc.token}, &stdout, &stderr)
			require.Equal(t, strings.Count(stdout.String(), "\n"), 1, "one line: %q", stdout.String())
			var got map[string]any
			dec := json.NewDecoder(&stdout)
			dec.UseNumber()
			require.NoError(t, dec.Decode(&got))
			require.Equal(t, tc.signature, got["signature"])
			require.Equal(t, tc.code == "", got["valid"])
			if tc.code == "" {
				require.Equal(t, 0, code, stderr.String())
				require.NotContains(t, got, "error")
			} else {
				require.Equal(t, 1, code)
				require.Contains(t, stderr.String(), "palisade: error: token rejected: ")
				e := got["error"].(map[string]any)
				require.Equal(t, tc.code, e["code"])
				require.NotEmpty(t, e["message"])
			}
			if !tc.fields {
				require.NotContains(t, got, "resource")
				return
			}
			tok, err := protocol.ParseTokenText(tc.token)
			require.NoError(t, err)
			require.Equal(t, tok.Cluster.String(), got["cluster"])
			require.Equal(t, "orders-db", got["resource"])
			require.Equal(t, json.Number(strconv.FormatUint(tok.Epoch, 10)), got["epoch"])
			require.Equal(t, "app", got["holder"])
			require.Equal(t, verifiertest.Session.String(), got["session"])
		})
	}
}
