package protocol

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
)

// identityCluster is an n-member cluster (t = 2f+1) whose members all have
// real Ed25519 identities: keys[i-1] is member i's.
func identityCluster(t testing.TB, n int) (*Cluster, []ed25519.PrivateKey) {
	t.Helper()
	f := (n - 1) / 3
	gk, _, err := crypto.Deal(seeded(int64(100+n)), n, 2*f+1)
	require.NoError(t, err)
	var keys []ed25519.PrivateKey
	var nodes []NodeInfo
	for i := 1; i <= n; i++ {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1] = byte(i), byte(n)
		k := ed25519.NewKeyFromSeed(seed)
		keys = append(keys, k)
		nodes = append(nodes, NodeInfo{Index: i, PeerID: Ed25519PeerID(k.Public().(ed25519.PublicKey))})
	}
	c, err := NewCluster(NewClusterFile(fmt.Sprintf("forensics-%d", n), gk, nodes, nil))
	require.NoError(t, err)
	return c, keys
}

// certOf is the certificate of members' real votes for holder at
// (resource, epoch).
func certOf(t testing.TB, c *Cluster, keys []ed25519.PrivateKey, resource string, epoch uint64, holder Holder, members []int) Certificate {
	t.Helper()
	var votes []SignedVote
	for _, m := range members {
		votes = append(votes, signVote(c, keys[m-1], m, resource, epoch, holder))
	}
	cert, err := NewCertificate(votes)
	require.NoError(t, err)
	require.NoError(t, VerifyCertificate(c, cert))
	return cert
}

