package verifier_test

import (
	"encoding/base64"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// bn256P is the base field modulus of kyber's bn256 (pairing/bn256/constants.go).
var bn256P, _ = new(big.Int).SetString("65000549695646603732796438742359905742825358107623003571877145026864184071783", 10)

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
		{"last signature byte flipped", func(tok *protocol.Token) { tok.Signature[63] ^= 0x80 }, verifier.ErrInvalidToken},
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

// TestVerifyRefusesVersion1Tokens: tokens of format version 1 named no
// lock session; they are refused with a message that says so.
func TestVerifyRefusesVersion1Tokens(t *testing.T) {
	v := verifier.New(mainFixture().Cluster)
	good := mainFixture().Token(t, "orders-db", 5, "client-a")
	b, err := good.MarshalBinary()
	require.NoError(t, err)
	b[0] = 1
	_, err = v.ParseAndVerify("pt1." + base64.RawURLEncoding.EncodeToString(b))
	require.ErrorIs(t, err, verifier.ErrMalformedToken)
	require.ErrorIs(t, err, protocol.ErrTokenVersion)
	require.Contains(t, err.Error(), "acquire a new token")
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

// TestMalleatedSignatureRefused adds p to the signature's x coordinate: kyber
// would decode the same point, so the signature must be refused for its
// non-canonical encoding.
func TestMalleatedSignatureRefused(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	limit := new(big.Int).Lsh(big.NewInt(1), 256)
	for epoch := uint64(1); epoch < 20; epoch++ {
		tok := fx.Token(t, "orders-db", epoch, "client-a")
		x := new(big.Int).SetBytes(tok.Signature[:32])
		x.Add(x, bn256P)
		if x.Cmp(limit) >= 0 {
			continue // x+p does not fit 32 bytes; try another signature
		}
		mal := tok
		x.FillBytes(mal.Signature[:32])
		require.NotEqual(t, tok.Signature, mal.Signature)

		err := v.Verify(mal)
		require.ErrorIs(t, err, verifier.ErrInvalidToken)
		require.ErrorIs(t, err, crypto.ErrMalformedPoint)

		_, err = v.ParseAndVerify(mal.String())
		require.ErrorIs(t, err, verifier.ErrMalformedToken)
		require.ErrorIs(t, err, protocol.ErrMalformed)

		require.NoError(t, v.Verify(tok))
		return
	}
	t.Fatal("no signature with x+p below 2^256 found")
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
		"pt1.!!!!",
		"pt2." + strings.TrimPrefix(good, "pt1."),
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
