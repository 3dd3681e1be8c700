package testnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
)

// scrape fetches a node's /metrics through its admin handler and returns
// each sample by its series ("name" or "name{labels}").
func scrape(t testing.TB, r *node.Running) map[string]float64 {
	t.Helper()
	code, body := adminGet(t, r, node.PathMetrics)
	require.Equal(t, http.StatusOK, code, body)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "sample line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		out[line[:i]] = v
	}
	return out
}

// adminGet serves one GET of path from the node's admin handler.
func adminGet(t testing.TB, r *node.Running, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(r.AdminHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// auditVotes counts the vote entries in a node's audit log.
func auditVotes(t testing.TB, r *node.Running) int {
	t.Helper()
	entries, err := r.Audit(context.Background(), 1, 1<<20)
	require.NoError(t, err)
	votes := 0
	for _, e := range entries {
		if e.Kind == node.AuditVote {
			votes++
		}
	}
	return votes
}

// TestMetricsCountAKnownSequence runs K acquire+release cycles on distinct
// resources with node 4 stopped, so every token needs the votes of nodes
// 1, 2 and 3: each of them must report exactly K votes, K commits, K
// releases, no signature check (each Commit and Release comes from the
// holder of the statement the node voted for: one pairing per token, the
// client's) and no live lease. Then with all four up, each
// node's vote counter equals the votes in its audit log, and together
// they count every vote cast: between t and N per acquisition.
func TestMetricsCountAKnownSequence(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, nw.Stop(4))
	c := newClient(t, nw, 0, client.Config{})
	const K = 5
	for k := 0; k < K; k++ {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("orders-%d", k))
		require.NoError(t, err)
		require.EqualValues(t, 1, l.Epoch())
		awaitCommit(t, l) // else the Release may overtake the Commit
		require.NoError(t, l.Release(ctx))
	}
	for i := 1; i <= 3; i++ {
		m := scrape(t, nw.Node(i))
		require.EqualValues(t, K, m[node.MetricVotes], "node %d votes", i)
		require.EqualValues(t, K, m[node.MetricAuditEntries+`{kind="vote"}`], "node %d", i)
		require.EqualValues(t, K, m[node.MetricCommits], "node %d commits", i)
		require.EqualValues(t, K, m[node.MetricReleases], "node %d releases", i)
		require.Zero(t, m[node.MetricSignatureChecks], "node %d pairing checks", i)
		require.Zero(t, m[node.MetricLeasesLive], "node %d live leases", i)
		require.Zero(t, m[node.MetricBusy], "node %d busy", i)
		require.GreaterOrEqual(t, m[node.MetricStoreCommit+"_count"], float64(3*K), "node %d: a vote, a commit and a release per cycle, some sharing an fsync", i)
		require.Equal(t, K, auditVotes(t, nw.Node(i)), "node %d's audit log", i)
		require.EqualValues(t, 4, m[node.MetricMembers])
		require.EqualValues(t, 3, m[node.MetricThreshold])
	}

	// A held lease shows as live on the nodes that committed it.
	l, err := c.TryAcquire(ctx, "held")
	require.NoError(t, err)
	awaitCommit(t, l)
	for i := 1; i <= 3; i++ {
		require.EqualValues(t, 1, scrape(t, nw.Node(i))[node.MetricLeasesLive], "node %d", i)
	}
	require.NoError(t, l.Release(ctx))

	// All four up: a node may or may not vote for a round the others
	// already won, but every vote it casts is counted once.
	require.NoError(t, nw.Restart(4))
	for k := 0; k < K; k++ {
		l, err := c.Acquire(ctx, fmt.Sprintf("jobs/%d", k))
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	require.NoError(t, c.Close()) // waits for the client's calls still out
	total := 0
	for i := 1; i <= 4; i++ {
		r := nw.Node(i)
		require.Eventually(t, func() bool {
			return scrape(t, r)[node.MetricVotes] == float64(auditVotes(t, r))
		}, 10*time.Second, 10*time.Millisecond, "node %d: vote counter against audit log", i)
		total += int(scrape(t, r)[node.MetricVotes])
	}
	const cast = 3*K + 3 // the rounds of phase one and "held"
	require.GreaterOrEqual(t, total, cast+3*K)
	require.LessOrEqual(t, total, cast+4*K)
}

// TestReadyzFollowsReachableMembers: /readyz answers 200 while at least
// t = 3 of 4 members (the node included) answer its probes, and 503 once
// fewer do, whether members are cut off with their connections still open
// or stopped. /healthz stays 200 throughout.
func TestReadyzFollowsReachableMembers(t *testing.T) {
	nw := startNet(t, 4, 1, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n1 := nw.Node(1)
	probe := func() { n1.ProbeMembers(ctx, 5*time.Second) }
	ready := func() (int, string) { return adminGet(t, n1, node.PathReadyz) }

	code, body := ready()
	require.Equal(t, http.StatusServiceUnavailable, code, "no probes yet")
	require.Contains(t, body, "probes are not running")
	require.NoError(t, n1.StartProbing(time.Hour, 5*time.Second))
	require.Eventually(t, func() bool { return n1.Reachability().Reachable == 4 }, 20*time.Second, 10*time.Millisecond)
	code, body = ready()
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ready: 4 of 4 members reachable (t=3), store open\n", body)

	// Two members cut off: their connections stay open, their requests
	// are dropped. Connectedness would call them reachable; probes do not.
	nw.CutOff(3)
	nw.CutOff(4)
	probe()
	code, body = ready()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "2 of 4 members reachable, need t=3")
	require.Contains(t, body, "node3 (")
	m := scrape(t, n1)
	require.EqualValues(t, 2, m[node.MetricMembersReachable])
	require.EqualValues(t, 0, m[node.MetricMemberUp+`{member="3"}`])
	require.EqualValues(t, 1, m[node.MetricMemberUp+`{member="2"}`])
	code, _ = adminGet(t, n1, node.PathHealthz)
	require.Equal(t, http.StatusOK, code, "alive while not ready")

	// One back: 3 of 4 is enough.
	nw.Reconnect(3)
	probe()
	code, body = ready()
	require.Equal(t, http.StatusOK, code, body)

	// One stopped, one still cut off: not ready again.
	require.NoError(t, nw.Stop(3))
	probe()
	code, body = ready()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "2 of 4 members reachable")
}

// TestProbesRunOnTheNodesClock: the probe loop runs a round at start and
// then one per interval of the injected clock, and stops with the node.
func TestProbesRunOnTheNodesClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	nw := startNet(t, 4, 1, Options{Clock: clock})
	n1 := nw.Node(1)
	require.NoError(t, n1.StartProbing(10*time.Second, 5*time.Second))
	require.Eventually(t, func() bool { return n1.Reachability().Reachable == 4 }, 20*time.Second, 10*time.Millisecond)
	nw.CutOff(2)
	nw.CutOff(3)
	// No round runs until the clock moves.
	require.Equal(t, 4, n1.Reachability().Reachable)
	require.NoError(t, n1.Ready(context.Background()))
	clock.Advance(10 * time.Second)
	require.Eventually(t, func() bool { return n1.Reachability().Reachable == 2 }, 20*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, n1.Ready(context.Background()), node.ErrNotReady)
	// Close stops the loop (the package's leak check would catch it).
	require.NoError(t, nw.Stop(1))
}
