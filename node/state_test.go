package node

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// Tests of the pure voting transitions in state.go. No clocks and no
// sleeps: every time is stateBase plus an offset.

var (
	stateBase  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stateRules = Rules{MaxEpochStep: 10, VoteTimeout: 2 * time.Second, DefaultTTL: 10 * time.Second, MaxTTL: time.Minute}
)

const stateRes = "orders-db"

// The holders of these tests: lock sessions of three identities, and
// alice2, a second session of alice's identity (another replica sharing
// her key), which is a different holder.
var (
	alice  = protocol.Holder{ID: "alice", Session: protocol.SessionID{0xa1}}
	alice2 = protocol.Holder{ID: "alice", Session: protocol.SessionID{0xa2}}
	bob    = protocol.Holder{ID: "bob", Session: protocol.SessionID{0xb1}}
	carol  = protocol.Holder{ID: "carol", Session: protocol.SessionID{0xc1}}
)

func stateAt(d time.Duration) time.Time { return stateBase.Add(d) }

// ownerShown is what the acquiring process shows with a checked token: the
// token is genuine and the request carries the session's key.
var ownerShown = Shown{Verified: true, Key: true}

// stateTok is a certified token as the transitions see it: already
// verified by the caller, so a zero signature is fine here.
func stateTok(epoch uint64, holder protocol.Holder) protocol.Token {
	return protocol.Token{Statement: protocol.Statement{Resource: stateRes, Epoch: epoch, Holder: holder}}
}

func stateTokP(epoch uint64, holder protocol.Holder) *protocol.Token {
	t := stateTok(epoch, holder)
	return &t
}

func stateKinds(audit []AuditEntry) []AuditKind {
	var ks []AuditKind
	for _, a := range audit {
		ks = append(ks, a.Kind)
	}
	return ks
}

// stateVoted is the record after alice's vote at epoch 5, asked at t=0 with
// a 30s TTL, and signed by the driver (Vote.Index != 0).
func stateVoted() Record {
	return Record{
		Resource: stateRes, LastEpoch: 5,
		VoteEpoch: 5, VoteHolder: alice, Vote: crypto.PartialSig{Index: 1}, VoteTTL: 30 * time.Second, VoteAt: stateAt(0),
		Lease: Lease{Holder: alice, Epoch: 5, Expires: stateAt(2 * time.Second)},
	}
}

// stateCommitted is stateVoted after alice's commit at t=0 with a 10s TTL.
func stateCommitted() Record {
	r := stateVoted()
	r.Certified = stateTokP(5, alice)
	r.Lease = Lease{Holder: alice, Epoch: 5, Expires: stateAt(10 * time.Second), Committed: true}
	r.LeaseGen = 5
	return r
}

// stateWith returns a copy of r changed by f.
func stateWith(r Record, f func(*Record)) Record {
	f(&r)
	return r
}

type stateWant struct {
	kind    protocol.ReplyKind
	code    protocol.Code
	repeat  bool
	changed bool
	audit   []AuditKind
	next    Record
}

func stateCheck(t *testing.T, o Outcome, now time.Time, w stateWant) {
	t.Helper()
	require.Equal(t, now, o.At, "At")
	require.Equal(t, w.kind, o.Kind, "Kind (message %q)", o.Message)
	require.Equal(t, w.code, o.Code, "Code (message %q)", o.Message)
	require.Equal(t, w.repeat, o.Repeat, "Repeat")
	require.Equal(t, w.changed, o.Changed, "Changed")
	require.Equal(t, w.audit, stateKinds(o.Audit), "audit kinds")
	require.Equal(t, w.next, o.Next, "Next")
	if w.kind == protocol.KindRefuse {
		require.NotEmpty(t, o.Message)
	}
	for _, a := range o.Audit {
		require.Equal(t, now, a.Time)
		require.Equal(t, stateRes, a.Resource)
	}
}

