package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// TestRevokeRule: an operator revocation ends a committed lease or an
// uncommitted vote, keeps the last epoch (no second vote at it), refuses
// the old token's Commit and Renew afterwards, and audits who asked.
func TestRevokeRule(t *testing.T) {
	r := Rules{MaxEpochStep: 10, VoteTimeout: time.Second, DefaultTTL: time.Minute, MaxTTL: time.Hour}
	now := stateAt(0)
	holder := protocol.Holder{ID: "12D3KooWHolder", Session: protocol.SessionID{1}}
	other := protocol.Holder{ID: "12D3KooWOther", Session: protocol.SessionID{2}}
	rec := Record{Resource: "orders-db", LastEpoch: 4, VoteEpoch: 4, VoteHolder: holder,
		Lease: Lease{Holder: holder, Epoch: 4, Expires: now.Add(time.Hour), Committed: true}}

	// No lease, an expired lease, another epoch: nothing is revoked.
	o := r.Revoke(Record{Resource: "orders-db", LastEpoch: 4}, 0, "op", now)
	require.Equal(t, protocol.KindRefuse, o.Kind)
	require.Equal(t, protocol.CodeNoLease, o.Code)
	o = r.Revoke(rec, 0, "op", now.Add(2*time.Hour))
	require.Equal(t, protocol.CodeNoLease, o.Code)
	require.Equal(t, []AuditKind{AuditExpire}, stateKinds(o.Audit), "the lapse is audited, no revoke")
	o = r.Revoke(rec, 3, "op", now)
	require.Equal(t, protocol.CodeNotHolder, o.Code)
	require.False(t, o.Changed)

	o = r.Revoke(rec, 4, "operator revoke from 127.0.0.1:1", now)
	require.Zero(t, o.Kind)
	require.True(t, o.Changed)
	require.True(t, o.Next.Lease.Holder.IsZero())
	require.EqualValues(t, 4, o.Next.LastEpoch, "S1: the revoked epoch stays used up")
	require.EqualValues(t, 4, o.Next.Released)
	require.Equal(t, holder, o.Holder)
	require.False(t, o.Pending)
	require.Equal(t, []AuditKind{AuditRevoke}, stateKinds(o.Audit))
	require.Equal(t, "operator revoke from 127.0.0.1:1", o.Audit[0].Detail)
	require.Equal(t, holder.String(), o.Audit[0].Holder)

	// The old holder cannot bring the lease back here ...
	tok := stateTok(4, holder)
	c := r.Commit(o.Next, holder.ID, tok, ownerShown, time.Minute, now)
	require.Equal(t, protocol.KindRefuse, c.Kind)
	require.Equal(t, protocol.CodeNoLease, c.Code)
	rn := r.Renew(o.Next, holder, 4, time.Minute, now)
	require.Equal(t, protocol.KindRefuse, rn.Kind)
	// ... nobody gets a vote at the revoked epoch, and another holder
	// gets one above it.
	a := r.Acquire(o.Next, other, 4, time.Minute, nil, now)
	require.Equal(t, protocol.CodeStale, a.Code)
	a = r.Acquire(o.Next, other, 5, time.Minute, nil, now)
	require.Equal(t, protocol.KindVote, a.Kind)

	// An uncommitted vote is revoked too, and says so.
	voted := rec
	voted.Lease.Committed, voted.Lease.Expires = false, now.Add(time.Second)
	o = r.Revoke(voted, 0, "op", now)
	require.Zero(t, o.Kind)
	require.True(t, o.Pending)
}

// adminNode is node 1 with an admin secret, its admin API on a test
// server, and a driver for its handlers.
type adminNode struct {
	nodeDriver
	srv    *httptest.Server
	secret string
}

