package protocol

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The one definition of which names Palisade accepts: resource names in
// tokens and requests, holder identities, and the resource patterns of a
// cluster's client list. The verifier, the node and the client all check
// names here, so a name one part accepts is a name every part accepts.
//
// A name is 1..max bytes of UTF-8 made of printable characters other than
// space: letters, marks, numbers, punctuation and symbols
// (unicode.IsPrint, without U+0020). That refuses control characters (Cc),
// format characters (Cf: U+200B zero width space, U+202E right-to-left
// override, U+FEFF byte order mark, U+2060 word joiner, U+00AD soft
// hyphen), private-use and unassigned code points, and every space or line
// separator. Such characters make names that look alike but differ
// ("orders-\u202egpj.exe" reads as "orders-exe.jpg"), which would spoof
// logs, `palisade verify` output and ACL reviews.

// ValidateResource checks a resource name: 1..MaxResourceLen bytes, by the
// rule above, so it is safe in logs, headers and shell arguments.
func ValidateResource(r string) error {
	return validateName("resource", r, MaxResourceLen)
}

// ValidateHolder checks a holder identity the same way.
func ValidateHolder(h string) error {
	return validateName("holder", h, MaxHolderLen)
}

// ValidatePattern checks a resource pattern of a cluster's client list
// ('*' matches any run of characters) by the same rule, so no pattern can
// hide characters a resource name may not contain.
func ValidatePattern(p string) error {
	return validateName("resource pattern", p, MaxResourceLen)
}

// NameRune reports whether r may appear in a name.
func NameRune(r rune) bool {
	return r != ' ' && unicode.IsPrint(r)
}

func validateName(what, s string, max int) error {
	if len(s) == 0 || len(s) > max {
		return fmt.Errorf("%w: %s must be 1..%d bytes, got %d", ErrInvalidField, what, max, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalidField, what)
	}
	for _, r := range s {
		if !NameRune(r) {
			return fmt.Errorf("%w: %s contains %U, a control, format, space or unprintable character", ErrInvalidField, what, r)
		}
	}
	return nil
}
