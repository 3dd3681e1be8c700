package node

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// certVotes are members' real identity signatures over st's VoteBytes.
func (d nodeDriver) certVotes(st protocol.Statement, members ...int) []protocol.CertVote {
	d.t.Helper()
	out := make([]protocol.CertVote, 0, len(members))
	for _, m := range members {
		sig, err := d.lc.ids[m-1].Sign(st.VoteBytes())
		require.NoError(d.t, err)
		out = append(out, protocol.CertVote{Node: m, Sig: sig})
	}
	return out
}

// commitCert commits tok from its holder with its key and a certificate
// of members' votes.
func (d nodeDriver) commitCert(from peer.ID, tok protocol.Token, votes []protocol.CertVote) protocol.Ack {
	return d.commitReq(from, protocol.CommitRequest{Token: tok, TTL: 10 * time.Second, Key: keyOf(tok.Holder), Certificate: votes})
}

// forensics asks node 1 for its certificates at (resource, epoch) as from.
func (d nodeDriver) forensics(from peer.ID, resource string, epoch uint64) protocol.ForensicsReply {
	d.t.Helper()
	req := protocol.ForensicsRequest{Cluster: d.lc.cluster.ID, Resource: resource, Epoch: epoch}
	r, err := protocol.UnmarshalForensicsReply(d.call(from, protocol.ProtoForensics, req.Marshal()))
	require.NoError(d.t, err)
	return r
}

func newCertDriver(t *testing.T, store VoteStore) nodeDriver {
	lc := newLimitsCluster(t)
	return nodeDriver{t: t, lc: lc, n: lc.startNode1(t, store, Limits{}, "")}
}

// TestCommitKeepsCertificate checks that a Commit's certificate is kept
// with the commit and given out by Forensics, once per holder; and that a
// fork's second certificate is kept too, so that the two convict.
func TestCommitKeepsCertificate(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	a, b := d.lc.everything, d.lc.ordersOnly
	ha, hb := limitsHolder(a.String()), limitsHolder(b.String())
	stA := d.lc.cluster.Statement("orders-1", 5, ha)
	tokA := d.token(stA)

	require.Equal(t, protocol.CodeOK, d.commitCert(a, tokA, d.certVotes(stA, 1, 2, 3)).Code)
	rec := d.record("orders-1")
	require.Len(t, rec.Certificates, 1)
	require.Equal(t, []int{1, 2, 3}, rec.Certificates[0].Signers())
	require.True(t, rec.Lease.Committed, "the commit started the lease")
	got := d.forensics(a, "orders-1", 5)
	require.Equal(t, protocol.CodeOK, got.Code)
	require.Len(t, got.Certificates, 1)
	require.NoError(t, protocol.VerifyCertificate(d.lc.cluster, got.Certificates[0]))
	require.Empty(t, d.forensics(a, "orders-1", 4).Certificates)

	// The same holder again, with other voters: nothing more is kept.
	require.Equal(t, protocol.CodeOK, d.commitCert(a, tokA, d.certVotes(stA, 2, 3, 4)).Code)
	require.Len(t, d.record("orders-1").Certificates, 1)

	// A fork: members 2 and 3 also voted for b at epoch 5. Its Commit is
	// relayed by a member: refused as a fork (recorded), and its
	// certificate is kept.
	stB := d.lc.cluster.Statement("orders-1", 5, hb)
	tokB := d.token(stB)
	member2 := peerOf(t, d.lc.cluster.File.Nodes[1].PeerID)
	require.Equal(t, protocol.CodeFork, d.commitReq(member2, protocol.CommitRequest{Token: tokB, Certificate: d.certVotes(stB, 2, 3, 4)}).Code)
	require.Equal(t, 1, d.n.Forks())
	got = d.forensics(b, "orders-1", 5)
	require.Len(t, got.Certificates, 2)
	v := protocol.Convict(d.lc.cluster, "orders-1", 5, got.Certificates)
	require.True(t, v.Fork())
	require.Len(t, v.Culprits, 2)
	require.Equal(t, 2, v.Culprits[0].Node)
	require.Equal(t, 3, v.Culprits[1].Node)

	// A third holder at the same epoch is not kept: two per epoch.
	hc := keyHolder(a.String(), 9)
	stC := d.lc.cluster.Statement("orders-1", 5, hc)
	require.Equal(t, protocol.CodeFork, d.commitReq(member2, protocol.CommitRequest{Token: d.token(stC), Certificate: d.certVotes(stC, 1, 2, 3)}).Code)
	require.Len(t, d.record("orders-1").Certificates, 2)
}

