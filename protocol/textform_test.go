package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseTextForm: the text forms of forks and certificates decode
// strictly and within their length limit; every refusal is ErrMalformed.
func TestParseTextForm(t *testing.T) {
	b := []byte("some binary form")
	s := textForm("px1.", b)
	got, err := parseTextForm("  "+s+"\n", "px1.", len(s), "thing")
	require.NoError(t, err, "surrounding spaces are trimmed")
	require.Equal(t, b, got)
	for name, bad := range map[string]string{
		"too long":      s + "A",
		"other prefix":  "py1." + s[4:],
		"a line break":  s[:8] + "\n" + s[8:],
		"not base64url": s[:len(s)-1] + "+",
		"padded":        "px1." + strings.Repeat("A", 2) + "==",
	} {
		_, err := parseTextForm(bad, "px1.", len(s), "thing")
		require.ErrorIs(t, err, ErrMalformed, name)
	}
	var c Certificate
	require.ErrorIs(t, c.UnmarshalText([]byte(CertificateTextPrefix+strings.Repeat("A", maxCertificateTextLen))), ErrMalformed, "a certificate text over its limit")
}
