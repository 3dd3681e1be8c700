// Package metricstest reads Prometheus series in tests: the agent's and
// the resource server's metrics are checked the same way.
package metricstest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Value returns the series of g named name whose labels are exactly
// labels (name, value, name, value …, in the order Prometheus sorts
// them): a counter's or gauge's value, a histogram's sample count. It
// fails the test if there is no such series.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName(), lp.GetValue())
			}
			if !slices.Equal(got, labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}