func TestAcquire(t *testing.T) {
	fresh := Record{Resource: stateRes}
	tests := []struct {
		name   string
		rec    Record
		holder protocol.Holder
		epoch  uint64
		ttl    time.Duration
		proof  *protocol.Token
		now    time.Time
		want   stateWant
		// busy details, checked when want.kind is KindBusy
		busyHolder protocol.Holder
		busyEpoch  uint64
		busyLeft   time.Duration
		busyVote   bool // the busy lease is an uncommitted vote (Pending)
		// lastEra runs the case in the last epoch era, whose ceiling is
		// the top of the uint64 range.
		lastEra bool
	}{
		{
			name: "fresh record votes", rec: fresh, holder: bob, epoch: 1, ttl: 20 * time.Second, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 1, VoteEpoch: 1, VoteHolder: bob, VoteTTL: 20 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: 1, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "vote zeroes the previous partial for the driver to sign", rec: stateVoted(), holder: bob, epoch: 6, ttl: 20 * time.Second, now: stateAt(3 * time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 6, VoteEpoch: 6, VoteHolder: bob, VoteTTL: 20 * time.Second, VoteAt: stateAt(3 * time.Second),
				Lease: Lease{Holder: bob, Epoch: 6, Expires: stateAt(5 * time.Second)},
			}},
		},
		{
			name: "ttl 0 gets DefaultTTL", rec: fresh, holder: bob, epoch: 3, ttl: 0, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 3, VoteEpoch: 3, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: 3, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "negative ttl gets DefaultTTL", rec: fresh, holder: bob, epoch: 3, ttl: -time.Second, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 3, VoteEpoch: 3, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: 3, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "ttl above MaxTTL is clamped", rec: fresh, holder: bob, epoch: 3, ttl: time.Hour, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 3, VoteEpoch: 3, VoteHolder: bob, VoteTTL: time.Minute, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: 3, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "other holder at the voted epoch is stale", rec: stateVoted(), holder: bob, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: stateVoted()},
		},
		{
			name: "epoch below last epoch is stale", rec: stateVoted(), holder: bob, epoch: 4, now: stateAt(time.Hour),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, changed: true,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease = Lease{} })},
		},
		{
			name: "epoch 0 on a fresh record is stale", rec: fresh, holder: bob, epoch: 0, now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: fresh},
		},
		{
			name: "fresh: known+step votes", rec: fresh, holder: bob, epoch: 10, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 10, VoteEpoch: 10, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: 10, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "fresh: known+step+1 is too far", rec: fresh, holder: bob, epoch: 11, now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: fresh},
		},
		{
			name: "last epoch 5: 15 votes", rec: stateVoted(), holder: alice, epoch: 15, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 15, VoteEpoch: 15, VoteHolder: alice, VoteTTL: 10 * time.Second, VoteAt: stateAt(time.Second),
				Lease: Lease{Holder: alice, Epoch: 15, Expires: stateAt(3 * time.Second)},
			}},
		},
		{
			name: "last epoch 5: 16 is too far", rec: stateVoted(), holder: alice, epoch: 16, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: stateVoted()},
		},
		{
			name: "far epoch is checked before busy", rec: stateCommitted(), holder: bob, epoch: 1000, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: stateCommitted()},
		},
		{
			// Not reachable through the transitions (catchUp raises LastEpoch
			// with Certified), but known is max(LastEpoch, Certified.Epoch).
			name: "known is the certified epoch when above last epoch: 30 votes", rec: Record{Resource: stateRes, LastEpoch: 5, Certified: stateTokP(20, carol)},
			holder: bob, epoch: 30, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 30, VoteEpoch: 30, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0), Certified: stateTokP(20, carol),
				Lease: Lease{Holder: bob, Epoch: 30, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "known is the certified epoch when above last epoch: 31 is too far", rec: Record{Resource: stateRes, LastEpoch: 5, Certified: stateTokP(20, carol)},
			holder: bob, epoch: 31, now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: Record{Resource: stateRes, LastEpoch: 5, Certified: stateTokP(20, carol)}},
		},
		{
			// known+step = MaxUint64-5+10 would wrap to 4: a naive
			// epoch > known+step would refuse.
			name: "no overflow: last epoch MaxUint64-5, epoch MaxUint64 votes", lastEra: true, rec: Record{Resource: stateRes, LastEpoch: math.MaxUint64 - 5},
			holder: bob, epoch: math.MaxUint64, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: math.MaxUint64, VoteEpoch: math.MaxUint64, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: math.MaxUint64, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "no overflow: last epoch MaxUint64-10, epoch MaxUint64 votes", lastEra: true, rec: Record{Resource: stateRes, LastEpoch: math.MaxUint64 - 10},
			holder: bob, epoch: math.MaxUint64, now: stateAt(0),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: math.MaxUint64, VoteEpoch: math.MaxUint64, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(0),
				Lease: Lease{Holder: bob, Epoch: math.MaxUint64, Expires: stateAt(2 * time.Second)},
			}},
		},
		{
			name: "no overflow: last epoch MaxUint64-11, epoch MaxUint64 is too far", lastEra: true, rec: Record{Resource: stateRes, LastEpoch: math.MaxUint64 - 11},
			holder: bob, epoch: math.MaxUint64, now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: Record{Resource: stateRes, LastEpoch: math.MaxUint64 - 11}},
		},
		{
			name: "no overflow: last epoch MaxUint64 is stale", lastEra: true, rec: Record{Resource: stateRes, LastEpoch: math.MaxUint64},
			holder: bob, epoch: math.MaxUint64, now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: Record{Resource: stateRes, LastEpoch: math.MaxUint64}},
		},
		{
			name: "busy: another holder's committed lease", rec: stateCommitted(), holder: bob, epoch: 6, now: stateAt(4 * time.Second),
			want:       stateWant{kind: protocol.KindBusy, next: stateCommitted()},
			busyHolder: alice, busyEpoch: 5, busyLeft: 6 * time.Second,
		},
		{
			name: "busy: another holder's uncommitted vote", rec: stateVoted(), holder: bob, epoch: 6, now: stateAt(time.Second),
			want:       stateWant{kind: protocol.KindBusy, next: stateVoted()},
			busyHolder: alice, busyEpoch: 5, busyLeft: time.Second, busyVote: true,
		},
		{
			name: "busy: one nanosecond before the vote times out", rec: stateVoted(), holder: bob, epoch: 6, now: stateAt(2*time.Second - 1),
			want:       stateWant{kind: protocol.KindBusy, next: stateVoted()},
			busyHolder: alice, busyEpoch: 5, busyLeft: 1, busyVote: true,
		},
		{
			name: "vote timeout frees the resource", rec: stateVoted(), holder: bob, epoch: 6, now: stateAt(2 * time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 6, VoteEpoch: 6, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(2 * time.Second),
				Lease: Lease{Holder: bob, Epoch: 6, Expires: stateAt(4 * time.Second)},
			}},
		},
		{
			name: "committed lease expiry frees the resource", rec: stateCommitted(), holder: bob, epoch: 6, now: stateAt(10 * time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditExpire, AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 6, VoteEpoch: 6, VoteHolder: bob, VoteTTL: 10 * time.Second, VoteAt: stateAt(10 * time.Second), Certified: stateTokP(5, alice), LeaseGen: 5,
				Lease: Lease{Holder: bob, Epoch: 6, Expires: stateAt(12 * time.Second)},
			}},
		},
		{
			// The lease starts at the vote (issue 20): the vote sent again
			// holds the resource for VoteTimeout from now.
			name: "same holder re-sends: repeat, its vote's lease from now", rec: stateVoted(), holder: alice, epoch: 5, ttl: 30 * time.Second, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindVote, repeat: true, changed: true,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease.Expires = stateAt(time.Second).Add(stateRules.VoteTimeout) })},
		},
		{
			name: "same holder re-sends after it abandoned: repeat, the vote's lease again", rec: stateWith(stateVoted(), func(r *Record) { r.Lease = Lease{} }),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindVote, repeat: true, changed: true,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease.Expires = stateAt(time.Second).Add(stateRules.VoteTimeout) })},
		},
		{
			name: "same holder re-sends while another holder has the resource: busy, no vote", rec: stateWith(stateVoted(), func(r *Record) {
				r.Lease = Lease{Holder: bob, Epoch: 5, Expires: stateAt(2 * time.Second)}
			}),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindBusy, next: stateWith(stateVoted(), func(r *Record) {
				r.Lease = Lease{Holder: bob, Epoch: 5, Expires: stateAt(2 * time.Second)}
			})},
			busyHolder: bob, busyEpoch: 5, busyLeft: time.Second, busyVote: true,
		},
		{
			name: "same holder re-sends after it released: repeat, no lease", rec: stateWith(stateVoted(), func(r *Record) { r.Lease, r.Released = Lease{}, 5 }),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindVote, repeat: true, next: stateWith(stateVoted(), func(r *Record) { r.Lease, r.Released = Lease{}, 5 })},
		},
		{
			name: "same holder re-sends with a committed lease: repeat", rec: stateCommitted(), holder: alice, epoch: 5, now: stateAt(5 * time.Second),
			want: stateWant{kind: protocol.KindVote, repeat: true, next: stateCommitted()},
		},
		{
			// A re-send restarts the vote's lease only until the vote is
			// VoteTimeout old: the vote holds the resource at most twice the
			// vote timeout, however often it is asked for again.
			name: "same holder re-sends just before the vote is VoteTimeout old: repeat, the vote's lease from now", rec: stateVoted(), holder: alice, epoch: 5, now: stateAt(2*time.Second - 1),
			want: stateWant{kind: protocol.KindVote, repeat: true, changed: true,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease.Expires = stateAt(4*time.Second - 1) })},
		},
		{
			name: "same holder re-sends once the vote is VoteTimeout old, its lease running: stale, the lease kept", rec: stateWith(stateVoted(), func(r *Record) { r.Lease.Expires = stateAt(3 * time.Second) }),
			holder: alice, epoch: 5, now: stateAt(2 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease.Expires = stateAt(3 * time.Second) })},
		},
		{
			name: "same holder re-sends after the vote timed out: stale, no lease", rec: stateVoted(), holder: alice, epoch: 5, now: stateAt(time.Hour),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, changed: true,
				next: stateWith(stateVoted(), func(r *Record) { r.Lease = Lease{} })},
		},
		{
			name: "a record from before VoteAt: a re-send is stale", rec: stateWith(stateVoted(), func(r *Record) { r.VoteAt = time.Time{} }),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale,
				next: stateWith(stateVoted(), func(r *Record) { r.VoteAt = time.Time{} })},
		},
		{
			name: "same holder re-sends before the driver signed: stale, no repeat", rec: stateWith(stateVoted(), func(r *Record) { r.Vote = crypto.PartialSig{} }),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale,
				next: stateWith(stateVoted(), func(r *Record) { r.Vote = crypto.PartialSig{} })},
		},
		{
			name: "same holder, older epoch than its last vote: stale", rec: stateWith(stateVoted(), func(r *Record) { r.LastEpoch, r.VoteEpoch, r.Lease.Epoch = 7, 7, 7 }),
			holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale,
				next: stateWith(stateVoted(), func(r *Record) { r.LastEpoch, r.VoteEpoch, r.Lease.Epoch = 7, 7, 7 })},
		},
		{
			name: "same holder acquires a higher epoch while holding: keeps the later expiry", rec: stateCommitted(), holder: alice, epoch: 6, ttl: 20 * time.Second, now: stateAt(4 * time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 6, VoteEpoch: 6, VoteHolder: alice, VoteTTL: 20 * time.Second, VoteAt: stateAt(4 * time.Second), Certified: stateTokP(5, alice), LeaseGen: 5,
				Lease: Lease{Holder: alice, Epoch: 6, Expires: stateAt(10 * time.Second)},
			}},
		},
		{
			name: "same holder acquires a higher epoch near its lease end: vote timeout is later", rec: stateCommitted(), holder: alice, epoch: 6, now: stateAt(9 * time.Second),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: Record{
				Resource: stateRes, LastEpoch: 6, VoteEpoch: 6, VoteHolder: alice, VoteTTL: 10 * time.Second, VoteAt: stateAt(9 * time.Second), Certified: stateTokP(5, alice), LeaseGen: 5,
				Lease: Lease{Holder: alice, Epoch: 6, Expires: stateAt(11 * time.Second)},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := stateRules
			if tt.lastEra {
				rules.EpochFloor = 0xffff << protocol.EraBits
			}
			o := rules.Acquire(tt.rec, tt.holder, tt.epoch, tt.ttl, tt.proof, tt.now)
			stateCheck(t, o, tt.now, tt.want)
			if tt.want.kind == protocol.KindBusy {
				require.Equal(t, tt.busyHolder, o.Holder)
				require.Equal(t, tt.busyEpoch, o.LeaseEpoch)
				require.Equal(t, tt.busyLeft, o.Left)
				require.Equal(t, tt.busyVote, o.Pending)
			} else {
				require.Empty(t, o.Holder)
				require.Zero(t, o.Left)
			}
		})
	}
}