func TestVerifyCertificate(t *testing.T) {
	c, keys := identityCluster(t, 4)
	good := certOf(t, c, keys, "orders-db", 7, testHolder, []int{1, 2, 4})
	with := func(f func(x *Certificate)) Certificate {
		x := good
		x.Votes = make([]CertVote, len(good.Votes))
		for i, v := range good.Votes {
			x.Votes[i] = CertVote{Node: v.Node, Sig: append([]byte(nil), v.Sig...)}
		}
		f(&x)
		return x
	}
	all := certOf(t, c, keys, "orders-db", 7, testHolder, []int{1, 2, 3, 4})
	for _, tc := range []struct {
		name string
		cert Certificate
		want error // nil: valid; else ErrBadCertificate and this
	}{
		{"t votes", good, nil},
		{"N votes", all, nil},
		{"fewer than t votes", with(func(x *Certificate) { x.Votes = x.Votes[:2] }), ErrBadCertificate},
		{"no votes", with(func(x *Certificate) { x.Votes = nil }), ErrBadCertificate},
		{"a member twice", with(func(x *Certificate) { x.Votes[1] = x.Votes[0] }), ErrBadCertificate},
		{"out of order", with(func(x *Certificate) { x.Votes[0], x.Votes[1] = x.Votes[1], x.Votes[0] }), ErrBadCertificate},
		{"member above N", with(func(x *Certificate) { x.Votes[2].Node = 5 }), ErrBadVote},
		{"another cluster", with(func(x *Certificate) { x.Statement.Cluster[0] ^= 1 }), ErrBadCertificate},
		{"another holder than signed", with(func(x *Certificate) { x.Statement.Holder = otherHolder }), ErrBadVote},
		{"another epoch than signed", with(func(x *Certificate) { x.Statement.Epoch++ }), ErrBadVote},
		{"a forged vote", with(func(x *Certificate) { x.Votes[1].Sig[5] ^= 1 }), ErrBadVote},
		{"a vote signed by another member", with(func(x *Certificate) { x.Votes[1].Sig = ed25519.Sign(keys[2], x.Statement.VoteBytes()) }), ErrBadVote},
		{"a short signature", with(func(x *Certificate) { x.Votes[1].Sig = x.Votes[1].Sig[:32] }), ErrBadCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyCertificate(c, tc.cert)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrBadCertificate)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestNewCertificate(t *testing.T) {
	c, keys := identityCluster(t, 4)
	a := signVote(c, keys[2], 3, "orders-db", 7, testHolder)
	b := signVote(c, keys[0], 1, "orders-db", 7, testHolder)
	cert, err := NewCertificate([]SignedVote{a, b})
	require.NoError(t, err)
	require.Equal(t, []int{1, 3}, cert.Signers(), "votes in member order")
	require.Equal(t, []SignedVote{b, a}, cert.SignedVotes())

	other := signVote(c, keys[1], 2, "orders-db", 7, otherHolder)
	_, err = NewCertificate([]SignedVote{a, other})
	require.ErrorIs(t, err, ErrBadCertificate, "votes for two statements")
	_, err = NewCertificate([]SignedVote{a, a})
	require.ErrorIs(t, err, ErrBadCertificate, "a member twice")
	_, err = NewCertificate(nil)
	require.ErrorIs(t, err, ErrBadCertificate)
}

func TestCertificateEncodings(t *testing.T) {
	c, keys := identityCluster(t, 4)
	cert := certOf(t, c, keys, "bücher/日本", 1<<40, sameIDHolder, []int{2, 3, 4})
	b, err := cert.MarshalBinary()
	require.NoError(t, err)
	got, err := ParseCertificate(b)
	require.NoError(t, err)
	require.True(t, cert.Equal(got))
	require.NoError(t, VerifyCertificate(c, got))

	text, err := cert.MarshalText()
	require.NoError(t, err)
	require.Equal(t, cert.String(), string(text))
	require.True(t, strings.HasPrefix(string(text), CertificateTextPrefix))
	var back Certificate
	require.NoError(t, back.UnmarshalText(text))
	require.True(t, cert.Equal(back))
	for _, bad := range []string{"", CertificateTextPrefix, "pt3." + string(text[4:]), string(text) + "=", string(text[:20]) + "\n" + string(text[20:])} {
		require.ErrorIs(t, new(Certificate).UnmarshalText([]byte(bad)), ErrMalformed, "%q", bad)
	}
	require.Equal(t, CertificateTextPrefix+"invalid", Certificate{}.String())
	_, err = Certificate{}.MarshalBinary()
	require.ErrorIs(t, err, ErrBadCertificate)
}

// TestCommitWithoutCertificate checks that a Commit of the earlier
// release (2.0.0, no certificate) decodes as a Commit without one, and
// that a Commit without one encodes exactly as before.
func TestCommitWithoutCertificate(t *testing.T) {
	fx := testFixture(t)
	old := wire(fx.tok.appendTo(nil), wu64(30000), wu8(1), wkey(testKey), wu8(1))
	got, err := UnmarshalCommitRequest(old)
	require.NoError(t, err)
	require.Equal(t, CommitRequest{Token: fx.tok, TTL: 30 * time.Second, Key: testKey, TokenRelease: true}, got)
	require.Equal(t, old, got.Marshal())
	_, ok := got.Cert()
	require.False(t, ok)

	with := got
	with.Certificate = testCertVotes(fx, 3, 1, 2) // encoded in member order
	enc := with.Marshal()
	require.Equal(t, old, enc[:len(old)])
	back, err := UnmarshalCommitRequest(enc)
	require.NoError(t, err)
	cert, ok := back.Cert()
	require.True(t, ok)
	require.Equal(t, fx.tok.Statement, cert.Statement)
	require.Equal(t, []int{1, 2, 3}, cert.Signers())
}

func TestLargestCertificateMessagesFitFrame(t *testing.T) {
	fx := testFixture(t)
	st := fx.stmt
	st.Resource = strings.Repeat("r", MaxResourceLen)
	st.Holder.ID = strings.Repeat("h", MaxHolderLen)
	st.Epoch = ^uint64(0)
	members := make([]int, MaxCertificateVotes)
	for i := range members {
		members[i] = crypto.MaxNodes - MaxCertificateVotes + 1 + i
	}
	tok := fx.tok
	tok.Statement = st
	commit := CommitRequest{Token: tok, TTL: MaxTTL, Key: testKey, TokenRelease: true, Certificate: testCertVotes(fx, members...)}
	enc := commit.Marshal()
	require.NoError(t, WriteFrame(io.Discard, enc))
	got, err := UnmarshalCommitRequest(enc)
	require.NoError(t, err)
	require.Equal(t, commit, got)

	a := Certificate{Statement: st, Votes: testCertVotes(fx, members...)}
	b := a
	b.Statement.Holder.Session = otherHolder.Session
	reply := ForensicsReply{Code: CodeOK, Certificates: []Certificate{a, b}, Message: strings.Repeat("m", MaxMessageLen)}
	enc = reply.Marshal()
	require.NoError(t, WriteFrame(io.Discard, enc), "largest forensics reply: %d bytes", len(enc))
	back, err := UnmarshalForensicsReply(enc)
	require.NoError(t, err)
	require.Equal(t, reply, back)
	bin, err := a.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, bin, maxCertificateSize)
}

// doubleVote builds the certificates of a fork in an n-member cluster:
// culprits voted for both holders, and each certificate is completed to t
// votes by honest members, each of whom voted for one holder only. It
// returns both certificates and the honest members.
func doubleVote(t *testing.T, c *Cluster, keys []ed25519.PrivateKey, culprits []int, epoch uint64) (a, b Certificate, honest []int) {
	t.Helper()
	tt := c.File.T
	bad := map[int]bool{}
	for _, m := range culprits {
		bad[m] = true
	}
	for m := 1; m <= len(c.File.Nodes); m++ {
		if !bad[m] {
			honest = append(honest, m)
		}
	}
	need := tt - len(culprits)
	require.LessOrEqual(t, 2*need, len(honest), "not enough honest members for two certificates")
	signersA := append(append([]int(nil), culprits...), honest[:need]...)
	signersB := append(append([]int(nil), culprits...), honest[len(honest)-need:]...)
	a = certOf(t, c, keys, "orders-db", epoch, testHolder, signersA)
	b = certOf(t, c, keys, "orders-db", epoch, otherHolder, signersB)
	return a, b, honest
}

// TestConvictNamesExactlyTheDoubleVoters is the forensics bound, tested:
// with the certificates of both tokens of a fork, where exactly f+1
// members (2t-N, the least two quorums share) voted twice, Convict names
// exactly them, each with two votes that verify as evidence, and never an
// honest member. More double voters are all named.
func TestConvictNamesExactlyTheDoubleVoters(t *testing.T) {
	for _, n := range []int{4, 7, 10} {
		c, keys := identityCluster(t, n)
		f := c.F
		rng := seeded(int64(n))
		for _, extra := range []int{0, 1} {
			k := f + 1 + extra
			if 2*(c.File.T-k) > n-k {
				continue
			}
			t.Run(fmt.Sprintf("N=%d/%d-culprits", n, k), func(t *testing.T) {
				culprits := rng.Perm(n)[:k]
				for i := range culprits {
					culprits[i]++
				}
				a, b, honest := doubleVote(t, c, keys, culprits, 9)
				v := Convict(c, "orders-db", 9, []Certificate{b, a})
				require.Empty(t, v.Rejected)
				require.True(t, v.Fork())
				require.ElementsMatch(t, []Holder{testHolder, otherHolder}, v.Certified)
				var named []int
				for _, cu := range v.Culprits {
					named = append(named, cu.Node)
					require.NoError(t, VerifyEvidence(c, cu.Evidence), "node %d", cu.Node)
					require.Equal(t, cu.Node, cu.Evidence.A.Node)
				}
				require.ElementsMatch(t, culprits, named)
				require.GreaterOrEqual(t, len(named), 2*c.File.T-n, "the bound: 2t-N = f+1")
				for _, h := range honest {
					require.NotContains(t, named, h, "honest member %d named", h)
				}
			})
		}
	}
}

// TestConvictBoundRandomQuorums checks the bound over random pairs of
// quorums: any two certificates of t valid votes for different holders
// convict at least 2t-N = f+1 members, exactly the members in both.
func TestConvictBoundRandomQuorums(t *testing.T) {
	c, keys := identityCluster(t, 7)
	n, tt := len(c.File.Nodes), c.File.T
	rng := seeded(77)
	for i := 0; i < 40; i++ {
		pa, pb := rng.Perm(n)[:tt], rng.Perm(n)[:tt]
		sa, sb := make([]int, tt), make([]int, tt)
		inA := map[int]bool{}
		for j := range pa {
			sa[j], sb[j] = pa[j]+1, pb[j]+1
			inA[sa[j]] = true
		}
		var both []int
		for _, m := range sb {
			if inA[m] {
				both = append(both, m)
			}
		}
		a := certOf(t, c, keys, "jobs", uint64(100+i), testHolder, sa)
		b := certOf(t, c, keys, "jobs", uint64(100+i), sameIDHolder, sb)
		v := Convict(c, "jobs", uint64(100+i), []Certificate{a, b})
		var named []int
		for _, cu := range v.Culprits {
			named = append(named, cu.Node)
		}
		require.ElementsMatch(t, both, named)
		require.GreaterOrEqual(t, len(named), c.F+1)
	}
}

// TestConvictRefusesForgedVotes checks that a vote whose identity
// signature does not verify is never evidence: a certificate that frames
// an honest member with a forged vote, or carries a tampered one, names
// nobody for it, and says why in Rejected. Certificates of another
// (resource, epoch) or malformed ones are rejected whole.
func TestConvictRefusesForgedVotes(t *testing.T) {
	c, keys := identityCluster(t, 4) // f = 1, t = 3
	a := certOf(t, c, keys, "orders-db", 5, testHolder, []int{1, 2, 3})
	// Member 4 is Byzantine and votes for the other holder; members 2 and 3
	// are honest, and the second certificate "frames" them with votes
	// signed by member 4's key (and one with a tampered signature).
	st := c.Statement("orders-db", 5, otherHolder)
	framed := Certificate{Statement: st, Votes: []CertVote{
		{Node: 2, Sig: ed25519.Sign(keys[3], st.VoteBytes())},
		{Node: 3, Sig: tampered(ed25519.Sign(keys[2], st.VoteBytes()))},
		{Node: 4, Sig: ed25519.Sign(keys[3], st.VoteBytes())},
	}}
	require.ErrorIs(t, VerifyCertificate(c, framed), ErrBadVote)
	v := Convict(c, "orders-db", 5, []Certificate{a, framed})
	require.Empty(t, v.Culprits, "a forged vote is not evidence")
	require.Equal(t, []Holder{testHolder}, v.Certified, "the framing certificate has one valid vote, not t")
	require.False(t, v.Fork())
	require.Len(t, v.Rejected, 2)
	for _, err := range v.Rejected {
		require.ErrorIs(t, err, ErrBadVote)
	}

	// Certificates of another epoch, resource or cluster, or malformed.
	otherEpoch := certOf(t, c, keys, "orders-db", 6, otherHolder, []int{1, 2, 3})
	otherRes := certOf(t, c, keys, "invoices", 5, otherHolder, []int{1, 2, 3})
	dup := Certificate{Statement: st, Votes: []CertVote{framed.Votes[2], framed.Votes[2]}}
	v = Convict(c, "orders-db", 5, []Certificate{a, otherEpoch, otherRes, dup})
	require.Empty(t, v.Culprits)
	require.Len(t, v.Rejected, 3)
	for _, err := range v.Rejected {
		require.ErrorIs(t, err, ErrBadCertificate)
	}

	// One real double vote among forged ones: only it convicts.
	framed.Votes[0].Sig = ed25519.Sign(keys[1], st.VoteBytes()) // member 2 really did
	v = Convict(c, "orders-db", 5, []Certificate{a, framed})
	require.Len(t, v.Culprits, 1)
	require.Equal(t, 2, v.Culprits[0].Node)
	require.NoError(t, VerifyEvidence(c, v.Culprits[0].Evidence))
}

// TestConvictNoFork checks that certificates of one holder convict nobody.
func TestConvictNoFork(t *testing.T) {
	c, keys := identityCluster(t, 4)
	a := certOf(t, c, keys, "orders-db", 5, testHolder, []int{1, 2, 3})
	b := certOf(t, c, keys, "orders-db", 5, testHolder, []int{2, 3, 4})
	v := Convict(c, "orders-db", 5, []Certificate{a, b, a})
	require.Empty(t, v.Culprits)
	require.Empty(t, v.Rejected)
	require.Equal(t, []Holder{testHolder}, v.Certified)
	require.False(t, v.Fork())
	require.Empty(t, Convict(c, "orders-db", 5, nil).Culprits)
}

func tampered(sig []byte) []byte {
	out := append([]byte(nil), sig...)
	out[0] ^= 0x80
	return out
}

// TestVerifyCertificateKnowing checks that a member's own vote, known
// byte for byte, is taken without a check, and that nothing else is: not
// its signature under another member's index, for another statement, or
// with other bytes.
func TestVerifyCertificateKnowing(t *testing.T) {
	c, keys := identityCluster(t, 4)
	good := certOf(t, c, keys, "orders-db", 7, testHolder, []int{1, 2, 4})
	own := good.SignedVotes()[1] // member 2's vote, as member 2 keeps it
	require.Equal(t, 2, own.Node)
	require.NoError(t, VerifyCertificateKnowing(c, good, &own))
	require.NoError(t, VerifyCertificateKnowing(c, good, nil))

	// A known vote is not checked again: what the member keeps is what it
	// signed, so even bytes that would not verify pass when they are its.
	kept := own
	kept.IdentitySig = append([]byte(nil), own.IdentitySig...)
	kept.IdentitySig[3] ^= 1
	spoilt := good
	spoilt.Votes = slices.Clone(good.Votes)
	spoilt.Votes[1].Sig = kept.IdentitySig
	require.NoError(t, VerifyCertificateKnowing(c, spoilt, &kept), "the known vote was checked again")
	require.ErrorIs(t, VerifyCertificate(c, spoilt), ErrBadVote)

	later := certOf(t, c, keys, "orders-db", 8, testHolder, []int{1, 2, 4})
	laterOwn := later.SignedVotes()[1]
	for _, tc := range []struct {
		name  string
		cert  Certificate
		known SignedVote
	}{
		{"other bytes than the known vote", spoilt, own},
		{"the known signature under another member", func() Certificate {
			x := good
			x.Votes = slices.Clone(good.Votes)
			x.Votes[2].Sig = own.IdentitySig // member 4 claims member 2's signature
			return x
		}(), own},
		{"the known signature for another statement", func() Certificate {
			x := good
			x.Votes = slices.Clone(good.Votes)
			x.Votes[1].Sig = laterOwn.IdentitySig // member 2's vote at epoch 8, in a certificate of epoch 7
			return x
		}(), laterOwn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyCertificateKnowing(c, tc.cert, &tc.known)
			require.ErrorIs(t, err, ErrBadCertificate)
			require.ErrorIs(t, err, ErrBadVote)
		})
	}
}

// BenchmarkVerifyCertificate times what a member pays for a Commit's
// certificate of t = 3 votes (N = 4): one Ed25519 check per vote, and
// one fewer when it knows its own vote (VerifyCertificateKnowing).
func BenchmarkVerifyCertificate(b *testing.B) {
	c, keys := identityCluster(b, 4)
	cert := certOf(b, c, keys, "orders-db", 7, testHolder, []int{1, 2, 4})
	own := cert.SignedVotes()[0]
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			if err := VerifyCertificate(c, cert); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("own known", func(b *testing.B) {
		for b.Loop() {
			if err := VerifyCertificateKnowing(c, cert, &own); err != nil {
				b.Fatal(err)
			}
		}
	})
}
