package client

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
)

// TestVouching: a member is vouched for once its partial was in a token
// of exactly t partials that verified, and never again once one of its
// partials failed; a token of more than t partials vouches for nobody
// (one that was not interpolated may be invalid).
func TestVouching(t *testing.T) {
	c := &Client{t: 3, partials: map[int]partialRecord{}}
	round := func(idx ...int) *voteRound {
		r := &voteRound{c: c}
		for _, i := range idx {
			r.votes = append(r.votes, crypto.PartialSig{Index: i})
		}
		return r
	}
	require.False(t, c.vouched([]int{1, 2, 3}), "a new client vouches for nobody")
	c.vouch(round(1, 2, 3, 4))
	require.False(t, c.vouched([]int{1}), "more than t partials vouch for nobody")
	c.vouch(round(1, 2, 3))
	require.True(t, c.vouched([]int{1, 2, 3}))
	require.False(t, c.vouched([]int{1, 2, 4}), "member 4 never made a valid token")
	c.forged(2)
	require.False(t, c.vouched([]int{1, 2, 3}), "a member that forged is checked first")
	c.vouch(round(1, 2, 3))
	require.False(t, c.vouched([]int{2}), "for good")
	require.True(t, c.vouched([]int{1, 3}))
}
