package node

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
)

// Tests of the session-key rules (issue 20: sessions that cannot be
// borrowed): Release, Commit, Renew and Abandon act on a session only with
// its key, or, for Release of a lease committed with TokenRelease, with a
// genuine token; a token whose signature was not checked never does
// without the key.

// TestReleaseRuleNeedsKeyOrGenuineToken: the pure rule.
func TestReleaseRuleNeedsKeyOrGenuineToken(t *testing.T) {
	at := stateAt(time.Second)
	committed := stateRules.Commit(stateVoted(), alice.ID, stateTok(5, alice), ownerShown, 0, at).Next
	require.False(t, committed.Lease.TokenRelease, "a Commit with the key and without TokenRelease")
	tokenReleasable := stateRules.Commit(stateVoted(), alice.ID, stateTok(5, alice), Shown{Verified: true, Key: true, TokenRelease: true}, 0, at).Next
	require.True(t, tokenReleasable.Lease.TokenRelease)

	tests := []struct {
		name    string
		rec     Record
		shown   Shown
		code    protocol.Code // CodeOK: released
		message string
	}{
		{"key and checked token", committed, ownerShown, protocol.CodeOK, ""},
		{"key, token not checked (own statement)", committed, Shown{Key: true}, protocol.CodeOK, ""},
		{"no key, token not checked", committed, Shown{}, protocol.CodeBadRequest, "no session key"},
		{"no key, token not checked, token release asked", tokenReleasable, Shown{}, protocol.CodeBadRequest, "no session key"},
		{"no key, genuine token, key-only lease", committed, Shown{Verified: true}, protocol.CodeNotHolder, ErrKeyOnlyMessage},
		{"no key, genuine token, token release asked", tokenReleasable, Shown{Verified: true}, protocol.CodeOK, ""},
		{"no key, genuine token, uncommitted vote", stateVoted(), Shown{Verified: true}, protocol.CodeNotHolder, ErrKeyOnlyMessage},
		{"key, uncommitted vote", stateVoted(), Shown{Key: true}, protocol.CodeOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stateRules.Release(tt.rec, stateTok(5, alice), tt.shown, at)
			if tt.code == protocol.CodeOK {
				require.NotEqual(t, protocol.KindRefuse, o.Kind, o.Message)
				require.True(t, o.Next.Lease.Holder.IsZero())
				require.EqualValues(t, 5, o.Next.Released)
				return
			}
			require.Equal(t, protocol.KindRefuse, o.Kind)
			require.Equal(t, tt.code, o.Code)
			require.Contains(t, o.Message, tt.message)
			require.Equal(t, tt.rec.Lease, o.Next.Lease, "a refused Release ends no lease")
			if !tt.shown.Verified {
				require.False(t, o.Changed, "an unchecked token teaches nothing")
			}
		})
	}

	// The audit says when a lease ended by token alone.
	o := stateRules.Release(tokenReleasable, stateTok(5, alice), Shown{Verified: true}, at)
	require.Equal(t, "by token", o.Audit[len(o.Audit)-1].Detail)
}

// TestCommitWithoutKeyLoosensNothing: a Commit without the key neither
// takes the unchecked path nor turns a key-only lease into one a token
// releases, even if it asks to.
func TestCommitWithoutKeyLoosensNothing(t *testing.T) {
	at := stateAt(time.Second)
	o := stateRules.Commit(stateVoted(), alice.ID, stateTok(5, alice), Shown{TokenRelease: true}, 0, at)
	require.Equal(t, protocol.CodeBadRequest, o.Code, "an unchecked token without the key")

	committed := stateRules.Commit(stateVoted(), alice.ID, stateTok(5, alice), ownerShown, 0, at).Next
	again := stateRules.Commit(committed, alice.ID, stateTok(5, alice), Shown{Verified: true, TokenRelease: true}, 0, at)
	require.NotEqual(t, protocol.KindRefuse, again.Kind)
	require.False(t, again.Next.Lease.TokenRelease, "a re-sent Commit without the key keeps the lease key-only")

	fresh := stateRules.Commit(stateVoted(), alice.ID, stateTok(5, alice), Shown{Verified: true, TokenRelease: true}, 0, at)
	require.False(t, fresh.Next.Lease.TokenRelease, "TokenRelease is honoured only with the key")

	// The lease's owner may change its mind, with the key.
	loosened := stateRules.Commit(committed, alice.ID, stateTok(5, alice), Shown{Key: true, TokenRelease: true}, 0, at)
	require.True(t, loosened.Next.Lease.TokenRelease)
}

