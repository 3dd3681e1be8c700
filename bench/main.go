// Command bench measures Palisade against etcd's lock side by side, in one
// process on loopback: a 3-member embedded etcd (fsync on,
// concurrency.Mutex, one session per client) and an in-process Palisade
// cluster (package testnet), on the same workloads with the same runner
// (testnet.RunWorkload). It prints one table with both systems and their
// ratios, the spread of grants per client in the contended runs, and a
// second table with Palisade alone at several cluster sizes.
//
// It is its own module so that etcd stays out of Palisade's dependencies.
// See README.md for the flags and what each figure means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	logging "github.com/ipfs/go-log/v2"

	"github.com/palisade-dev/palisade/testnet"
)

// workload is one benchmark scenario: how many clients, and whether they
// share one resource.
type workload struct {
	name    string
	label   string
	clients int
	shared  bool
}

// workloads are the scenarios of the issue, in table order.
var workloads = []workload{
	{"1", "1 client", 1, false},
	{"16own", "16 clients, own resources", 16, false},
	{"64own", "64 clients, own resources", 64, false},
	{"2one", "2 clients, one resource", 2, true},
	{"8one", "8 clients, one resource", 8, true},
	{"16one", "16 clients, one resource", 16, true},
}

// system is one lock service under test.
type system struct {
	name string
	// lockers returns k clients of the service.
	lockers func(k int) ([]testnet.Locker, error)
	close   func() error
	// stores, if set, returns the vote store's counters of each node
	// (Palisade only), read before and after the measured phase.
	stores func() []storeCounts
}

// config is the command line.
type config struct {
	cycles, warmup int
	workloads      []workload
	systems        []string
	nodes          []int
	deadline       time.Duration
	cpuprofile     string
	blockprofile   string
	mutexprofile   string
	trace          string
	dir            string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		_ = logging.SetLogLevelRegex("palisade/.*", "error")
	}
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
		os.Exit(1)
	}
}

const usage = `Usage:
    cd bench && go run . [-cycles N] [-workloads LIST] [-nodes LIST] [flags]

Runs a 3-member etcd and a Palisade cluster of 4 nodes in this process,
on loopback, both durable, and measures both on the same workloads:
acquire and release latency p50/p99, acquire+release cycles/s, and for
contended runs handoffs/s and the handoff gap. Then Palisade alone at
each cluster size of -nodes, one client. See README.md.

Flags:
`

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var cfg config
	var names, systems, nodes string
	var smoke bool
	fs.IntVar(&cfg.cycles, "cycles", 100, "measured acquire+release cycles per client (the clients of a workload share one budget)")
	fs.IntVar(&cfg.warmup, "warmup", 5, "warm-up cycles per client, not measured")
	fs.StringVar(&names, "workloads", "all", "comma-separated workloads: "+workloadNames()+", or all")
	fs.StringVar(&systems, "systems", "etcd,palisade", "comma-separated systems of the first table: etcd, palisade")
	fs.StringVar(&nodes, "nodes", "4,7,10,16", "comma-separated cluster sizes of the second table (Palisade alone, 1 client); empty for none")
	fs.DurationVar(&cfg.deadline, "deadline", 5*time.Minute, "bound on each run's warm-up and, again, on its measured phase")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of each measured run to this file name with .SYSTEM-WORKLOAD before its extension")
	fs.StringVar(&cfg.blockprofile, "blockprofile", "", "write a block profile (every blocking event) of each measured run, named as -cpuprofile's")
	fs.StringVar(&cfg.mutexprofile, "mutexprofile", "", "write a mutex contention profile (every event) of each measured run, named as -cpuprofile's")
	fs.StringVar(&cfg.trace, "trace", "", "write an execution trace (go tool trace) of each measured run, named as -cpuprofile's")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the data directories (default the system's temporary directory); they are removed at the end")
	fs.BoolVar(&smoke, "smoke", false, "a short run that only checks the benchmark works: unless given, -cycles 2 -warmup 1 -nodes 4,7 -deadline 2m")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() != 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if smoke {
		// Smoke defaults, under the flags given explicitly.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, value := range map[string]string{"cycles": "2", "warmup": "1", "nodes": "4,7", "deadline": "2m"} {
			if !set[name] {
				_ = fs.Set(name, value)
			}
		}
	}
	if cfg.cycles < 1 || cfg.warmup < 0 || cfg.deadline <= 0 {
		return cfg, errors.New("-cycles and -deadline must be positive, -warmup not negative")
	}
	var err error
	if cfg.workloads, err = parseWorkloads(names); err != nil {
		return cfg, err
	}
	for _, s := range splitList(systems) {
		if s != "etcd" && s != "palisade" {
			return cfg, fmt.Errorf("unknown system %q (etcd, palisade)", s)
		}
		cfg.systems = append(cfg.systems, s)
	}
	for _, s := range splitList(nodes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 4 || (n-1)%3 != 0 {
			return cfg, fmt.Errorf("-nodes: %q is not a cluster size 3f+1 >= 4", s)
		}
		cfg.nodes = append(cfg.nodes, n)
	}
	return cfg, nil
}