// TestCommitRefusesBadCertificate checks that a Commit whose certificate
// does not verify, or is not for its token, is refused whole: no lease,
// nothing kept, and no pairing was needed to tell.
func TestCommitRefusesBadCertificate(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	a := d.lc.everything
	h := limitsHolder(a.String())
	st := d.lc.cluster.Statement("jobs", 3, h)
	tok := d.token(st)
	other := d.lc.cluster.Statement("jobs", 3, keyHolder(a.String(), 9))
	tampered := d.certVotes(st, 1, 2, 3)
	tampered[1].Sig = append([]byte(nil), tampered[1].Sig...)
	tampered[1].Sig[7] ^= 1
	byOther := d.certVotes(st, 1, 2, 3)
	byOther[2].Sig = d.certVotes(st, 4)[0].Sig // member 4's signature, claimed as member 3's
	for _, tc := range []struct {
		name  string
		votes []protocol.CertVote
	}{
		{"a forged vote", tampered},
		{"a vote signed by another member", byOther},
		{"votes for another holder", d.certVotes(other, 1, 2, 3)},
		{"votes for another epoch", d.certVotes(d.lc.cluster.Statement("jobs", 4, h), 1, 2, 3)},
		{"fewer than t votes", d.certVotes(st, 1, 2)},
		{"a member outside the cluster", append(d.certVotes(st, 1, 2, 3), protocol.CertVote{Node: 5, Sig: tampered[0].Sig})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack := d.commitCert(a, tok, tc.votes)
			require.Equal(t, protocol.CodeBadRequest, ack.Code)
			require.Contains(t, ack.Message, "certificate")
			rec := d.record("jobs")
			require.Empty(t, rec.Certificates)
			require.False(t, rec.Lease.Committed)
		})
	}
	require.Zero(t, d.n.LimitStats().TokenChecks, "a bad certificate is refused before the token is checked")
}

// TestCommitWithoutCertificate checks that a Commit without a
// certificate (a client of the earlier release, on either protocol ID)
// still starts the lease.
func TestCommitWithoutCertificate(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	a := d.lc.everything
	for i, proto := range []string{protocol.ProtoCommit, protocol.ProtoCommitV2} {
		res := []string{"old-1", "old-2"}[i]
		tok := d.token(d.lc.cluster.Statement(res, 1, limitsHolder(a.String())))
		ack := d.ack(a, proto, protocol.CommitRequest{Token: tok, TTL: 10 * time.Second, Key: keyOf(tok.Holder)}.Marshal())
		require.Equal(t, protocol.CodeOK, ack.Code, proto)
		rec := d.record(res)
		require.True(t, rec.Lease.Committed, proto)
		require.Empty(t, rec.Certificates)
	}
	// The earlier ID is guarded as a Commit: a client may not commit a
	// resource its patterns do not allow.
	tok := d.token(d.lc.cluster.Statement("jobs", 1, limitsHolder(d.lc.ordersOnly.String())))
	ack := d.ack(d.lc.ordersOnly, protocol.ProtoCommitV2, protocol.CommitRequest{Token: tok, Key: keyOf(tok.Holder)}.Marshal())
	require.Equal(t, protocol.CodeUnauthorised, ack.Code)
}

