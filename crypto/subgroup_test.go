package crypto

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
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
		_, err = bls12381.DecodeG2(pub[:])
		require.NoError(t, err)

		bad := bls12381test.NonSubgroupG2(uint64(1 + 100*i))
		_, err = ParsePublicKey(bad[:])
		require.ErrorIs(t, err, ErrNotInSubgroup)
		require.ErrorIs(t, err, ErrMalformedPoint)
		_, err = NewGroupKey(4, [][]byte{pub[:], bad[:], pub[:]})
		require.ErrorIs(t, err, ErrNotInSubgroup)
		// The kyber adapter refuses it too, so no kyber point of this
		// suite is outside the subgroup.
		require.Error(t, suite.G2().Point().UnmarshalBinary(bad[:]))
	}
}
