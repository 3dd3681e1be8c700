package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
)

// forkTokens are the fixture's reference token and two tokens that fork
// with it: another client, and another session of the same identity.
type forkTokens struct {
	c                 *Cluster
	ref, other, samID Token
}

var (
	forkOnce sync.Once
	forkFix  forkTokens
)

func testForkTokens(tb testing.TB) forkTokens {
	tb.Helper()
	fx := testFixture(tb)
	forkOnce.Do(func() {
		c, err := NewCluster(NewClusterFile("test-cluster", fx.gk, nil, nil))
		require.NoError(tb, err)
		other, samID := fx.stmt, fx.stmt
		other.Holder, samID.Holder = otherHolder, sameIDHolder
		forkFix = forkTokens{c: c, ref: fx.tok, other: fx.mustSign(tb, other), samID: fx.mustSign(tb, samID)}
	})
	require.Equal(tb, forkFix.c.ID, fx.stmt.Cluster, "the fixture's cluster ID")
	return forkFix
}

func TestForkCanonicalOrder(t *testing.T) {
	ft := testForkTokens(t)
	f1, err := NewFork(ft.ref, ft.other)
	require.NoError(t, err)
	f2, err := NewFork(ft.other, ft.ref)
	require.NoError(t, err)
	require.Equal(t, f1, f2, "the order of the arguments must not matter")
	require.True(t, f1.Equal(Fork{A: ft.other, B: ft.ref}))
	require.False(t, f1.Equal(Fork{A: ft.ref, B: ft.samID}))

	a, _ := f1.A.MarshalBinary()
	b, _ := f1.B.MarshalBinary()
	require.Negative(t, bytes.Compare(a, b), "A sorts before B")

	// One encoding whatever order the fields hold.
	enc1, err := f1.MarshalBinary()
	require.NoError(t, err)
	enc2, err := Fork{A: f1.B, B: f1.A}.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, enc1, enc2)
	require.True(t, strings.HasPrefix(string(enc1), DomainFork))
	require.Equal(t, byte(Version), enc1[len(DomainFork)])
	require.LessOrEqual(t, len(enc1), MaxForkSize)

	got, err := ParseFork(enc1)
	require.NoError(t, err)
	require.Equal(t, f1, got)
	require.Equal(t, ft.ref.Resource, got.Resource())
	require.Equal(t, ft.ref.Epoch, got.Epoch())
	require.Len(t, f1.ID(), 64)
	require.Equal(t, f1.ID(), Fork{A: f1.B, B: f1.A}.ID(), "one fork, one ID")
	require.NotEqual(t, f1.ID(), mustForkOf(t, ft.ref, ft.samID).ID())
	require.Empty(t, Fork{A: ft.ref, B: ft.ref}.ID())

	// The text form and JSON.
	text := f1.String()
	require.True(t, strings.HasPrefix(text, ForkTextPrefix))
	require.LessOrEqual(t, len(text), MaxForkTextLen)
	got, err = ParseForkText(" " + text + "\n")
	require.NoError(t, err)
	require.Equal(t, f1, got)
	j, err := json.Marshal(struct{ Fork Fork }{f1})
	require.NoError(t, err)
	var back struct{ Fork Fork }
	require.NoError(t, json.Unmarshal(j, &back))
	require.Equal(t, f1, back.Fork)
}

func TestForkCheck(t *testing.T) {
	ft := testForkTokens(t)
	with := func(f func(t *Token)) Token {
		tok := ft.other
		f(&tok)
		return tok
	}
	for _, tc := range []struct {
		name string
		b    Token
		want error
	}{
		{"other client", ft.other, nil},
		{"other session of the same identity", ft.samID, nil},
		{"same holder", ft.ref, ErrNotFork},
		{"other epoch", with(func(t *Token) { t.Epoch++ }), ErrNotFork},
		{"other resource", with(func(t *Token) { t.Resource = "invoices" }), ErrNotFork},
		{"other cluster", with(func(t *Token) { t.Cluster[0] ^= 1 }), ErrNotFork},
		{"no session", with(func(t *Token) { t.Holder.Session = SessionID{} }), ErrNotFork},
		{"bad resource", with(func(t *Token) { t.Resource = "a b" }), ErrNotFork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFork(ft.ref, tc.b)
			if tc.want == nil {
				require.NoError(t, err)
				require.NoError(t, f.Check())
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrInvalidField)
			require.Equal(t, Fork{}, f)
			_, err = Fork{A: ft.ref, B: tc.b}.MarshalBinary()
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, ForkTextPrefix+"invalid", Fork{A: ft.ref, B: tc.b}.String())
		})
	}
}

func TestVerifyFork(t *testing.T) {
	ft := testForkTokens(t)
	good, err := NewFork(ft.ref, ft.other)
	require.NoError(t, err)
	require.NoError(t, VerifyFork(ft.c, good))
	sessions, err := NewFork(ft.ref, ft.samID)
	require.NoError(t, err)
	require.NoError(t, VerifyFork(ft.c, sessions), "two sessions of one identity are a fork too")

	// A token whose signature is another statement's: it forks on paper,
	// but does not verify.
	forged := ft.other
	forged.Holder = Holder{ID: "12D3KooWForger", Session: SessionID{9}}
	f, err := NewFork(ft.ref, forged)
	require.NoError(t, err)
	require.ErrorIs(t, VerifyFork(ft.c, f), ErrBadFork)
	require.ErrorIs(t, VerifyFork(ft.c, f), crypto.ErrInvalidSignature)

	// The same fork checked against another cluster's file.
	gk, _, err := crypto.Deal(seeded(7), 4, 3)
	require.NoError(t, err)
	other, err := NewCluster(NewClusterFile("test-cluster", gk, nil, nil))
	require.NoError(t, err)
	require.ErrorIs(t, VerifyFork(other, good), ErrBadFork)

	// Tokens that do not fork are refused before any signature check.
	require.ErrorIs(t, VerifyFork(ft.c, Fork{A: ft.ref, B: ft.ref}), ErrNotFork)
}

func TestParseForkRefuses(t *testing.T) {
	ft := testForkTokens(t)
	f, err := NewFork(ft.ref, ft.other)
	require.NoError(t, err)
	enc, err := f.MarshalBinary()
	require.NoError(t, err)
	text := f.String()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"no prefix", text[len(ForkTextPrefix):]},
		{"token prefix", TokenTextPrefix + text[len(ForkTextPrefix):]},
		{"padded", text + "=="},
		{"line break inside", text[:40] + "\n" + text[40:]},
		{"truncated", text[:len(text)-1]},
		{"over-long", ForkTextPrefix + strings.Repeat("A", MaxForkTextLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseForkText(tc.in)
			require.ErrorIs(t, err, ErrMalformed)
			require.Equal(t, Fork{}, got)
		})
	}
	_, err = ParseFork(append(append([]byte(nil), enc...), make([]byte, MaxForkSize)...))
	require.ErrorIs(t, err, ErrMalformed)
}

func mustForkOf(t *testing.T, a, b Token) Fork {
	t.Helper()
	f, err := NewFork(a, b)
	require.NoError(t, err)
	return f
}
