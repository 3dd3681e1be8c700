package dkg

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/util/random"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/internal/g2test"
)

// signedJustification builds dealer m's signed justification revealing a
// (random) share for new member idx (0-based) under the given session.
func signedJustification(t testing.TB, m *memMember, sid []byte, commits []kyber.Point, idx int) []byte {
	t.Helper()
	jj := &vss.Justification{SessionID: sid, Index: uint32(idx), Deal: &vss.Deal{
		SessionID: sid, SecShare: &share.PriShare{I: idx, V: g2suite.Scalar().Pick(random.New())},
		T: uint32(len(commits)), Commitments: commits,
	}}
	sig, err := signWith(m.key, jj.Hash(g2suite))
	require.NoError(t, err)
	jj.Signature = sig
	b, err := encodeJustification(&pedersen.Justification{Index: uint32(m.dkg.oldIdx), Justification: jj})
	require.NoError(t, err)
	return b
}

// TestDKGPointsOutsideSubgroupRefused: a dealer's deal whose commitments
// leave the subgroup is refused before kyber stores it, so the real deal
// still gets in; a justification or response carrying such a point does
// not decode; a ceremony key outside the subgroup is refused.
func TestDKGPointsOutsideSubgroupRefused(t *testing.T) {
	ms := newMembers(t, 4)
	for _, m := range ms {
		d, err := New(Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3})
		require.NoError(t, err)
		m.dkg = d
	}
	deals, _, err := ms[0].dkg.Deals()
	require.NoError(t, err)
	// Dealer 1 forges a deal to member 2: its own commitments with one
	// point moved outside the subgroup, correctly encrypted and signed.
	v := ms[0].dkg.gen.Verifiers()[0]
	commits := append([]kyber.Point(nil), v.Commits()...)
	badPt := g2suite.Point()
	require.NoError(t, badPt.UnmarshalBinary(g2test.OutsideSubgroup(t, 7)))
	commits[2] = badPt
	real, err := decodeDeal(deals[2])
	require.NoError(t, err)
	forgedDeal := *real
	good := &vss.Deal{
		SessionID:   ms[0].dkg.sessionID(ms[0].key.pub, commits, 3),
		SecShare:    &share.PriShare{I: 1, V: g2suite.Scalar().Pick(random.New())},
		T:           3,
		Commitments: commits,
	}
	newPts, _ := dkgPoints(pubs(ms))
	forgedDeal.Deal, err = encryptDeal(ms[0].key, newPts, 1, good)
	require.NoError(t, err)
	require.NoError(t, signDeal(ms[0].key, &forgedDeal))
	fb, err := encodeDeal(&forgedDeal)
	require.NoError(t, err)
	_, err = ms[1].dkg.ProcessDeal(fb)
	require.ErrorIs(t, err, crypto.ErrNotInSubgroup)
	require.Nil(t, ms[1].dkg.knownSession(0), "nothing stored")
	resp, err := ms[1].dkg.ProcessDeal(deals[2])
	require.NoError(t, err, "the real deal still gets in")
	r, err := decodeResponse(resp)
	require.NoError(t, err)
	require.Equal(t, vss.StatusApproval, r.Response.Status)

	// A justification with a commitment outside the subgroup.
	j := signedJustification(t, ms[0], v.SessionID(), v.Commits(), 2)
	jb := append([]byte(nil), j...)
	off := len(jb) - SchnorrSignatureSize - crypto.PublicKeySize
	copy(jb[off:], g2test.OutsideSubgroup(t, 11))
	_, err = decodeJustification(jb)
	require.ErrorIs(t, err, crypto.ErrNotInSubgroup)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = ms[1].dkg.CheckJustification(jb)
	require.ErrorIs(t, err, ErrForged)
	// A response whose signature point is outside the subgroup.
	rb := append([]byte(nil), resp...)
	copy(rb[len(rb)-SchnorrSignatureSize:], g2test.OutsideSubgroup(t, 13))
	_, err = decodeResponse(rb)
	require.ErrorIs(t, err, crypto.ErrNotInSubgroup)
	// A ceremony key outside the subgroup.
	keys := pubs(ms)
	copy(keys[3][:], g2test.OutsideSubgroup(t, 17))
	_, err = New(Config{Key: ms[0].key, NewNodes: keys, Threshold: 3})
	require.ErrorIs(t, err, ErrConfig)
}