// TestRecordBeforeSessionKeysFailsClosed: a lease written before session
// keys has no token_release field; it reads as one that only its session's
// key ends early, so a token alone (even a genuine one) does not. Leases
// that asked for token release keep the field.
func TestRecordBeforeSessionKeysFailsClosed(t *testing.T) {
	// The lease as the previous release wrote it.
	old := []byte(`{"holder":"alice/a1000000000000000000000000000000","epoch":5,"expires":"2026-01-01T00:00:10Z","committed":true}`)
	var l Lease
	require.NoError(t, json.Unmarshal(old, &l))
	require.Equal(t, alice, l.Holder)
	require.True(t, l.Committed)
	require.False(t, l.TokenRelease)
	rec := Record{Resource: stateRes, LastEpoch: 5, Lease: l}
	o := stateRules.Release(rec, stateTok(5, alice), Shown{Verified: true}, stateAt(time.Second))
	require.Equal(t, protocol.CodeNotHolder, o.Code)
	require.Equal(t, l, o.Next.Lease)

	b, err := json.Marshal(Lease{Holder: alice, Epoch: 5, Committed: true, TokenRelease: true})
	require.NoError(t, err)
	require.Contains(t, string(b), `"token_release":true`)
	b, err = json.Marshal(Lease{Holder: alice, Epoch: 5, Committed: true})
	require.NoError(t, err)
	require.NotContains(t, string(b), "token_release", "records of key-only leases read the same in the previous release")
}

// TestReleaseThroughHandler: the driver's side, through node 1's Release
// and Commit handlers: which tokens cost a pairing, which end the lease.
func TestReleaseThroughHandler(t *testing.T) {
	lc := newLimitsCluster(t)
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1(t, NewMemStore(), Limits{}, "")}
	me := lc.everything
	h := limitsHolder(me.String())
	key := keyOf(h)
	sibling := testKey(99) // a key of the same identity that owns another session

	acquired := func(res string, tokenRelease bool) protocol.Token {
		t.Helper()
		require.Equal(t, protocol.KindVote, d.acquire(me, h, res, 1).Kind)
		tok := d.token(lc.cluster.Statement(res, 1, h))
		require.Equal(t, protocol.CodeOK, d.commitReq(me, protocol.CommitRequest{Token: tok, Key: key, TokenRelease: tokenRelease}).Code)
		return tok
	}
	live := func(res string) bool {
		l := d.record(res).Lease
		return l.Holder == h && l.Committed
	}

	// A library Lock's lease (no TokenRelease).
	tok := acquired("orders-lib", false)
	checks := d.n.LimitStats().TokenChecks
	a := d.releaseReq(me, protocol.ReleaseRequest{Token: d.forged(tok)})
	require.Equal(t, protocol.CodeBadRequest, a.Code, "a garbage signature without the key: %s", a.Message)
	require.Equal(t, checks+1, d.n.LimitStats().TokenChecks, "checked, not taken on trust")
	require.True(t, live("orders-lib"))
	a = d.releaseReq(me, protocol.ReleaseRequest{Token: tok})
	require.Equal(t, protocol.CodeNotHolder, a.Code)
	require.Equal(t, ErrKeyOnlyMessage, a.Message)
	require.True(t, live("orders-lib"))
	a = d.releaseReq(me, protocol.ReleaseRequest{Token: tok, Key: sibling})
	require.Equal(t, protocol.CodeNotHolder, a.Code)
	require.Equal(t, ErrWrongKeyMessage, a.Message)
	require.True(t, live("orders-lib"))
	// A Commit without the key with a garbage signature extends nothing.
	before := d.record("orders-lib").Lease.Expires
	require.Equal(t, protocol.CodeBadRequest, d.commitReq(me, protocol.CommitRequest{Token: d.forged(tok), TTL: time.Hour}).Code)
	require.Equal(t, before, d.record("orders-lib").Lease.Expires)
	// Control: the key ends it, even with the signature unchecked.
	checks = d.n.LimitStats().TokenChecks
	require.Equal(t, protocol.CodeOK, d.releaseReq(me, protocol.ReleaseRequest{Token: d.forged(tok), Key: key}).Code)
	require.Equal(t, checks, d.n.LimitStats().TokenChecks, "the owner's Release costs no pairing")
	require.False(t, live("orders-lib"))

	// A lease acquired for release by token (palisade acquire).
	tok = acquired("orders-cli", true)
	require.Equal(t, protocol.CodeBadRequest, d.releaseReq(me, protocol.ReleaseRequest{Token: d.forged(tok)}).Code, "a garbage signature")
	require.True(t, live("orders-cli"))
	checks = d.n.LimitStats().TokenChecks
	require.Equal(t, protocol.CodeOK, d.releaseReq(me, protocol.ReleaseRequest{Token: tok}).Code, "the genuine token")
	require.Equal(t, checks+1, d.n.LimitStats().TokenChecks, "one pairing")
	require.False(t, live("orders-cli"))

	// A token byte for byte the certified one the node holds is genuine
	// without another pairing.
	tok = acquired("orders-cert", true)
	require.Equal(t, protocol.CodeOK, d.commitReq(lc.ordersOnly, protocol.CommitRequest{Token: tok}).Code, "relayed: checked and recorded")
	require.Equal(t, &tok, d.record("orders-cert").Certified)
	checks = d.n.LimitStats().TokenChecks
	require.Equal(t, protocol.CodeOK, d.releaseReq(me, protocol.ReleaseRequest{Token: tok}).Code)
	require.Equal(t, checks, d.n.LimitStats().TokenChecks)
	require.False(t, live("orders-cert"))
}

