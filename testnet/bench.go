package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/palisade-dev/palisade/client"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	// Nodes is N (default 4).
	Nodes int
	// Clients is the number of concurrent clients (default 1).
	Clients int
	// Acquires is the number of acquire+release cycles per client (default
	// 200); the clients draw them from one budget of Clients*Acquires.
	Acquires int
	// Contended makes every client use the same resource; otherwise each
	// has its own.
	Contended bool
	// Dir holds the keys and stores (default a temporary directory,
	// removed afterwards).
	Dir string
	// Deadline bounds the measured phase (default 10 minutes).
	Deadline time.Duration
}

// BenchResult holds what Bench measured.
type BenchResult struct {
	Options BenchOptions
	WorkloadResult
}

// Quantile returns the q-quantile (0..1) of sorted durations: the element
// at rank floor(q*(n-1)), 0 when there is none.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q * float64(len(d)-1))
	return d[i]
}

// Print writes a summary with medians and tails; a contended run adds the
// handoffs and the spread of grants per client.
func (r BenchResult) Print(w io.Writer) {
	us := func(d []time.Duration, q float64) time.Duration { return Quantile(d, q).Round(time.Microsecond) }
	fmt.Fprintf(w, "nodes=%d clients=%d contended=%v cycles=%d failures=%d elapsed=%v\n",
		r.Options.Nodes, r.Options.Clients, r.Options.Contended, len(r.Acquire), r.Failures, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "acquire  p50=%v p90=%v p99=%v\n", us(r.Acquire, .5), us(r.Acquire, .9), us(r.Acquire, .99))
	fmt.Fprintf(w, "release  p50=%v p90=%v p99=%v\n", us(r.Release, .5), us(r.Release, .9), us(r.Release, .99))
	fmt.Fprintf(w, "throughput %.1f acquire+release cycles/s\n", r.CyclesPerS)
	if r.Options.Contended {
		fmt.Fprintf(w, "handoffs %.1f/s  gap p50=%v p99=%v\n", r.HandoffsPerS, us(r.Handoff, .5), us(r.Handoff, .99))
		fmt.Fprintf(w, "grants per client min=%d max=%d fair=%.1f longest-run=%d\n", slices.Min(r.Grants), slices.Max(r.Grants), float64(len(r.Acquire))/float64(len(r.Grants)), r.LongestRun)
	}
	if r.Stopped {
		fmt.Fprintf(w, "stopped at the deadline (%v)\n", r.Options.Deadline)
	}
	if r.FirstErr != nil {
		fmt.Fprintf(w, "first failure: %v\n", r.FirstErr)
	}
}

// Bench runs an in-process cluster on loopback and measures acquire and
// release latency with RunWorkload (one warm-up cycle per client). Its
// loops are bounded by Acquires, Deadline and ctx.
func Bench(ctx context.Context, o BenchOptions) (BenchResult, error) {
	if o.Nodes <= 0 {
		o.Nodes = 4
	}
	if o.Clients <= 0 {
		o.Clients = 1
	}
	if o.Acquires <= 0 {
		o.Acquires = 200
	}
	if o.Deadline <= 0 {
		o.Deadline = 10 * time.Minute
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "palisade-bench-")
		if err != nil {
			return BenchResult{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	nw, err := Start(dir, Options{Keygen: KeygenOptions{N: o.Nodes, Clients: o.Clients}})
	if err != nil {
		return BenchResult{}, err
	}
	defer nw.Close()
	lockers, err := nw.NewLockers(o.Clients)
	if err != nil {
		return BenchResult{}, err
	}
	defer CloseLockers(lockers)
	wr, err := RunWorkload(ctx, lockers, Workload{Name: "cli", Shared: o.Contended, Cycles: o.Acquires, Warmup: 1, Deadline: o.Deadline})
	res := BenchResult{Options: o, WorkloadResult: wr}
	if err == nil && len(res.Acquire) == 0 {
		err = errors.New("testnet: bench: no acquire succeeded")
	}
	return res, err
}

// acquireWait is Acquire waiting at most d (a context with timeout d).
func acquireWait(ctx context.Context, c *client.Client, d time.Duration, resource string, opts ...client.Option) (*client.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Acquire(ctx, resource, opts...)
}
