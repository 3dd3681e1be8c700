package protocol

import (
	mrand "math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
)

// seeded returns a deterministic randomness source: tests never read
// crypto/rand.
func seeded(seed int64) *mrand.Rand { return mrand.New(mrand.NewSource(seed)) }

// fixture is a 4-node, t=3 key dealt from a fixed seed, with one real token.
// Dealing and combining cost pairings, so it is built once per test binary.
type fixture struct {
	gk     *crypto.GroupKey
	shares []*crypto.Share
	// stmt and tok are the reference statement and its valid token.
	stmt Statement
	tok  Token
	// partial is share 1's partial signature over stmt, and identitySig
	// stands in for that node's identity signature over stmt.VoteBytes().
	partial     crypto.PartialSig
	identitySig []byte
}

var (
	fixOnce sync.Once
	fix     fixture
	fixErr  error
)

// testHolder is the reference holder: a client identity and one lock
// session of it. otherHolder is a different client; sameIDHolder is another
// session of testHolder's identity (a replica sharing its key).
var (
	testHolder   = Holder{ID: "12D3KooWHolderPeerID", Session: SessionID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	otherHolder  = Holder{ID: "12D3KooWOtherPeer", Session: SessionID{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}}
	sameIDHolder = Holder{ID: testHolder.ID, Session: SessionID{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}}
	// testSession is the session the reference tokens name.
	testSession = testHolder.Session
	// testKey and sameIDKey are session keys the reference requests
	// carry; testRef and otherRef name holders in replies.
	testKey   = SessionKey{1: 0x11, 2: 0x22, 31: 0x7f}
	sameIDKey = SessionKey{0: 0xee, 30: 0x01}
	testRef   = testHolder.Ref()
	otherRef  = otherHolder.Ref()
	sameIDRef = sameIDHolder.Ref()
)

func testFixture(tb testing.TB) fixture {
	tb.Helper()
	fixOnce.Do(func() {
		fix.gk, fix.shares, fixErr = crypto.Deal(seeded(1), 4, 3)
		if fixErr != nil {
			return
		}
		fix.stmt = Statement{
			Cluster:  NewClusterID("test-cluster", fix.gk.PublicKey()),
			Resource: "orders-db",
			Epoch:    42,
			Holder:   testHolder,
		}
		fix.tok, fixErr = fix.signToken(fix.stmt)
		if fixErr != nil {
			return
		}
		fix.partial, fixErr = fix.shares[0].Sign(fix.stmt.SignedBytes())
		fix.identitySig = make([]byte, 64)
		_, _ = seeded(2).Read(fix.identitySig)
	})
	require.NoError(tb, fixErr)
	return fix
}

// signToken signs st with shares 1..3 and combines the partials.
func (f fixture) signToken(st Statement) (Token, error) {
	msg := st.SignedBytes()
	ps := make([]crypto.PartialSig, 0, 3)
	for _, s := range f.shares[:3] {
		p, err := s.Sign(msg)
		if err != nil {
			return Token{}, err
		}
		ps = append(ps, p)
	}
	sig, _, err := f.gk.Combine(msg, ps)
	if err != nil {
		return Token{}, err
	}
	return Token{Statement: st, Signature: sig}, nil
}

func (f fixture) mustSign(tb testing.TB, st Statement) Token {
	tb.Helper()
	tok, err := f.signToken(st)
	require.NoError(tb, err)
	require.NoError(tb, f.gk.Verify(st.SignedBytes(), tok.Signature))
	return tok
}

// namedMsg is one valid value of a message type, with its encoding and a
// decoder that returns the decoded value as any (or the zero value on error).
type namedMsg struct {
	name   string
	value  any
	enc    []byte
	decode func([]byte) (any, error)
}

func decodeAs[M any](f func([]byte) (M, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) { return f(b) }
}

// validMessages returns at least one valid value of every message type, and
// of every optional or variant part (token present or absent, reply kinds).
func validMessages(tb testing.TB) []namedMsg {
	tb.Helper()
	fx := testFixture(tb)
	tok := fx.tok
	st := fx.stmt
	voteA := SignedVote{Node: 2, Statement: st, IdentitySig: fx.identitySig}
	stB := st
	stB.Holder = otherHolder
	voteB := SignedVote{Node: 2, Statement: stB, IdentitySig: fx.identitySig}
	stC := st
	stC.Holder = sameIDHolder
	voteC := SignedVote{Node: 2, Statement: stC, IdentitySig: fx.identitySig}
	place42, place43 := testClaim(fx, 42, 2)[0], testClaim(fx, 43, 2)[0]
	msgs := []struct {
		name  string
		value interface{ Marshal() []byte }
		dec   func([]byte) (any, error)
	}{
		{"StatusRequest", StatusRequest{Resource: st.Resource}, decodeAs(UnmarshalStatusRequest)},
		{"StatusReply/empty", StatusReply{}, decodeAs(UnmarshalStatusReply)},
		{"StatusReply/no-token", StatusReply{LastEpoch: 41, Holder: testRef, LeaseEpoch: 41, LeaseLeft: 1500 * time.Millisecond}, decodeAs(UnmarshalStatusReply)},
		{"StatusReply/reserved", StatusReply{LastEpoch: 42, Reserved: otherRef, ReservedLeft: 700 * time.Millisecond}, decodeAs(UnmarshalStatusReply)},
		{"StatusReply/certified", StatusReply{LastEpoch: 42, Holder: testRef, LeaseEpoch: 42, LeaseLeft: 30 * time.Second, Certified: &tok}, decodeAs(UnmarshalStatusReply)},
		{"AcquireRequest/no-proof", AcquireRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: 43, Key: testKey, TTL: 30 * time.Second}, decodeAs(UnmarshalAcquireRequest)},
		{"AcquireRequest/proof", AcquireRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: 43, Key: sameIDKey, TTL: MaxTTL, Proof: &tok}, decodeAs(UnmarshalAcquireRequest)},
		{"AcquireReply/vote", AcquireReply{Kind: KindVote, Partial: fx.partial, IdentitySig: fx.identitySig}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/busy", AcquireReply{Kind: KindBusy, Holder: otherRef, LeaseEpoch: 42, Left: 2500 * time.Millisecond}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/busy-pending", AcquireReply{Kind: KindBusy, Holder: otherRef, LeaseEpoch: 43, Left: 180 * time.Millisecond, Pending: true}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/busy-same-identity", AcquireReply{Kind: KindBusy, Holder: sameIDRef, LeaseEpoch: 42, Left: time.Second}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/queued", AcquireReply{Kind: KindQueued, Holder: otherRef, Left: 900 * time.Millisecond}, decodeAs(UnmarshalAcquireReply)},
		{"WaitRequest", WaitRequest{Cluster: st.Cluster, Resource: st.Resource, Key: waitKey, MaxWait: 4 * time.Second, Claim: testClaim(fx, 41, 1, 2)}, decodeAs(UnmarshalWaitRequest)},
		{"WaitRequest/register", WaitRequest{Cluster: st.Cluster, Resource: st.Resource, Key: waitKey}, decodeAs(UnmarshalWaitRequest)},
		{"WaitRequest/epoch", WaitRequest{Cluster: st.Cluster, Resource: st.Resource, Key: waitKey, MaxWait: 4 * time.Second, Epoch: 43, TTL: 10 * time.Second}, decodeAs(UnmarshalWaitRequest)},
		{"WaitRequest/epoch-default-ttl", WaitRequest{Cluster: st.Cluster, Resource: st.Resource, Key: waitKey, Epoch: ^uint64(0)}, decodeAs(UnmarshalWaitRequest)},
		{"WaitReply/free", WaitReply{Free: true, LastEpoch: 42, Cohort: 42, Place: &place42}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/free-vote", WaitReply{Free: true, LastEpoch: 43, Cohort: 42, Place: &place42, Vote: &WaitVote{Epoch: 43, Partial: fx.partial, IdentitySig: fx.identitySig}}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/free-vote-repeat", WaitReply{Free: true, LastEpoch: 45, Vote: &WaitVote{Epoch: 43, Partial: fx.partial, IdentitySig: fx.identitySig}}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/held", WaitReply{LastEpoch: 42, Holder: otherHolder.Ref(), LeaseEpoch: 42, Left: 2 * time.Second, Cohort: 42, Place: &place42}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/reserved", WaitReply{LastEpoch: 42, Holder: otherHolder.Ref(), Left: 700 * time.Millisecond, Pending: true, Cohort: 43, Place: &place43}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/no-room", WaitReply{LastEpoch: 42, Holder: otherHolder.Ref(), LeaseEpoch: 42, Left: time.Second}, decodeAs(UnmarshalWaitReply)},
		{"WaitReply/refused", WaitReply{Code: CodeUnauthorised, Message: "may not acquire"}, decodeAs(UnmarshalWaitReply)},
		{"AcquireReply/refuse", AcquireReply{Kind: KindRefuse, Code: CodeStale, LastEpoch: 42, Message: "epoch 40 is not above 42"}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/refuse-other-era", AcquireReply{Kind: KindRefuse, Code: CodeOtherEra, LastEpoch: 1 << EraBits, Message: "this node belongs to an earlier era; stop it"}, decodeAs(UnmarshalAcquireReply)},
		{"AcquireReply/refuse-no-message", AcquireReply{Kind: KindRefuse, Code: CodeTooFar, LastEpoch: 1}, decodeAs(UnmarshalAcquireReply)},
		{"CommitRequest", CommitRequest{Token: tok, TTL: 30 * time.Second}, decodeAs(UnmarshalCommitRequest)},
		{"CommitRequest/key", CommitRequest{Token: tok, TTL: 30 * time.Second, Key: testKey}, decodeAs(UnmarshalCommitRequest)},
		{"CommitRequest/token-release", CommitRequest{Token: tok, Key: testKey, TokenRelease: true}, decodeAs(UnmarshalCommitRequest)},
		{"CommitRequest/certificate", CommitRequest{Token: tok, TTL: 30 * time.Second, Key: testKey, Certificate: testCertVotes(fx, 1, 2, 3)}, decodeAs(UnmarshalCommitRequest)},
		{"RenewRequest", RenewRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: 42, Key: testKey, TTL: 10 * time.Second}, decodeAs(UnmarshalRenewRequest)},
		{"AbandonRequest", AbandonRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: 43, Key: testKey}, decodeAs(UnmarshalAbandonRequest)},
		{"StatusReply/vote", StatusReply{LastEpoch: 42, Certified: &tok, Vote: &voteA}, decodeAs(UnmarshalStatusReply)},
		{"AcquireRequest/votes", AcquireRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: 43, Key: testKey, TTL: time.Second, Votes: []SignedVote{voteA, voteB}}, decodeAs(UnmarshalAcquireRequest)},
		{"SignedVote", voteA, decodeAs(UnmarshalSignedVote)},
		{"Evidence", Evidence{A: voteA, B: voteB}, decodeAs(UnmarshalEvidence)},
		{"Evidence/same-identity", Evidence{A: voteA, B: voteC}, decodeAs(UnmarshalEvidence)},
		{"ReleaseRequest", ReleaseRequest{Token: tok}, decodeAs(UnmarshalReleaseRequest)},
		{"ReleaseRequest/key", ReleaseRequest{Token: tok, Key: testKey}, decodeAs(UnmarshalReleaseRequest)},
		{"Ack/ok", Ack{Code: CodeOK, LastEpoch: 42, Left: 30 * time.Second}, decodeAs(UnmarshalAck)},
		{"Ack/refused", Ack{Code: CodeNotHolder, LastEpoch: 42, Message: "lease held by another client"}, decodeAs(UnmarshalAck)},
	}
	out := make([]namedMsg, len(msgs))
	for i, m := range msgs {
		out[i] = namedMsg{name: m.name, value: m.value, enc: m.value.Marshal(), decode: m.dec}
	}
	return out
}

