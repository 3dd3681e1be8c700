package crypto

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto/internal/g2test"
)

func TestG2SubgroupCheck(t *testing.T) {
	rnd := seeded(1)
	for i := range 8 {
		// Honest points: multiples of the generator, DKG keys, commitments.
		s, err := PickScalar(rnd)
		require.NoError(t, err)
		var pub PublicKey
		pb, _ := suite.G2().Point().Mul(s, nil).MarshalBinary()
		copy(pub[:], pb)
		_, err = ParsePublicKey(pub[:])
		require.NoError(t, err)
		p, err := decodeG2(pub[:])
		require.NoError(t, err)
		require.True(t, InG2Subgroup(p))

		bad := g2test.OutsideSubgroup(t, int64(1+100*i))
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
