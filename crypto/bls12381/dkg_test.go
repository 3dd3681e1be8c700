package bls12381

import (
	"bytes"
	"testing"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	dkg "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/sign/tbls"
	"go.dedis.ch/kyber/v3/util/key"
)

const (
	dkgN = 4
	dkgT = 3
)

// longterm returns n long-term key pairs on G2, the DKG's group.
func longterm(n int) ([]kyber.Scalar, []kyber.Point) {
	s := NewSuiteG2()
	privs := make([]kyber.Scalar, n)
	pubs := make([]kyber.Point, n)
	for i := range privs {
		kp := key.NewKeyPair(s)
		privs[i], pubs[i] = kp.Private, kp.Public
	}
	return privs, pubs
}

// exchange runs deals and responses between dealers and receivers (the same
// generators in a fresh DKG), every response reaching every receiver but
// its author, and returns the receivers' key shares.
func exchange(t *testing.T, dealers, receivers []*dkg.DistKeyGenerator) []*dkg.DistKeyShare {
	t.Helper()
	var resps []*dkg.Response
	for _, d := range dealers {
		deals, err := d.Deals()
		if err != nil {
			t.Fatal(err)
		}
		for i, deal := range deals {
			resp, err := receivers[i].ProcessDeal(deal)
			if err != nil {
				t.Fatalf("deal to %d: %v", i, err)
			}
			if resp.Response.Status != vss.StatusApproval {
				t.Fatalf("deal to %d refused", i)
			}
			resps = append(resps, resp)
		}
	}
	for _, resp := range resps {
		for i, r := range receivers {
			if resp.Response.Index == uint32(i) {
				continue
			}
			j, err := r.ProcessResponse(resp)
			if err != nil {
				t.Fatalf("receiver %d, response from %d on deal %d: %v", i, resp.Response.Index, resp.Index, err)
			}
			if j != nil {
				t.Fatalf("receiver %d issued a justification", i)
			}
		}
	}
	shares := make([]*dkg.DistKeyShare, len(receivers))
	for i, r := range receivers {
		if !r.Certified() {
			t.Fatalf("receiver %d not certified", i)
		}
		var err error
		if shares[i], err = r.DistKeyShare(); err != nil {
			t.Fatal(err)
		}
	}
	return shares
}

// thresholdSign signs msg with the shares at idx (sign/tbls style: each
// partial is share·H(m) on the circl path), checks every partial against
// its public key share on the gnark path, recovers the signature with
// share.RecoverCommit and returns its encoding.
func thresholdSign(t *testing.T, shares []*dkg.DistKeyShare, idx []int, msg []byte, n int) []byte {
	t.Helper()
	s := NewSuite()
	pub := share.NewPubPoly(s.G2(), nil, shares[0].Commits)
	partials := make([]*share.PubShare, 0, len(idx))
	for _, i := range idx {
		ps := SignShare(shares[i].Share, msg)
		enc, _ := ps.V.MarshalBinary()
		// what travels: decode it strictly, check it against the key share
		dec, err := DecodeG1(enc)
		if err != nil {
			t.Fatal(err)
		}
		pkShare, err := PublicKeyFromPoint(pub.Eval(ps.I).V)
		if err != nil {
			t.Fatal(err)
		}
		if err := pkShare.Verify(msg, enc); err != nil {
			t.Fatalf("partial %d: %v", ps.I, err)
		}
		partials = append(partials, &share.PubShare{I: ps.I, V: dec})
	}
	sig, err := share.RecoverCommit(s.G1(), partials, len(idx), n)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sig.MarshalBinary()
	return b
}

