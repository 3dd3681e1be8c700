package cli

import (
	"context"
	"os"

	"github.com/palisade-dev/palisade/testnet"
)

// runBench runs testnet.Bench and prints its summary.
func runBench(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("bench", "bench: unexpected argument %q", args[0])
	}
	if cfg.Clients < 1 || cfg.Cycles < 1 {
		return usageErrorf("bench", "bench: --clients and --cycles must be at least 1")
	}
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		setPalisadeLogLevel("error")
	}
	r, err := testnet.Bench(ctx, testnet.BenchOptions{Nodes: cfg.Nodes, Clients: cfg.Clients, Acquires: cfg.Cycles, Contended: cfg.Contended})
	if err != nil {
		return err
	}
	r.Print(e.stdout)
	return nil
}
