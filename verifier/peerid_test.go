package verifier_test

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"math/rand"
	"strings"
	"testing"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// TestHolderKeyMatchesLibp2p compares the decoder with libp2p's own
// encoding of Ed25519 peer IDs (libp2p is imported by this test only:
// TestImportGraph checks the library's own dependencies).
func TestHolderKeyMatchesLibp2p(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 64; i++ {
		priv, pub, err := lcrypto.GenerateEd25519Key(rng)
		require.NoError(t, err)
		id, err := peer.IDFromPublicKey(pub)
		require.NoError(t, err)
		raw, err := pub.Raw()
		require.NoError(t, err)

		key, err := verifier.HolderKey(id.String())
		require.NoError(t, err)
		require.Equal(t, ed25519.PublicKey(raw), key)
		require.Equal(t, id.String(), verifier.HolderID(key))

		// A signature by libp2p's key verifies under the decoded key.
		msg := []byte("palisade holder key test")
		sig, err := priv.Sign(msg)
		require.NoError(t, err)
		require.True(t, ed25519.Verify(key, msg, sig))
	}
}

func TestHolderKeyRefusesOtherIDs(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	_, secpPub, err := lcrypto.GenerateSecp256k1Key(rng)
	require.NoError(t, err)
	secpID, err := peer.IDFromPublicKey(secpPub)
	require.NoError(t, err)
	_, edPub, err := lcrypto.GenerateEd25519Key(rng)
	require.NoError(t, err)
	edID, err := peer.IDFromPublicKey(edPub)
	require.NoError(t, err)

	for _, s := range holderKeyInvalidSeeds(t) {
		_, err := verifier.HolderKey(string(s.Data))
		require.ErrorIs(t, err, verifier.ErrHolderKey, s.Name)
	}
	for name, s := range map[string]string{
		"secp256k1 peer ID":  secpID.String(),
		"CID form":           peer.ToCid(edID).String(),
		"plain holder":       "client-a",
		"trailing character": edID.String() + "1",
		"leading one":        "1" + edID.String(),
	} {
		key, err := verifier.HolderKey(s)
		require.ErrorIs(t, err, verifier.ErrHolderKey, name)
		require.Nil(t, key, name)
	}
}

// holderKeyInvalidSeeds are hand-made near misses of an Ed25519 peer ID.
func holderKeyInvalidSeeds(tb testing.TB) []verifiertest.Seed {
	tb.Helper()
	pub := verifiertest.Key(1).Public().(ed25519.PublicKey)
	valid := verifier.HolderID(pub)
	enc := func(b ...[]byte) []byte {
		var all []byte
		for _, x := range b {
			all = append(all, x...)
		}
		return []byte(base58(all))
	}
	key := []byte(pub)
	return []verifiertest.Seed{
		{Name: "invalid-empty", Data: nil},
		{Name: "invalid-one", Data: []byte("1")},
		{Name: "invalid-alphabet-0", Data: []byte(strings.Replace(valid, valid[5:6], "0", 1))},
		{Name: "invalid-alphabet-l", Data: []byte(strings.Replace(valid, valid[5:6], "l", 1))},
		{Name: "invalid-too-long", Data: []byte(valid + valid)},
		{Name: "invalid-sha256-multihash", Data: enc([]byte{0x12, 0x20}, key)},
		{Name: "invalid-secp256k1-type", Data: enc([]byte{0x00, 0x25, 0x08, 0x02, 0x12, 0x21, 0x02}, key)},
		{Name: "invalid-rsa-type", Data: enc([]byte{0x00, 0x24, 0x08, 0x00, 0x12, 0x20}, key)},
		{Name: "invalid-fields-swapped", Data: enc([]byte{0x00, 0x24, 0x12, 0x20}, key, []byte{0x08, 0x01})},
		{Name: "invalid-short-key", Data: enc([]byte{0x00, 0x23, 0x08, 0x01, 0x12, 0x1f}, key[:31])},
		{Name: "invalid-trailing-byte", Data: enc([]byte{0x00, 0x25, 0x08, 0x01, 0x12, 0x20}, key, []byte{0})},
		{Name: "invalid-length-mismatch", Data: enc([]byte{0x00, 0x25, 0x08, 0x01, 0x12, 0x20}, key)},
		{Name: "invalid-no-multihash", Data: enc([]byte{0x08, 0x01, 0x12, 0x20}, key)},
	}
}

// base58 is a reference bitcoin-alphabet encoder for building seeds.
func base58(b []byte) string {
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	var out []byte
	n := append([]byte(nil), b...)
	for len(n) > 0 && !allZero(n) {
		var rem int
		for i := range n {
			acc := rem<<8 | int(n[i])
			n[i] = byte(acc / 58)
			rem = acc % 58
		}
		out = append(out, alphabet[rem])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// holderKeySeeds is the FuzzHolderKey corpus.
func holderKeySeeds(tb testing.TB) []verifiertest.Seed {
	tb.Helper()
	var out []verifiertest.Seed
	for i, k := range []byte{1, 2, 200} {
		out = append(out, verifiertest.Seed{Name: "valid-ed25519-" + string(rune('a'+i)), Data: []byte(verifier.HolderID(verifiertest.Key(k).Public().(ed25519.PublicKey)))})
	}
	zero := verifier.HolderID(make(ed25519.PublicKey, ed25519.PublicKeySize))
	out = append(out, verifiertest.Seed{Name: "valid-zero-key", Data: []byte(zero)})
	return append(out, holderKeyInvalidSeeds(tb)...)
}

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the FuzzHolderKey seed corpus under testdata/fuzz")

// TestHolderKeySeedCorpus checks the FuzzHolderKey seeds and that
// testdata/fuzz holds them; with -write-corpus it writes them:
//
//	go test ./verifier -run TestHolderKeySeedCorpus -write-corpus
func TestHolderKeySeedCorpus(t *testing.T) {
	verifiertest.CheckCorpus(t, "FuzzHolderKey", holderKeySeeds(t), func(s string) error {
		_, err := verifier.HolderKey(s)
		return err
	}, *writeCorpus)
}

func FuzzHolderKey(f *testing.F) {
	verifiertest.AddSeeds(f, holderKeySeeds(f))
	f.Fuzz(func(t *testing.T, in string) {
		key, err := verifier.HolderKey(in)
		if err != nil {
			if key != nil {
				t.Fatalf("failed decode returned a key")
			}
			if !errors.Is(err, verifier.ErrHolderKey) {
				t.Fatalf("error %v does not wrap ErrHolderKey", err)
			}
			return
		}
		if len(key) != ed25519.PublicKeySize {
			t.Fatalf("key of %d bytes", len(key))
		}
		if out := verifier.HolderID(key); out != in {
			t.Fatalf("decode then encode changed the text: %q -> %q", in, out)
		}
	})
}
