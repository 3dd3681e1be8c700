package dkg

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/util/random"
	"go.dedis.ch/protobuf"

	"github.com/palisade-dev/palisade/crypto"
)

// TestWireSizes checks the wire constants against what the suite
// produces: a Schnorr signature is a 96-byte point and a 32-byte scalar,
// a response has a fixed size, the largest deal an honest dealer can
// make (t = crypto.MaxNodes commitments) fits MaxCipherSize, a larger
// ciphertext is refused both ways, and the largest justification round
// trips.
func TestWireSizes(t *testing.T) {
	require.Equal(t, 96, crypto.PublicKeySize)
	require.Equal(t, 32, crypto.ScalarSize)
	require.Equal(t, 128, SchnorrSignatureSize)
	ms := newMembers(t, 4)
	sig, err := signWith(ms[0].key, []byte("m"))
	require.NoError(t, err)
	require.Len(t, sig, SchnorrSignatureSize)
	require.Equal(t, crypto.PublicKeySize, g2suite.Point().MarshalSize())
	require.Equal(t, crypto.ScalarSize, g2suite.Scalar().MarshalSize())

	for i, m := range ms {
		cfg := Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3}
		cfg.Seed[0] = byte(i)
		d, err := New(cfg)
		require.NoError(t, err)
		m.dkg = d
	}
	deals, _, err := ms[0].dkg.Deals()
	require.NoError(t, err)
	resp, err := ms[1].dkg.ProcessDeal(deals[2])
	require.NoError(t, err)
	require.Len(t, resp, 2+4+SessionIDSize+4+1+SchnorrSignatureSize)

	// The largest deal: t = MaxNodes commitments.
	commits := make([]kyber.Point, crypto.MaxNodes)
	for i := range commits {
		commits[i] = g2suite.Point().Pick(random.New())
	}
	sid := bytes.Repeat([]byte{7}, SessionIDSize)
	big := &vss.Deal{SessionID: sid, SecShare: &share.PriShare{I: crypto.MaxNodes - 1, V: g2suite.Scalar().Pick(random.New())},
		T: crypto.MaxNodes, Commitments: commits}
	plain, err := protobuf.Encode(big)
	require.NoError(t, err)
	newPts, err := dkgPoints(pubs(ms))
	require.NoError(t, err)
	enc, err := sealDeal(ms[0].key, newPts, 1, plain)
	require.NoError(t, err)
	t.Logf("largest deal: %d bytes of ciphertext, cap %d", len(enc.Cipher), MaxCipherSize)
	require.LessOrEqual(t, len(enc.Cipher), MaxCipherSize)
	dd := &pedersen.Deal{Index: 0, Deal: enc}
	require.NoError(t, signDeal(ms[0].key, dd))
	b, err := encodeDeal(dd)
	require.NoError(t, err)
	back, err := decodeDeal(b)
	require.NoError(t, err)
	again, err := encodeDeal(back)
	require.NoError(t, err)
	require.Equal(t, b, again)

	// A ciphertext over the cap is refused by both ends.
	over := *enc
	over.Cipher = make([]byte, MaxCipherSize+1)
	_, err = encodeDeal(&pedersen.Deal{Deal: &over, Signature: dd.Signature})
	require.ErrorIs(t, err, ErrMalformed)
	at := 2 + 4 + crypto.PublicKeySize + SchnorrSignatureSize + NonceSize
	long := append(bytes.Clone(b[:at]), binary.BigEndian.AppendUint32(nil, MaxCipherSize+1)...)
	long = append(long, make([]byte, MaxCipherSize+1+SchnorrSignatureSize)...)
	_, err = decodeDeal(long)
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorContains(t, err, "cap")

	// The largest justification round trips.
	jj := &vss.Justification{SessionID: sid, Index: 1, Deal: big, Signature: sig}
	jb, err := encodeJustification(&pedersen.Justification{Index: 0, Justification: jj})
	require.NoError(t, err)
	require.Len(t, jb, 2+4+SessionIDSize+4+SessionIDSize+4+crypto.ScalarSize+4+2+crypto.MaxNodes*crypto.PublicKeySize+SchnorrSignatureSize)
	jback, err := decodeJustification(jb)
	require.NoError(t, err)
	jagain, err := encodeJustification(jback)
	require.NoError(t, err)
	require.Equal(t, jb, jagain)
	// One commitment more than MaxNodes is refused.
	jj.Deal = &vss.Deal{SessionID: sid, SecShare: big.SecShare, T: crypto.MaxNodes + 1, Commitments: append(commits, commits[0])}
	_, err = encodeJustification(&pedersen.Justification{Index: 0, Justification: jj})
	require.ErrorIs(t, err, ErrMalformed)
}
