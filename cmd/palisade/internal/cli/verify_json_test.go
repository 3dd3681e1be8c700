package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// runVerifyJSON runs "palisade verify --json" on token and returns its exit
// code, the decoded object and stderr.
func runVerifyJSON(t *testing.T, clusterFile, token string) (code int, out []byte, got map[string]any, stderr string) {
	t.Helper()
	var so, se bytes.Buffer
	code = Run(context.Background(), []string{"verify", "--json", "--cluster", clusterFile, token}, &so, &se)
	out = bytes.Clone(so.Bytes())
	require.Equal(t, 1, strings.Count(so.String(), "\n"), "one line: %q", so.String())
	dec := json.NewDecoder(&so)
	dec.UseNumber()
	require.NoError(t, dec.Decode(&got))
	return code, out, got, se.String()
}

// TestVerifyJSON: verify --json prints one JSON object for every verdict,
// with the fields of a token that decodes and what an outside check
// needs, and exits 1 on a refusal.
func TestVerifyJSON(t *testing.T) {
	d := verifiertest.NewDealer("json-test", 1)
	other := verifiertest.NewDealer("other", 2)
	clusterFile := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, d.Cluster.File.Save(clusterFile))
	groupKey := d.Cluster.Key.PublicKey()
	valid := d.Token(t, "orders-db", 7, "app")
	tampered := valid
	tampered.Epoch = 8
	outsideG1 := valid
	outsideG1.Signature = bls12381test.NonSubgroupG1(7) // parses; not a point of G1

	for _, tc := range []struct {
		name, token, code, check string
		fields                   bool
	}{
		{"valid", valid.String(), "", "valid", true},
		{"tampered epoch", tampered.String(), "invalid_signature", "invalid", true},
		{"signature outside G1", outsideG1.String(), "invalid_signature", "invalid", true},
		{"another cluster", other.Token(t, "orders-db", 7, "app").String(), "wrong_cluster", "not_checked", true},
		{"garbage", "pt3.garbage", "malformed", "not_checked", false},
		{"version 1", "pt1.AQAAAA", "old_version", "not_checked", false},
		{"version 2", "pt2.AgAAAA", "old_version", "not_checked", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, got, stderr := runVerifyJSON(t, clusterFile, tc.token)
			require.Equal(t, tc.check, got["signature_check"])
			require.Equal(t, tc.code == "", got["valid"])
			if tc.code == "" {
				require.Equal(t, 0, code, stderr)
				require.NotContains(t, got, "error")
			} else {
				require.Equal(t, 1, code)
				require.Contains(t, stderr, "palisade: error: token rejected: ")
				e := got["error"].(map[string]any)
				require.Equal(t, tc.code, e["code"])
				require.NotEmpty(t, e["message"])
			}
			// What an outside implementation needs: always the suite and
			// the key, and the signed bytes and signature of a token that
			// decodes.
			require.Equal(t, "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_", got["ciphersuite"])
			require.Equal(t, crypto.Ciphersuite, got["dst"])
			require.Equal(t, hex.EncodeToString(groupKey[:]), got["group_key"])
			require.Len(t, got["group_key"], 2*crypto.PublicKeySize)
			if !tc.fields {
				for _, k := range []string{"resource", "message", "signature"} {
					require.NotContains(t, got, k)
				}
				return
			}
			tok, err := protocol.ParseTokenText(tc.token)
			require.NoError(t, err)
			require.Equal(t, tok.Cluster.String(), got["cluster"])
			require.Equal(t, "orders-db", got["resource"])
			require.Equal(t, json.Number(strconv.FormatUint(tok.Epoch, 10)), got["epoch"])
			require.Equal(t, "app", got["holder"])
			require.Equal(t, verifiertest.Session.String(), got["session"])
			require.Equal(t, hex.EncodeToString(tok.Statement.SignedBytes()), got["message"])
			require.Equal(t, hex.EncodeToString(tok.Signature[:]), got["signature"])
			require.Len(t, got["signature"], 2*crypto.SignatureSize)
		})
	}
}

// pythonDir holds the from-spec Python verifier (bls12381_minsig.py) and
// test_token_vectors.py, whose verify_json checks verify --json output.
var pythonDir = filepath.Join("..", "..", "..", "..", "clients", "python")

// TestVerifyJSONOutsideCheck is the outside-checking path end to end: the
// JSON verify --json prints for a token is fed to the Python min-sig
// verifier written from the specifications (no code shared with Palisade),
// which verifies the valid token and refuses a tampered one. It skips
// without python3 unless PALISADE_REQUIRE_PYTHON is set (as .ci/run sets
// it).
func TestVerifyJSONOutsideCheck(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("PALISADE_REQUIRE_PYTHON") != "" {
			t.Fatalf("python3 is required (PALISADE_REQUIRE_PYTHON is set): %v", err)
		}
		t.Skipf("python3 not found, the outside check is not run: %v", err)
	}
	d := verifiertest.NewDealer("outside-check", 3)
	clusterFile := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, d.Cluster.File.Save(clusterFile))
	valid := d.Token(t, "orders-db", 42, "app")
	tampered := valid
	tampered.Epoch++

	check := func(token string) (string, error) {
		_, out, _, _ := runVerifyJSON(t, clusterFile, token)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-c",
			`import json, sys, test_token_vectors as t; t.verify_json(json.load(sys.stdin)); print("verified")`)
		cmd.Dir = pythonDir
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		cmd.Stdin = bytes.NewReader(out)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out, err := check(valid.String())
	require.NoError(t, err, out)
	require.Equal(t, "verified\n", out)

	out, err = check(tampered.String())
	require.Error(t, err, out)
	require.Contains(t, out, "InvalidSignatureError")
}
