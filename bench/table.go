package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/palisade-dev/palisade/testnet"
)

// printTable writes a table with aligned columns: a header, a rule, then
// the rows; a nil row leaves a blank line.
func printTable(w io.Writer, header []string, rows [][]string) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	line := func(cells []string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	line(header)
	rule := make([]string, len(header))
	for i, h := range header {
		rule[i] = strings.Repeat("-", len([]rune(h)))
	}
	line(rule)
	for _, r := range rows {
		if r == nil {
			r = make([]string, len(header)) // empty cells keep the columns aligned
		}
		line(r)
	}
	tw.Flush()
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" {
			fmt.Fprintln(w, strings.TrimRight(l, " \n"))
		}
	}
}

// fmtDur prints a latency with three significant digits or so.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// fmtRatio prints a/b, or "-" when b is zero.
func fmtRatio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// metric is one column of the comparison: its header, its cell, and the
// value its ratio is taken of.
type metric struct {
	header string
	// shared: only for workloads on one resource.
	shared bool
	value  func(r result) float64
	cell   func(r result) string
}

func latency(header string, shared bool, d func(r result) []time.Duration, q float64) metric {
	return metric{header: header, shared: shared,
		value: func(r result) float64 { return float64(testnet.Quantile(d(r), q)) },
		cell:  func(r result) string { return fmtDur(testnet.Quantile(d(r), q)) }}
}

func rate(header string, shared bool, v func(r result) float64) metric {
	return metric{header: header, shared: shared, value: v,
		cell: func(r result) string { return fmt.Sprintf("%.1f", v(r)) }}
}

func acquires(r result) []time.Duration { return r.Acquire }
func releases(r result) []time.Duration { return r.Release }
func handoffs(r result) []time.Duration { return r.Handoff }

// comparison are the columns of the first table.
var comparison = []metric{
	latency("acquire p50", false, acquires, .5),
	latency("acquire p99", false, acquires, .99),
	latency("release p50", false, releases, .5),
	latency("release p99", false, releases, .99),
	rate("cycles/s", false, func(r result) float64 { return r.CyclesPerS }),
	rate("handoffs/s", true, func(r result) float64 { return r.HandoffsPerS }),
	latency("gap p50", true, handoffs, .5),
	latency("gap p99", true, handoffs, .99),
	{header: "CPU", value: cpuShare, cell: func(r result) string { return fmt.Sprintf("%.0f%%", 100*cpuShare(r)) }},
	{header: "CPU/cycle", value: cpuPerCycle, cell: func(r result) string { return fmtDur(time.Duration(cpuPerCycle(r))) }},
}

// cpuShare is the process's CPU time over the measured phase's wall time:
// 2 is both cores of a 2-core machine busy.
func cpuShare(r result) float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.cpu) / float64(r.Elapsed)
}

// cpuPerCycle is the process's CPU time per acquire+release cycle, in
// nanoseconds.
func cpuPerCycle(r result) float64 {
	if r.Cycles == 0 {
		return 0
	}
	return float64(r.cpu) / float64(r.Cycles)
}

// notes says what went wrong in a run, if anything.
func notes(r result) string {
	var n []string
	if r.warmFailed > 0 {
		n = append(n, fmt.Sprintf("%d warm-up failures", r.warmFailed))
	}
	if r.Failures > 0 {
		n = append(n, fmt.Sprintf("%d failures", r.Failures))
	}
	if r.Stopped {
		n = append(n, "deadline hit")
	}
	return strings.Join(n, ", ")
}

// printComparison writes the first table: per workload, a row per system
// and, with both systems, a row of ratios Palisade / etcd.
func printComparison(w io.Writer, rows []result, systems []string) {
	header := []string{"workload", "system"}
	for _, m := range comparison {
		header = append(header, m.header)
	}
	header = append(header, "notes")
	var cells [][]string
	var last workload
	for k, r := range rows {
		if k > 0 && r.w != last {
			cells = append(cells, nil)
		}
		label := ""
		if k == 0 || r.w != last {
			label = r.w.label
		}
		last = r.w
		row := []string{label, r.system}
		for _, m := range comparison {
			if m.shared && !r.w.shared {
				row = append(row, "-")
				continue
			}
			row = append(row, m.cell(r))
		}
		cells = append(cells, append(row, notes(r)))
		if r.system == "palisade" && k > 0 && rows[k-1].system == "etcd" && rows[k-1].w == r.w {
			e := rows[k-1]
			ratio := []string{"", "ratio P/E"}
			for _, m := range comparison {
				if m.shared && !r.w.shared {
					ratio = append(ratio, "-")
					continue
				}
				ratio = append(ratio, fmtRatio(m.value(r), m.value(e)))
			}
			cells = append(cells, append(ratio, ""))
		}
	}
	fmt.Fprintf(w, "Side by side (%s), one process, loopback, both durable\n\n", strings.Join(systems, " and "))
	printTable(w, header, cells)
	fmt.Fprintln(w, `
acquire: the Lock call; in one-resource runs it is the wait for the lock.
release: the Unlock call. gap: from a holder's Unlock call to the next
holder's grant. CPU: the process's CPU time (user and system, both
systems') over the measured wall time, 100% a core; CPU/cycle: that time
per cycle. Ratio P/E = Palisade / etcd: below 1 is faster for the
latencies and less CPU, above 1 is more for cycles/s and handoffs/s.`)
}

// printFairness writes the spread of grants per client of every run on
// one resource.
func printFairness(w io.Writer, rows []result) {
	var cells [][]string
	for _, r := range rows {
		if !r.w.shared {
			continue
		}
		total := 0
		for _, g := range r.Grants {
			total += g
		}
		lo, hi := slices.Min(r.Grants), slices.Max(r.Grants)
		cells = append(cells, []string{r.w.label, r.system, fmt.Sprint(total),
			fmt.Sprintf("%.1f", float64(total)/float64(len(r.Grants))),
			fmt.Sprint(lo), fmt.Sprint(hi), fmtRatio(float64(hi), float64(lo)),
			fmtRatio(float64(len(r.Handoff)), float64(total-1)), fmt.Sprint(r.LongestRun)})
	}
	if len(cells) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFairness: grants per client (the clients share one budget of cycles)")
	fmt.Fprintln(w)
	printTable(w, []string{"workload", "system", "grants", "fair share", "min", "max", "max/min", "handoff share", "longest run"}, cells)
	fmt.Fprintln(w, `
handoff share: handoffs / (grants - 1), 1.00 when every grant went to
another client; longest run: most grants in a row to one client.`)
}

// printSizes writes the second table: Palisade alone, one client, per
// cluster size, with each size's acquire p50 over the first size's.
func printSizes(w io.Writer, rows []result) {
	var cells [][]string
	base := float64(testnet.Quantile(rows[0].Acquire, .5))
	for _, r := range rows {
		p50 := testnet.Quantile(r.Acquire, .5)
		cells = append(cells, []string{fmt.Sprint(r.nodes), fmtDur(p50), fmtDur(testnet.Quantile(r.Acquire, .99)),
			fmt.Sprintf("%.1f", r.CyclesPerS), fmtRatio(float64(p50), base), notes(r)})
	}
	fmt.Fprintf(w, "\nPalisade alone, 1 client, by cluster size\n\n")
	printTable(w, []string{"N", "acquire p50", "acquire p99", "cycles/s", fmt.Sprintf("p50 / p50(N=%d)", rows[0].nodes), "notes"}, cells)
}
