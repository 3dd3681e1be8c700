package node

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// alertRulesFile is the example alert-rules file of the docs.
var alertRulesFile = filepath.Join("..", "docs", "prometheus", "palisade-alerts.yml")

var metricNameRE = regexp.MustCompile(`\bpalisade_[a-z0-9_]+\b`)

// TestAlertRulesUseExportedMetrics: every palisade_* metric that an
// expression of docs/prometheus/palisade-alerts.yml uses is one a node
// exports (a histogram's _bucket, _sum and _count series included), and
// every alert has an expression. promtool check rules (in .ci/run when it
// is installed) checks the rest of the file's syntax.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	a := startAdminNode(t, NewMemStore())
	// The per-member series exist once the probes ran; make them now.
	a.n.ops.metrics.memberUp.WithLabelValues("1").Set(1)
	a.n.ops.metrics.memberRTT.WithLabelValues("1").Set(0)
	fams, err := a.n.MetricsRegistry().Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, f := range fams {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+s] = true
			}
		}
	}

	f, err := os.Open(alertRulesFile)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	alerts, exprs := 0, 0
	used := map[string]bool{}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "- alert:"):
			alerts++
		case strings.HasPrefix(line, "expr:"):
			exprs++
			for _, name := range metricNameRE.FindAllString(line, -1) {
				used[name] = true
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Positive(t, alerts)
	require.Equal(t, alerts, exprs, "every alert has one expr line")
	for _, want := range []string{MetricEvidence, MetricReady, MetricMembersReachable, MetricRefusals, MetricStoreCommit + "_bucket"} {
		require.True(t, used[want], "the rules should use %s", want)
	}
	for name := range used {
		require.True(t, exported[name], "%s uses %s, which a node does not export", alertRulesFile, name)
	}
}
