package verifier_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func TestVerify(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	good := fx.Token(t, "orders-db", 5, "client-a")
	other := fx.Token(t, "orders-db", 6, "client-b")

	// Same group key, another cluster name: another cluster ID.
	renamed, err := protocol.NewCluster(protocol.NewClusterFile("renamed", fx.Cluster.Key, nil, nil))
	require.NoError(t, err)

	tests := []struct {
		name   string
		tamper func(tok *protocol.Token)
		want   error
	}{
		{"valid", func(*protocol.Token) {}, nil},
		{"resource changed", func(tok *protocol.Token) { tok.Resource = "orders-dc" }, verifier.ErrInvalidToken},
		{"epoch raised", func(tok *protocol.Token) { tok.Epoch++ }, verifier.ErrInvalidToken},
		{"epoch lowered", func(tok *protocol.Token) { tok.Epoch-- }, verifier.ErrInvalidToken},
		{"holder changed", func(tok *protocol.Token) { tok.Holder.ID = "client-b" }, verifier.ErrInvalidToken},
		{"session changed", func(tok *protocol.Token) { tok.Holder.Session[15] ^= 1 }, verifier.ErrInvalidToken},
		{"zero session", func(tok *protocol.Token) { tok.Holder.Session = protocol.SessionID{} }, verifier.ErrMalformedToken},
		{"resource with a right-to-left override", func(tok *protocol.Token) { tok.Resource = "orders-\u202egpj.exe" }, verifier.ErrMalformedToken},
		{"signature byte flipped", func(tok *protocol.Token) { tok.Signature[10] ^= 1 }, verifier.ErrInvalidToken},
		{"last signature byte flipped", func(tok *protocol.Token) { tok.Signature[crypto.SignatureSize-1] ^= 0x80 }, verifier.ErrInvalidToken},
		{"signature of another statement", func(tok *protocol.Token) { tok.Signature = other.Signature }, verifier.ErrInvalidToken},
		{"zero signature", func(tok *protocol.Token) { tok.Signature = crypto.Signature{} }, verifier.ErrInvalidToken},
		{"signed by another key", func(tok *protocol.Token) {
			tok.Signature = sign(t, otherFixture(), tok.Statement)
		}, verifier.ErrInvalidToken},
		{"cluster ID byte flipped", func(tok *protocol.Token) { tok.Cluster[0] ^= 1 }, verifier.ErrWrongCluster},
		{"same key, other cluster name", func(tok *protocol.Token) { tok.Cluster = renamed.ID }, verifier.ErrWrongCluster},
		{"resource with a space", func(tok *protocol.Token) { tok.Resource = "orders db" }, verifier.ErrMalformedToken},
		{"empty holder", func(tok *protocol.Token) { tok.Holder.ID = "" }, verifier.ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := good
			tt.tamper(&tok)
			err := v.Verify(tok)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// TestVerifyRefusesOldVersions: tokens of format version 1 named no lock
// session, those of version 2 were signed on bn256; both are refused with
// a message that names the version and what to do, by their text prefix
// and by their version byte.
func TestVerifyRefusesOldVersions(t *testing.T) {
	v := verifier.New(mainFixture().Cluster)
	good := mainFixture().Token(t, "orders-db", 5, "client-a")
	b, err := good.MarshalBinary()
	require.NoError(t, err)
	for _, tc := range []struct {
		version byte
		says    string
	}{
		{1, "acquire a new token"},
		{2, "run a new DKG"},
	} {
		old := append([]byte{tc.version}, b[1:]...)
		for _, prefix := range []string{fmt.Sprintf("pt%d.", tc.version), protocol.TokenTextPrefix} {
			_, err = v.ParseAndVerify(prefix + base64.RawURLEncoding.EncodeToString(old))
			require.ErrorIs(t, err, verifier.ErrMalformedToken)
			require.ErrorIs(t, err, protocol.ErrTokenVersion)
			require.Contains(t, err.Error(), fmt.Sprintf("version %d", tc.version))
			require.Contains(t, err.Error(), tc.says)
		}
	}
}

func TestVerifyOtherCluster(t *testing.T) {
	v := verifier.New(mainFixture().Cluster)
	tok := otherFixture().Token(t, "orders-db", 5, "client-a")
	require.NoError(t, verifier.New(otherFixture().Cluster).Verify(tok))
	require.ErrorIs(t, v.Verify(tok), verifier.ErrWrongCluster)
	require.ErrorIs(t, v.VerifyFor(tok, "orders-db"), verifier.ErrWrongCluster)
	_, err := v.ParseAndVerify(tok.String())
	require.ErrorIs(t, err, verifier.ErrWrongCluster)
}

func TestVerifyFor(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	tok := fx.Token(t, "orders-db", 5, "client-a")
	tests := []struct {
		resource string
		want     error
	}{
		{"orders-db", nil},
		{"orders-db2", verifier.ErrWrongResource},
		{"bucket/photos", verifier.ErrWrongResource},
		{"", verifier.ErrWrongResource},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			err := v.VerifyFor(tok, tt.resource)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
	bad := tok
	bad.Epoch++
	require.ErrorIs(t, v.VerifyFor(bad, "orders-db"), verifier.ErrInvalidToken)
}

// TestTamperedTextRefused flips the low bit of each byte of the binary form
// in turn: no single-byte change may produce a token that verifies.
func TestTamperedTextRefused(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	tok := fx.Token(t, "orders-db", 5, "client-a")
	got, err := v.ParseAndVerify(tok.String())
	require.NoError(t, err)
	require.Equal(t, tok, got)

	bin, err := tok.MarshalBinary()
	require.NoError(t, err)
	for i := range bin {
		b := append([]byte{}, bin...)
		b[i] ^= 1
		text := protocol.TokenTextPrefix + base64.RawURLEncoding.EncodeToString(b)
		_, err := v.ParseAndVerify(text)
		require.Error(t, err, "byte %d flipped", i)
		require.True(t, errors.Is(err, verifier.ErrMalformedToken) ||
			errors.Is(err, verifier.ErrInvalidToken) ||
			errors.Is(err, verifier.ErrWrongCluster), "byte %d: %v", i, err)
	}
}

func TestParseAndVerifyMalformed(t *testing.T) {
	v := verifier.New(mainFixture().Cluster)
	good := mainFixture().Token(t, "orders-db", 5, "client-a").String()
	for _, text := range []string{
		"",
		"hello",
		"pt1.",
		"pt3.",
		"pt3.!!!!",
		"pt4." + strings.TrimPrefix(good, protocol.TokenTextPrefix),
		good + "A",
		good[:len(good)-3],
		"pt1." + strings.Repeat("A", protocol.MaxTokenTextLen),
	} {
		tok, err := v.ParseAndVerify(text)
		require.ErrorIs(t, err, verifier.ErrMalformedToken, "%q", text)
		require.Equal(t, protocol.Token{}, tok)
	}
	tok, err := v.ParseAndVerify("  " + good + "\n")
	require.NoError(t, err)
	require.Equal(t, "orders-db", tok.Resource)
}

func TestLoad(t *testing.T) {
	fx := mainFixture()
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.json")
	require.NoError(t, fx.Cluster.File.Save(path))
	v, err := verifier.Load(path)
	require.NoError(t, err)
	require.Equal(t, fx.Cluster.ID, v.ClusterID())
	require.NoError(t, v.Verify(fx.Token(t, "orders-db", 5, "client-a")))

	_, err = verifier.Load(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"version": 1, "name": ""}`), 0o644))
	_, err = verifier.Load(bad)
	require.ErrorIs(t, err, protocol.ErrBadClusterFile)
}

func TestStaleError(t *testing.T) {
	var err error = &verifier.StaleError{Resource: "orders-db", Epoch: 4, Barrier: 5}
	require.ErrorIs(t, err, verifier.ErrStale)
	require.NotErrorIs(t, err, verifier.ErrInvalidToken)
	require.Equal(t, `verifier: stale token for resource "orders-db": epoch 4 below barrier 5`, err.Error())
}
