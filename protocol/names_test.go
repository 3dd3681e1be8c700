package protocol

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// nameValidators are the three checks that share one definition of a name.
var nameValidators = map[string]func(string) error{
	"ValidateResource": ValidateResource,
	"ValidateHolder":   ValidateHolder,
	"ValidatePattern":  ValidatePattern,
}

// refusedRunes are characters no name may contain: format characters that
// hide or reorder text, controls, separators, private-use and unassigned
// code points.
var refusedRunes = []struct {
	name string
	r    rune
}{
	{"zero width space U+200B", '\u200b'},
	{"right-to-left override U+202E", '\u202e'},
	{"left-to-right mark U+200E", '\u200e'},
	{"first strong isolate U+2068", '\u2068'},
	{"byte order mark U+FEFF", '\ufeff'},
	{"word joiner U+2060", '\u2060'},
	{"soft hyphen U+00AD", '\u00ad'},
	{"tag U+E0041", '\U000E0041'},
	{"next line U+0085", '\u0085'},
	{"line separator U+2028", '\u2028'},
	{"paragraph separator U+2029", '\u2029'},
	{"NUL", 0},
	{"tab", '\t'},
	{"newline", '\n'},
	{"escape", 0x1b},
	{"DEL", 0x7f},
	{"space", ' '},
	{"no-break space U+00A0", '\u00a0'},
	{"ideographic space U+3000", '\u3000'},
	{"private use U+E000", '\ue000'},
	{"private use plane 15 U+F0000", '\U000F0000'},
	{"unassigned U+0378", '\u0378'},
	{"unassigned U+1FFFD", 0x1fffd},
	{"noncharacter U+FFFE", '\ufffe'},
	{"noncharacter U+FFFF", '\uffff'},
}

func TestNamesRefuseInvisibleAndUnprintable(t *testing.T) {
	for _, c := range refusedRunes {
		require.False(t, NameRune(c.r), c.name)
		for vname, validate := range nameValidators {
			for _, s := range []string{
				string(c.r),
				"orders" + string(c.r) + "db",
				string(c.r) + "orders-db",
				"orders-db" + string(c.r),
			} {
				err := validate(s)
				require.ErrorIs(t, err, ErrInvalidField, "%s(%+q) (%s)", vname, s, c.name)
				if len(s) > len(string(c.r)) {
					require.Contains(t, err.Error(), fmt.Sprintf("%U", c.r), "%s names the character", vname)
				}
			}
		}
	}
}

func TestNamesAccept(t *testing.T) {
	for _, s := range []string{"orders-db", "bucket/photos", "Bücher/ü", "日本", "a:b@c#1", "orders-*", "*", "é", "x", "emoji-\U0001F512", "Ωmega_1.2~"} {
		for vname, validate := range nameValidators {
			require.NoError(t, validate(s), "%s(%q)", vname, s)
		}
		for _, r := range s {
			require.True(t, NameRune(r), "%q in %q", r, s)
		}
	}
}

func TestNamesLengthAndEncoding(t *testing.T) {
	for vname, validate := range nameValidators {
		require.ErrorIs(t, validate(""), ErrInvalidField, vname)
		require.ErrorIs(t, validate("a\xffb"), ErrInvalidField, vname)
		require.ErrorIs(t, validate("\xc3"), ErrInvalidField, vname)
	}
	require.NoError(t, ValidateResource(strings.Repeat("r", MaxResourceLen)))
	require.ErrorIs(t, ValidateResource(strings.Repeat("r", MaxResourceLen+1)), ErrInvalidField)
	require.NoError(t, ValidatePattern(strings.Repeat("r", MaxResourceLen)))
	require.ErrorIs(t, ValidatePattern(strings.Repeat("r", MaxResourceLen+1)), ErrInvalidField)
	require.NoError(t, ValidateHolder(strings.Repeat("h", MaxHolderLen)))
	require.ErrorIs(t, ValidateHolder(strings.Repeat("h", MaxHolderLen+1)), ErrInvalidField)
}

// TestNameRuneMatchesCategories: NameRune agrees with the Unicode
// categories it is documented by, over the whole Basic Multilingual Plane
// and the supplementary planes' starts.
func TestNameRuneMatchesCategories(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r == 0x30000 {
			r = 0xE0000 // skip the mostly unassigned planes 3..13
		}
		want := r != ' ' && (unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S))
		if got := NameRune(r); got != want {
			t.Fatalf("NameRune(%U) = %v, want %v", r, got, want)
		}
	}
}

// TestNamesRefusedInDecoders: a token or a request naming a resource with
// a right-to-left override is refused when decoded, as an invalid field.
func TestNamesRefusedInDecoders(t *testing.T) {
	fx := testFixture(t)
	st := fx.stmt
	spoof := "orders-\u202egpj.exe" // reads as "orders-exe.jpg"

	tok := encodeToken(Version, st.Cluster, spoof, st.Epoch, st.Holder, fx.tok.Signature[:])
	got, err := ParseToken(tok)
	require.ErrorIs(t, err, ErrInvalidField)
	require.Equal(t, Token{}, got)
	got, err = ParseTokenText(TokenTextPrefix + base64.RawURLEncoding.EncodeToString(tok))
	require.ErrorIs(t, err, ErrInvalidField)
	require.Equal(t, Token{}, got)

	sr, err := UnmarshalStatusRequest(StatusRequest{Resource: spoof}.Marshal())
	require.ErrorIs(t, err, ErrInvalidField)
	require.Equal(t, StatusRequest{}, sr)

	ar, err := UnmarshalAcquireRequest(AcquireRequest{Cluster: st.Cluster, Resource: spoof, Epoch: 1, Key: testKey, TTL: 1}.Marshal())
	require.ErrorIs(t, err, ErrInvalidField)
	require.Equal(t, AcquireRequest{}, ar)

	// The encoder side refuses it too.
	bad := fx.tok
	bad.Resource = spoof
	_, err = bad.MarshalBinary()
	require.ErrorIs(t, err, ErrInvalidField)
	bad = fx.tok
	bad.Holder.ID = "12D3Koo\u200bW"
	_, err = bad.MarshalBinary()
	require.ErrorIs(t, err, ErrInvalidField)
}
