package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// TestSessionsExcludeEachOther: a lock belongs to a session, not to an
// identity. alice2 is a second process with alice's key (a replica sharing
// one credential): it gets Busy while alice's session holds the lease, is
// never handed alice's vote by a re-send, and cannot renew, abandon or
// release alice's lease. Before sessions, 4 of 6 processes with one key
// printed the same token (issue 10, item 1).
func TestSessionsExcludeEachOther(t *testing.T) {
	committed := stateCommitted() // alice's committed lease at 5, until 10 s
	voted := stateVoted()         // alice's uncommitted vote at 5, until 2 s

	t.Run("another session of the same identity is busy", func(t *testing.T) {
		for _, rec := range []Record{committed, voted} {
			o := stateRules.Acquire(rec, alice2, 6, 0, nil, stateAt(time.Second))
			require.Equal(t, protocol.KindBusy, o.Kind)
			require.Equal(t, alice, o.Holder)
			require.Equal(t, !rec.Lease.Committed, o.Pending)
			require.False(t, o.Changed)
		}
	})
	t.Run("a re-send is recognised by session, not identity", func(t *testing.T) {
		o := stateRules.Acquire(voted, alice, 5, 0, nil, stateAt(time.Second))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.True(t, o.Repeat, "the same session gets its vote back")

		o = stateRules.Acquire(voted, alice2, 5, 0, nil, stateAt(time.Second))
		require.Equal(t, protocol.KindRefuse, o.Kind, "another session never gets alice's vote")
		require.Equal(t, protocol.CodeStale, o.Code)
		require.False(t, o.Repeat)
	})
	t.Run("after the lease lapses the other session votes at a new epoch", func(t *testing.T) {
		o := stateRules.Acquire(committed, alice2, 6, 0, nil, stateAt(11*time.Second))
		require.Equal(t, protocol.KindVote, o.Kind)
		require.Equal(t, alice2, o.Next.Lease.Holder)
		require.Equal(t, alice2, o.Next.VoteHolder)
	})
	t.Run("renew, abandon and release name the session", func(t *testing.T) {
		o := stateRules.Renew(committed, alice2, 5, time.Minute, stateAt(time.Second))
		require.Equal(t, protocol.CodeNotHolder, o.Code)
		o = stateRules.Abandon(voted, alice2, 5, stateAt(time.Second))
		require.Equal(t, protocol.CodeNotHolder, o.Code)
		o = stateRules.Release(committed, stateTok(5, alice2), ownerShown, stateAt(time.Second))
		require.Equal(t, protocol.CodeNotHolder, o.Code)
		require.Equal(t, alice, o.Next.Lease.Holder, "alice's lease is untouched")

		o = stateRules.Renew(committed, alice, 5, time.Minute, stateAt(time.Second))
		require.Zero(t, o.Code)
		o = stateRules.Release(committed, stateTok(5, alice), ownerShown, stateAt(time.Second))
		require.Zero(t, o.Code)
		require.Zero(t, o.Next.Lease.Holder)
	})
	t.Run("commit starts the lease of the token's session", func(t *testing.T) {
		o := stateRules.Commit(voted, alice.ID, stateTok(5, alice), ownerShown, 0, stateAt(time.Second))
		require.Zero(t, o.Code)
		require.Equal(t, alice, o.Next.Lease.Holder)
		o = stateRules.Acquire(o.Next, alice2, 6, 0, nil, stateAt(2*time.Second))
		require.Equal(t, protocol.KindBusy, o.Kind)
	})
}