// TestAcquireVoteAuditEntry checks the full audit entry and that the record
// passed in is not modified.
func TestAcquireVoteAuditEntry(t *testing.T) {
	rec := stateCommitted()
	orig := stateCommitted()
	now := stateAt(20 * time.Second)
	o := stateRules.Acquire(rec, bob, 7, 0, nil, now)
	require.Equal(t, protocol.KindVote, o.Kind)
	require.Equal(t, []AuditEntry{
		{Time: now, Kind: AuditExpire, Resource: stateRes, Epoch: 5, Holder: alice.String()},
		{Time: now, Kind: AuditVote, Resource: stateRes, Epoch: 7, Holder: bob.String()},
	}, o.Audit)
	require.Equal(t, orig, rec, "Acquire must not modify its input")
}

// TestAcquireSameEpochOtherHolderAlwaysRefused is S1/S3 at one node: once it
// voted for alice at epoch 5, no other holder gets a vote at epoch 5 (or
// below), whatever the time, the lease state, the signed partial or the proof.
func TestAcquireSameEpochOtherHolderAlwaysRefused(t *testing.T) {
	now0 := stateAt(0)
	// Build the states through the transitions.
	o := stateRules.Acquire(Record{Resource: stateRes}, alice, 5, 30*time.Second, nil, now0)
	require.Equal(t, protocol.KindVote, o.Kind)
	voted := o.Next
	voted.Vote = crypto.PartialSig{Index: 2}
	o = stateRules.Commit(voted, alice.ID, stateTok(5, alice), ownerShown, 0, stateAt(time.Second))
	require.Zero(t, o.Kind)
	committed := o.Next
	o = stateRules.Release(committed, stateTok(5, alice), ownerShown, stateAt(2*time.Second))
	require.Zero(t, o.Kind)
	released := o.Next
	o = stateRules.Commit(voted, bob.ID, stateTok(5, alice), ownerShown, 0, stateAt(time.Second))
	require.Zero(t, o.Kind)
	learned := o.Next // certified by a non-holder's commit; lease still the vote
	o = stateRules.Acquire(committed, alice, 8, 0, nil, stateAt(3*time.Second))
	require.Equal(t, protocol.KindVote, o.Kind)
	later := o.Next // alice moved on to 8 while holding

	states := map[string]Record{
		"voted":     voted,
		"committed": committed,
		"released":  released,
		"learned":   learned,
		"later":     later,
		"voted, not yet signed": stateWith(voted, func(r *Record) {
			r.Vote = crypto.PartialSig{}
		}),
		"committed, not yet signed": stateWith(committed, func(r *Record) {
			r.Vote = crypto.PartialSig{}
		}),
	}
	times := []time.Duration{-time.Hour, 0, time.Second, 2 * time.Second, 3 * time.Second, 30 * time.Second, 31 * time.Second, time.Hour, 24 * 365 * time.Hour}
	proofs := []*protocol.Token{
		nil,
		stateTokP(5, alice),
		stateTokP(4, carol),
		stateTokP(6, alice),
		stateTokP(40, carol),
		stateTokP(5, bob),   // cannot exist under S1; the node must still not vote
		stateTokP(5, carol), // idem
	}
	ttls := []time.Duration{0, time.Second, time.Hour}
	n := 0
	for name, rec := range states {
		for _, d := range times {
			for _, proof := range proofs {
				for _, holder := range []protocol.Holder{bob, carol} {
					for _, epoch := range []uint64{5, 4, 1} {
						for _, ttl := range ttls {
							now := stateAt(d)
							msg := []any{"state %s, now %v, proof %v, holder %s, epoch %d, ttl %v", name, d, proof, holder, epoch, ttl}
							o := stateRules.Acquire(rec, holder, epoch, ttl, proof, now)
							require.Equal(t, protocol.KindRefuse, o.Kind, msg...)
							require.Equal(t, protocol.CodeStale, o.Code, msg...)
							require.False(t, o.Repeat, msg...)
							require.NotContains(t, stateKinds(o.Audit), AuditVote, msg...)
							require.Equal(t, rec.VoteEpoch, o.Next.VoteEpoch, msg...)
							require.Equal(t, rec.VoteHolder, o.Next.VoteHolder, msg...)
							require.Equal(t, rec.Vote, o.Next.Vote, msg...)
							require.GreaterOrEqual(t, o.Next.LastEpoch, rec.LastEpoch, msg...)
							require.NotEqual(t, holder, o.Next.Lease.Holder, msg...)
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d refused requests checked", n)
}

// TestAcquireProofCatchUp: a verified token catches a lagging node up (S5).
func TestAcquireProofCatchUp(t *testing.T) {
	lagging := Record{
		Resource: stateRes, LastEpoch: 3, VoteEpoch: 3, VoteHolder: carol, Vote: crypto.PartialSig{Index: 1}, VoteTTL: time.Minute,
		Certified: stateTokP(3, carol),
		Lease:     Lease{Holder: carol, Epoch: 3, Expires: stateAt(time.Minute), Committed: true},
	}
	caughtUp := stateWith(lagging, func(r *Record) {
		r.LastEpoch = 20
		r.Certified = stateTokP(20, alice)
		r.Lease = Lease{}
	})
	now := stateAt(time.Second)
	votedAt := func(base Record, epoch uint64) Record {
		return stateWith(base, func(r *Record) {
			r.LastEpoch, r.VoteEpoch, r.VoteHolder, r.VoteTTL, r.VoteAt = epoch, epoch, bob, 10*time.Second, now
			r.Vote = crypto.PartialSig{}
			r.Lease = Lease{Holder: bob, Epoch: epoch, Expires: now.Add(2 * time.Second)}
		})
	}
	tests := []struct {
		name  string
		rec   Record
		epoch uint64
		proof *protocol.Token
		want  stateWant
	}{
		{
			name: "without the proof 20 is too far", rec: lagging, epoch: 20,
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: lagging},
		},
		{
			name: "without the proof carol is busy at 13", rec: lagging, epoch: 13,
			want: stateWant{kind: protocol.KindBusy, next: lagging},
		},
		{
			name: "proof epoch itself is stale, but the node caught up", rec: lagging, epoch: 20, proof: stateTokP(20, alice),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, changed: true, audit: []AuditKind{AuditCatchUp}, next: caughtUp},
		},
		{
			name: "proof epoch+1 votes", rec: lagging, epoch: 21, proof: stateTokP(20, alice),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditCatchUp, AuditVote}, next: votedAt(caughtUp, 21)},
		},
		{
			name: "proof epoch+step votes", rec: lagging, epoch: 30, proof: stateTokP(20, alice),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditCatchUp, AuditVote}, next: votedAt(caughtUp, 30)},
		},
		{
			name: "proof epoch+step+1 is too far, but the node caught up", rec: lagging, epoch: 31, proof: stateTokP(20, alice),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, changed: true, audit: []AuditKind{AuditCatchUp}, next: caughtUp},
		},
		{
			name: "after catch-up, no proof: 20 is stale", rec: caughtUp, epoch: 20,
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: caughtUp},
		},
		{
			name: "after catch-up, no proof: 21 votes", rec: caughtUp, epoch: 21,
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: votedAt(caughtUp, 21)},
		},
		{
			name: "after catch-up, no proof: 30 votes", rec: caughtUp, epoch: 30,
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: votedAt(caughtUp, 30)},
		},
		{
			name: "after catch-up, no proof: 31 is too far", rec: caughtUp, epoch: 31,
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeTooFar, next: caughtUp},
		},
		{
			name: "older proof changes nothing", rec: caughtUp, epoch: 21, proof: stateTokP(2, carol),
			want: stateWant{kind: protocol.KindVote, changed: true, audit: []AuditKind{AuditVote}, next: votedAt(caughtUp, 21)},
		},
		{
			name: "older proof on a refusal changes nothing", rec: caughtUp, epoch: 19, proof: stateTokP(2, carol),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: caughtUp},
		},
		{
			name: "proof at the last epoch only records the token", rec: stateWith(lagging, func(r *Record) { r.Certified = nil }), epoch: 13, proof: stateTokP(3, carol),
			want: stateWant{kind: protocol.KindBusy, changed: true, next: lagging},
		},
		{
			name: "proof for the lease epoch keeps the lease", rec: stateWith(lagging, func(r *Record) { r.Certified = nil }), epoch: 3, proof: stateTokP(3, carol),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, changed: true, next: lagging},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stateRules.Acquire(tt.rec, bob, tt.epoch, 0, tt.proof, now)
			stateCheck(t, o, now, tt.want)
			for _, a := range o.Audit {
				if a.Kind == AuditCatchUp {
					require.Equal(t, tt.proof.Epoch, a.Epoch)
					require.Equal(t, tt.proof.Holder.String(), a.Holder)
				}
			}
		})
	}
}

