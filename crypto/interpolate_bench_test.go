package crypto

import (
	"fmt"
	"testing"
)

// BenchmarkInterpolate measures GroupKey.Interpolate, what a client pays
// to turn t votes into a candidate token: decoding the partials and
// interpolating them, without a pairing.
func BenchmarkInterpolate(b *testing.B) {
	for _, n := range []int{4, 7, 10, 16, 31} {
		gk, shares := deal(b, n)
		msg := []byte("benchmark message")
		ps := signAll(b, shares, msg)[:gk.Threshold()]
		b.Run(fmt.Sprintf("t=%d", gk.Threshold()), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := gk.Interpolate(ps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