func workloadNames() string {
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
	}
	return strings.Join(names, ", ")
}

func parseWorkloads(list string) ([]workload, error) {
	if list == "all" {
		return workloads, nil
	}
	var out []workload
	for _, name := range splitList(list) {
		i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown workload %q (%s)", name, workloadNames())
		}
		out = append(out, workloads[i])
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run runs the first table's workloads on each system, then the second
// table's cluster sizes, and prints the tables to stdout; progress goes to
// stderr.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	dir, err := os.MkdirTemp(cfg.dir, "palisade-bench-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()

	maxClients := 1
	for _, w := range cfg.workloads {
		maxClients = max(maxClients, w.clients)
	}
	var systems []system
	defer func() {
		for _, s := range systems {
			err = errors.Join(err, s.close())
		}
	}()
	for _, name := range cfg.systems {
		fmt.Fprintf(stderr, "starting %s\n", name)
		var s system
		switch name {
		case "etcd":
			s, err = etcdSystem(ctx, filepath.Join(dir, "etcd"))
		case "palisade":
			s, err = palisadeSystem(filepath.Join(dir, "palisade"), 4, maxClients)
		}
		if err != nil {
			return err
		}
		systems = append(systems, s)
	}

	var rows []result
	for _, w := range cfg.workloads {
		for _, s := range systems {
			r, err := runOne(ctx, cfg, s, w, stderr)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	if len(rows) > 0 {
		printComparison(stdout, rows, cfg.systems)
		printFairness(stdout, rows)
	}

	var sizes []result
	for _, n := range cfg.nodes {
		r, err := runSize(ctx, cfg, filepath.Join(dir, fmt.Sprintf("palisade-n%d", n)), n, stderr)
		if err != nil {
			return err
		}
		sizes = append(sizes, r)
	}
	if len(sizes) > 0 {
		printSizes(stdout, sizes)
	}
	return checkRuns(append(rows, sizes...))
}

// result is one measured run.
type result struct {
	system string
	nodes  int
	w      workload
	// warmFailed counts the failed warm-up cycles.
	warmFailed int
	// cpu is the CPU time (user and system) the whole process spent in
	// the measured phase: both systems run in it, the idle one too.
	cpu time.Duration
	testnet.WorkloadResult
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// errNoCycle fails a benchmark in which a run completed no cycle at all.
var errNoCycle = errors.New("a run completed no cycle")

// checkRuns returns errNoCycle, naming the runs, if any run completed no
// cycle: its figures would be empty.
func checkRuns(runs []result) error {
	var empty []string
	for _, r := range runs {
		if r.Cycles == 0 {
			empty = append(empty, r.system+" "+r.w.name)
		}
	}
	if len(empty) > 0 {
		return fmt.Errorf("%w: %s", errNoCycle, strings.Join(empty, ", "))
	}
	return nil
}

// runOne runs workload w on system s with fresh clients, warm-up first,
// and profiles the measured phase when asked.
func runOne(ctx context.Context, cfg config, s system, w workload, stderr io.Writer) (result, error) {
	lockers, err := s.lockers(w.clients)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", s.name, err)
	}
	defer testnet.CloseLockers(lockers)
	tw := testnet.Workload{Name: w.name, Shared: w.shared, Cycles: cfg.cycles, Warmup: cfg.warmup, Deadline: cfg.deadline}
	var warm *testnet.WarmupError
	if err := testnet.Warm(ctx, lockers, tw); errors.As(err, &warm) {
		// Measured anyway: the failures are the finding, and the notes
		// column shows them.
		fmt.Fprintf(stderr, "%-8s %-6s %v\n", s.name, w.name, err)
	} else if err != nil {
		return result{}, fmt.Errorf("%s: %w", s.name, err)
	}
	stopProfile, err := startProfiles(cfg, s.name+"-"+w.name)
	if err != nil {
		return result{}, err
	}
	var before []storeCounts
	if s.stores != nil {
		before = s.stores()
	}
	cpu0, err := processCPU()
	if err != nil {
		return result{}, errors.Join(err, stopProfile())
	}
	r, err := testnet.Measure(ctx, lockers, tw)
	cpu1, cerr := processCPU()
	if perr := stopProfile(); err == nil {
		err = errors.Join(perr, cerr)
	}
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", s.name, err)
	}
	fmt.Fprintf(stderr, "%-8s %-6s %d cycles in %v, %d failures, CPU %v\n", s.name, w.name, r.Cycles, r.Elapsed.Round(time.Millisecond), r.Failures, (cpu1 - cpu0).Round(time.Millisecond))
	if s.stores != nil {
		fmt.Fprintf(stderr, "%-8s %-6s vote stores: %s\n", s.name, w.name, storeDeltas(before, s.stores()))
	}
	if r.FirstErr != nil {
		fmt.Fprintf(stderr, "%-8s %-6s first failure: %v\n", s.name, w.name, r.FirstErr)
	}
	res := result{system: s.name, w: w, cpu: cpu1 - cpu0, WorkloadResult: r}
	if warm != nil {
		res.warmFailed = warm.Failed
	}
	return res, nil
}

// runSize measures Palisade alone with n nodes and one client.
func runSize(ctx context.Context, cfg config, dir string, n int, stderr io.Writer) (res result, err error) {
	fmt.Fprintf(stderr, "starting palisade with %d nodes\n", n)
	s, err := palisadeSystem(dir, n, 1)
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, s.close(), os.RemoveAll(dir)) }()
	s.name = fmt.Sprintf("palisade-n%d", n)
	res, err = runOne(ctx, cfg, s, workloads[0], stderr)
	res.nodes = n
	return res, err
}

