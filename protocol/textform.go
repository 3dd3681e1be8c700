package protocol

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// textForm is the text form of a binary encoding: prefix, then unpadded
// base64url of b. One line, fit for a file, a log line, JSON or an HTTP
// header.
func textForm(prefix string, b []byte) string {
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseTextForm returns the binary encoding inside text form s, decoded
// strictly: s (its surrounding spaces trimmed) is at most maxLen bytes,
// starts with prefix, and the rest is unpadded base64url without line
// breaks (base64 skips them even in strict mode). what names the form in
// errors, which wrap ErrMalformed.
func parseTextForm(s, prefix string, maxLen int, what string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxLen {
		return nil, fmt.Errorf("%w: %s text is %d bytes, limit %d", ErrMalformed, what, len(s), maxLen)
	}
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return nil, fmt.Errorf("%w: %s text must start with %q", ErrMalformed, what, prefix)
	}
	if strings.ContainsAny(rest, "\r\n") {
		return nil, fmt.Errorf("%w: %s text contains a line break", ErrMalformed, what)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s text: %w", ErrMalformed, what, err)
	}
	return b, nil
}
