package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

func goldenStatement() Statement {
	var c ClusterID
	for i := range c {
		c[i] = byte(i)
	}
	return Statement{Cluster: c, Resource: "orders-db", Epoch: 0x0102030405060708, Holder: Holder{ID: "client-1", Session: goldenSession()}}
}

// goldenSession is the session ID f0 f1 … ff.
func goldenSession() SessionID {
	var s SessionID
	for i := range s {
		s[i] = 0xf0 + byte(i)
	}
	return s
}

// TestSignedBytesGolden pins the canonical signed bytes: changing them
// invalidates every token ever issued.
func TestSignedBytesGolden(t *testing.T) {
	want := strings.Join([]string{
		"70616c69736164652f746f6b656e00", // DomainToken "palisade/token\x00"
		"03",                             // Version 3 (BLS12-381)
		"20",                             // len(cluster) = 32
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
		"09", "6f72646572732d6462", // "orders-db"
		"0102030405060708",       // epoch, big-endian
		"08", "636c69656e742d31", // holder ID "client-1"
		"f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", // session ID, fixed 16 bytes, no length
	}, "")
	require.Equal(t, want, hex.EncodeToString(goldenStatement().SignedBytes()))

	wantVote := strings.Join([]string{
		"70616c69736164652f766f746500", // DomainVote "palisade/vote\x00"
		want[len("70616c69736164652f746f6b656e00"):],
	}, "")
	require.Equal(t, wantVote, hex.EncodeToString(goldenStatement().VoteBytes()))
}

func TestSignedBytesDistinct(t *testing.T) {
	base := goldenStatement()
	mutations := []struct {
		name string
		f    func(*Statement)
	}{
		{"base", func(*Statement) {}},
		{"cluster first byte", func(s *Statement) { s.Cluster[0] ^= 1 }},
		{"cluster last byte", func(s *Statement) { s.Cluster[31] ^= 0x80 }},
		{"resource", func(s *Statement) { s.Resource = "orders-dc" }},
		{"resource longer", func(s *Statement) { s.Resource = "orders-db2" }},
		{"epoch+1", func(s *Statement) { s.Epoch++ }},
		{"epoch high bit", func(s *Statement) { s.Epoch ^= 1 << 63 }},
		{"holder", func(s *Statement) { s.Holder.ID = "client-2" }},
		{"holder empty", func(s *Statement) { s.Holder = Holder{} }},
		{"holder ID empty", func(s *Statement) { s.Holder.ID = "" }},
		{"resource and holder swapped", func(s *Statement) { s.Resource, s.Holder.ID = s.Holder.ID, s.Resource }},
		{"session", func(s *Statement) { s.Holder.Session[7] ^= 0x10 }},
		{"session last bit", func(s *Statement) { s.Holder.Session[SessionIDSize-1] ^= 1 }},
		{"same ID other session", func(s *Statement) { s.Holder.Session = sameIDHolder.Session }},
		{"zero session", func(s *Statement) { s.Holder.Session = SessionID{} }},
		// The session follows the ID, so moving a byte from one to the
		// other must change the bytes.
		{"ID byte into session", func(s *Statement) {
			s.Holder.ID = "client-"
			sess := goldenSession()
			copy(s.Holder.Session[:], append([]byte{'1'}, sess[:SessionIDSize-1]...))
		}},
	}
	seen := map[string]string{}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			s := base
			m.f(&s)
			sb := string(s.SignedBytes())
			vb := string(s.VoteBytes())
			require.NotEqual(t, sb, vb, "vote bytes must differ from signed bytes")
			require.True(t, strings.HasPrefix(sb, DomainToken))
			require.True(t, strings.HasPrefix(vb, DomainVote))
			for _, b := range []string{sb, vb} {
				prev, dup := seen[b]
				require.False(t, dup, "same bytes as %q", prev)
				seen[b] = m.name
			}
		})
	}
}

