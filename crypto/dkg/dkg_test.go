package dkg

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	"go.dedis.ch/kyber/v3/sign/schnorr"

	"github.com/palisade-dev/palisade/crypto"
)

// memCeremony runs a DKG or resharing among in-memory members, with no
// network: every message reaches every live member. silent members (by
// position in members) send nothing.
type memMember struct {
	key    *Key
	dkg    *DKG
	silent bool
	// corruptTo, if not 0, is the new index this member (a Byzantine
	// dealer) sends a bad deal to and never justifies.
	corruptTo int
}

func testRand(t testing.TB) *mrand.ChaCha8 {
	var seed [32]byte
	copy(seed[:], t.Name())
	return mrand.NewChaCha8(seed)
}

func runMem(t testing.TB, members []*memMember) {
	t.Helper()
	type addressed struct {
		to  *memMember
		msg []byte
	}
	var deals []addressed
	var responses, justifs [][]byte
	byNew := map[crypto.PublicKey]*memMember{}
	for _, m := range members {
		byNew[m.key.Public()] = m
	}
	for _, m := range members {
		if m.silent {
			continue
		}
		ds, own, err := m.dkg.Deals()
		require.NoError(t, err)
		if own != nil {
			responses = append(responses, own)
		}
		for i, d := range ds {
			if i == m.corruptTo {
				d, err = m.dkg.CorruptDeal(i)
				require.NoError(t, err)
			}
			to := byNew[m.dkg.cfg.NewNodes[i-1]]
			if to != nil {
				deals = append(deals, addressed{to, d})
			}
		}
	}
	for _, d := range deals {
		if d.to.silent || !d.to.dkg.Receives() {
			continue
		}
		r, err := d.to.dkg.ProcessDeal(d.msg)
		require.NoError(t, err)
		responses = append(responses, r)
	}
	for _, m := range members {
		if m.silent {
			continue
		}
		for _, r := range responses {
			j, err := m.dkg.ProcessResponse(r)
			if err != nil {
				require.ErrorIs(t, err, ErrMessage)
				continue
			}
			s, _ := ResponseSlot(r)
			if j != nil && (m.corruptTo == 0 || int(s.Member)+1 != m.corruptTo) {
				justifs = append(justifs, j)
			}
		}
	}
	for _, m := range members {
		if m.silent {
			continue
		}
		for _, j := range justifs {
			_ = m.dkg.ProcessJustification(j)
		}
		m.dkg.SetTimeout()
	}
}

func newMembers(t testing.TB, n int) []*memMember {
	rnd := testRand(t)
	ms := make([]*memMember, n)
	for i := range ms {
		k, err := GenerateKey(rnd)
		require.NoError(t, err)
		ms[i] = &memMember{key: k}
	}
	return ms
}

func pubs(ms []*memMember) []crypto.PublicKey {
	out := make([]crypto.PublicKey, len(ms))
	for i, m := range ms {
		out[i] = m.key.Public()
	}
	return out
}

func freshDKG(t *testing.T, n int, silent, corrupt []int) ([]*memMember, []*crypto.Share, *crypto.GroupKey) {
	t.Helper()
	ms := newMembers(t, n)
	_, th := crypto.FaultThreshold(n)
	var victims []int
	for i := 1; i <= n; i++ {
		if !slices.Contains(corrupt, i) && !slices.Contains(silent, i) {
			victims = append(victims, i)
		}
	}
	for i, m := range ms {
		cfg := Config{Key: m.key, NewNodes: pubs(ms), Threshold: th}
		cfg.Seed[0] = byte(i)
		if slices.Contains(corrupt, i+1) {
			m.corruptTo = victims[0]
		}
		m.silent = slices.Contains(silent, i+1)
		d, err := New(cfg)
		require.NoError(t, err)
		m.dkg = d
	}
	runMem(t, ms)
	var shares []*crypto.Share
	var gk *crypto.GroupKey
	for i, m := range ms {
		if m.silent || slices.Contains(corrupt, i+1) {
			continue // a corrupt dealer's own view does not matter
		}
		require.Equal(t, n-len(silent)-len(corrupt), len(m.dkg.QUAL()), "member %d QUAL %v", i+1, m.dkg.QUAL())
		s, g, err := m.dkg.Result()
		require.NoError(t, err, "member %d", i+1)
		if gk == nil {
			gk = g
		}
		require.True(t, gk.Equal(g), "member %d has another group key", i+1)
		shares = append(shares, s)
	}
	return ms, shares, gk
}

