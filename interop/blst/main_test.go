package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vector holds the fields of verifier/testdata/vectors this test reads.
type vector struct {
	Name    string `json:"name"`
	Error   string `json:"error"`
	Cluster struct {
		PublicKey   string `json:"public_key"`
		Ciphersuite string `json:"ciphersuite"`
	} `json:"cluster"`
	Decoded *struct {
		Signature   string `json:"signature"`
		SignedBytes string `json:"signed_bytes"`
	} `json:"decoded"`
}

// TestTokenVectors checks every token vector whose signature decodes with
// blst: the signature verifies over the signed bytes under the cluster's
// key exactly when Palisade's verifier did not refuse it as an invalid
// signature. Palisade signed the valid ones (verifier/vectors_test.go
// makes them with crypto.Share.Sign and GroupKey.Combine).
func TestTokenVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "verifier", "testdata", "vectors", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	checked, valid := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if v.Cluster.Ciphersuite != ciphersuite {
			t.Fatalf("%s: ciphersuite %q", v.Name, v.Cluster.Ciphersuite)
		}
		if v.Decoded == nil || v.Decoded.Signature == "" || v.Error == "wrong_cluster" {
			continue // refused before any signature check, or signed under another cluster's key
		}
		pk := mustHex(t, v.Cluster.PublicKey)
		err = verify(pk, mustHex(t, v.Decoded.SignedBytes), mustHex(t, v.Decoded.Signature), []byte(ciphersuite))
		wantValid := v.Error != "invalid_signature"
		if (err == nil) != wantValid {
			t.Errorf("%s: blst says %v, Palisade's verifier says %q", v.Name, err, v.Error)
		}
		checked++
		if err == nil {
			valid++
		}
	}
	if checked < 15 || valid < 5 {
		t.Fatalf("only %d vectors checked (%d valid signatures)", checked, valid)
	}
	t.Logf("%d vectors checked with blst, %d signatures valid", checked, valid)
}

// TestRunReadsVerifyJSON feeds run the shape of `palisade verify --json`
// built from a valid vector, then the same with one message byte changed.
func TestRunReadsVerifyJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "verifier", "testdata", "vectors", "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out := verifyJSON{Ciphersuite: ciphersuite, DST: ciphersuite, GroupKey: v.Cluster.PublicKey, Message: v.Decoded.SignedBytes, Signature: v.Decoded.Signature}
	js, _ := json.Marshal(out)
	if err := run(strings.NewReader(string(js))); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	msg := mustHex(t, out.Message)
	msg[len(msg)-1] ^= 1
	out.Message = hex.EncodeToString(msg)
	js, _ = json.Marshal(out)
	if err := run(strings.NewReader(string(js))); err == nil {
		t.Fatal("a changed message verified")
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