// TestForgedTokenKeepsWaiterPlace: a sibling process of a waiter's
// identity cannot take the waiter's place in line away with a forged
// Commit or Release naming the waiter's session, nor does the waiter's
// own Commit that the node refuses; the waiter's own Release (with its
// key) does leave the line.
func TestForgedTokenKeepsWaiterPlace(t *testing.T) {
	lc := newLimitsCluster(t)
	d := nodeDriver{t: t, lc: lc, n: lc.startNode1(t, NewMemStore(), Limits{}, "")}
	a, b := lc.everything, lc.ordersOnly
	const res = "orders-line"
	ha, hb := limitsHolder(a.String()), keyHolder(b.String(), 9)
	require.Equal(t, protocol.KindVote, d.acquire(a, ha, res, 1).Kind)
	require.Equal(t, protocol.CodeOK, d.commit(a, d.token(lc.cluster.Statement(res, 1, ha))).Code)

	// b's session waits (a long poll of no time joins the line).
	// (The one line that names b's session in a Wait request.)
	d.call(b, protocol.ProtoWait, protocol.WaitRequest{Cluster: lc.cluster.ID, Resource: res, Key: keyOf(hb)}.Marshal())
	require.Equal(t, 1, d.n.QueueStats().Waiters)

	// A sibling of b forges b's token at a later epoch: refused, and b keeps
	// its place.
	forged := d.forged(d.token(lc.cluster.Statement(res, 2, hb)))
	require.NotEqual(t, protocol.CodeOK, d.commitReq(b, protocol.CommitRequest{Token: forged}).Code)
	require.NotEqual(t, protocol.CodeOK, d.releaseReq(b, protocol.ReleaseRequest{Token: forged}).Code)
	require.Equal(t, 1, d.n.QueueStats().Waiters, "the forgeries took no place away")

	// b's own Commit (with its key) of a token that does not verify, as
	// when the client combined a Byzantine member's invalid partial before
	// checking: refused, and b keeps its place, where it completes the
	// token at the same epoch.
	require.NotEqual(t, protocol.CodeOK, d.commitReq(b, protocol.CommitRequest{Token: forged, Key: keyOf(hb)}).Code)
	require.Equal(t, 1, d.n.QueueStats().Waiters, "a refused Commit serves no one")

	// b's own Release (with its key) leaves the line, whatever the node
	// made of it.
	d.releaseReq(b, protocol.ReleaseRequest{Token: forged, Key: keyOf(hb)})
	require.Zero(t, d.n.QueueStats().Waiters)
}