func startAdminNode(t *testing.T, store VoteStore) adminNode {
	t.Helper()
	lc := newLimitsCluster(t)
	h, err := transport.NewHost(lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	const secret = "0123456789abcdef-test-secret"
	n, err := New(Config{Cluster: lc.cluster, Share: lc.shares[0], AdminSecret: secret}, store, h, clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	srv := httptest.NewServer(n.AdminHandler())
	t.Cleanup(srv.Close)
	return adminNode{nodeDriver: nodeDriver{t: t, lc: lc, n: n}, srv: srv, secret: secret}
}

// hold acquires and commits resource at epoch for from's session s.
func (a adminNode) hold(from peer.ID, s byte, resource string, epoch uint64) protocol.Token {
	a.t.Helper()
	h := keyHolder(from.String(), s)
	r := a.acquire(from, h, resource, epoch)
	require.Equal(a.t, protocol.KindVote, r.Kind, r.Message)
	tok := a.token(a.lc.cluster.Statement(resource, epoch, h))
	require.Equal(a.t, protocol.CodeOK, a.commit(from, tok).Code)
	return tok
}

// TestAdminRevokeAndAudit drives POST /revoke and GET /audit: both need
// the admin secret; a revocation ends the lease at this node and is in
// the audit log that FetchAudit reads from the running node.
func TestAdminRevokeAndAudit(t *testing.T) {
	a := startAdminNode(t, NewMemStore())
	ctx := context.Background()
	tok := a.hold(a.lc.everything, 1, "orders-db", 1)

	// No secret, a wrong one: refused, nothing changes.
	resp, err := http.PostForm(a.srv.URL+PathRevoke, url.Values{"resource": {"orders-db"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	_, err = RevokeAt(ctx, a.srv.URL, "wrong", "orders-db", 0)
	require.ErrorIs(t, err, ErrAdminAuth)
	_, err = FetchAudit(ctx, a.srv.URL, "wrong", func(AuditEntry) error { return nil })
	require.ErrorIs(t, err, ErrAdminAuth)
	require.True(t, a.record("orders-db").Lease.Committed)

	// Another epoch: left alone.
	_, err = RevokeAt(ctx, a.srv.URL, a.secret, "orders-db", 7)
	require.ErrorIs(t, err, ErrOtherEpoch)
	_, err = RevokeAt(ctx, a.srv.URL, a.secret, "bad name", 0)
	require.Error(t, err)

	rv, err := RevokeAt(ctx, strings.TrimPrefix(a.srv.URL, "http://"), a.secret, "orders-db", 1)
	require.NoError(t, err)
	require.Equal(t, RevokeReply{Node: 1, Resource: "orders-db", Epoch: 1, HolderID: tok.Holder.ID,
		SessionHash: tok.Holder.Session.Hash().String(), Committed: true, LeftMS: rv.LeftMS}, rv)
	require.Positive(t, rv.LeftMS)
	require.True(t, a.record("orders-db").Lease.Holder.IsZero())
	_, err = RevokeAt(ctx, a.srv.URL, a.secret, "orders-db", 0)
	require.ErrorIs(t, err, ErrNoLease)
	// The holder's Commit cannot bring it back.
	require.Equal(t, protocol.CodeNoLease, a.commit(a.lc.everything, tok).Code)

	var kinds []AuditKind
	sum, err := FetchAudit(ctx, a.srv.URL, a.secret, func(e AuditEntry) error { kinds = append(kinds, e.Kind); return nil })
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	require.Equal(t, []AuditKind{AuditVote, AuditCommit, AuditRevoke}, kinds)
	require.EqualValues(t, 3, sum.Sequence)
	v, ok := metricValue(t, a.n, MetricAuditEntries, "kind", string(AuditRevoke))
	require.True(t, ok)
	require.EqualValues(t, 1, v)

	// A node without a secret has its operator endpoints off.
	lc := a.lc
	h, err := transport.NewHost(lc.ids[1], nil, transport.NewGater())
	require.NoError(t, err)
	defer h.Close()
	n2, err := New(Config{Cluster: lc.cluster, Share: lc.shares[1]}, NewMemStore(), h, clockwork.NewRealClock())
	require.NoError(t, err)
	defer n2.Close()
	srv2 := httptest.NewServer(n2.AdminHandler())
	defer srv2.Close()
	_, err = RevokeAt(ctx, srv2.URL, "", "orders-db", 0)
	require.ErrorIs(t, err, ErrAdminAuth)
}

// TestFetchAuditPages reads a log longer than one page through the admin
// API: every entry once, in order, and the summary matches ReadAudit's.
func TestFetchAuditPages(t *testing.T) {
	a := startAdminNode(t, NewMemStore())
	ctx := context.Background()
	for e := uint64(1); e <= MaxAuditPage+5; e++ {
		require.NoError(t, a.n.store.Save(ctx, Record{Resource: "r", LastEpoch: e}, AuditEntry{Kind: AuditSeen, Resource: "r", Epoch: e}))
	}
	var next uint64 = 1
	sum, err := FetchAudit(ctx, a.srv.URL, a.secret, func(e AuditEntry) error {
		require.Equal(t, next, e.Seq)
		next++
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	require.EqualValues(t, MaxAuditPage+5, sum.Entries)
	require.EqualValues(t, MaxAuditPage+5, sum.Sequence)
}

// locksPage asks node 1 for a page of leases as from.
func (a adminNode) locksPage(from peer.ID, after string, limit uint32) protocol.LocksReply {
	a.t.Helper()
	b := a.call(from, protocol.ProtoLocks, protocol.LocksRequest{Cluster: a.lc.cluster.ID, After: after, Limit: limit}.Marshal())
	r, err := protocol.UnmarshalLocksReply(b)
	require.NoError(a.t, err)
	return r
}

// TestLocksHandler: a node lists its live committed leases in order, a
// page at a time; a client sees only what its patterns allow, a member
// everything; holders show a session hash, never the session.
func TestLocksHandler(t *testing.T) {
	a := startAdminNode(t, NewMemStore())
	lc := a.lc
	a.hold(lc.everything, 1, "jobs/a", 1)
	a.hold(lc.ordersOnly, 2, "orders-1", 1)
	tok := a.hold(lc.ordersOnly, 3, "orders-2", 1)
	// An uncommitted vote and a released lease are not live leases.
	r := a.acquire(lc.everything, keyHolder(lc.everything.String(), 4), "jobs/b", 1)
	require.Equal(t, protocol.KindVote, r.Kind)
	rel := a.hold(lc.everything, 5, "jobs/c", 1)
	require.Equal(t, protocol.CodeOK, a.release(lc.everything, rel).Code)

	member, err := peer.IDFromPrivateKey(lc.ids[1])
	require.NoError(t, err)
	all := a.locksPage(member, "", 0)
	require.Equal(t, protocol.CodeOK, all.Code)
	require.Empty(t, all.Next)
	var names []string
	for _, l := range all.Leases {
		names = append(names, l.Resource)
	}
	require.Equal(t, []string{"jobs/a", "orders-1", "orders-2"}, names)
	last := all.Leases[2]
	require.Equal(t, tok.Holder.ID, last.HolderID)
	require.Equal(t, tok.Holder.Session.Hash(), last.Session)
	require.EqualValues(t, 1, last.Epoch)
	require.Positive(t, last.Left)

	// A client sees its patterns' resources only.
	own := a.locksPage(lc.ordersOnly, "", 0)
	require.Len(t, own.Leases, 2)
	require.Equal(t, "orders-1", own.Leases[0].Resource)

	// Pages of one lease: each Next goes on where the last stopped.
	var paged []string
	after := ""
	for i := 0; i < 10; i++ {
		p := a.locksPage(lc.everything, after, 1)
		for _, l := range p.Leases {
			paged = append(paged, l.Resource)
		}
		if p.Next == "" {
			break
		}
		require.Greater(t, p.Next, after)
		after = p.Next
	}
	require.Equal(t, names, paged)

	// A stranger (the gater keeps it out; the handler refuses it too) and
	// another cluster are refused.
	require.Equal(t, protocol.CodeUnauthorised, a.locksPage(lc.stranger, "", 0).Code)
	b := a.call(lc.everything, protocol.ProtoLocks, protocol.LocksRequest{After: ""}.Marshal())
	wrong, err := protocol.UnmarshalLocksReply(b)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeWrongCluster, wrong.Code)
}

// TestLocksScanBounded: one page reads at most maxLocksScan records; a
// page that stopped there says where to go on.
func TestLocksScanBounded(t *testing.T) {
	s := NewMemStore()
	ctx := context.Background()
	for i := 0; i < maxLocksScan+10; i++ {
		require.NoError(t, s.Save(ctx, Record{Resource: fmt.Sprintf("r%05d", i), LastEpoch: 1}))
	}
	a := startAdminNode(t, s)
	p := a.locksPage(a.lc.everything, "", 0)
	require.Empty(t, p.Leases)
	require.NotEmpty(t, p.Next, "the page stopped at the scan bound")
	p2 := a.locksPage(a.lc.everything, p.Next, 0)
	require.Empty(t, p2.Next, "the rest fits one page")
}

// TestEvidenceMetricByMember: verified evidence against member 2 counts
// under member="2"; every member's series exists from the start; the
// causes of turned-away requests are a fixed set.
func TestEvidenceMetricByMember(t *testing.T) {
	a := startAdminNode(t, NewMemStore())
	lc := a.lc
	for i := 1; i <= 4; i++ {
		v, ok := metricValue(t, a.n, MetricEvidence, "member", strconv.Itoa(i))
		require.True(t, ok, "member %d", i)
		require.Zero(t, v)
	}
	vote := func(s byte) protocol.SignedVote {
		st := lc.cluster.Statement("orders-db", 3, keyHolder(lc.everything.String(), s))
		sig, err := lc.ids[1].Sign(st.VoteBytes())
		require.NoError(t, err)
		return protocol.SignedVote{Node: 2, Statement: st, IdentitySig: sig}
	}
	ev := protocol.Evidence{A: vote(1), B: vote(2)}
	ack, err := protocol.UnmarshalAck(a.call(lc.everything, protocol.ProtoEvidence, ev.Marshal()))
	require.NoError(t, err)
	require.Equal(t, protocol.CodeOK, ack.Code, ack.Message)
	v, _ := metricValue(t, a.n, MetricEvidence, "member", "2")
	require.EqualValues(t, 1, v)
	v, _ = metricValue(t, a.n, MetricEvidenceRecorded, "member", "2")
	require.EqualValues(t, 1, v)
	v, _ = metricValue(t, a.n, MetricEvidence, "member", "1")
	require.Zero(t, v)

	// An unauthorised Status counts under its cause.
	a.call(lc.ordersOnly, protocol.ProtoStatus, protocol.StatusRequest{Resource: "jobs/x"}.Marshal())
	v, _ = metricValue(t, a.n, MetricTurnedAway, "cause", TurnedAwayUnauthorised)
	require.EqualValues(t, 1, v)
	fams, err := a.n.MetricsRegistry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != MetricTurnedAway {
			continue
		}
		require.Len(t, f.GetMetric(), len(turnedAwayCauses))
	}
}
