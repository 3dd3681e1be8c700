package dkg

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDKGCheckRelayed: relayed responses and justifications are checked
// without changing the DKG's state: a bad signature, a response relabelled
// to another dealer and a justification for another session are refused;
// the genuine ones pass, before and after a forged copy was refused.
func TestDKGCheckRelayed(t *testing.T) {
	ms := newMembers(t, 4)
	for i, m := range ms {
		cfg := Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3}
		cfg.Seed[0] = byte(i) // distinct polynomials
		d, err := New(cfg)
		require.NoError(t, err)
		m.dkg = d
	}
	resp := map[[2]int][]byte{} // (dealer, member) 0-based
	for di, m := range ms {
		deals, _, err := m.dkg.Deals()
		require.NoError(t, err)
		for to, b := range deals {
			r, err := ms[to-1].dkg.ProcessDeal(b)
			require.NoError(t, err)
			resp[[2]int{di, to - 1}] = r
		}
	}
	checker := ms[3].dkg
	genuine := resp[[2]int{0, 1}]
	r, err := decodeResponse(genuine)
	require.NoError(t, err)
	// Bad signature: another member's signature on the same statement.
	forged := *r.Response
	forged.Signature, err = signWith(ms[2].key, forged.Hash(g2suite))
	require.NoError(t, err)
	r.Response = &forged
	fb, err := encodeResponse(r)
	require.NoError(t, err)
	_, err = checker.CheckResponse(fb)
	require.ErrorIs(t, err, ErrForged)
	// Relabelled: member 2's genuine response to dealer 1, labelled as its
	// response to dealer 3.
	r, _ = decodeResponse(genuine)
	r.Index = 2
	rb, err := encodeResponse(r)
	require.NoError(t, err)
	_, err = checker.CheckResponse(rb)
	require.ErrorIs(t, err, ErrSession)
	// Out of range.
	r, _ = decodeResponse(genuine)
	r.Index = 9
	rb, _ = encodeResponse(r)
	_, err = checker.CheckResponse(rb)
	require.ErrorIs(t, err, ErrForged)
	// The genuine copy still passes, and processing works.
	s, err := checker.CheckResponse(genuine)
	require.NoError(t, err)
	require.Equal(t, Slot{Dealer: 0, Member: 1, SessionID: s.SessionID}, s)
	_, err = checker.ProcessResponse(genuine)
	require.NoError(t, err)

	// Justifications: dealer 1's, for member 3, under its real session.
	v := ms[0].dkg.gen.Verifiers()[0]
	j := signedJustification(t, ms[0], v.SessionID(), v.Commits(), 2)
	s, err = checker.CheckJustification(j)
	require.NoError(t, err)
	require.Equal(t, uint32(0), s.Dealer)
	require.Equal(t, uint32(2), s.Member)
	// Signed by another dealer's key.
	jf := signedJustification(t, &memMember{key: ms[1].key, dkg: ms[0].dkg}, v.SessionID(), v.Commits(), 2)
	_, err = checker.CheckJustification(jf)
	require.ErrorIs(t, err, ErrForged)
	// Signed by the dealer, but for commitments that are not its session's:
	// malformed whoever checks it.
	other := ms[1].dkg.gen.Verifiers()[1]
	jw := signedJustification(t, ms[0], v.SessionID(), other.Commits(), 2)
	_, err = checker.CheckJustification(jw)
	require.ErrorIs(t, err, ErrForged)
	// Dealer 2's well-formed justification relabelled as dealer 1's: the
	// session hashes dealer 2's key.
	j2 := signedJustification(t, ms[1], other.SessionID(), other.Commits(), 2)
	dj, err := decodeJustification(j2)
	require.NoError(t, err)
	dj.Index = 0
	j2b, err := encodeJustification(dj)
	require.NoError(t, err)
	_, err = checker.CheckJustification(j2b)
	require.ErrorIs(t, err, ErrForged)
	// Garbage.
	_, err = checker.CheckJustification([]byte{1, 3, 0})
	require.ErrorIs(t, err, ErrForged)
}
