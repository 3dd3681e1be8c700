package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestLocksAgree: a lease is listed only when t members report it alike,
// with the t-th longest time left; a liar's different report neither
// hides it nor adds another; leases past what every member covered wait
// for the next round.
func TestLocksAgree(t *testing.T) {
	s1 := protocol.SessionID{1}.Hash()
	s2 := protocol.SessionID{2}.Hash()
	lease := func(r string, s protocol.SessionHash, epoch uint64, left time.Duration) protocol.LeaseInfo {
		return protocol.LeaseInfo{Resource: r, HolderID: "12D3KooWA", Session: s, Epoch: epoch, Left: left}
	}
	pages := map[int]protocol.LocksReply{
		1: {Leases: []protocol.LeaseInfo{lease("a", s1, 3, 9*time.Second), lease("b", s1, 5, time.Second), lease("z", s1, 1, time.Second)}, Next: "z"},
		2: {Leases: []protocol.LeaseInfo{lease("a", s1, 3, 8*time.Second), lease("b", s1, 5, time.Second)}, Next: "m"},
		3: {Leases: []protocol.LeaseInfo{lease("a", s1, 3, 7*time.Second), lease("b", s2, 5, time.Second)}},
		// A liar: another session for "a", and a lease nobody else has.
		4: {Leases: []protocol.LeaseInfo{lease("a", s2, 3, time.Hour), lease("c", s1, 9, time.Hour)}},
	}
	hi, done := coverage(pages)
	require.False(t, done)
	require.Equal(t, "m", hi, "the lowest Next among the members")
	got, unconfirmed := agree(pages, hi, done, 3)
	require.Equal(t, []LeaseReport{{Resource: "a", HolderID: "12D3KooWA", Session: s1, Epoch: 3, Left: 7 * time.Second, Reports: 3}}, got)
	require.Equal(t, 2, unconfirmed, `"b" (2 against 1) and "c" (1): fewer than t alike; "z" is past m`)

	// Every member at its end: everything counts.
	for i, p := range pages {
		p.Next = ""
		pages[i] = p
	}
	hi, done = coverage(pages)
	require.True(t, done)
	_, unconfirmed = agree(pages, hi, done, 3)
	require.Equal(t, 3, unconfirmed)
}

// TestLocksCheckPage: a page that lists a resource at or before the
// cursor, or whose Next does not move on, is refused.
func TestLocksCheckPage(t *testing.T) {
	l := protocol.LeaseInfo{Resource: "b", HolderID: "h"}
	require.NoError(t, checkPage(protocol.LocksReply{Leases: []protocol.LeaseInfo{l}, Next: "c"}, "a"))
	require.ErrorIs(t, checkPage(protocol.LocksReply{Leases: []protocol.LeaseInfo{l}}, "b"), errBadPage)
	require.ErrorIs(t, checkPage(protocol.LocksReply{Next: "a"}, "a"), errBadPage)
	require.NoError(t, checkPage(protocol.LocksReply{}, "a"))
}
