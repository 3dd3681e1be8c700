package client

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestClaimOf: a claim is made of the f+1 places of the lowest cohorts
// whenever the members disagree, up (a member put the session one cohort
// later) or back (a member put it earlier than f+1 members did: its own
// place is in the claim, and the claimed cohort is later than it); none
// when every member gives the same cohort or too few gave a place.
func TestClaimOf(t *testing.T) {
	places := func(cohorts ...uint64) []protocol.SignedPlace {
		var out []protocol.SignedPlace
		for i, c := range cohorts {
			out = append(out, protocol.SignedPlace{Place: protocol.Place{Cohort: c, Member: i + 1}})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		cohorts []uint64
		want    uint64 // claimed cohort, 0 for no claim
	}{
		{"all alike", []uint64{2, 2, 2, 2}, 0},
		{"one later: move it up", []uint64{2, 2, 3, 2}, 2},
		{"one earlier: move it back", []uint64{2, 1, 2, 2}, 2},
		{"two earlier: f+1 vouch for it, the others move up", []uint64{1, 2, 1, 2}, 1},
		{"too few places", []uint64{1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := claimOf(places(tc.cohorts...), 2)
			if tc.want == 0 {
				require.Nil(t, claim)
				return
			}
			require.Len(t, claim, 2)
			require.Equal(t, tc.want, protocol.ClaimCohort(claim))
		})
	}
}