func TestSignedBytesLengthPrefix(t *testing.T) {
	sess := goldenSession()
	a := Statement{Resource: "ab", Holder: Holder{ID: "c", Session: sess}, Epoch: 1}
	b := Statement{Resource: "a", Holder: Holder{ID: "bc", Session: sess}, Epoch: 1}
	require.NotEqual(t, a.SignedBytes(), b.SignedBytes())
	require.NotEqual(t, a.VoteBytes(), b.VoteBytes())

	// A resource of 200 bytes has a two-byte uvarint length (0xc8 0x01);
	// the session is the last 16 bytes, with no length prefix.
	long := Statement{Resource: strings.Repeat("r", 200), Holder: Holder{ID: "h", Session: sess}}
	sb := long.SignedBytes()
	off := len(DomainToken) + 1 + 1 + ClusterIDSize
	require.Equal(t, []byte{0xc8, 0x01}, sb[off:off+2])
	require.Len(t, sb, off+2+200+8+1+1+SessionIDSize)
	require.Equal(t, []byte{1, 'h'}, sb[len(sb)-SessionIDSize-2:len(sb)-SessionIDSize])
	require.Equal(t, sess[:], sb[len(sb)-SessionIDSize:])

	// A holder ID of 128 bytes has a two-byte length (0x80 0x01).
	longHolder := Statement{Resource: "r", Holder: Holder{ID: strings.Repeat("h", MaxHolderLen), Session: sess}}
	sb = longHolder.SignedBytes()
	off = len(DomainToken) + 1 + 1 + ClusterIDSize + 2 + 8
	require.Equal(t, []byte{0x80, 0x01}, sb[off:off+2])
	require.Len(t, sb, off+2+MaxHolderLen+SessionIDSize)
}

func TestSignedBytesDoesNotAlias(t *testing.T) {
	s := goldenStatement()
	a := s.SignedBytes()
	b := s.SignedBytes()
	a[0] ^= 0xff
	require.NotEqual(t, a, b)
	require.Equal(t, b, s.SignedBytes())
}