// testCertVotes are certificate votes of members, with the fixture's
// stand-in signature (they decode but never verify).
func testCertVotes(fx fixture, members ...int) []CertVote {
	out := make([]CertVote, len(members))
	for i, m := range members {
		out[i] = CertVote{Node: m, Sig: fx.identitySig}
	}
	return out
}

// wire concatenates the version byte and parts: a hand-built message.
func wire(parts ...[]byte) []byte {
	out := []byte{Version}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// wstr is a length-prefixed string field.
func wstr(s string) []byte {
	e := encoder{}
	e.str(s)
	return e.b
}

// wu64 is a fixed-width big-endian integer field.
func wu64(v uint64) []byte {
	e := encoder{}
	e.u64(v)
	return e.b
}

// whld is a holder field: the length-prefixed identity, then the session.
func whld(h Holder) []byte {
	e := encoder{}
	e.holder(h)
	return e.b
}

// wref is a holder reference field: the length-prefixed identity, then
// the session hash.
func wref(r HolderRef) []byte {
	e := encoder{}
	e.holderRef(r)
	return e.b
}

// wkey is a session key field.
func wkey(k SessionKey) []byte { return append([]byte(nil), k[:]...) }

// wsess is a session ID field.
func wsess(s SessionID) []byte { return append([]byte(nil), s[:]...) }

// waitKey is the session key of keyHolder, the holder the reference Wait
// requests name.
var (
	waitKey    = SessionKey{0x5e, 0x55, 1, 2, 3}
	keyHolder  = Holder{ID: testHolder.ID, Session: waitKey.Session()}
	keyHolder2 = Holder{ID: testHolder.ID, Session: SessionKey{0x5e, 0x55, 9}.Session()}
)

// testClaim is a claim of keyHolder on the reference resource in cohort,
// one place per member, with the fixture's stand-in signature (it decodes
// but never verifies).
func testClaim(fx fixture, cohort uint64, members ...int) []SignedPlace {
	var out []SignedPlace
	for _, m := range members {
		out = append(out, SignedPlace{Place: Place{Cluster: fx.stmt.Cluster, Resource: fx.stmt.Resource, Holder: keyHolder.Ref(), Cohort: cohort, Member: m}, Sig: fx.identitySig})
	}
	return out
}

// wplace is a signed place field.
func wplace(p SignedPlace) []byte {
	e := encoder{}
	e.place(p)
	return e.b
}

// wu8 is a one-byte field.
func wu8(v uint8) []byte { return []byte{v} }