// TestCertificatesBoundedPerResource checks that a resource keeps the
// certificates of at most CertificateEpochs epochs, however many Commits
// peers send, and a fork's in preference.
func TestCertificatesBoundedPerResource(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	a, b := d.lc.everything, d.lc.ordersOnly
	member2 := peerOf(t, d.lc.cluster.File.Nodes[1].PeerID)
	commitWant := func(want protocol.Code, epoch uint64, h protocol.Holder) {
		st := d.lc.cluster.Statement("orders-x", epoch, h)
		ack := d.commitReq(member2, protocol.CommitRequest{Token: d.token(st), Certificate: d.certVotes(st, 1, 2, 3)})
		require.Equal(t, want, ack.Code)
	}
	commit := func(epoch uint64, h protocol.Holder) { commitWant(protocol.CodeOK, epoch, h) }
	commit(1, limitsHolder(a.String()))
	// A fork at epoch 1: refused, recorded, and its certificate kept.
	commitWant(protocol.CodeFork, 1, limitsHolder(b.String()))
	require.Equal(t, 1, d.n.Forks())
	for e := uint64(2); e <= 12; e++ {
		commit(e, limitsHolder(a.String()))
	}
	rec := d.record("orders-x")
	epochs := map[uint64]int{}
	for _, c := range rec.Certificates {
		epochs[c.Statement.Epoch]++
	}
	require.Len(t, epochs, CertificateEpochs)
	require.Equal(t, 2, epochs[1], "the fork is kept")
	for e := uint64(10); e <= 12; e++ {
		require.Equal(t, 1, epochs[e], "epoch %d", e)
	}
	require.LessOrEqual(t, len(rec.Certificates), CertificateEpochs*protocol.MaxCertificatesPerEpoch)
	// An epoch older than every kept one is not kept.
	commit(3, limitsHolder(b.String()))
	require.Len(t, d.record("orders-x").Certificates, len(rec.Certificates))
}

// TestKeepCertificate checks the pure rule over a record.
func TestKeepCertificate(t *testing.T) {
	st := func(epoch uint64, s byte) protocol.Statement {
		return protocol.Statement{Resource: "r", Epoch: epoch, Holder: keyHolder("12D3KooWHolder", s)}
	}
	cert := func(epoch uint64, s byte) protocol.Certificate {
		return protocol.Certificate{Statement: st(epoch, s), Votes: []protocol.CertVote{{Node: 1, Sig: make([]byte, 64)}}}
	}
	tok := func(epoch uint64, s byte) protocol.Token { return protocol.Token{Statement: st(epoch, s)} }
	keep := func(rec Record, epoch uint64, s byte) (Record, bool) {
		return keepCertificate(rec, cert(epoch, s), tok(epoch, s))
	}
	epochsOf := func(r Record) []uint64 {
		var out []uint64
		for _, c := range r.Certificates {
			out = append(out, c.Statement.Epoch)
		}
		return out
	}
	tokenEpochs := func(r Record) []uint64 {
		var out []uint64
		for _, t := range r.CertTokens {
			out = append(out, t.Epoch)
		}
		slices.Sort(out)
		return out
	}
	rec := Record{Resource: "r"}
	var changed bool
	for _, e := range []uint64{5, 3, 4, 6} {
		rec, changed = keep(rec, e, 1)
		require.True(t, changed)
	}
	require.Equal(t, []uint64{3, 4, 5, 6}, epochsOf(rec), "in epoch order")
	_, changed = keep(rec, 4, 1)
	require.False(t, changed, "the same holder again")
	rec, changed = keep(rec, 3, 2)
	require.True(t, changed, "a fork at 3")
	require.Equal(t, []protocol.Token{tok(3, 1), tok(3, 2)}, tokensAt(rec, 3), "both tokens of the fork")
	_, changed = keep(rec, 3, 3)
	require.False(t, changed, "a third holder")
	_, changed = keep(rec, 2, 1)
	require.False(t, changed, "older than every kept epoch")
	rec, changed = keep(rec, 7, 1)
	require.True(t, changed)
	require.Equal(t, []uint64{3, 3, 5, 6, 7}, epochsOf(rec), "epoch 4 made room, the fork stayed")
	require.Equal(t, epochsOf(rec), tokenEpochs(rec), "the tokens follow their certificates")
	require.Empty(t, tokensAt(rec, 4))

	// A record of an earlier release keeps no tokens with its
	// certificates: its certified token is shown.
	old := Record{Resource: "r", Certified: &protocol.Token{Statement: st(9, 4)}}
	require.Equal(t, []protocol.Token{*old.Certified}, tokensAt(old, 9))
	require.Empty(t, tokensAt(old, 8))
	rec.Certified = &protocol.Token{Statement: st(3, 1)}
	require.Len(t, tokensAt(rec, 3), 2, "the certified token is not shown twice")
}

