package protocol

import (
	"crypto/ed25519"
	"testing"

	"github.com/stretchr/testify/require"
)

// signPlace is member's place for holder in cohort on resource in c,
// signed with key.
func signPlace(t *testing.T, c *Cluster, key ed25519.PrivateKey, member int, resource string, holder Holder, cohort uint64) SignedPlace {
	t.Helper()
	sp, err := SignPlace(edSigner(key), Place{Cluster: c.ID, Resource: resource, Holder: holder.Ref(), Cohort: cohort, Member: member})
	require.NoError(t, err)
	return sp
}

type edSigner ed25519.PrivateKey

func (k edSigner) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(ed25519.PrivateKey(k), msg), nil
}

func TestPlaceBytes(t *testing.T) {
	fx := testFixture(t)
	p := testClaim(fx, 41, 2)[0].Place
	b := p.PlaceBytes()
	require.Equal(t, DomainPlace, string(b[:len(DomainPlace)]))
	for name, q := range map[string]func(Place) Place{
		"cohort":  func(q Place) Place { q.Cohort++; return q },
		"member":  func(q Place) Place { q.Member++; return q },
		"holder":  func(q Place) Place { q.Holder = keyHolder2.Ref(); return q },
		"cluster": func(q Place) Place { q.Cluster[0] ^= 1; return q },
		"resource": func(q Place) Place {
			q.Resource += "x"
			return q
		},
	} {
		require.NotEqual(t, b, q(p).PlaceBytes(), name)
	}
	// Not a vote's bytes: the domains differ.
	require.NotEqual(t, DomainVote, DomainPlace)
}

func TestVerifyPlace(t *testing.T) {
	c, keys := voteCluster(t)
	good := signPlace(t, c, keys[1], 2, "orders-db", keyHolder, 7)
	with := func(f func(p *SignedPlace)) SignedPlace {
		p := good
		p.Sig = append([]byte(nil), good.Sig...)
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name  string
		place SignedPlace
		want  error
	}{
		{"valid", good, nil},
		{"member 0", with(func(p *SignedPlace) { p.Member = 0 }), ErrBadPlace},
		{"member above N", with(func(p *SignedPlace) { p.Member = 5 }), ErrBadPlace},
		{"another cluster", with(func(p *SignedPlace) { p.Cluster[0] ^= 1 }), ErrBadPlace},
		{"signed by another member", with(func(p *SignedPlace) { p.Member = 3 }), ErrBadPlace},
		{"other session", with(func(p *SignedPlace) { p.Holder = keyHolder2.Ref() }), ErrBadPlace},
		{"earlier cohort than signed", with(func(p *SignedPlace) { p.Cohort-- }), ErrBadPlace},
		{"tampered signature", with(func(p *SignedPlace) { p.Sig[0] ^= 1 }), ErrBadPlace},
		{"member without an Ed25519 peer ID", signPlace(t, c, keys[0], 4, "orders-db", keyHolder, 7), ErrPeerID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyPlace(c, tc.place)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrBadPlace)
		})
	}
}

// TestVerifyClaim: a claim needs f+1 distinct members' valid places of
// this very holder and resource; extra places are not verified.
func TestVerifyClaim(t *testing.T) {
	c, keys := voteCluster(t) // N=4, f=1: a claim needs 2 places
	const res = "orders-db"
	p := func(m int, cohort uint64) SignedPlace { return signPlace(t, c, keys[m-1], m, res, keyHolder, cohort) }
	forged := p(2, 7)
	forged.Sig = append([]byte(nil), forged.Sig...)
	forged.Sig[5] ^= 1
	ref := keyHolder.Ref()
	for _, tc := range []struct {
		name   string
		claim  []SignedPlace
		holder HolderRef
		cohort uint64
		ok     bool
	}{
		{"two members", []SignedPlace{p(1, 7), p(2, 7)}, ref, 7, true},
		{"the latest cohort is claimed", []SignedPlace{p(1, 6), p(2, 7)}, ref, 7, true},
		{"a forged third place is never checked", []SignedPlace{p(1, 7), p(2, 7), func() SignedPlace { x := p(3, 7); x.Sig[0] ^= 1; return x }()}, ref, 7, true},
		{"one member", []SignedPlace{p(1, 7)}, ref, 0, false},
		{"none", nil, ref, 0, false},
		{"one member twice", []SignedPlace{p(1, 7), p(1, 7)}, ref, 0, false},
		{"a forged signature", []SignedPlace{p(1, 7), forged}, ref, 0, false},
		{"another session's places", []SignedPlace{p(1, 7), p(2, 7)}, keyHolder2.Ref(), 0, false},
		{"another resource", []SignedPlace{p(1, 7), signPlace(t, c, keys[1], 2, "other", keyHolder, 7)}, ref, 0, false},
		{"member without a key", []SignedPlace{p(1, 7), signPlace(t, c, keys[0], 4, res, keyHolder, 7)}, ref, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VerifyClaim(c, res, tc.holder, tc.claim)
			if !tc.ok {
				require.ErrorIs(t, err, ErrBadPlace)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.cohort, got)
		})
	}
}
