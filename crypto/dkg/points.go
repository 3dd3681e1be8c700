package dkg

import (
	"fmt"

	"go.dedis.ch/kyber/v3"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
)

// g2suite is the BLS12-381 suite over G2, where ceremony keys, commitments and
// Schnorr signatures live (the group of crypto.PublicKey).
var g2suite = bls12381.NewSuiteG2()

// decodeG2Subgroup decodes a G2 point that arrives from another party as
// crypto.ParsePublicKey does: canonical, not the identity, in the
// prime-order subgroup (a subgroup failure wraps crypto.ErrNotInSubgroup).
func decodeG2Subgroup(b []byte) (kyber.Point, error) {
	if _, err := crypto.ParsePublicKey(b); err != nil {
		return nil, err
	}
	return decodeG2(b)
}

// decodeG2 decodes a G2 point already checked once (a configured key).
func decodeG2(b []byte) (kyber.Point, error) {
	p := g2suite.Point()
	if err := p.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: %w", crypto.ErrMalformedPoint, err)
	}
	return p, nil
}

// encodePoints marshals points (marshalling a G2 point cannot fail).
func encodePoints(pts []kyber.Point) [][]byte {
	out := make([][]byte, len(pts))
	for i, p := range pts {
		out[i], _ = p.MarshalBinary()
	}
	return out
}

// groupCommits returns a trusted group key's commitments as points.
func groupCommits(g *crypto.GroupKey) ([]kyber.Point, error) {
	cs := g.Commitments()
	out := make([]kyber.Point, len(cs))
	for i, c := range cs {
		p, err := decodeG2(c)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// shareScalar returns a share's secret scalar, through its encoding (a
// big-endian u16 index, then the scalar).
func shareScalar(s *crypto.Share) (kyber.Scalar, error) {
	b, err := s.MarshalBinary()
	if err != nil {
		return nil, err
	}
	v := g2suite.Scalar()
	if err := v.UnmarshalBinary(b[2:]); err != nil {
		return nil, fmt.Errorf("%w: share: %w", ErrConfig, err)
	}
	return v, nil
}

// newShare builds the share of index (1-based) with secret v.
func newShare(index int, v kyber.Scalar) (*crypto.Share, error) {
	b, err := v.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return crypto.ParseShare(append([]byte{byte(index >> 8), byte(index)}, b...))
}