func TestClusterID(t *testing.T) {
	fx := testFixture(t)
	pk := fx.gk.PublicKey()
	id := NewClusterID("test-cluster", pk)
	require.Equal(t, fx.stmt.Cluster, id)
	require.NotEqual(t, id, NewClusterID("test-cluster2", pk))
	other := pk
	other[5] ^= 1
	require.NotEqual(t, id, NewClusterID("test-cluster", other))

	back, err := ParseClusterID(id.String())
	require.NoError(t, err)
	require.Equal(t, id, back)
	require.Len(t, id.String(), 2*ClusterIDSize)

	for _, bad := range []string{"", "zz", id.String()[:62], id.String() + "00", " " + id.String()} {
		got, err := ParseClusterID(bad)
		require.ErrorIs(t, err, ErrMalformed, "%q", bad)
		require.Equal(t, ClusterID{}, got)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	fx := testFixture(t)
	tok := fx.tok
	require.NoError(t, fx.gk.Verify(tok.SignedBytes(), tok.Signature))

	bin, err := tok.MarshalBinary()
	require.NoError(t, err)
	require.LessOrEqual(t, len(bin), MaxTokenSize)
	back, err := ParseToken(bin)
	require.NoError(t, err)
	require.Equal(t, tok, back)
	require.NoError(t, fx.gk.Verify(back.SignedBytes(), back.Signature))

	text := tok.String()
	require.Regexp(t, regexp.MustCompile(`^pt3\.[A-Za-z0-9_-]+$`), text)
	require.LessOrEqual(t, len(text), MaxTokenTextLen)
	mt, err := tok.MarshalText()
	require.NoError(t, err)
	require.Equal(t, text, string(mt))
	back, err = ParseTokenText(text)
	require.NoError(t, err)
	require.Equal(t, tok, back)
	require.Equal(t, tok.Digest(), back.Digest())

	// JSON uses the text form.
	j, err := json.Marshal(struct{ T Token }{tok})
	require.NoError(t, err)
	require.Equal(t, `{"T":"`+text+`"}`, string(j))
	var jt struct{ T Token }
	require.NoError(t, json.Unmarshal(j, &jt))
	require.Equal(t, tok, jt.T)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"T":"pt3.AAAA"}`), &jt), ErrMalformed)
	require.NotErrorIs(t, json.Unmarshal([]byte(`{"T":"pt3.AAAA"}`), &jt), ErrTokenVersion)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"T":"pt2.AAAA"}`), &jt), ErrTokenVersion)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"T":"pt1.AAAA"}`), &jt), ErrTokenVersion)

	// The session survives both forms.
	require.Equal(t, testHolder, back.Holder)
	require.Equal(t, testHolder.Session[:], bin[len(bin)-crypto.SignatureSize-SessionIDSize:len(bin)-crypto.SignatureSize])
}

func TestTokenLimits(t *testing.T) {
	fx := testFixture(t)
	tok := fx.tok
	tok.Resource = strings.Repeat("r", MaxResourceLen)
	tok.Holder.ID = strings.Repeat("h", MaxHolderLen)
	tok.Holder.Session = SessionID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	tok.Epoch = ^uint64(0)
	bin, err := tok.MarshalBinary()
	require.NoError(t, err)
	// The limits are exact: a token with every field at its maximum is
	// MaxTokenSize bytes and MaxTokenTextLen characters.
	require.Len(t, bin, MaxTokenSize)
	text := tok.String()
	require.Len(t, text, MaxTokenTextLen)
	back, err := ParseTokenText(text)
	require.NoError(t, err)
	require.Equal(t, tok, back)
}

func TestParseTokenTextTrimsSpace(t *testing.T) {
	fx := testFixture(t)
	text := fx.tok.String()
	for _, s := range []string{" " + text, text + " ", "\t" + text + "\r\n", "  \n" + text + "\n\n"} {
		got, err := ParseTokenText(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, fx.tok, got)
	}
}

func TestParseTokenTextRefuses(t *testing.T) {
	fx := testFixture(t)
	text := fx.tok.String()
	body := strings.TrimPrefix(text, TokenTextPrefix)
	cases := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"prefix only", TokenTextPrefix},
		{"no prefix", body},
		{"wrong prefix", "pt4." + body},
		{"version 0 prefix", "pt0." + body},
		{"upper-case prefix", "PT3." + body},
		{"upper-case old prefix", "PT2." + body},
		{"upper-case first prefix", "PT1." + body},
		{"padded", text + "=="},
		{"std alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(text) + "+"},
		{"inner space", text[:20] + " " + text[20:]},
		{"truncated", text[:len(text)-1]},
		{"extra char", text + "A"},
		{"invalid token", "pt3.invalid"},
		{"over-long", TokenTextPrefix + strings.Repeat("A", MaxTokenTextLen)},
		{"over-long garbage", strings.Repeat("x", 1<<20)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTokenText(c.in)
			require.ErrorIs(t, err, ErrMalformed)
			require.Equal(t, Token{}, got)
		})
	}
}

// TestParseTokenTextRefusesLineBreaks: "nothing else is forgiven", so one
// token has exactly one text form (after trimming). encoding/base64 skips
// '\r' and '\n' even in Strict mode, so they must be refused explicitly.
func TestParseTokenTextRefusesLineBreaks(t *testing.T) {
	fx := testFixture(t)
	text := fx.tok.String()
	for _, c := range []string{"\n", "\r", "\r\n"} {
		in := text[:30] + c + text[30:]
		got, err := ParseTokenText(in)
		require.ErrorIs(t, err, ErrMalformed, "%q inside the token text", c)
		require.Equal(t, Token{}, got)
	}
}

func TestTokenTamperDetected(t *testing.T) {
	fx := testFixture(t)
	bin, err := fx.tok.MarshalBinary()
	require.NoError(t, err)
	parsed, verifyFailed := 0, 0
	for i := range bin {
		for _, mask := range []byte{0x01, 0x80} {
			b := append([]byte(nil), bin...)
			b[i] ^= mask
			tok, err := ParseToken(b)
			if err != nil {
				require.Equal(t, Token{}, tok)
				continue
			}
			parsed++
			err = fx.gk.Verify(tok.SignedBytes(), tok.Signature)
			require.Error(t, err, "byte %d ^ %#x parses and verifies", i, mask)
			if i >= len(bin)-crypto.SignatureSize && errors.Is(err, crypto.ErrMalformedPoint) {
				// A flipped bit of the signature's x often leaves no
				// point on the curve: the decoder refuses it before
				// any pairing.
				verifyFailed++
				continue
			}
			require.ErrorIs(t, err, crypto.ErrInvalidSignature, "byte %d ^ %#x", i, mask)
			verifyFailed++
		}
	}
	// Cluster ID and epoch bytes always parse: the signature is what catches
	// their tampering. Flipping the compression flag never parses.
	require.GreaterOrEqual(t, parsed, 2*(ClusterIDSize+8))
	require.Equal(t, parsed, verifyFailed)
}

// Tokens a real version 1 and version 2 cluster issued (the bn256 test
// cluster of earlier releases, over the reference statement). Their curve
// is gone from this release, so they are kept as text: they must be refused
// by their version, whatever their signature bytes.
const (
	oldTokenV1Text = "pt1.AXrQlyFmN_eTGwo_VTfZYhFKtrfYfELcbc_UxAvdWDHmCW9yZGVycy1kYgAAAAAAAAAqFDEyRDNLb29XSG9sZGVyUGVlcklEGsRESJhzZTY8hugjJQY919WxFa5SLwAD40KKflU16JY9ithhGt0d4SZnL6SH4x94oP7N4tcwWU-KQ05fdWVGlg"
	oldTokenV2Text = "pt2.AnrQlyFmN_eTGwo_VTfZYhFKtrfYfELcbc_UxAvdWDHmCW9yZGVycy1kYgAAAAAAAAAqFDEyRDNLb29XSG9sZGVyUGVlcklEAQIDBAUGBwgJCgsMDQ4PEFFlzgsB-9n3KC7X_8Zu5giTPb5ECwZ_vxpcA98nIwHtHYgm8LPDMlErog-BsFnyKz3dtJv7-Fx98tgOMbkpDUY"
)

// oldToken returns the version 1 or 2 token above in binary and text form.
func oldToken(tb testing.TB, version int) ([]byte, string) {
	tb.Helper()
	text := map[int]string{1: oldTokenV1Text, 2: oldTokenV2Text}[version]
	require.NotEmpty(tb, text, "no version %d token", version)
	bin, err := base64.RawURLEncoding.DecodeString(text[len("ptN."):])
	require.NoError(tb, err)
	require.Equal(tb, byte(version), bin[0])
	return bin, text
}

// blsModulusHex is p, the base-field modulus of BLS12-381, in 48 bytes.
const blsModulusHex = "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab"

// badSignature is a BLS12-381 encoding attack on a token's signature.
type badSignature struct {
	name string
	sig  []byte
	// parses reports that the bytes pass the byte-level rules ParseToken
	// checks (length, flags, x below p, not the identity), so only the
	// full decoding at verification refuses them, with want.
	parses bool
	want   error
}

// badSignatures returns encodings a strict decoder must refuse: x ≥ p,
// every forbidden flag combination, the identity, an x with no point, and
// a point on the curve outside the prime-order subgroup. The last entry,
// the valid signature with its sort flag flipped, is the negated point: a
// well-formed signature that does not verify, so flipping a flag never
// yields a second encoding of a valid signature.
func badSignatures(tb testing.TB) []badSignature {
	tb.Helper()
	fx := testFixture(tb)
	valid := fx.tok.Signature
	with := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid[:]...)
		f(b)
		return b
	}
	// x + p fits beside the flags for about a quarter of all x: sign
	// epochs until one does.
	var plusP []byte
	for epoch := uint64(1); plusP == nil; epoch++ {
		require.Less(tb, epoch, uint64(200), "no signature whose x + p fits in 381 bits")
		st := fx.stmt
		st.Epoch = epoch
		tok := fx.mustSign(tb, st)
		if b, ok := bls12381test.AddModulus(tok.Signature[:]); ok {
			plusP = b
		}
	}
	// p, BLS12-381's base-field modulus, with the compression flag.
	p, err := hex.DecodeString(blsModulusHex)
	require.NoError(tb, err)
	p[0] |= 0x80
	allOnes := bytes.Repeat([]byte{0xff}, crypto.SignatureSize)
	allOnes[0] = 0x9f
	notOnCurve := bls12381test.NotOnCurveG1(1)
	outside := bls12381test.NonSubgroupG1(1)
	return []badSignature{
		{name: "x-plus-p", sig: plusP},
		{name: "x-equals-p", sig: p},
		{name: "x-all-ones", sig: allOnes},
		{name: "compression-flag-clear", sig: with(func(b []byte) { b[0] &^= 0x80 })},
		{name: "infinity-flag-on-point", sig: with(func(b []byte) { b[0] |= 0x40 })},
		{name: "zero-bytes", sig: make([]byte, crypto.SignatureSize)},
		{name: "identity", sig: bls12381test.Identity(crypto.SignatureSize)},
		{name: "identity-sort-flag", sig: with(func(b []byte) { clear(b); b[0] = 0xe0 })},
		{name: "identity-nonzero-x", sig: with(func(b []byte) { clear(b); b[0] = 0xc0; b[47] = 1 })},
		{name: "not-on-curve", sig: notOnCurve[:], parses: true, want: crypto.ErrMalformedPoint},
		{name: "outside-subgroup", sig: outside[:], parses: true, want: crypto.ErrNotInSubgroup},
		{name: "sort-flag-flipped", sig: with(func(b []byte) { b[0] ^= 0x20 }), parses: true, want: crypto.ErrInvalidSignature},
	}
}

// tokenWithSignature is the reference token's binary form with sig in
// place of its signature.
func tokenWithSignature(tb testing.TB, sig []byte) []byte {
	tb.Helper()
	st := testFixture(tb).stmt
	return encodeToken(Version, st.Cluster, st.Resource, st.Epoch, st.Holder, sig)
}

// TestTokenSignatureEncodingAttacks: a token whose signature breaks a
// byte-level rule is refused by ParseToken, naming the point; one that
// passes them but is no point of G1 parses (parsing never decompresses, so
// the verified-token cache is consulted first) and is then refused by
// verification with the decoder's reason, before any pairing.
func TestTokenSignatureEncodingAttacks(t *testing.T) {
	fx := testFixture(t)
	for _, c := range badSignatures(t) {
		t.Run(c.name, func(t *testing.T) {
			bin := tokenWithSignature(t, c.sig)
			tok, err := ParseToken(bin)
			if !c.parses {
				require.ErrorIs(t, err, ErrMalformed)
				require.ErrorIs(t, err, crypto.ErrMalformedPoint)
				require.Contains(t, err.Error(), "token signature")
				require.Equal(t, Token{}, tok)
				text := TokenTextPrefix + base64.RawURLEncoding.EncodeToString(bin)
				tok, err = ParseTokenText(text)
				require.ErrorIs(t, err, crypto.ErrMalformedPoint)
				require.Equal(t, Token{}, tok)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.sig, tok.Signature[:])
			back, err := tok.MarshalBinary()
			require.NoError(t, err)
			require.Equal(t, bin, back)
			err = fx.gk.Verify(tok.SignedBytes(), tok.Signature)
			require.ErrorIs(t, err, c.want)
			if c.want != crypto.ErrInvalidSignature {
				require.ErrorIs(t, err, crypto.ErrMalformedPoint)
				require.NotErrorIs(t, err, crypto.ErrInvalidSignature)
			}
		})
	}
}

// encodeToken writes a token's binary form without validating it, to build
// invalid inputs.
func encodeToken(version uint8, c ClusterID, resource string, epoch uint64, holder Holder, sig []byte) []byte {
	e := encoder{}
	e.u8(version)
	e.fixed(c[:])
	e.str(resource)
	e.u64(epoch)
	e.holder(holder)
	e.fixed(sig)
	return e.b
}

func TestTokenFieldValidation(t *testing.T) {
	fx := testFixture(t)
	cases := []struct {
		name     string
		resource string
		holder   Holder
		parseErr error // from ParseToken; MarshalBinary always gives ErrInvalidField
	}{
		{"empty resource", "", testHolder, ErrInvalidField},
		{"resource 257 bytes", strings.Repeat("r", MaxResourceLen+1), testHolder, ErrMalformed},
		{"resource with space", "orders db", testHolder, ErrInvalidField},
		{"resource with tab", "orders\tdb", testHolder, ErrInvalidField},
		{"resource with newline", "orders\ndb", testHolder, ErrInvalidField},
		{"resource with NUL", "orders\x00db", testHolder, ErrInvalidField},
		{"resource with DEL", "orders\x7fdb", testHolder, ErrInvalidField},
		{"resource with C1 control", "orders\u0085db", testHolder, ErrInvalidField},
		{"resource with NBSP", "orders\u00a0db", testHolder, ErrInvalidField},
		{"resource with line separator", "orders\u2028db", testHolder, ErrInvalidField},
		{"resource invalid UTF-8", "orders\xffdb", testHolder, ErrMalformed},
		{"resource truncated UTF-8", "orders\xc3", testHolder, ErrMalformed},
		{"resource with RLO", "orders-\u202egpj.exe", testHolder, ErrInvalidField},
		{"resource with zero width space", "orders\u200bdb", testHolder, ErrInvalidField},
		{"resource with BOM", "\ufefforders-db", testHolder, ErrInvalidField},
		{"empty holder", "orders-db", Holder{}, ErrInvalidField},
		{"empty holder ID", "orders-db", Holder{Session: testSession}, ErrInvalidField},
		{"zero session", "orders-db", Holder{ID: testHolder.ID}, ErrInvalidField},
		{"holder 129 bytes", "orders-db", Holder{ID: strings.Repeat("h", MaxHolderLen+1), Session: testSession}, ErrMalformed},
		{"holder with space", "orders-db", Holder{ID: "a b", Session: testSession}, ErrInvalidField},
		{"holder with RLO", "orders-db", Holder{ID: "a\u202eb", Session: testSession}, ErrInvalidField},
		{"holder invalid UTF-8", "orders-db", Holder{ID: "\xfe", Session: testSession}, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := fx.tok
			tok.Resource, tok.Holder = c.resource, c.holder
			require.ErrorIs(t, tok.Validate(), ErrInvalidField)
			b, err := tok.MarshalBinary()
			require.ErrorIs(t, err, ErrInvalidField)
			require.Nil(t, b)
			_, err = tok.MarshalText()
			require.ErrorIs(t, err, ErrInvalidField)
			require.Equal(t, TokenTextPrefix+"invalid", tok.String())

			raw := encodeToken(Version, tok.Cluster, c.resource, tok.Epoch, c.holder, tok.Signature[:])
			got, err := ParseToken(raw)
			require.ErrorIs(t, err, c.parseErr)
			require.Equal(t, Token{}, got)
		})
	}
}

func TestValidNames(t *testing.T) {
	for _, r := range []string{"a", "orders-db", "bucket/photos", "Bücher/ü", "日本", "a:b@c#1", "é", "Ωmega", "emoji-\U0001F512", strings.Repeat("x", MaxResourceLen), strings.Repeat("日", MaxResourceLen/3)} {
		require.NoError(t, ValidateResource(r), "%q", r)
	}
	for _, h := range []string{"12D3KooWHolderPeerID", strings.Repeat("h", MaxHolderLen)} {
		require.NoError(t, ValidateHolder(h), "%q", h)
	}
}

func TestParseTokenRefusesMalformed(t *testing.T) {
	fx := testFixture(t)
	tok := fx.tok
	bin, err := tok.MarshalBinary()
	require.NoError(t, err)
	nonMinimal := []byte{Version}
	nonMinimal = append(nonMinimal, tok.Cluster[:]...)
	nonMinimal = append(nonMinimal, 0x89, 0x00) // 9, in two bytes
	nonMinimal = append(nonMinimal, bin[1+ClusterIDSize+1:]...)
	identity := append(append([]byte(nil), bin[:len(bin)-crypto.SignatureSize]...), make([]byte, crypto.SignatureSize)...)
	cases := map[string][]byte{
		"empty":              nil,
		"version only":       {Version},
		"version 0":          append([]byte{0}, bin[1:]...),
		"version 4":          append([]byte{4}, bin[1:]...),
		"version 255":        append([]byte{255}, bin[1:]...),
		"truncated":          bin[:len(bin)-1],
		"trailing byte":      append(append([]byte(nil), bin...), 0),
		"non-minimal length": nonMinimal,
		"identity signature": identity,
	}
	for _, c := range badSignatures(t) {
		if !c.parses {
			cases["signature "+c.name] = tokenWithSignature(t, c.sig)
		}
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseToken(b)
			require.ErrorIs(t, err, ErrMalformed)
			require.Equal(t, Token{}, got)
		})
	}
	// Every strict prefix is refused.
	for i := range bin {
		got, err := ParseToken(bin[:i])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
		require.Equal(t, Token{}, got)
	}
}

// TestOldTokenVersionRefused: a version 1 token (no lock session) or a
// version 2 token (bn256) is never accepted, in binary or text form or
// inside a message, and the error names the version and says what to do.
func TestOldTokenVersionRefused(t *testing.T) {
	fx := testFixture(t)
	newBin, err := fx.tok.MarshalBinary()
	require.NoError(t, err)
	advice := map[int]string{1: "acquire a new token", 2: "run a new DKG"}
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			bin, text := oldToken(t, v)
			prefix := fmt.Sprintf("pt%d.", v)
			check := func(t *testing.T, err error) {
				t.Helper()
				require.ErrorIs(t, err, ErrTokenVersion)
				require.ErrorIs(t, err, ErrMalformed)
				require.Contains(t, err.Error(), advice[v])
				require.Contains(t, err.Error(), fmt.Sprintf("version %d", v))
			}

			got, err := ParseToken(bin)
			check(t, err)
			require.Equal(t, Token{}, got)
			for _, s := range []string{text, " " + text + "\n", text[:len(text)-1], text + "A", prefix, prefix + "AAAA", prefix + "invalid"} {
				got, err := ParseTokenText(s)
				check(t, err)
				require.Equal(t, Token{}, got, "%q", s)
			}
			var tok Token
			check(t, tok.UnmarshalText([]byte(text)))
			require.Equal(t, Token{}, tok)
			var jt struct{ T Token }
			check(t, json.Unmarshal([]byte(`{"T":"`+text+`"}`), &jt))

			// The old version byte is refused whatever follows, even
			// the current layout and signature, and the old prefix
			// whatever body follows it.
			got, err = ParseToken(append([]byte{byte(v)}, newBin[1:]...))
			check(t, err)
			require.Equal(t, Token{}, got)
			_, err = ParseToken([]byte{byte(v)})
			check(t, err)
			_, err = ParseTokenText(prefix + fx.tok.String()[len(TokenTextPrefix):])
			check(t, err)

			// Inside messages that carry a token.
			_, err = UnmarshalCommitRequest(wire(bin, wu64(1000)))
			check(t, err)
			_, err = UnmarshalReleaseRequest(wire(bin))
			check(t, err)
			_, err = UnmarshalAcquireRequest(wire(fx.stmt.Cluster[:], wstr("r"), wu64(43), wkey(testKey), wu64(1), wu8(1), bin, wu8(0)))
			check(t, err)
			_, err = UnmarshalStatusReply(wire(wu64(1), wref(HolderRef{}), wu64(1), wu64(0), wu8(1), bin, wu8(0)))
			check(t, err)
		})
	}

	// An old body under the current prefix is refused by its version
	// byte. Other versions are malformed, but not an old version.
	_, v2Text := oldToken(t, 2)
	_, err = ParseTokenText(TokenTextPrefix + v2Text[len("pt2."):])
	require.ErrorIs(t, err, ErrTokenVersion)
	for _, v := range []byte{0, 4, 255} {
		_, err := ParseToken(append([]byte{v}, newBin[1:]...))
		require.ErrorIs(t, err, ErrMalformed, "version %d", v)
		require.NotErrorIs(t, err, ErrTokenVersion, "version %d", v)
	}
	for _, p := range []string{"pt0.", "pt4.", "pt11.", "pt22.", "PT1.", "PT2."} {
		_, err := ParseTokenText(p + v2Text[len("pt2."):])
		require.ErrorIs(t, err, ErrMalformed, p)
		require.NotErrorIs(t, err, ErrTokenVersion, p)
	}
}

// TestTokenNamesSession: the session is part of what is signed, so a
// token cannot be moved to another session of the same identity.
func TestTokenNamesSession(t *testing.T) {
	fx := testFixture(t)
	moved := fx.tok
	moved.Holder = sameIDHolder
	require.ErrorIs(t, fx.gk.Verify(moved.SignedBytes(), moved.Signature), crypto.ErrInvalidSignature)
	bin, err := moved.MarshalBinary()
	require.NoError(t, err)
	back, err := ParseToken(bin)
	require.NoError(t, err)
	require.Equal(t, sameIDHolder, back.Holder)
	require.ErrorIs(t, fx.gk.Verify(back.SignedBytes(), back.Signature), crypto.ErrInvalidSignature)
	require.NotEqual(t, fx.tok.Digest(), moved.Digest())
}

func BenchmarkSignedBytes(b *testing.B) {
	s := goldenStatement()
	s.Holder = testHolder
	b.ReportAllocs()
	for b.Loop() {
		_ = s.SignedBytes()
	}
}

func BenchmarkTokenParseText(b *testing.B) {
	text := testFixture(b).tok.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTokenText(text); err != nil {
			b.Fatal(err)
		}
	}
}
