package crypto

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

// batchFixture returns n messages and their valid group signatures.
func batchFixture(t testing.TB, gk *GroupKey, shares []*Share, n int) ([][]byte, []Signature) {
	t.Helper()
	msgs := make([][]byte, n)
	sigs := make([]Signature, n)
	for i := range msgs {
		msgs[i] = []byte(fmt.Sprintf("batch message %d", i))
		sig, _, err := gk.Combine(msgs[i], signAll(t, shares[:gk.Threshold()], msgs[i]))
		require.NoError(t, err)
		sigs[i] = sig
	}
	return msgs, sigs
}

// individually returns the indices k.Verify refuses.
func individually(k PublicKey, msgs [][]byte, sigs []Signature) []int {
	var bad []int
	for i := range sigs {
		if k.Verify(msgs[i], sigs[i]) != nil {
			bad = append(bad, i)
		}
	}
	return bad
}

func TestVerifyBatch(t *testing.T) {
	gk, shares := deal(t, 4)
	pk := gk.PublicKey()
	msgs, sigs := batchFixture(t, gk, shares, 12)
	// A valid signature that is invalid elsewhere: signature 0 on message 1.
	cp := func() []Signature { return append([]Signature(nil), sigs...) }

	// Encodings the batch must refuse alone: the negation of a valid
	// signature (sort flag flipped) and points outside the subgroup or
	// off the curve.
	const negIdx = 3
	neg := sigs[negIdx]
	neg[0] ^= 0x20
	nonSub, offCurve := Signature(bls12381test.NonSubgroupG1(5)), Signature(bls12381test.NotOnCurveG1(5))

	tests := []struct {
		name string
		msgs [][]byte
		sigs []Signature
		bad  []int
	}{
		{"empty", nil, nil, nil},
		{"single valid", msgs[:1], sigs[:1], nil},
		{"single invalid", msgs[:1], sigs[1:2], []int{0}},
		{"all valid", msgs, sigs, nil},
		{"one invalid first", msgs, func() []Signature { s := cp(); s[0] = sigs[1]; return s }(), []int{0}},
		{"one invalid last", msgs, func() []Signature { s := cp(); s[11] = sigs[10]; return s }(), []int{11}},
		{"two swapped", msgs, func() []Signature { s := cp(); s[3], s[4] = s[4], s[3]; return s }(), []int{3, 4}},
		{"several invalid", msgs, func() []Signature {
			s := cp()
			s[2], s[5], s[6], s[9] = sigs[0], sigs[0], sigs[1], sigs[0]
			return s
		}(), []int{2, 5, 6, 9}},
		{"all invalid", msgs[:5], sigs[1:6], []int{0, 1, 2, 3, 4}},
		{"negated", msgs, func() []Signature { s := cp(); s[negIdx] = neg; return s }(), []int{negIdx}},
		{"outside the subgroup and off the curve", msgs, func() []Signature { s := cp(); s[1], s[7] = nonSub, offCurve; return s }(), []int{1, 7}},
		{"identity", msgs[:3], []Signature{sigs[0], {}, sigs[2]}, []int{1}},
		{"garbage bytes", msgs[:3], []Signature{sigs[0], sigs[1], {1, 2, 3}}, []int{2}},
		// Two invalid signatures whose errors cancel in an unweighted sum:
		// σ0+δ and σ1-δ. The random weights must catch them.
		{"cancelling pair", msgs[:4], func() []Signature {
			delta := suite.G1().Point().Mul(suite.G1().Scalar().SetInt64(7), nil)
			s := cp()[:4]
			for i, sign := range []bool{true, false} {
				p, err := bls12381.DecodeG1(s[i][:])
				require.NoError(t, err)
				if sign {
					p.Add(p, delta)
				} else {
					p.Sub(p, delta)
				}
				b, err := p.MarshalBinary()
				require.NoError(t, err)
				copy(s[i][:], b)
			}
			return s
		}(), []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.bad, individually(pk, tt.msgs, tt.sigs), "fixture")
			bad, err := pk.VerifyBatch(seeded(1), tt.msgs, tt.sigs)
			require.NoError(t, err)
			require.Equal(t, tt.bad, bad)
			bad, err = gk.VerifyBatch(seeded(2), tt.msgs, tt.sigs)
			require.NoError(t, err)
			require.Equal(t, tt.bad, bad)
		})
	}
}

// TestVerifyBatchRandomMixes compares batch results with individual checks
// on seeded random mixes of valid, swapped and malformed signatures.
func TestVerifyBatchRandomMixes(t *testing.T) {
	gk, shares := deal(t, 4)
	pk := gk.PublicKey()
	msgs, sigs := batchFixture(t, gk, shares, 16)
	rng := seeded(42)
	for round := 0; round < 12; round++ {
		n := 2 + rng.Intn(len(msgs)-1)
		ms := make([][]byte, n)
		ss := make([]Signature, n)
		for i := 0; i < n; i++ {
			j := rng.Intn(len(msgs))
			ms[i] = msgs[j]
			switch rng.Intn(6) {
			case 0:
				ss[i] = sigs[(j+1)%len(sigs)] // wrong message
			case 1:
				rng.Read(ss[i][:]) // garbage
			default:
				ss[i] = sigs[j]
			}
		}
		bad, err := pk.VerifyBatch(rng, ms, ss)
		require.NoError(t, err)
		require.Equal(t, individually(pk, ms, ss), bad, "round %d", round)
	}
}

type failingReader struct{}

var errNoEntropy = errors.New("no entropy")

func (failingReader) Read([]byte) (int, error) { return 0, errNoEntropy }

func TestVerifyBatchErrors(t *testing.T) {
	gk, shares := deal(t, 4)
	msgs, sigs := batchFixture(t, gk, shares, 2)
	bad, err := gk.VerifyBatch(failingReader{}, msgs, sigs)
	require.ErrorIs(t, err, errNoEntropy)
	require.Nil(t, bad)
	bad, err = gk.VerifyBatch(nil, msgs[:1], sigs)
	require.Error(t, err)
	require.Nil(t, bad)
	// nil rand means crypto/rand.
	bad, err = gk.VerifyBatch(nil, msgs, sigs)
	require.NoError(t, err)
	require.Nil(t, bad)
}

func benchmarkVerifyBatch(b *testing.B, n int) {
	gk, shares := deal(b, 4)
	msgs, sigs := batchFixture(b, gk, shares, n)
	pk := gk.PublicKey()
	for b.Loop() {
		bad, err := pk.VerifyBatch(nil, msgs, sigs)
		if err != nil || bad != nil {
			b.Fatal(bad, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1e3, "µs/token")
}

func BenchmarkVerifyBatch10(b *testing.B)  { benchmarkVerifyBatch(b, 10) }
func BenchmarkVerifyBatch100(b *testing.B) { benchmarkVerifyBatch(b, 100) }