func checkSigns(t *testing.T, gk *crypto.GroupKey, shares []*crypto.Share, msg string) crypto.Signature {
	t.Helper()
	var parts []crypto.PartialSig
	for _, s := range shares {
		p, err := s.Sign([]byte(msg))
		require.NoError(t, err)
		require.NoError(t, gk.VerifyPartial([]byte(msg), p))
		parts = append(parts, p)
	}
	sig, bad, err := gk.Combine([]byte(msg), parts)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.NoError(t, gk.Verify([]byte(msg), sig))
	return sig
}

// secretOf interpolates the group secret from shares (tests only).
func secretOf(t *testing.T, gk *crypto.GroupKey, shares []*crypto.Share) kyber.Scalar {
	ps := make([]*share.PriShare, len(shares))
	for i, s := range shares {
		v, err := shareScalar(s)
		require.NoError(t, err)
		ps[i] = &share.PriShare{I: s.Index() - 1, V: v}
	}
	x, err := share.RecoverSecret(g2suite, ps, len(shares), gk.N())
	require.NoError(t, err)
	return x
}

func TestDKGFresh(t *testing.T) {
	for _, tc := range []struct {
		n               int
		silent, corrupt []int
	}{
		{n: 4},
		{n: 7},
		{n: 4, silent: []int{3}},
		{n: 7, silent: []int{2, 6}},
		{n: 4, corrupt: []int{2}},
		{n: 7, corrupt: []int{1, 5}},
	} {
		t.Run(fmt.Sprintf("n=%d/silent=%v/corrupt=%v", tc.n, tc.silent, tc.corrupt), func(t *testing.T) {
			_, shares, gk := freshDKG(t, tc.n, tc.silent, tc.corrupt)
			_, th := crypto.FaultThreshold(tc.n)
			require.Equal(t, th, gk.Threshold())
			require.GreaterOrEqual(t, len(shares), th)
			checkSigns(t, gk, shares[:th], "hello")
			// t shares give the group secret; t-1 do not.
			x := secretOf(t, gk, shares[:th])
			require.True(t, g2suite.Point().Mul(x, nil).Equal(commit0(t, gk)))
			y := secretOf(t, gk, shares[:th-1])
			require.False(t, g2suite.Point().Mul(y, nil).Equal(commit0(t, gk)))
		})
	}
}

func TestDKGTooManySilent(t *testing.T) {
	ms := newMembers(t, 4)
	for i, m := range ms {
		d, err := New(Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3})
		require.NoError(t, err)
		m.dkg, m.silent = d, i >= 2
	}
	runMem(t, ms)
	_, _, err := ms[0].dkg.Result()
	require.ErrorIs(t, err, ErrNotQualified)
}

func TestDKGSeedReproducesDeal(t *testing.T) {
	ms := newMembers(t, 4)
	cfg := Config{Key: ms[0].key, NewNodes: pubs(ms), Threshold: 3}
	cfg.Seed[5] = 9
	a, err := New(cfg)
	require.NoError(t, err)
	b, err := New(cfg)
	require.NoError(t, err)
	_, _, err = a.Deals()
	require.NoError(t, err)
	_, _, err = b.Deals()
	require.NoError(t, err)
	va, vb := a.gen.Verifiers()[0], b.gen.Verifiers()[0]
	require.Equal(t, va.SessionID(), vb.SessionID(), "same seed, same polynomial")
}

