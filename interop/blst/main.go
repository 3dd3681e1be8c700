// Command blst checks Palisade tokens with blst, the BLS12-381 library of
// Supranational, which Palisade itself does not link: it is the outside
// implementation of the IETF min-sig ciphersuite that issue 18's
// acceptance asks for. It reads the output of `palisade verify --json`
// (one JSON object) from standard input and checks the signature over
// the printed signed bytes under the printed group key, with the printed
// DST, in one call to blst's min-sig Verify (which also checks that the
// signature and key are in their subgroups).
//
//	palisade verify --cluster cluster.json --json "$TOKEN" | go run .
//
// It prints "verified" and exits 0, or names the failure and exits 1.
// This is its own Go module, so blst (a cgo library) stays out of
// Palisade's go.mod.
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	blst "github.com/supranational/blst/bindings/go"
)

// ciphersuite is the only suite this checker knows.
const ciphersuite = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"

// verifyJSON holds the fields of `palisade verify --json` this checker
// reads.
type verifyJSON struct {
	Ciphersuite string `json:"ciphersuite"`
	DST         string `json:"dst"`
	GroupKey    string `json:"group_key"`
	Message     string `json:"message"`
	Signature   string `json:"signature"`
}

func main() {
	if err := run(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "blst:", err)
		os.Exit(1)
	}
	fmt.Println("verified")
}

func run(r io.Reader) error {
	var v verifyJSON
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		return fmt.Errorf("reading verify --json output: %w", err)
	}
	if v.Ciphersuite != ciphersuite || v.DST != ciphersuite {
		return fmt.Errorf("ciphersuite %q with DST %q, want %q", v.Ciphersuite, v.DST, ciphersuite)
	}
	pk, err1 := hex.DecodeString(v.GroupKey)
	msg, err2 := hex.DecodeString(v.Message)
	sig, err3 := hex.DecodeString(v.Signature)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("hex field: %w", err)
	}
	return verify(pk, msg, sig, []byte(v.DST))
}

// errInvalid reports a signature blst does not accept.
var errInvalid = errors.New("signature does not verify")

// verify checks sig (48-byte compressed G1) over msg under pk (96-byte
// compressed G2) with blst's min-sig API.
func verify(pk, msg, sig, dst []byte) error {
	key := new(blst.P2Affine).Uncompress(pk)
	if key == nil {
		return fmt.Errorf("group key does not decode")
	}
	s := new(blst.P1Affine).Uncompress(sig)
	if s == nil {
		return fmt.Errorf("%w: signature does not decode", errInvalid)
	}
	// sigGroupcheck and pkValidate: subgroup checks on both points.
	if !s.Verify(true, key, true, blst.Message(msg), dst) {
		return errInvalid
	}
	return nil
}