// TestDKGThresholdSignReshare runs kyber v3's Pedersen DKG (n=4, t=3) over
// G2, signs with 3 of the 4 shares, checks the result against kyber's
// sign/tbls over the same suite, reshares to 5 new nodes with threshold 3,
// and checks that the group key is kept and the new shares sign for it.
func TestDKGThresholdSignReshare(t *testing.T) {
	if testing.Short() {
		t.Skip("DKG and resharing")
	}
	suite := NewSuiteG2()
	privs, pubs := longterm(dkgN)
	gens := make([]*dkg.DistKeyGenerator, dkgN)
	for i := range gens {
		var err error
		if gens[i], err = dkg.NewDistKeyGenerator(suite, privs[i], pubs, dkgT); err != nil {
			t.Fatal(err)
		}
	}
	shares := exchange(t, gens, gens)
	groupKey := shares[0].Public()
	for i, sh := range shares {
		if !sh.Public().Equal(groupKey) {
			t.Fatalf("node %d has another group key", i)
		}
	}
	// The shares interpolate to the secret of the group key.
	priShares := make([]*share.PriShare, dkgN)
	for i, sh := range shares {
		priShares[i] = sh.Share
	}
	secret, err := share.RecoverSecret(suite, priShares, dkgT, dkgN)
	if err != nil {
		t.Fatal(err)
	}
	if !suite.Point().Mul(secret, nil).Equal(groupKey) {
		t.Fatal("recovered secret does not match the group key")
	}

	pk, err := PublicKeyFromPoint(groupKey)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("palisade fencing token 1")
	sig := thresholdSign(t, shares, []int{0, 2, 3}, msg, dkgN)
	if err := pk.Verify(msg, sig); err != nil {
		t.Fatalf("threshold signature: %v", err)
	}
	// BLS is deterministic: any quorum gives the same signature, equal to
	// the one of the (never assembled) group secret.
	if other := thresholdSign(t, shares, []int{1, 2, 3}, msg, dkgN); !bytes.Equal(other, sig) {
		t.Fatal("another quorum gives another signature")
	}
	if direct, _ := Sign(secret, msg).MarshalBinary(); !bytes.Equal(direct, sig) {
		t.Fatal("threshold signature differs from the group secret's")
	}
	// Below the threshold, recovery fails.
	s := NewSuite()
	two := []*share.PubShare{SignShare(shares[0].Share, msg), SignShare(shares[1].Share, msg)}
	if _, err := share.RecoverCommit(s.G1(), two, dkgT, dkgN); err == nil {
		t.Fatal("recovered from 2 partials with t=3")
	}

	// kyber's own sign/tbls over this suite produces the same bytes.
	pubPoly := share.NewPubPoly(s.G2(), nil, shares[0].Commits)
	var tsigs [][]byte
	for _, i := range []int{0, 2, 3} {
		ts, err := tbls.Sign(s, shares[i].Share, msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tbls.Verify(s, pubPoly, msg, ts); err != nil {
			t.Fatal(err)
		}
		tshare := tbls.SigShare(ts)
		if ours, _ := SignShare(shares[i].Share, msg).V.MarshalBinary(); !bytes.Equal(tshare.Value(), ours) {
			t.Fatalf("tbls partial %d differs from SignShare", i)
		}
		tsigs = append(tsigs, ts)
	}
	tsig, err := tbls.Recover(s, pubPoly, msg, tsigs, dkgT, dkgN)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tsig, sig) {
		t.Fatal("tbls.Recover differs from RecoverCommit")
	}

	// Reshare from the 4 old nodes (threshold 3) to 5 new nodes
	// (threshold 3); the group key must survive.
	const newN, newT = 5, 3
	newPrivs, newPubs := longterm(newN)
	old := make([]*dkg.DistKeyGenerator, dkgN)
	for i := range old {
		if old[i], err = dkg.NewDistKeyHandler(&dkg.Config{
			Suite: suite, Longterm: privs[i], OldNodes: pubs, NewNodes: newPubs,
			Share: shares[i], Threshold: newT, OldThreshold: dkgT,
		}); err != nil {
			t.Fatal(err)
		}
	}
	fresh := make([]*dkg.DistKeyGenerator, newN)
	for i := range fresh {
		if fresh[i], err = dkg.NewDistKeyHandler(&dkg.Config{
			Suite: suite, Longterm: newPrivs[i], OldNodes: pubs, NewNodes: newPubs,
			PublicCoeffs: shares[0].Commits, Threshold: newT, OldThreshold: dkgT,
		}); err != nil {
			t.Fatal(err)
		}
	}
	newShares := exchange(t, old, fresh)
	for i, sh := range newShares {
		if !sh.Public().Equal(groupKey) {
			t.Fatalf("new node %d: resharing changed the group key", i)
		}
		for _, o := range shares {
			if sh.Share.V.Equal(o.Share.V) {
				t.Fatal("a new share equals an old one")
			}
		}
	}
	newSig := thresholdSign(t, newShares, []int{4, 1, 0}, msg, newN)
	if err := pk.Verify(msg, newSig); err != nil {
		t.Fatalf("signature of the reshared key: %v", err)
	}
	if !bytes.Equal(newSig, sig) {
		t.Fatal("reshared quorum gives another signature")
	}
}