func TestCommit(t *testing.T) {
	tests := []struct {
		name   string
		rec    Record
		sender string
		tok    protocol.Token
		ttl    time.Duration
		now    time.Time
		want   stateWant
	}{
		{
			name: "holder commits the voted epoch with ttl 0: VoteTTL", rec: stateVoted(), sender: alice.ID, tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCommit}, next: stateWith(stateVoted(), func(r *Record) {
				r.Certified = stateTokP(5, alice)
				r.Lease = Lease{Holder: alice, Epoch: 5, Expires: stateAt(31 * time.Second), Committed: true}
				r.LeaseGen = 5
			})},
		},
		{
			name: "holder commits with a ttl", rec: stateVoted(), sender: alice.ID, tok: stateTok(5, alice), ttl: 20 * time.Second, now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCommit}, next: stateWith(stateVoted(), func(r *Record) {
				r.Certified = stateTokP(5, alice)
				r.Lease = Lease{Holder: alice, Epoch: 5, Expires: stateAt(21 * time.Second), Committed: true}
				r.LeaseGen = 5
			})},
		},
		{
			name: "holder commits with a ttl above MaxTTL: clamped", rec: stateVoted(), sender: alice.ID, tok: stateTok(5, alice), ttl: time.Hour, now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCommit}, next: stateWith(stateVoted(), func(r *Record) {
				r.Certified = stateTokP(5, alice)
				r.Lease = Lease{Holder: alice, Epoch: 5, Expires: stateAt(61 * time.Second), Committed: true}
				r.LeaseGen = 5
			})},
		},
		{
			name: "holder commits after its vote timed out: lease starts now", rec: stateVoted(), sender: alice.ID, tok: stateTok(5, alice), now: stateAt(5 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCommit}, next: stateWith(stateVoted(), func(r *Record) {
				r.Certified = stateTokP(5, alice)
				r.Lease = Lease{Holder: alice, Epoch: 5, Expires: stateAt(35 * time.Second), Committed: true}
				r.LeaseGen = 5
			})},
		},
		{
			name: "holder commits an epoch the node missed: catch-up, DefaultTTL", rec: stateVoted(), sender: alice.ID, tok: stateTok(7, alice), now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCatchUp, AuditCommit}, next: stateWith(stateVoted(), func(r *Record) {
				r.LastEpoch = 7
				r.Certified = stateTokP(7, alice)
				r.Lease = Lease{Holder: alice, Epoch: 7, Expires: stateAt(11 * time.Second), Committed: true}
				r.LeaseGen = 7
			})},
		},
		{
			name: "holder commits on a fresh record", rec: Record{Resource: stateRes}, sender: bob.ID, tok: stateTok(4, bob), ttl: 15 * time.Second, now: stateAt(0),
			want: stateWant{changed: true, audit: []AuditKind{AuditCatchUp, AuditCommit}, next: Record{
				Resource: stateRes, LastEpoch: 4, Certified: stateTokP(4, bob), LeaseGen: 4,
				Lease: Lease{Holder: bob, Epoch: 4, Expires: stateAt(15 * time.Second), Committed: true},
			}},
		},
		{
			name: "duplicate commit is fine: lease restarts", rec: stateCommitted(), sender: alice.ID, tok: stateTok(5, alice), now: stateAt(3 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCommit}, next: stateWith(stateCommitted(), func(r *Record) {
				r.Lease.Expires = stateAt(33 * time.Second)
			})},
		},
		{
			name: "non-holder commit only records the token", rec: stateVoted(), sender: bob.ID, tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{changed: true, next: stateWith(stateVoted(), func(r *Record) { r.Certified = stateTokP(5, alice) })},
		},
		{
			name: "non-holder commit of a known token changes nothing", rec: stateCommitted(), sender: bob.ID, tok: stateTok(5, alice), ttl: time.Minute, now: stateAt(time.Second),
			want: stateWant{next: stateCommitted()},
		},
		{
			name: "non-holder commit of a later epoch catches up", rec: stateCommitted(), sender: carol.ID, tok: stateTok(9, bob), now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCatchUp}, next: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch = 9
				r.Certified = stateTokP(9, bob)
				r.Lease = Lease{}
			})},
		},
		{
			name: "token below last epoch is stale", rec: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch, r.VoteEpoch, r.VoteHolder = 8, 8, bob
				r.Lease = Lease{Holder: bob, Epoch: 8, Expires: stateAt(2 * time.Second)}
			}),
			sender: alice.ID, tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch, r.VoteEpoch, r.VoteHolder = 8, 8, bob
				r.Lease = Lease{Holder: bob, Epoch: 8, Expires: stateAt(2 * time.Second)}
			})},
		},
		{
			name: "token below last epoch, no lease, is stale", rec: stateWith(stateVoted(), func(r *Record) { r.LastEpoch = 8; r.Lease = Lease{} }),
			sender: alice.ID, tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, changed: true, next: stateWith(stateVoted(), func(r *Record) {
				r.LastEpoch = 8
				r.Lease = Lease{}
				r.Certified = stateTokP(5, alice)
			})},
		},
		{
			name: "token below the lease epoch is stale", rec: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch, r.VoteEpoch = 6, 6
				r.Lease.Epoch = 6
			}),
			sender: alice.ID, tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeStale, next: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch, r.VoteEpoch = 6, 6
				r.Lease.Epoch = 6
			})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stateRules.Commit(tt.rec, tt.sender, tt.tok, ownerShown, tt.ttl, tt.now)
			stateCheck(t, o, tt.now, tt.want)
		})
	}
}

