package main

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/testnet"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 100, cfg.cycles)
	require.Equal(t, workloads, cfg.workloads)
	require.Equal(t, []string{"etcd", "palisade"}, cfg.systems)
	require.Equal(t, []int{4, 7, 10, 16}, cfg.nodes)

	cfg, err = parseFlags([]string{"-smoke", "-nodes", "", "-workloads", "8one,1"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2, cfg.cycles, "smoke's default")
	require.Equal(t, 1, cfg.warmup)
	require.Empty(t, cfg.nodes, "an explicit -nodes wins over smoke's")
	require.Equal(t, []workload{workloads[4], workloads[0]}, cfg.workloads)

	for _, bad := range [][]string{{"-nodes", "5"}, {"-workloads", "nope"}, {"-systems", "zookeeper"}, {"-cycles", "0"}, {"extra"}} {
		_, err := parseFlags(bad, io.Discard)
		require.Error(t, err, "%v", bad)
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		712 * time.Microsecond:   "712µs",
		2880 * time.Microsecond:  "2.88ms",
		98500 * time.Microsecond: "98.5ms",
		312 * time.Millisecond:   "312ms",
		1500 * time.Millisecond:  "1.50s",
		-5 * time.Millisecond:    "-5.00ms",
	} {
		require.Equal(t, want, fmtDur(d))
	}
}

// fake is a measured run with the given latencies and rates, one cycle
// in 10ms that cost 4 acquires of CPU.
func fake(system string, w workload, acquire time.Duration, cps float64, grants ...int) result {
	return result{system: system, w: w, cpu: 4 * acquire, WorkloadResult: testnet.WorkloadResult{
		Acquire: []time.Duration{acquire}, Release: []time.Duration{acquire / 2},
		Handoff: []time.Duration{acquire / 4}, CyclesPerS: cps, HandoffsPerS: cps / 2, Grants: grants,
		LongestRun: len(grants), Cycles: 1, Elapsed: 10 * time.Millisecond,
	}}
}

// TestPrintComparison: each workload gets a row per system and a ratio
// row Palisade / etcd; contended columns are "-" for own-resource runs.
func TestPrintComparison(t *testing.T) {
	rows := []result{
		fake("etcd", workloads[0], 2*time.Millisecond, 200, 1),
		fake("palisade", workloads[0], time.Millisecond, 500, 1),
		fake("etcd", workloads[4], 100*time.Millisecond, 80, 10, 10, 10, 10, 10, 10, 10, 10),
		fake("palisade", workloads[4], 20*time.Millisecond, 160, 5, 5, 5, 5, 10, 10, 10, 30),
	}
	var out strings.Builder
	printComparison(&out, rows, []string{"etcd", "palisade"})
	var fair strings.Builder
	printFairness(&fair, rows)
	find := func(text, prefix string, skip int) []string {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				if skip == 0 {
					return strings.Fields(l)
				}
				skip--
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, text)
		return nil
	}
	require.Equal(t, []string{"1", "client", "etcd", "2.00ms", "2.00ms", "1.00ms", "1.00ms", "200.0", "-", "-", "-", "80%", "8.00ms"}, find(out.String(), "1 client", 0))
	require.Equal(t, []string{"ratio", "P/E", "0.50", "0.50", "0.50", "0.50", "2.50", "-", "-", "-", "0.50", "0.50"}, find(out.String(), "ratio P/E", 0))
	require.Equal(t, []string{"ratio", "P/E", "0.20", "0.20", "0.20", "0.20", "2.00", "2.00", "0.20", "0.20", "0.20", "0.20"}, find(out.String(), "ratio P/E", 1))
	// Fairness: 80 grants over 8 clients, etcd even, Palisade 5 to 30;
	// only the one-resource runs.
	require.NotContains(t, fair.String(), "1 client")
	require.Equal(t, []string{"8", "clients,", "one", "resource", "etcd", "80", "10.0", "10", "10", "1.00", "0.01", "8"}, find(fair.String(), "8 clients, one resource  etcd", 0))
	require.Equal(t, []string{"8", "clients,", "one", "resource", "palisade", "80", "10.0", "5", "30", "6.00", "0.01", "8"}, find(fair.String(), "8 clients, one resource  palisade", 0))
}

func TestPrintSizes(t *testing.T) {
	rows := []result{fake("palisade-n4", workloads[0], 2*time.Millisecond, 400, 1), fake("palisade-n7", workloads[0], 3*time.Millisecond, 300, 1)}
	rows[0].nodes, rows[1].nodes = 4, 7
	var out strings.Builder
	printSizes(&out, rows)
	require.Contains(t, out.String(), "p50 / p50(N=4)")
	var last []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		last = strings.Fields(l)
	}
	require.Equal(t, []string{"7", "3.00ms", "3.00ms", "300.0", "1.50"}, last)
}

func TestStartProfileName(t *testing.T) {
	dir := t.TempDir()
	stop, err := startProfile(dir+"/cpu.pprof", "palisade-16own")
	require.NoError(t, err)
	require.NoError(t, stop())
	require.FileExists(t, dir+"/cpu.palisade-16own.pprof")
}

func TestStartProfilesWritesEachAsked(t *testing.T) {
	dir := t.TempDir()
	cfg := config{blockprofile: dir + "/block.pprof", mutexprofile: dir + "/mutex.pprof"}
	stop, err := startProfiles(cfg, "palisade-1")
	require.NoError(t, err)
	var mu sync.Mutex
	mu.Lock()
	go func() { time.Sleep(time.Millisecond); mu.Unlock() }()
	mu.Lock() // one blocking and one contended event at least
	mu.Unlock()
	require.NoError(t, stop())
	for _, name := range []string{"block.palisade-1.pprof", "mutex.palisade-1.pprof"} {
		fi, err := os.Stat(dir + "/" + name)
		require.NoError(t, err)
		require.Positive(t, fi.Size(), name)
	}
	require.NoFileExists(t, dir+"/cpu.palisade-1.pprof")
}

func TestNotesAndCheckRuns(t *testing.T) {
	r := fake("palisade", workloads[4], time.Millisecond, 10, 1)
	r.Cycles = 0
	r.warmFailed, r.Failures, r.Stopped = 2, 48, true
	require.Equal(t, "2 warm-up failures, 48 failures, deadline hit", notes(r))
	err := checkRuns([]result{fake("etcd", workloads[4], time.Millisecond, 10, 1), r})
	require.ErrorIs(t, err, errNoCycle)
	require.Contains(t, err.Error(), "palisade 8one")
	require.NotContains(t, err.Error(), "etcd")
}
