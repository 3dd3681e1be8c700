package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func verifyFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.BoolVar(&c.JSON, "json", c.JSON, "")
}

// verifyResult is what "palisade verify --json" prints: the token's fields
// when it decodes, and the check's result.
type verifyResult struct {
	// Valid is true only if the token verifies for this cluster.
	Valid bool `json:"valid"`
	*tokenFields
	// Signature is "valid", "invalid", or "not_checked" (the token did
	// not decode, or names another cluster).
	Signature string `json:"signature"`
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
	res := verifyResult{Signature: "not_checked"}
	tok, err := protocol.ParseTokenText(text)
	if err == nil {
		res.tokenFields = &tokenFields{Cluster: tok.Cluster.String(), Resource: tok.Resource, Epoch: tok.Epoch,
			Holder: tok.Holder.ID, Session: tok.Holder.Session.String()}
		err = v.Verify(tok)
	} else {
		_, err = v.ParseAndVerify(text) // the verifier's own words for it
	}
	switch code := verifyCode(err); code {
	case "":
		res.Valid, res.Signature = true, "valid"
	default:
		if code == "invalid_signature" {
			res.Signature = "invalid"
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