func TestRenew(t *testing.T) {
	tests := []struct {
		name   string
		rec    Record
		holder protocol.Holder
		epoch  uint64
		ttl    time.Duration
		now    time.Time
		want   stateWant
	}{
		{
			name: "holder extends", rec: stateCommitted(), holder: alice, epoch: 5, ttl: 20 * time.Second, now: stateAt(5 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditRenew}, next: stateWith(stateCommitted(), func(r *Record) {
				r.Lease.Expires = stateAt(25 * time.Second)
			})},
		},
		{
			name: "holder extends, ttl 0: DefaultTTL", rec: stateCommitted(), holder: alice, epoch: 5, now: stateAt(5 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditRenew}, next: stateWith(stateCommitted(), func(r *Record) {
				r.Lease.Expires = stateAt(15 * time.Second)
			})},
		},
		{
			name: "holder extends, ttl clamped", rec: stateCommitted(), holder: alice, epoch: 5, ttl: time.Hour, now: stateAt(5 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditRenew}, next: stateWith(stateCommitted(), func(r *Record) {
				r.Lease.Expires = stateAt(65 * time.Second)
			})},
		},
		{
			name: "one nanosecond before expiry still renews", rec: stateCommitted(), holder: alice, epoch: 5, now: stateAt(10*time.Second - 1),
			want: stateWant{changed: true, audit: []AuditKind{AuditRenew}, next: stateWith(stateCommitted(), func(r *Record) {
				r.Lease.Expires = stateAt(20*time.Second - 1)
			})},
		},
		{
			name: "wrong holder", rec: stateCommitted(), holder: bob, epoch: 5, now: stateAt(5 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: stateCommitted()},
		},
		{
			name: "lower epoch", rec: stateCommitted(), holder: alice, epoch: 4, now: stateAt(5 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: stateCommitted()},
		},
		{
			name: "higher epoch", rec: stateCommitted(), holder: alice, epoch: 6, now: stateAt(5 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: stateCommitted()},
		},
		{
			name: "no lease at all", rec: Record{Resource: stateRes, LastEpoch: 5}, holder: alice, epoch: 5, now: stateAt(5 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: Record{Resource: stateRes, LastEpoch: 5}},
		},
		{
			name: "uncommitted vote", rec: stateVoted(), holder: alice, epoch: 5, now: stateAt(time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNoLease, next: stateVoted()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stateRules.Renew(tt.rec, tt.holder, tt.epoch, tt.ttl, tt.now)
			stateCheck(t, o, tt.now, tt.want)
		})
	}
}