// TestCertificatesSurviveRestart checks that certificates are as durable
// as the commit that carried them (the bbolt store, reopened).
func TestCertificatesSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "votes.db")
	s, err := OpenBoltStore(path)
	require.NoError(t, err)
	d := newCertDriver(t, s)
	a := d.lc.everything
	st := d.lc.cluster.Statement("orders-d", 2, limitsHolder(a.String()))
	require.Equal(t, protocol.CodeOK, d.commitCert(a, d.token(st), d.certVotes(st, 2, 3, 4)).Code)
	require.NoError(t, d.n.Close())
	require.NoError(t, s.Close())

	s2, err := OpenBoltStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	h, err := transport.NewHost(d.lc.ids[0], nil, transport.NewGater())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	n2, err := New(Config{Cluster: d.lc.cluster, Share: d.lc.shares[0]}, s2, h, clockwork.NewRealClock())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })
	d2 := nodeDriver{t: t, lc: d.lc, n: n2}
	got := d2.forensics(a, "orders-d", 2)
	require.Len(t, got.Certificates, 1)
	require.Equal(t, []int{2, 3, 4}, got.Certificates[0].Signers())
	require.NoError(t, protocol.VerifyCertificate(d.lc.cluster, got.Certificates[0]))
}

// TestForensicsAuthorised checks that Forensics is authorised as Status
// is: members and clients allowed the resource; others are refused
// before anything is loaded.
func TestForensicsAuthorised(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	member3 := peerOf(t, d.lc.cluster.File.Nodes[2].PeerID)
	require.Equal(t, protocol.CodeOK, d.forensics(member3, "jobs", 1).Code)
	require.Equal(t, protocol.CodeOK, d.forensics(d.lc.everything, "jobs", 1).Code)
	require.Equal(t, protocol.CodeUnauthorised, d.forensics(d.lc.ordersOnly, "jobs", 1).Code)
	require.Equal(t, protocol.CodeUnauthorised, d.forensics(d.lc.stranger, "jobs", 1).Code)
	req := protocol.ForensicsRequest{Cluster: protocol.ClusterID{1}, Resource: "jobs", Epoch: 1}
	r, err := protocol.UnmarshalForensicsReply(d.call(d.lc.everything, protocol.ProtoForensics, req.Marshal()))
	require.NoError(t, err)
	require.Equal(t, protocol.CodeWrongCluster, r.Code)
}

// TestCommitCertificateWithOwnVote checks the node's shortcut for its own
// vote in a Commit's certificate: the vote it gave, byte for byte, is
// taken; its index with other bytes, or its signature of another
// statement, is refused as before.
func TestCommitCertificateWithOwnVote(t *testing.T) {
	d := newCertDriver(t, NewMemStore())
	a := d.lc.everything
	h := limitsHolder(a.String())
	own := func(resource string, epoch uint64) (protocol.Statement, protocol.CertVote) {
		r := d.acquire(a, h, resource, epoch)
		require.Equal(t, protocol.KindVote, r.Kind, r.Message)
		return d.lc.cluster.Statement(resource, epoch, h), protocol.CertVote{Node: 1, Sig: r.IdentitySig}
	}

	st, mine := own("jobs", 3)
	ack := d.commitCert(a, d.token(st), append([]protocol.CertVote{mine}, d.certVotes(st, 2, 3)...))
	require.Equal(t, protocol.CodeOK, ack.Code, ack.Message)
	require.True(t, d.record("jobs").Lease.Committed)

	st, mine = own("queue", 5)
	spoilt := protocol.CertVote{Node: 1, Sig: append([]byte(nil), mine.Sig...)}
	spoilt.Sig[9] ^= 1
	other := d.lc.cluster.Statement("queue", 5, keyHolder(a.String(), 9))
	for _, tc := range []struct {
		name  string
		stmt  protocol.Statement
		votes []protocol.CertVote
	}{
		{"its index with other bytes", st, append([]protocol.CertVote{spoilt}, d.certVotes(st, 2, 3)...)},
		{"its signature for another holder", other, append([]protocol.CertVote{mine}, d.certVotes(other, 2, 3)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack := d.commitCert(a, d.token(tc.stmt), tc.votes)
			require.Equal(t, protocol.CodeBadRequest, ack.Code)
			require.Contains(t, ack.Message, "certificate")
			require.False(t, d.record("queue").Lease.Committed)
		})
	}
}
