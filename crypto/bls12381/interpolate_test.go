package bls12381

import (
	"fmt"
	"math/big"
	"testing"

	"go.dedis.ch/kyber/v3/share"
)

// TestInterpolateG1MatchesKyber checks the gnark interpolation of partial
// signatures against kyber's share.RecoverCommit over the circl points,
// for several thresholds and index sets, and that the result is the
// signature under the group secret.
func TestInterpolateG1MatchesKyber(t *testing.T) {
	g2 := NewSuiteG2()
	rand := stream("interpolate")
	for _, tc := range []struct{ n, t int }{{4, 3}, {7, 5}, {10, 7}, {16, 11}} {
		pri := share.NewPriPoly(g2, tc.t, nil, rand)
		msg := []byte(fmt.Sprintf("interpolate %d-of-%d", tc.t, tc.n))
		want := Sign(pri.Secret(), msg)
		wantEnc, _ := want.MarshalBinary()
		shares := pri.Shares(tc.n)
		// Two different quorums: the first t, and the last t reversed.
		for q, pick := range [][]int{firstN(tc.t), lastNReversed(tc.n, tc.t)} {
			var pubs []*share.PubShare
			var idx []int
			var pts []*PublicG1
			for _, i := range pick {
				ps := SignShare(shares[i], msg)
				pubs = append(pubs, ps)
				enc, _ := ps.V.MarshalBinary()
				p, err := DecodePublicG1(enc)
				if err != nil {
					t.Fatal(err)
				}
				idx = append(idx, i+1)
				pts = append(pts, p)
			}
			k, err := share.RecoverCommit(NewSuiteG1(), pubs, tc.t, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			kEnc, _ := k.MarshalBinary()
			got, err := InterpolateG1(idx, pts)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(kEnc) || string(got) != string(wantEnc) {
				t.Fatalf("%d-of-%d quorum %d: gnark %x, kyber %x, secret's signature %x", tc.t, tc.n, q, got, kEnc, wantEnc)
			}
		}
	}
}

func TestInterpolateG1Refuses(t *testing.T) {
	p, err := DecodePublicG1(mustEncode(t, HashToG1([]byte("p"))))
	if err != nil {
		t.Fatal(err)
	}
	// The line through (1, P), (2, 2P), (3, 3P) is x·P: its value at 0 is
	// the identity.
	line := []*PublicG1{p, scaled(p, 2), scaled(p, 3)}
	for name, c := range map[string]struct {
		idx []int
		pts []*PublicG1
	}{
		"empty":           {nil, nil},
		"lengths differ":  {[]int{1, 2}, []*PublicG1{p}},
		"repeated index":  {[]int{1, 1}, []*PublicG1{p, p}},
		"index zero":      {[]int{0, 1}, []*PublicG1{p, p}},
		"negative index":  {[]int{-1, 1}, []*PublicG1{p, p}},
		"identity result": {[]int{1, 2, 3}, line},
	} {
		if _, err := InterpolateG1(c.idx, c.pts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// scaled returns k·p.
func scaled(p *PublicG1, k int64) *PublicG1 {
	var out PublicG1
	out.p.ScalarMultiplication(&p.p, big.NewInt(k))
	return &out
}

func mustEncode(t *testing.T, p *G1Point) []byte {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func firstN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func lastNReversed(n, k int) []int {
	out := make([]int, 0, k)
	for i := n - 1; i >= n-k; i-- {
		out = append(out, i)
	}
	return out
}
