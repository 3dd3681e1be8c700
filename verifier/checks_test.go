package verifier_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// TestSignatureChecksCountsPairings: a token's first check costs a pairing
// and is counted, a cached one is not, a forged one is, and a batch counts
// each token it checks.
func TestSignatureChecksCountsPairings(t *testing.T) {
	d := verifiertest.NewDealer("checks", 1)
	v := verifier.New(d.Cluster)
	tok := d.Token(t, "r", 1, "client")
	require.NoError(t, v.Verify(tok))
	require.EqualValues(t, 1, v.SignatureChecks())
	require.NoError(t, v.VerifyFor(tok, "r"))
	require.EqualValues(t, 1, v.SignatureChecks(), "cached: no pairing")

	forged := d.Token(t, "r", 2, "client")
	forged.Epoch = 3
	require.ErrorIs(t, v.Verify(forged), verifier.ErrInvalidToken)
	require.EqualValues(t, 2, v.SignatureChecks())
	require.ErrorIs(t, v.VerifyFor(tok, "other"), verifier.ErrWrongResource)
	require.EqualValues(t, 2, v.SignatureChecks(), "a cheap refusal costs no pairing")

	errs := v.VerifyBatch([]protocol.Token{d.Token(t, "r", 4, "client"), d.Token(t, "r", 5, "client"), tok})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 4, v.SignatureChecks(), "two new tokens checked in the batch")
}
