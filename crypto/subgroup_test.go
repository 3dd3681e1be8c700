package crypto

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/pairing/bn256"
	"go.dedis.ch/kyber/v3/share"
	dkg "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/util/random"
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
	b, err := EncodeDKGJustification(&dkg.Justification{Index: uint32(m.dkg.oldIdx), Justification: jj})
	require.NoError(t, err)
	return b
}

// fp2 is a + b·i in GF(p²) with i² = −1, as bn256's gfP2 (whose encoding
// is the i coefficient first, then the constant).
type fp2 struct{ a, b *big.Int }

var bnP, _ = new(big.Int).SetString("65000549695646603732796438742359905742825358107623003571877145026864184071783", 10)

func (x fp2) add(y fp2) fp2 {
	return fp2{new(big.Int).Mod(new(big.Int).Add(x.a, y.a), bnP), new(big.Int).Mod(new(big.Int).Add(x.b, y.b), bnP)}
}

func (x fp2) sub(y fp2) fp2 {
	return fp2{new(big.Int).Mod(new(big.Int).Sub(x.a, y.a), bnP), new(big.Int).Mod(new(big.Int).Sub(x.b, y.b), bnP)}
}

func (x fp2) mul(y fp2) fp2 {
	ac := new(big.Int).Mul(x.a, y.a)
	bd := new(big.Int).Mul(x.b, y.b)
	ad := new(big.Int).Mul(x.a, y.b)
	bc := new(big.Int).Mul(x.b, y.a)
	return fp2{new(big.Int).Mod(ac.Sub(ac, bd), bnP), new(big.Int).Mod(ad.Add(ad, bc), bnP)}
}

func (x fp2) equal(y fp2) bool { return x.a.Cmp(y.a) == 0 && x.b.Cmp(y.b) == 0 }

// sqrtFp is a square root in GF(p), p ≡ 3 (mod 4), or nil.
func sqrtFp(x *big.Int) *big.Int {
	e := new(big.Int).Add(bnP, big.NewInt(1))
	e.Rsh(e, 2)
	r := new(big.Int).Exp(x, e, bnP)
	if new(big.Int).Mod(new(big.Int).Mul(r, r), bnP).Cmp(new(big.Int).Mod(x, bnP)) != 0 {
		return nil
	}
	return r
}

// sqrt is a square root in GF(p²) by the norm method, or false.
func (x fp2) sqrt() (fp2, bool) {
	norm := new(big.Int).Mod(new(big.Int).Add(new(big.Int).Mul(x.a, x.a), new(big.Int).Mul(x.b, x.b)), bnP)
	n := sqrtFp(norm)
	if n == nil {
		return fp2{}, false
	}
	half := new(big.Int).ModInverse(big.NewInt(2), bnP)
	for _, s := range []*big.Int{n, new(big.Int).Neg(n)} {
		c := new(big.Int).Mod(new(big.Int).Mul(new(big.Int).Add(x.a, s), half), bnP)
		a := sqrtFp(c)
		if a == nil || a.Sign() == 0 {
			continue
		}
		b := new(big.Int).Mul(x.b, new(big.Int).ModInverse(new(big.Int).Lsh(a, 1), bnP))
		r := fp2{a, b.Mod(b, bnP)}
		if r.mul(r).equal(x) {
			return r, true
		}
	}
	return fp2{}, false
}

func fp2From(b []byte) fp2 {
	return fp2{new(big.Int).SetBytes(b[32:64]), new(big.Int).SetBytes(b[0:32])}
}

func (x fp2) bytes() []byte {
	out := make([]byte, 64)
	x.b.FillBytes(out[:32])
	x.a.FillBytes(out[32:])
	return out
}

// outsideSubgroup returns the canonical encoding of a point on bn256's G2
// twist that is not in the prime-order subgroup: the twist's constant is
// derived from the generator (b = y² − x³), then x-coordinates are tried
// from tag upwards until x³ + b is a square. No cofactor is cleared, so
// the point is in the r-torsion only with probability about 1/(2p−r).
func outsideSubgroup(t testing.TB, tag int64) []byte {
	t.Helper()
	gen, err := suite.G2().Point().Base().MarshalBinary()
	require.NoError(t, err)
	gx, gy := fp2From(gen[:64]), fp2From(gen[64:])
	b := gy.mul(gy).sub(gx.mul(gx).mul(gx))
	for i := tag; ; i++ {
		x := fp2{big.NewInt(i), big.NewInt(1)}
		y, ok := x.mul(x).mul(x).add(b).sqrt()
		if !ok {
			continue
		}
		enc := append(x.bytes(), y.bytes()...)
		p := bn256.NewSuiteG2().Point()
		require.NoError(t, p.UnmarshalBinary(enc), "kyber accepts any point on the twist")
		again, _ := p.MarshalBinary()
		require.Equal(t, enc, again, "canonical")
		if InG2Subgroup(p) {
			continue // astronomically unlikely
		}
		return enc
	}
}

