package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func verifyFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.BoolVar(&c.JSON, "json", c.JSON, "")
}

// verifyResult is what "palisade verify --json" prints: the token's fields
// when it decodes, the check's result, and what an outside implementation
// of the ciphersuite needs to check the signature itself in one call
// (docs/token-format.md, "Checking a token elsewhere").
type verifyResult struct {
	// Valid is true only if the token verifies for this cluster.
	Valid bool `json:"valid"`
	*tokenFields
	// SignatureCheck is "valid", "invalid", or "not_checked" (the token
	// did not decode, or names another cluster).
	SignatureCheck string `json:"signature_check"`
	// Ciphersuite is the signatures' ciphersuite ID (crypto.Ciphersuite).
	Ciphersuite string `json:"ciphersuite"`
	// DST is the domain separation tag of hash_to_G1, as text: for this
	// ciphersuite it is the ciphersuite ID itself.
	DST string `json:"dst"`
	// GroupKey is the cluster's group public key, hex of the 96-byte
	// compressed G2 point.
	GroupKey string `json:"group_key"`
	// Message is hex of the exact bytes the group signed (the token's
	// statement, protocol.Statement.SignedBytes), when the token decodes.
	Message string `json:"message,omitempty"`
	// Signature is hex of the token's 48-byte signature, a compressed G1
	// point, when the token decodes.
	Signature string `json:"signature,omitempty"`
	// Error says why the token was refused.
	Error *verifyError `json:"error,omitempty"`
}

type tokenFields struct {
	Cluster  string `json:"cluster"`
	Resource string `json:"resource"`
	Epoch    uint64 `json:"epoch"`
	Holder   string `json:"holder"`
	Session  string `json:"session"`
}

// verifyError is a refusal: Code is one of the reasons of
// docs/token-format.md (malformed, old_version, wrong_cluster,
// invalid_signature).
type verifyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// verifyJSON checks text like runVerify and prints the result as one JSON
// object on w. A refused token is printed too, and returned as an error.
func verifyJSON(w io.Writer, v *verifier.Verifier, text string) error {
	key := v.PublicKey()
	res := verifyResult{SignatureCheck: "not_checked", Ciphersuite: crypto.Ciphersuite, DST: crypto.Ciphersuite,
		GroupKey: hex.EncodeToString(key[:])}
	tok, err := protocol.ParseTokenText(text)
	if err == nil {
		res.tokenFields = &tokenFields{Cluster: tok.Cluster.String(), Resource: tok.Resource, Epoch: tok.Epoch,
			Holder: tok.Holder.ID, Session: tok.Holder.Session.String()}
		res.Message = hex.EncodeToString(tok.Statement.SignedBytes())
		res.Signature = hex.EncodeToString(tok.Signature[:])
		err = v.Verify(tok)
	} else {
		_, err = v.ParseAndVerify(text) // the verifier's own words for it
	}
	switch code := verifyCode(err); code {
	case "":
		res.Valid, res.SignatureCheck = true, "valid"
	default:
		if code == "invalid_signature" {
			res.SignatureCheck = "invalid"
		}
		res.Error = &verifyError{Code: code, Message: err.Error()}
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return fmt.Errorf("verify: %w", merr)
	}
	fmt.Fprintf(w, "%s\n", b)
	if err != nil {
		return fmt.Errorf("token rejected: %w", err)
	}
	return nil
}

// verifyCode names a verifier error as docs/token-format.md does.
func verifyCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, protocol.ErrTokenVersion):
		return "old_version"
	case errors.Is(err, verifier.ErrMalformedToken):
		return "malformed"
	case errors.Is(err, verifier.ErrWrongCluster):
		return "wrong_cluster"
	case errors.Is(err, verifier.ErrInvalidToken):
		return "invalid_signature"
	}
	return "error"
}