// TestRenewExpiredLeaseIsNoLease: renewing a lease that has lapsed is
// refused with CodeNoLease ("lease expired or superseded"), not
// CodeNotHolder, and the lapsed lease is cleared.
//
// Regression test: Rules.Renew used to run o.expire(now) before judging,
// so the holder check saw the cleared lease (Holder "") and refused every
// expired lease with CodeNotHolder, leaving the expiry branch dead. Renew
// now judges the lease as it was before expiry clears it:
//
//	l := rec.Lease
//	o.expire(now)
//	switch {
//	case l.Holder != holder || l.Epoch != epoch:
//		return o.refuse(protocol.CodeNotHolder, ...)
//	case !l.Committed || !l.Active(now):
//		return o.refuse(protocol.CodeNoLease, ...)
//	}
func TestRenewExpiredLeaseIsNoLease(t *testing.T) {
	tests := []struct {
		name  string
		rec   Record
		now   time.Time
		audit []AuditKind
	}{
		{name: "committed lease at its expiry", rec: stateCommitted(), now: stateAt(10 * time.Second), audit: []AuditKind{AuditExpire}},
		{name: "committed lease long expired", rec: stateCommitted(), now: stateAt(time.Hour), audit: []AuditKind{AuditExpire}},
		{name: "uncommitted vote timed out", rec: stateVoted(), now: stateAt(3 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stateRules.Renew(tt.rec, alice, 5, 0, tt.now)
			require.Equal(t, protocol.KindRefuse, o.Kind)
			require.True(t, o.Changed)
			require.Equal(t, Lease{}, o.Next.Lease, "the lapsed lease is cleared")
			require.Equal(t, tt.audit, stateKinds(o.Audit))
			require.Equal(t, protocol.CodeNoLease, o.Code, "Rules.Renew refused an expired lease as %v (%q), want CodeNoLease", o.Code, o.Message)
		})
	}
}

func TestRelease(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		tok  protocol.Token
		now  time.Time
		// shown is what the request showed, ownerShown if nil.
		shown *Shown
		want  stateWant
	}{
		{
			name: "holder releases its committed lease", rec: stateCommitted(), tok: stateTok(5, alice), now: stateAt(3 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditRelease}, next: stateWith(stateCommitted(), func(r *Record) { r.Lease, r.Released = Lease{}, 5 })},
		},
		{
			name: "holder releases its uncommitted vote", rec: stateVoted(), tok: stateTok(5, alice), now: stateAt(time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditRelease}, next: stateWith(stateVoted(), func(r *Record) {
				r.Lease, r.Released = Lease{}, 5
				r.Certified = stateTokP(5, alice)
				r.PrevGen, r.LeaseGen = 0, 5 // as its Commit would have
			})},
		},
		{
			name: "non-holder", rec: stateCommitted(), tok: stateTok(5, bob), now: stateAt(3 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: stateCommitted()},
		},
		{
			name: "lower epoch", rec: stateCommitted(), tok: stateTok(4, alice), now: stateAt(3 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: stateCommitted()},
		},
		{
			// The Release overtook its Commit (the lease starts at the
			// vote): a late Commit at epoch 6 must start nothing here.
			name: "higher epoch: catches up, which clears the lower lease, and records the release", rec: stateCommitted(), tok: stateTok(6, alice), now: stateAt(3 * time.Second),
			want: stateWant{changed: true, audit: []AuditKind{AuditCatchUp, AuditRelease}, next: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch = 6
				r.Certified = stateTokP(6, alice)
				r.Lease = Lease{}
				r.Released = 6
			})},
		},
		{
			// It voted for the session; the vote's lease ran out before
			// the Commit came. The late Commit must start nothing.
			name: "its vote ran out: refuses, and remembers the release", rec: stateVoted(), tok: stateTok(5, alice), now: stateAt(time.Hour),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, changed: true, next: stateWith(stateVoted(), func(r *Record) {
				r.Lease, r.Released = Lease{}, 5
				r.Certified = stateTokP(5, alice)
			})},
		},
		{
			name: "higher epoch without the session's key", rec: stateCommitted(), tok: stateTok(6, alice), now: stateAt(3 * time.Second), shown: &Shown{Verified: true},
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, changed: true, audit: []AuditKind{AuditCatchUp}, next: stateWith(stateCommitted(), func(r *Record) {
				r.LastEpoch = 6
				r.Certified = stateTokP(6, alice)
				r.Lease = Lease{}
			})},
		},
		{
			// Refused (the lease ended under its holder), and remembered:
			// a re-sent Commit must not bring it back.
			name: "expired lease", rec: stateCommitted(), tok: stateTok(5, alice), now: stateAt(10 * time.Second),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, changed: true, audit: []AuditKind{AuditExpire},
				next: stateWith(stateCommitted(), func(r *Record) { r.Lease, r.Released = Lease{}, 5 })},
		},
		{
			name: "no lease", rec: Record{Resource: stateRes, LastEpoch: 5, Certified: stateTokP(5, alice)}, tok: stateTok(5, alice), now: stateAt(0),
			want: stateWant{kind: protocol.KindRefuse, code: protocol.CodeNotHolder, next: Record{Resource: stateRes, LastEpoch: 5, Certified: stateTokP(5, alice)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shown := ownerShown
			if tt.shown != nil {
				shown = *tt.shown
			}
			o := stateRules.Release(tt.rec, tt.tok, shown, tt.now)
			stateCheck(t, o, tt.now, tt.want)
		})
	}
}

// TestReleaseFreesAtOnce is L3: after a release another holder's Acquire at a
// higher epoch votes immediately, long before the lease would have expired.
func TestReleaseFreesAtOnce(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
	}{
		{name: "committed lease", rec: stateCommitted()},
		{name: "uncommitted vote", rec: stateVoted()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := stateAt(time.Second)
			o := stateRules.Acquire(tt.rec, bob, 6, 0, nil, now)
			require.Equal(t, protocol.KindBusy, o.Kind, "held before the release")
			o = stateRules.Release(tt.rec, stateTok(5, alice), ownerShown, now)
			require.Zero(t, o.Kind, o.Message)
			require.False(t, Status(o.Next, now).Holder.IsZero() == false)
			o = stateRules.Acquire(o.Next, bob, 6, 0, nil, now)
			require.Equal(t, protocol.KindVote, o.Kind, o.Message)
			require.Equal(t, Lease{Holder: bob, Epoch: 6, Expires: now.Add(stateRules.VoteTimeout)}, o.Next.Lease)
		})
	}
}

