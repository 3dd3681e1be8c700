package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
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
	// 200).
	Acquires int
	// Contended makes every client use the same resource; otherwise each
	// has its own.
	Contended bool
	// Dir holds the keys and stores (default a temporary directory,
	// removed afterwards).
	Dir string
}

// BenchResult holds the measured latencies.
type BenchResult struct {
	Options    BenchOptions
	Acquire    []time.Duration // one per successful acquire, sorted
	Release    []time.Duration // sorted
	Failures   int
	Elapsed    time.Duration
	CyclesPerS float64
}

// Quantile returns the q-quantile (0..1) of sorted durations.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q * float64(len(d)-1))
	return d[i]
}

// Print writes a summary with medians and tails.
func (r BenchResult) Print(w io.Writer) {
	fmt.Fprintf(w, "nodes=%d clients=%d contended=%v cycles=%d failures=%d elapsed=%v\n",
		r.Options.Nodes, r.Options.Clients, r.Options.Contended, len(r.Acquire), r.Failures, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "acquire  p50=%v p90=%v p99=%v\n", Quantile(r.Acquire, .5).Round(time.Microsecond), Quantile(r.Acquire, .9).Round(time.Microsecond), Quantile(r.Acquire, .99).Round(time.Microsecond))
	fmt.Fprintf(w, "release  p50=%v p90=%v p99=%v\n", Quantile(r.Release, .5).Round(time.Microsecond), Quantile(r.Release, .9).Round(time.Microsecond), Quantile(r.Release, .99).Round(time.Microsecond))
	fmt.Fprintf(w, "throughput %.1f acquire+release cycles/s\n", r.CyclesPerS)
}

// Bench runs an in-process cluster on loopback and measures acquire and
// release latency. Its loops are bounded by Acquires and by ctx.
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
	clients := make([]*client.Client, o.Clients)
	for i := range clients {
		c, err := nw.NewClient(i, client.Config{MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		if err != nil {
			return BenchResult{}, err
		}
		defer c.Close()
		clients[i] = c
		// One warm-up cycle so connection set-up is not measured.
		l, err := acquireWait(ctx, c, 30*time.Second, fmt.Sprintf("warmup-%d", i))
		if err != nil {
			return BenchResult{}, fmt.Errorf("warm-up: %w", err)
		}
		if err := l.Release(ctx); err != nil {
			return BenchResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	res := BenchResult{Options: o}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resource := fmt.Sprintf("bench-%d", i)
			if o.Contended {
				resource = "bench"
			}
			for k := 0; k < o.Acquires && ctx.Err() == nil; k++ {
				t0 := time.Now()
				l, err := acquireWait(ctx, c, 30*time.Second, resource)
				t1 := time.Now()
				if err != nil {
					mu.Lock()
					res.Failures++
					mu.Unlock()
					continue
				}
				err = l.Release(ctx)
				t2 := time.Now()
				mu.Lock()
				res.Acquire = append(res.Acquire, t1.Sub(t0))
				if err == nil {
					res.Release = append(res.Release, t2.Sub(t1))
				} else {
					res.Failures++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	sort.Slice(res.Acquire, func(i, j int) bool { return res.Acquire[i] < res.Acquire[j] })
	sort.Slice(res.Release, func(i, j int) bool { return res.Release[i] < res.Release[j] })
	res.CyclesPerS = float64(len(res.Release)) / res.Elapsed.Seconds()
	if len(res.Acquire) == 0 {
		return res, errors.New("testnet: bench: no acquire succeeded")
	}
	return res, ctx.Err()
}

// acquireWait is Acquire waiting at most d (a context with timeout d).
func acquireWait(ctx context.Context, c *client.Client, d time.Duration, resource string, opts ...client.Option) (*client.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Acquire(ctx, resource, opts...)
}
