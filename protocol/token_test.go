package protocol

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
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
		"02",                             // Version 2 (lock sessions)
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
	require.Regexp(t, regexp.MustCompile(`^pt2\.[A-Za-z0-9_-]+$`), text)
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
	require.Error(t, json.Unmarshal([]byte(`{"T":"pt2.AAAA"}`), &jt))
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
		{"wrong prefix", "pt3." + body},
		{"version 0 prefix", "pt0." + body},
		{"upper-case prefix", "PT2." + body},
		{"upper-case old prefix", "PT1." + body},
		{"padded", text + "=="},
		{"std alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(text) + "+"},
		{"inner space", text[:20] + " " + text[20:]},
		{"truncated", text[:len(text)-1]},
		{"extra char", text + "A"},
		{"invalid token", "pt2.invalid"},
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
			require.ErrorIs(t, err, crypto.ErrInvalidSignature, "byte %d ^ %#x parses and verifies", i, mask)
			verifyFailed++
		}
	}
	// Cluster ID and epoch bytes always parse: the signature is what catches
	// their tampering.
	require.GreaterOrEqual(t, parsed, 2*(ClusterIDSize+8))
	require.Equal(t, parsed, verifyFailed)
}

// addP returns the 32-byte big-endian v+p, the non-canonical encoding kyber
// would accept, if it still fits in 32 bytes.
func addP(x []byte) ([]byte, bool) {
	p, _ := new(big.Int).SetString("65000549695646603732796438742359905742825358107623003571877145026864184071783", 10)
	v := new(big.Int).Add(new(big.Int).SetBytes(x), p)
	if v.BitLen() > 256 {
		return nil, false
	}
	return v.FillBytes(make([]byte, 32)), true
}

// nonCanonicalToken returns the binary form of a valid token whose signature
// has one coordinate replaced by coordinate+p.
func nonCanonicalToken(tb testing.TB) []byte {
	tb.Helper()
	fx := testFixture(tb)
	for epoch := uint64(1); epoch < 64; epoch++ {
		st := fx.stmt
		st.Epoch = epoch
		tok := fx.mustSign(tb, st)
		bin, err := tok.MarshalBinary()
		require.NoError(tb, err)
		sig := bin[len(bin)-crypto.SignatureSize:]
		for _, coord := range [][]byte{sig[:32], sig[32:]} {
			if v, ok := addP(coord); ok {
				copy(coord, v)
				return bin
			}
		}
	}
	tb.Fatal("no signature with a malleable coordinate")
	return nil
}

func TestParseTokenRefusesNonCanonicalSignature(t *testing.T) {
	bin := nonCanonicalToken(t)
	tok, err := ParseToken(bin)
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorIs(t, err, crypto.ErrMalformedPoint)
	require.Equal(t, Token{}, tok)
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

// encodeTokenV1 writes a token in the version 1 layout: version byte 1,
// cluster, resource, epoch, holder identity, signature (no session).
func encodeTokenV1(c ClusterID, resource string, epoch uint64, holderID string, sig []byte) []byte {
	e := encoder{}
	e.u8(1)
	e.fixed(c[:])
	e.str(resource)
	e.u64(epoch)
	e.str(holderID)
	e.fixed(sig)
	return e.b
}

// oldToken is a version 1 token of the reference statement, in binary and
// text form, signed (as version 1 nodes did) over the version 1 signed
// bytes, so it is a token a real version 1 cluster could have issued.
func oldToken(tb testing.TB) ([]byte, string) {
	tb.Helper()
	fx := testFixture(tb)
	st := fx.stmt
	e := encoder{}
	e.fixed([]byte(DomainToken))
	e.u8(1)
	e.bytes(st.Cluster[:])
	e.str(st.Resource)
	e.u64(st.Epoch)
	e.str(st.Holder.ID)
	msg := e.b
	ps := make([]crypto.PartialSig, 0, 3)
	for _, s := range fx.shares[:3] {
		p, err := s.Sign(msg)
		require.NoError(tb, err)
		ps = append(ps, p)
	}
	sig, _, err := fx.gk.Combine(msg, ps)
	require.NoError(tb, err)
	require.NoError(tb, fx.gk.Verify(msg, sig))
	bin := encodeTokenV1(st.Cluster, st.Resource, st.Epoch, st.Holder.ID, sig[:])
	return bin, "pt1." + base64.RawURLEncoding.EncodeToString(bin)
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
		"version 3":          append([]byte{3}, bin[1:]...),
		"version 255":        append([]byte{255}, bin[1:]...),
		"truncated":          bin[:len(bin)-1],
		"trailing byte":      append(append([]byte(nil), bin...), 0),
		"non-minimal length": nonMinimal,
		"identity signature": identity,
		"non-canonical sig":  nonCanonicalToken(t),
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

// TestOldTokenVersionRefused: a version 1 token (no lock session) is never
// accepted, in binary or text form or inside a message, and the error says
// what to do.
func TestOldTokenVersionRefused(t *testing.T) {
	fx := testFixture(t)
	bin, text := oldToken(t)
	check := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, ErrTokenVersion)
		require.ErrorIs(t, err, ErrMalformed)
		require.Contains(t, err.Error(), "acquire a new token")
		require.Contains(t, err.Error(), "version 1")
	}

	got, err := ParseToken(bin)
	check(t, err)
	require.Equal(t, Token{}, got)
	for _, s := range []string{text, " " + text + "\n", text[:len(text)-1], text + "A", "pt1.", "pt1.AAAA", "pt1.invalid"} {
		got, err := ParseTokenText(s)
		check(t, err)
		require.Equal(t, Token{}, got, "%q", s)
	}
	var tok Token
	check(t, tok.UnmarshalText([]byte(text)))
	require.Equal(t, Token{}, tok)
	var jt struct{ T Token }
	check(t, json.Unmarshal([]byte(`{"T":"`+text+`"}`), &jt))

	// Version byte 1 is refused whatever follows, even the new layout.
	newBin, err := fx.tok.MarshalBinary()
	require.NoError(t, err)
	got, err = ParseToken(append([]byte{1}, newBin[1:]...))
	check(t, err)
	require.Equal(t, Token{}, got)
	_, err = ParseToken([]byte{1})
	check(t, err)

	// Inside messages that carry a token.
	_, err = UnmarshalCommitRequest(wire(bin, wu64(1000)))
	check(t, err)
	_, err = UnmarshalReleaseRequest(wire(bin))
	check(t, err)
	_, err = UnmarshalAcquireRequest(wire(fx.stmt.Cluster[:], wstr("r"), wu64(43), wsess(testSession), wu64(1), wu8(1), bin, wu8(0)))
	check(t, err)
	_, err = UnmarshalStatusReply(wire(wu64(1), whld(Holder{}), wu64(1), wu64(0), wu8(1), bin, wu8(0)))
	check(t, err)

	// Other versions are malformed, but not the old version.
	for _, v := range []byte{0, 3, 255} {
		_, err := ParseToken(append([]byte{v}, newBin[1:]...))
		require.ErrorIs(t, err, ErrMalformed, "version %d", v)
		require.NotErrorIs(t, err, ErrTokenVersion, "version %d", v)
	}
	for _, p := range []string{"pt0.", "pt3.", "pt11.", "PT1."} {
		_, err := ParseTokenText(p + text[len("pt1."):])
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
