package main

import (
	"errors"
	"fmt"
	"runtime/trace"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-dev/palisade/node"
)

// storeCounts are a node's vote store counters: write transactions (one
// group commit each), the Saves they carried, and their total duration.
type storeCounts struct {
	commits uint64
	saves   float64
	seconds float64
}

// readStoreCounts reads a node's store counters from its metrics.
func readStoreCounts(reg *prometheus.Registry) storeCounts {
	var c storeCounts
	mfs, err := reg.Gather()
	if err != nil {
		return c
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			switch mf.GetName() {
			case node.MetricStoreCommit:
				c.commits, c.seconds = h.GetSampleCount(), h.GetSampleSum()
			case node.MetricStoreBatch:
				c.saves = h.GetSampleSum()
			}
		}
	}
	return c
}

// storeDeltas describes each node's commits over a measured phase: how
// many, their mean batch and their mean duration.
func storeDeltas(before, after []storeCounts) string {
	var parts []string
	for i := range after {
		if i >= len(before) {
			break
		}
		n := after[i].commits - before[i].commits
		if n == 0 {
			parts = append(parts, fmt.Sprintf("node %d: no commit", i+1))
			continue
		}
		batch := (after[i].saves - before[i].saves) / float64(n)
		d := time.Duration((after[i].seconds - before[i].seconds) / float64(n) * float64(time.Second))
		parts = append(parts, fmt.Sprintf("node %d: %d commits, batch %.2f, %v each", i+1, n, batch, d.Round(time.Microsecond)))
	}
	return strings.Join(parts, "; ")
}

// startTrace starts an execution trace into name with tag inserted before
// its extension (as startProfile); with no name it does nothing.
func startTrace(name, tag string) (func() error, error) {
	if name == "" {
		return func() error { return nil }, nil
	}
	f, err := createTagged(name, tag)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}
