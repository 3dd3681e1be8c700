package protocol

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// voteCluster is a 4-node cluster whose nodes 1..3 have Ed25519 identities
// (keys[i-1]) and node 4 an RSA-style hashed peer ID that names no
// Ed25519 key.
func voteCluster(t *testing.T) (*Cluster, []ed25519.PrivateKey) {
	t.Helper()
	fx := testFixture(t)
	var keys []ed25519.PrivateKey
	var nodes []NodeInfo
	for i := 1; i <= 3; i++ {
		seed := make([]byte, ed25519.SeedSize)
		seed[0] = byte(i)
		k := ed25519.NewKeyFromSeed(seed)
		keys = append(keys, k)
		nodes = append(nodes, NodeInfo{Index: i, PeerID: Ed25519PeerID(k.Public().(ed25519.PublicKey))})
	}
	nodes = append(nodes, NodeInfo{Index: 4, PeerID: "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"})
	c, err := NewCluster(NewClusterFile("vote-test", fx.gk, nodes, nil))
	require.NoError(t, err)
	return c, keys
}

// signVote is node's vote for holder at (resource, epoch) in c, signed
// with key.
func signVote(c *Cluster, key ed25519.PrivateKey, node int, resource string, epoch uint64, holder Holder) SignedVote {
	st := c.Statement(resource, epoch, holder)
	return SignedVote{Node: node, Statement: st, IdentitySig: ed25519.Sign(key, st.VoteBytes())}
}

func TestVerifyVote(t *testing.T) {
	c, keys := voteCluster(t)
	good := signVote(c, keys[1], 2, "orders-db", 7, testHolder)
	with := func(f func(v *SignedVote)) SignedVote {
		v := good
		v.IdentitySig = append([]byte(nil), good.IdentitySig...)
		f(&v)
		return v
	}
	for _, tc := range []struct {
		name string
		vote SignedVote
		want error
	}{
		{"valid", good, nil},
		{"node index 0", with(func(v *SignedVote) { v.Node = 0 }), ErrBadVote},
		{"node index above N", with(func(v *SignedVote) { v.Node = 5 }), ErrBadVote},
		{"another cluster", with(func(v *SignedVote) { v.Statement.Cluster[0] ^= 1 }), ErrBadVote},
		{"signed by another member", with(func(v *SignedVote) { v.Node = 3 }), ErrBadVote},
		{"other holder than signed", with(func(v *SignedVote) { v.Statement.Holder = otherHolder }), ErrBadVote},
		{"other epoch than signed", with(func(v *SignedVote) { v.Statement.Epoch++ }), ErrBadVote},
		{"tampered signature", with(func(v *SignedVote) { v.IdentitySig[0] ^= 1 }), ErrBadVote},
		{"short signature", with(func(v *SignedVote) { v.IdentitySig = v.IdentitySig[:10] }), ErrBadVote},
		{"member without an Ed25519 peer ID", signVote(c, keys[0], 4, "orders-db", 7, testHolder), ErrPeerID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyVote(c, tc.vote)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrBadVote)
		})
	}
}

func TestVerifyEvidence(t *testing.T) {
	c, keys := voteCluster(t)
	a := signVote(c, keys[0], 1, "orders-db", 7, testHolder)
	b := signVote(c, keys[0], 1, "orders-db", 7, otherHolder)
	forged := b
	forged.IdentitySig = ed25519.Sign(keys[1], b.Statement.VoteBytes()) // node 2's key, not node 1's
	for _, tc := range []struct {
		name string
		ev   Evidence
		want error
	}{
		{"two holders at one epoch", Evidence{A: a, B: b}, nil},
		{"two sessions of one identity", Evidence{A: a, B: signVote(c, keys[0], 1, "orders-db", 7, sameIDHolder)}, nil},
		{"same vote twice", Evidence{A: a, B: a}, ErrNotEvidence},
		{"different epochs", Evidence{A: a, B: signVote(c, keys[0], 1, "orders-db", 8, otherHolder)}, ErrNotEvidence},
		{"different resources", Evidence{A: a, B: signVote(c, keys[0], 1, "orders-db2", 7, otherHolder)}, ErrNotEvidence},
		{"different nodes", Evidence{A: a, B: signVote(c, keys[1], 2, "orders-db", 7, otherHolder)}, ErrNotEvidence},
		{"second vote not signed by the node", Evidence{A: a, B: forged}, ErrBadVote},
		{"first vote not signed by the node", Evidence{A: forged, B: a}, ErrBadVote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyEvidence(c, tc.ev)
			if tc.want == nil {
				require.NoError(t, err)
				// Its wire form checks the same way, as an operator
				// would receive it.
				back, err := UnmarshalEvidence(tc.ev.Marshal())
				require.NoError(t, err)
				require.NoError(t, VerifyEvidence(c, back))
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestPeerIDKey(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	id := Ed25519PeerID(pub)
	require.True(t, strings.HasPrefix(id, "12D3KooW"), id)
	got, err := PeerIDKey(id)
	require.NoError(t, err)
	require.Equal(t, pub, got)
	for name, bad := range map[string]string{
		"empty":               "",
		"not base58":          "12D3KooW0OIl",
		"hashed (RSA) ID":     "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N",
		"leading zero digit":  "1" + id,
		"one digit dropped":   id[:len(id)-1],
		"too long":            id + id,
		"trailing whitespace": id + " ",
	} {
		key, err := PeerIDKey(bad)
		require.ErrorIs(t, err, ErrPeerID, name)
		require.Nil(t, key, name)
	}
	require.Panics(t, func() { Ed25519PeerID(pub[:31]) })
}

// FuzzPeerIDKey: a decode that succeeds re-encodes to its input; a failed
// one returns no key and wraps ErrPeerID.
func FuzzPeerIDKey(f *testing.F) {
	f.Add(Ed25519PeerID(make(ed25519.PublicKey, ed25519.PublicKeySize)))
	f.Add("QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		key, err := PeerIDKey(in)
		if err != nil {
			if key != nil {
				t.Fatalf("failed decode returned a key")
			}
			require.ErrorIs(t, err, ErrPeerID)
			return
		}
		if out := Ed25519PeerID(key); out != in {
			t.Fatalf("decode then encode changed the text: %q -> %q", in, out)
		}
	})
}