// TestExpiry: a lapsed committed lease is cleared and audited as expire by
// whatever transition comes next; a lapsed uncommitted vote is cleared
// without an audit entry.
func TestExpiry(t *testing.T) {
	type transition func(Record, time.Time) Outcome
	transitions := []struct {
		name string
		run  transition
		// after is the audit the transition adds after the expiry itself.
		after []AuditKind
	}{
		{name: "acquire by another holder", run: func(r Record, now time.Time) Outcome {
			return stateRules.Acquire(r, bob, 6, 0, nil, now)
		}, after: []AuditKind{AuditVote}},
		{name: "stale acquire", run: func(r Record, now time.Time) Outcome {
			return stateRules.Acquire(r, bob, 5, 0, nil, now)
		}},
		{name: "commit by a non-holder", run: func(r Record, now time.Time) Outcome {
			return stateRules.Commit(r, bob.ID, stateTok(5, alice), ownerShown, 0, now)
		}},
		{name: "renew by another holder", run: func(r Record, now time.Time) Outcome {
			return stateRules.Renew(r, bob, 5, 0, now)
		}},
		{name: "release by another holder", run: func(r Record, now time.Time) Outcome {
			return stateRules.Release(r, stateTok(5, bob), ownerShown, now)
		}},
	}
	leases := []struct {
		name      string
		rec       Record
		lapsed    time.Time
		committed bool
	}{
		{name: "committed lease", rec: stateCommitted(), lapsed: stateAt(10 * time.Second), committed: true},
		{name: "uncommitted vote", rec: stateVoted(), lapsed: stateAt(2 * time.Second)},
	}
	for _, l := range leases {
		for _, tr := range transitions {
			for _, later := range []time.Duration{0, time.Nanosecond, time.Hour} {
				t.Run(fmt.Sprintf("%s/%s/+%v", l.name, tr.name, later), func(t *testing.T) {
					now := l.lapsed.Add(later)
					o := tr.run(l.rec, now)
					require.True(t, o.Changed)
					var want []AuditKind
					if l.committed {
						want = append(want, AuditExpire)
					}
					want = append(want, tr.after...)
					require.Equal(t, want, stateKinds(o.Audit))
					if l.committed {
						require.Equal(t, AuditEntry{Time: now, Kind: AuditExpire, Resource: stateRes, Epoch: 5, Holder: alice.String()}, o.Audit[0])
					}
					require.NotEqual(t, alice, o.Next.Lease.Holder, "lapsed lease cleared")
					require.Equal(t, l.rec.LastEpoch <= o.Next.LastEpoch, true)
				})
			}
		}
	}
	// One nanosecond before, nothing expires.
	for _, l := range leases {
		t.Run(l.name+"/not yet", func(t *testing.T) {
			now := l.lapsed.Add(-1)
			o := stateRules.Renew(l.rec, bob, 5, 0, now)
			require.False(t, o.Changed)
			require.Empty(t, o.Audit)
			require.Equal(t, l.rec, o.Next)
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		now  time.Time
		want protocol.StatusReply
	}{
		{name: "fresh", rec: Record{Resource: stateRes}, now: stateAt(0), want: protocol.StatusReply{}},
		{name: "uncommitted vote", rec: stateVoted(), now: stateAt(500 * time.Millisecond),
			want: protocol.StatusReply{LastEpoch: 5, Holder: alice.Ref(), LeaseEpoch: 5, LeaseLeft: 1500 * time.Millisecond}},
		{name: "uncommitted vote timed out", rec: stateVoted(), now: stateAt(2 * time.Second),
			want: protocol.StatusReply{LastEpoch: 5}},
		{name: "committed lease", rec: stateCommitted(), now: stateAt(4 * time.Second),
			want: protocol.StatusReply{LastEpoch: 5, Holder: alice.Ref(), LeaseEpoch: 5, LeaseLeft: 6 * time.Second, Certified: stateTokP(5, alice)}},
		{name: "committed lease expired", rec: stateCommitted(), now: stateAt(10 * time.Second),
			want: protocol.StatusReply{LastEpoch: 5, Certified: stateTokP(5, alice)}},
		{name: "released", rec: stateWith(stateCommitted(), func(r *Record) { r.Lease = Lease{} }), now: stateAt(time.Second),
			want: protocol.StatusReply{LastEpoch: 5, Certified: stateTokP(5, alice)}},
		{name: "certified above a later vote", rec: stateWith(stateVoted(), func(r *Record) {
			r.LastEpoch = 9
			r.Certified = stateTokP(7, carol)
			r.Lease = Lease{}
		}), now: stateAt(time.Second),
			want: protocol.StatusReply{LastEpoch: 9, Certified: stateTokP(7, carol)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Status(tt.rec, tt.now))
		})
	}
}

// TestRandomTransitions drives one record through 10,000 random transitions
// from three holders, with random epochs, times (also going backwards:
// safety must not depend on clocks) and proofs, and checks the invariants
// after every step.
func TestRandomTransitions(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	seed := int64(h.Sum64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	holders := []protocol.Holder{alice, alice2, bob, carol}
	pick := func() protocol.Holder { return holders[rng.Intn(len(holders))] }
	// voted is every epoch this node voted for, and the holder (S1/S3).
	voted := map[uint64]protocol.Holder{}
	// certified is every token that exists in this simulated world; it is
	// consistent with voted, as S1 guarantees.
	certified := map[uint64]protocol.Holder{}
	tokenAt := func(e uint64) protocol.Token {
		h, ok := certified[e]
		if !ok {
			if h, ok = voted[e]; !ok {
				h = pick()
			}
			certified[e] = h
		}
		return stateTok(e, h)
	}
	// around is a random epoch near e, at least 1.
	around := func(e uint64, below, above int) uint64 {
		d := rng.Intn(below+above+1) - below
		if d < 0 && uint64(-d) >= e || e+uint64(d) == 0 {
			return 1
		}
		return uint64(int64(e) + int64(d))
	}
	randTTL := func() time.Duration {
		if rng.Intn(3) == 0 {
			return 0
		}
		return time.Duration(rng.Intn(90)) * time.Second
	}

	rec := Record{Resource: stateRes}
	now := stateBase
	counts := map[string]int{}
	for step := 0; step < 10000; step++ {
		switch r := rng.Intn(100); {
		case r < 50:
			now = now.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
		case r < 55:
			now = now.Add(time.Duration(rng.Intn(120)) * time.Second)
		case r < 58:
			now = now.Add(-time.Duration(rng.Intn(5000)) * time.Millisecond)
		}
		prev := rec
		var (
			o      Outcome
			op     string
			holder protocol.Holder
			epoch  uint64
		)
		switch r := rng.Intn(100); {
		case r < 45:
			op = "acquire"
			holder, epoch = pick(), around(prev.LastEpoch, 3, 13)
			if rng.Intn(8) == 0 && !prev.VoteHolder.IsZero() {
				holder, epoch = prev.VoteHolder, prev.VoteEpoch // a re-send
			}
			var proof *protocol.Token
			if rng.Intn(5) == 0 {
				p := tokenAt(around(prev.LastEpoch, 3, 25))
				proof = &p
			}
			o = stateRules.Acquire(prev, holder, epoch, randTTL(), proof, now)
			if o.Kind == protocol.KindVote && !o.Repeat {
				o.Next.Vote = crypto.PartialSig{Index: 1 + rng.Intn(4)} // the driver signs
			}
		case r < 65:
			op = "commit"
			e := around(prev.LastEpoch, 3, 15)
			if prev.VoteEpoch != 0 && rng.Intn(3) != 0 {
				e = prev.VoteEpoch
			}
			tok := tokenAt(e)
			sender := tok.Holder.ID
			if rng.Intn(4) == 0 {
				sender = pick().ID
			}
			o = stateRules.Commit(prev, sender, tok, ownerShown, randTTL(), now)
		case r < 80:
			op = "renew"
			holder, epoch = pick(), around(prev.LastEpoch, 2, 1)
			if prev.Lease.Holder.IsZero() == false && rng.Intn(2) == 0 {
				holder, epoch = prev.Lease.Holder, prev.Lease.Epoch
			}
			o = stateRules.Renew(prev, holder, epoch, randTTL(), now)
		case r < 92:
			op = "release"
			e := around(prev.LastEpoch, 2, 2)
			if prev.Lease.Holder.IsZero() == false && rng.Intn(2) == 0 {
				e = prev.Lease.Epoch
			}
			o = stateRules.Release(prev, tokenAt(e), ownerShown, now)
		default:
			op = "status"
			s := Status(prev, now)
			require.Equal(t, prev.LastEpoch, s.LastEpoch)
			require.Equal(t, prev.Certified, s.Certified)
			require.Equal(t, prev.Lease.Active(now), s.Holder.IsZero() == false)
			counts[op]++
			continue
		}
		// msg formats only when an assertion fails.
		msg := func(what string) []any {
			return []any{what + ": step %d (%s holder %q epoch %d at %v): %+v -> %+v (kind %d code %d %q)",
				step, op, holder, epoch, now.Sub(stateBase), prev, o.Next, o.Kind, o.Code, o.Message}
		}
		next := o.Next

		require.GreaterOrEqual(t, next.LastEpoch, prev.LastEpoch, msg("LastEpoch decreased")...)
		require.LessOrEqual(t, next.VoteEpoch, next.LastEpoch, msg("VoteEpoch above LastEpoch")...)
		require.LessOrEqual(t, next.Lease.Epoch, next.LastEpoch, msg("lease epoch above LastEpoch")...)
		if next.Certified != nil {
			require.LessOrEqual(t, next.Certified.Epoch, next.LastEpoch, msg("invariant")...)
			if prev.Certified != nil {
				require.GreaterOrEqual(t, next.Certified.Epoch, prev.Certified.Epoch, msg("invariant")...)
			}
		}
		if !o.Changed {
			require.Equal(t, prev, next, msg("unchanged outcome with a different record")...)
		}
		for _, a := range o.Audit {
			require.Equal(t, now, a.Time, msg("invariant")...)
		}
		switch {
		case o.Kind == protocol.KindVote && o.Repeat:
			counts["repeat"]++
			v, ok := voted[epoch]
			require.True(t, ok, msg("repeat of a vote never given")...)
			require.Equal(t, v, holder, msg("repeat for another holder")...)
			require.Equal(t, prev.Vote, next.Vote, msg("invariant")...)
			require.NotContains(t, stateKinds(o.Audit), AuditVote, msg("invariant")...)
		case o.Kind == protocol.KindVote:
			counts["vote"]++
			require.True(t, o.Changed, msg("invariant")...)
			require.Greater(t, epoch, prev.LastEpoch, msg("vote at or below the last epoch")...)
			if v, ok := voted[epoch]; ok {
				require.Equal(t, v, holder, msg("S1: second holder voted at one epoch")...)
			}
			if c, ok := certified[epoch]; ok {
				require.Equal(t, c, holder, msg("voted against a certified token")...)
			}
			voted[epoch] = holder
			require.Equal(t, epoch, next.VoteEpoch, msg("invariant")...)
			require.Equal(t, holder, next.VoteHolder, msg("invariant")...)
			require.Equal(t, epoch, next.LastEpoch, msg("invariant")...)
			require.Equal(t, Lease{Holder: holder, Epoch: epoch}, Lease{Holder: next.Lease.Holder, Epoch: next.Lease.Epoch}, msg("invariant")...)
			require.Contains(t, stateKinds(o.Audit), AuditVote, msg("invariant")...)
		case o.Kind == protocol.KindBusy:
			counts["busy"]++
			require.NotEqual(t, holder, o.Holder, msg("invariant")...)
			require.Positive(t, o.Left, msg("invariant")...)
		case o.Kind == protocol.KindRefuse:
			counts[fmt.Sprintf("%s refuse %d", op, o.Code)]++
			require.NotContains(t, stateKinds(o.Audit), AuditVote, msg("invariant")...)
		default:
			counts[op+" ok"]++
		}
		// The recorded vote always matches the vote log.
		if next.VoteEpoch != 0 {
			require.Equal(t, voted[next.VoteEpoch], next.VoteHolder, msg("invariant")...)
		}
		rec = next
	}
	t.Logf("outcomes %v; last epoch %d; %d epochs voted", counts, rec.LastEpoch, len(voted))
	// The walk must have exercised every path, or it proves little.
	for _, k := range []string{"vote", "repeat", "busy", "commit ok", "renew ok", "release ok", "status",
		fmt.Sprintf("acquire refuse %d", protocol.CodeStale), fmt.Sprintf("acquire refuse %d", protocol.CodeTooFar),
		fmt.Sprintf("commit refuse %d", protocol.CodeStale), fmt.Sprintf("renew refuse %d", protocol.CodeNotHolder),
		fmt.Sprintf("release refuse %d", protocol.CodeNotHolder)} {
		require.Positive(t, counts[k], "no %q outcome in the walk: %v", k, counts)
	}
}

// TestCommitAfterReleaseRefused: a holder that released cannot get its
// lease back by re-sending the Commit of the same token.
func TestCommitAfterReleaseRefused(t *testing.T) {
	r := Rules{MaxEpochStep: 10, VoteTimeout: 2 * time.Second, DefaultTTL: 10 * time.Second, MaxTTL: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := protocol.Token{Statement: protocol.Statement{Resource: "r", Epoch: 1, Holder: alice}}
	o := r.Acquire(Record{Resource: "r"}, alice, 1, time.Second, nil, now)
	require.Equal(t, protocol.KindVote, o.Kind)
	o = r.Commit(o.Next, alice.ID, tok, ownerShown, time.Second, now)
	require.Zero(t, o.Code)
	require.True(t, o.Next.Lease.Committed)
	o = r.Release(o.Next, tok, ownerShown, now)
	require.Zero(t, o.Code)
	o = r.Commit(o.Next, alice.ID, tok, ownerShown, time.Second, now)
	require.Equal(t, protocol.CodeNoLease, o.Code)
	require.Zero(t, o.Next.Lease.Holder)
	// The resource stays free for another holder at a higher epoch.
	o = r.Acquire(o.Next, bob, 2, time.Second, nil, now)
	require.Equal(t, protocol.KindVote, o.Kind)
}