func TestG2SubgroupCheck(t *testing.T) {
	rnd := testRand(t)
	for i := range 8 {
		// Honest points: multiples of the generator, DKG keys, commitments.
		k, err := GenerateDKGKey(rnd)
		require.NoError(t, err)
		pub := k.Public()
		_, err = ParsePublicKey(pub[:])
		require.NoError(t, err)
		p, err := decodeG2(pub[:])
		require.NoError(t, err)
		require.True(t, InG2Subgroup(p))

		bad := outsideSubgroup(t, int64(1+100*i))
		q, err := decodeG2(bad)
		require.NoError(t, err, "on the curve, canonical: the old decoder accepts it")
		require.False(t, InG2Subgroup(q))
		_, err = ParsePublicKey(bad)
		require.ErrorIs(t, err, ErrNotInSubgroup)
		_, err = decodeG2Subgroup(bad)
		require.ErrorIs(t, err, ErrNotInSubgroup)
		_, err = NewGroupKey(4, [][]byte{pub[:], bad, pub[:]})
		require.ErrorIs(t, err, ErrNotInSubgroup)
		// r·q ≠ O, but the point is a genuine curve point: adding a
		// subgroup point keeps it outside, doubling keeps it on the curve.
		require.False(t, InG2Subgroup(suite.G2().Point().Add(q, p)))
		require.True(t, InG2Subgroup(suite.G2().Point().Mul(suite.G2().Scalar().SetInt64(int64(i+2)), p)))
	}
}

// TestDKGPointsOutsideSubgroupRefused: a dealer's deal whose commitments
// leave the subgroup is refused before kyber stores it, so the real deal
// still gets in; a justification or response carrying such a point does
// not decode; a ceremony key outside the subgroup is refused.
func TestDKGPointsOutsideSubgroupRefused(t *testing.T) {
	ms := newMembers(t, 4)
	for _, m := range ms {
		d, err := NewDKG(DKGConfig{Key: m.key, NewNodes: pubs(ms), Threshold: 3})
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
	require.NoError(t, badPt.UnmarshalBinary(outsideSubgroup(t, 7)))
	commits[2] = badPt
	real, err := DecodeDKGDeal(deals[2])
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
	fb, err := EncodeDKGDeal(&forgedDeal)
	require.NoError(t, err)
	_, err = ms[1].dkg.ProcessDeal(fb)
	require.ErrorIs(t, err, ErrNotInSubgroup)
	require.Nil(t, ms[1].dkg.knownSession(0), "nothing stored")
	resp, err := ms[1].dkg.ProcessDeal(deals[2])
	require.NoError(t, err, "the real deal still gets in")
	r, err := DecodeDKGResponse(resp)
	require.NoError(t, err)
	require.Equal(t, vss.StatusApproval, r.Response.Status)

	// A justification with a commitment outside the subgroup.
	j := signedJustification(t, ms[0], v.SessionID(), v.Commits(), 2)
	jb := append([]byte(nil), j...)
	off := len(jb) - SchnorrSignatureSize - PublicKeySize
	copy(jb[off:], outsideSubgroup(t, 11))
	_, err = DecodeDKGJustification(jb)
	require.ErrorIs(t, err, ErrNotInSubgroup)
	require.ErrorIs(t, err, ErrMalformedDKGMessage)
	_, err = ms[1].dkg.CheckJustification(jb)
	require.ErrorIs(t, err, ErrDKGForged)
	// A response whose signature point is outside the subgroup.
	rb := append([]byte(nil), resp...)
	copy(rb[len(rb)-SchnorrSignatureSize:], outsideSubgroup(t, 13))
	_, err = DecodeDKGResponse(rb)
	require.ErrorIs(t, err, ErrNotInSubgroup)
	// A ceremony key outside the subgroup.
	keys := pubs(ms)
	copy(keys[3][:], outsideSubgroup(t, 17))
	_, err = NewDKG(DKGConfig{Key: ms[0].key, NewNodes: keys, Threshold: 3})
	require.ErrorIs(t, err, ErrDKGConfig)
}