func reshare(t *testing.T, old []*memMember, oldShares []*crypto.Share, oldGK *crypto.GroupKey, nNew int, keep int, silentOld []int) ([]*memMember, []*crypto.Share, *crypto.GroupKey) {
	t.Helper()
	// The first keep old members stay (same ceremony key), the others leave;
	// new members fill up to nNew.
	newMs := append([]*memMember{}, old[:keep]...)
	extra := newMembers(t, nNew-keep+len(old))[len(old):]
	for _, m := range extra {
		newMs = append(newMs, &memMember{key: m.key})
	}
	_, th := crypto.FaultThreshold(nNew)
	all := map[*memMember]bool{}
	var everyone []*memMember
	for _, m := range append(append([]*memMember{}, old...), newMs...) {
		if !all[m] {
			all[m] = true
			everyone = append(everyone, m)
		}
	}
	for i, m := range everyone {
		cfg := Config{Key: m.key, NewNodes: pubs(newMs), Threshold: th, OldNodes: pubs(old), OldGroup: oldGK}
		cfg.Seed[1] = byte(i)
		if j := slices.Index(old, m); j >= 0 {
			cfg.Share = oldShares[j]
			m.silent = slices.Contains(silentOld, j+1)
		} else {
			m.silent = false
		}
		d, err := New(cfg)
		require.NoError(t, err, "member %d", i)
		m.dkg = d
	}
	runMem(t, everyone)
	var shares []*crypto.Share
	var gk *crypto.GroupKey
	for i, m := range newMs {
		if m.silent {
			continue
		}
		s, g, err := m.dkg.Result()
		require.NoError(t, err, "new member %d", i+1)
		if gk == nil {
			gk = g
		}
		require.True(t, gk.Equal(g))
		shares = append(shares, s)
	}
	require.Equal(t, oldGK.PublicKey(), gk.PublicKey())
	return newMs, shares, gk
}

func TestDKGReshare(t *testing.T) {
	ms, shares, gk := freshDKG(t, 4, nil, nil)
	before := checkSigns(t, gk, shares[:3], "before")

	// 4 -> 7: old members 1-3 stay, old member 4 leaves and is silent.
	ms7, shares7, gk7 := reshare(t, ms, shares, gk, 7, 3, []int{4})
	require.Equal(t, 7, gk7.N())
	require.Equal(t, 5, gk7.Threshold())
	after := checkSigns(t, gk7, shares7[:5], "after")
	require.NoError(t, gk.Verify([]byte("after"), after), "old group key verifies new signatures")
	require.NoError(t, gk7.Verify([]byte("before"), before))

	// 7 -> 4: members 1 and 2 stay, the others leave.
	_, shares4, gk4 := reshare(t, ms7, shares7, gk7, 4, 2, nil)
	require.Equal(t, 4, gk4.N())
	require.Equal(t, gk.PublicKey(), gk4.PublicKey(), "4 -> 7 -> 4 keeps the group key")
	again := checkSigns(t, gk4, shares4[:3], "again")
	require.NoError(t, gk.Verify([]byte("again"), again))
	require.NoError(t, gk4.Verify([]byte("before"), before))

	// A removed member's old share does not combine with new partials.
	removed := shares7[5]
	p, err := removed.Sign([]byte("x"))
	require.NoError(t, err)
	var parts []crypto.PartialSig
	for _, s := range shares4[:2] {
		q, err := s.Sign([]byte("x"))
		require.NoError(t, err)
		parts = append(parts, q)
	}
	_, _, err = gk4.Combine([]byte("x"), append(parts, p))
	require.ErrorIs(t, err, crypto.ErrNotEnoughPartials)
}

func TestDKGConfigErrors(t *testing.T) {
	ms := newMembers(t, 4)
	other := newMembers(t, 5)[4]
	for name, cfg := range map[string]Config{
		"no key":        {NewNodes: pubs(ms), Threshold: 3},
		"threshold 1":   {Key: ms[0].key, NewNodes: pubs(ms), Threshold: 1},
		"threshold 5":   {Key: ms[0].key, NewNodes: pubs(ms), Threshold: 5},
		"not a member":  {Key: other.key, NewNodes: pubs(ms), Threshold: 3},
		"duplicate key": {Key: ms[0].key, NewNodes: append(pubs(ms)[:3], ms[0].key.Public()), Threshold: 3},
	} {
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrConfig, name)
	}
}