// startProfile starts a CPU profile into name with tag inserted before
// its extension ("cpu.pprof", "palisade-16own": "cpu.palisade-16own.pprof");
// with no name it does nothing. The returned function stops it.
func startProfile(name, tag string) (func() error, error) {
	if name == "" {
		return func() error { return nil }, nil
	}
	f, err := createTagged(name, tag)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// startProfiles starts the profiles cfg asks for, each into its file
// name with tag inserted (see startProfile). The returned function stops
// them and writes the block and mutex profiles, which cover only the
// measured phase: their rates are set here and reset when it ends.
func startProfiles(cfg config, tag string) (func() error, error) {
	stopCPU, err := startProfile(cfg.cpuprofile, tag)
	if err != nil {
		return nil, err
	}
	stopTrace, err := startTrace(cfg.trace, tag)
	if err != nil {
		return nil, errors.Join(err, stopCPU())
	}
	if cfg.blockprofile != "" {
		runtime.SetBlockProfileRate(1)
	}
	if cfg.mutexprofile != "" {
		runtime.SetMutexProfileFraction(1)
	}
	return func() error {
		err := errors.Join(stopCPU(), stopTrace())
		if cfg.blockprofile != "" {
			err = errors.Join(err, writeProfile("block", cfg.blockprofile, tag))
			runtime.SetBlockProfileRate(0)
		}
		if cfg.mutexprofile != "" {
			err = errors.Join(err, writeProfile("mutex", cfg.mutexprofile, tag))
			runtime.SetMutexProfileFraction(0)
		}
		return err
	}, nil
}

// createTagged creates the file name with tag inserted before its
// extension ("cpu.pprof", "palisade-16own": "cpu.palisade-16own.pprof").
func createTagged(name, tag string) (*os.File, error) {
	ext := filepath.Ext(name)
	return os.Create(strings.TrimSuffix(name, ext) + "." + tag + ext)
}

// writeProfile writes the named runtime profile into name with tag
// inserted before its extension.
func writeProfile(profile, name, tag string) error {
	f, err := createTagged(name, tag)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup(profile).WriteTo(f, 0), f.Close())
}

// etcdSystem starts the etcd cluster under dir.
func etcdSystem(ctx context.Context, dir string) (system, error) {
	c, err := startEtcd(ctx, dir)
	if err != nil {
		return system{}, err
	}
	return system{name: "etcd", close: c.Close, lockers: func(k int) ([]testnet.Locker, error) {
		return makeLockers(k, c.newLocker)
	}}, nil
}

// palisadeSystem starts an in-process Palisade cluster of n nodes under
// dir, with identities for clients clients. Its nodes fsync every vote
// (group commit), as in production.
func palisadeSystem(dir string, n, clients int) (system, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return system{}, err
	}
	nw, err := testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: n, Clients: clients}})
	if err != nil {
		return system{}, fmt.Errorf("palisade: %w", err)
	}
	stores := func() []storeCounts {
		out := make([]storeCounts, n)
		for i := range n {
			if r := nw.Node(i + 1); r != nil {
				out[i] = readStoreCounts(r.MetricsRegistry())
			}
		}
		return out
	}
	return system{name: "palisade", close: nw.Close, lockers: nw.NewLockers, stores: stores}, nil
}

// makeLockers makes k lockers with newLocker; on error it closes those it
// made.
func makeLockers(k int, newLocker func() (testnet.Locker, error)) ([]testnet.Locker, error) {
	var ls []testnet.Locker
	for range k {
		l, err := newLocker()
		if err != nil {
			return nil, errors.Join(err, testnet.CloseLockers(ls))
		}
		ls = append(ls, l)
	}
	return ls, nil
}