func TestDKGKeyRedacted(t *testing.T) {
	k, err := GenerateKey(testRand(t))
	require.NoError(t, err)
	raw, err := k.MarshalBinary()
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v %#v %x", k, k, k)} {
		require.NotContains(t, s, fmt.Sprintf("%x", raw))
	}
	k2, err := ParseKey(raw)
	require.NoError(t, err)
	require.Equal(t, k.Public(), k2.Public())
	_, err = ParseKey(make([]byte, 32))
	require.Error(t, err)
	require.True(t, errors.Is(err, err))
}

// TestDKGMissingDealComplaint: a dealer gives no deal to one member; that
// member complains with the session ID the others report; the dealer's
// justification, checked against that session, gives it its share, and
// every member qualifies the dealer.
func TestDKGMissingDealComplaint(t *testing.T) {
	ms := newMembers(t, 4)
	for _, m := range ms {
		d, err := New(Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3})
		require.NoError(t, err)
		m.dkg = d
	}
	var responses [][]byte
	for di, m := range ms {
		deals, _, err := m.dkg.Deals()
		require.NoError(t, err)
		for to, b := range deals {
			if di == 0 && to == 3 {
				continue // dealer 1 withholds member 3's deal
			}
			r, err := ms[to-1].dkg.ProcessDeal(b)
			require.NoError(t, err)
			responses = append(responses, r)
		}
	}
	var sid []byte
	for _, b := range responses {
		r, err := decodeResponse(b)
		require.NoError(t, err)
		if r.Index == 0 {
			sid = r.Response.SessionID
		}
	}
	_, err := ms[2].dkg.ComplainMissing(2, sid)
	require.ErrorIs(t, err, ErrConfig, "dealer 2's deal was received")
	complaint, err := ms[2].dkg.ComplainMissing(1, sid)
	require.NoError(t, err)
	var justifs [][]byte
	for _, m := range ms {
		for _, b := range append(responses, complaint) {
			j, _ := m.dkg.ProcessResponse(b)
			if j != nil {
				justifs = append(justifs, j)
			}
		}
	}
	require.Len(t, justifs, 1, "dealer 1 justifies")
	// A justification signed by another key is refused.
	forged, err := decodeJustification(justifs[0])
	require.NoError(t, err)
	forged.Justification.Signature, err = signWith(ms[1].key, forged.Justification.Hash(g2suite))
	require.NoError(t, err)
	fb, err := encodeJustification(forged)
	require.NoError(t, err)
	require.ErrorIs(t, ms[2].dkg.ProcessJustification(fb), ErrMessage)
	for i, m := range ms {
		if err := m.dkg.ProcessJustification(justifs[0]); i > 0 {
			require.NoError(t, err, "member %d", i+1) // the dealer applied it already
		}
		for _, b := range responses {
			_, _ = m.dkg.ProcessResponse(b) // member 3 now has the deal
		}
		m.dkg.SetTimeout()
	}
	var shares []*crypto.Share
	var gk *crypto.GroupKey
	for i, m := range ms {
		require.Equal(t, []int{1, 2, 3, 4}, m.dkg.QUAL(), "member %d", i+1)
		s, g, err := m.dkg.Result()
		require.NoError(t, err, "member %d", i+1)
		if gk == nil {
			gk = g
		}
		require.True(t, gk.Equal(g))
		shares = append(shares, s)
	}
	checkSigns(t, gk, shares[1:], "all four have valid shares")
}

func signWith(k *Key, msg []byte) ([]byte, error) { return schnorr.Sign(g2suite, k.s, msg) }

func BenchmarkDKG(b *testing.B) {
	for _, n := range []int{4, 7} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				ms := newMembers(b, n)
				_, th := crypto.FaultThreshold(n)
				for _, m := range ms {
					d, err := New(Config{Key: m.key, NewNodes: pubs(ms), Threshold: th})
					if err != nil {
						b.Fatal(err)
					}
					m.dkg = d
				}
				runMem(b, ms)
				if _, _, err := ms[0].dkg.Result(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// commit0 is the group public key as a point.
func commit0(t *testing.T, gk *crypto.GroupKey) kyber.Point {
	cs, err := groupCommits(gk)
	require.NoError(t, err)
	return cs[0]
}
