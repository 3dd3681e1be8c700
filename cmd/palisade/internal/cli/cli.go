// Package cli is the palisade command line: keygen, node, testnet,
// acquire, lock, release, verify, fork, demo, identity, dkg, reshare, resource,
// agent, status, audit, clients, probe, version, completion and help.
// cmd/palisade only calls Main.
//
// Every command parses its flags with the standard flag package; a flag
// not given on the command line is read from the environment variable
// PALISADE_<NAME> (upper case, dashes as underscores; see EnvVar). Errors
// print "palisade: error: …" on stderr and exit with the status ExitCode
// picks (1 unless the failure has its own, see exitcode.go).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"

	"github.com/palisade-dev/palisade/protocol"
)

var log = logging.Logger("palisade/cli")

// EnvPrefix starts the name of every environment variable that sets a flag.
const EnvPrefix = "PALISADE_"

// EnvVar returns the environment variable that sets flag name when the
// command line does not: "base-port" is PALISADE_BASE_PORT.
func EnvVar(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Config holds the settings of every command; each command reads the
// fields it needs. DefaultConfig gives the defaults, Validate checks them.
type Config struct {
	// Dir is the keygen or testnet directory, or a node directory
	// (--dir). No default; keygen, node and testnet need it.
	Dir string
	// Nodes is the number of nodes for keygen and testnet (--nodes).
	// Default 4.
	Nodes int
	// Name is the cluster name keygen writes (--name). Default
	// "palisade-testnet".
	Name string
	// Host is the nodes' IP address or DNS name, one for all nodes or a
	// comma-separated list of one per node (--host). Default "127.0.0.1".
	Host string
	// BasePort puts node i on TCP port BasePort+i; 0 picks free ports on
	// 127.0.0.1 (--base-port). Default 0.
	BasePort int
	// Cluster is the cluster file for acquire and verify (--cluster). No
	// default.
	Cluster string
	// ClusterID pins the cluster ID (hex) the cluster file must have, on
	// every command that reads one and on bootstrap (--cluster-id; see
	// pin.go). No default: no pin.
	ClusterID string
	// Identity is the client key file for acquire (--identity). No
	// default.
	Identity string
	// TTL is the lease length acquire asks for (--ttl). Default 10s, at
	// most protocol.MaxTTL.
	TTL time.Duration
	// Wait is how long acquire waits for a busy resource or for enough
	// nodes; 0 tries once (--wait). Default 0.
	Wait time.Duration
	// Seed seeds the demo's key generation (--seed). Default 1.
	Seed uint64
	// Clients is the number of concurrent clients of bench (--clients).
	// Default 1.
	Clients int
	// Cycles is the number of acquire+release cycles per client of bench
	// (--cycles). Default 200.
	Cycles int
	// Contended makes bench's clients share one resource (--contended).
	Contended bool
	// Bootstrap holds the settings of bootstrap only (bootstrap.go).
	Bootstrap BootstrapConfig
	// Put holds the settings of put only (put.go).
	Put PutConfig
	// Members is the member list file of dkg and reshare (--members). No
	// default.
	Members string
	// OldDir is an old member's current node directory for reshare
	// (--old-dir). No default.
	OldDir string
	// PhaseTimeout bounds each phase of dkg and reshare; 0 means 60s
	// (--phase-timeout). Default 0.
	PhaseTimeout time.Duration
	// CeremonyListen overrides the comma-separated addresses dkg and
	// reshare listen on (--ceremony-listen). Default: the member list's.
	CeremonyListen string
	// Restart makes dkg and reshare discard the crash state of an
	// interrupted ceremony and start over (--restart).
	Restart bool
	// DKG makes testnet create its keys by distributed key generation
	// instead of a dealer (--dkg).
	DKG bool
	// Data is the data directory of resource (--data). No default.
	Data string
	// Listen is the TCP address resource serves HTTP on (--listen).
	// Default "127.0.0.1:7070"; agent's is "127.0.0.1:7071".
	Listen string
	// Grace is how long lock's COMMAND has to exit after SIGTERM once
	// the lease is lost, before SIGKILL (--grace). Default 10s.
	Grace time.Duration
	// SecretFile is the agent's bearer secret file (--secret-file). No
	// default: the agent then serves loopback only.
	SecretFile string
	// MaxLocks bounds the locks the agent holds (--max-locks). Default
	// 1024.
	MaxLocks int
	// JSON makes verify print its result as JSON (--json).
	JSON bool
	// Ops are the settings of the operator commands (ops.go).
	Ops OpsConfig
	// Leases holds the settings of locks and revoke only (locks.go).
	Leases LeasesConfig
}

// DefaultConfig returns the defaults: Nodes 4, Name "palisade-testnet",
// Host "127.0.0.1", BasePort 0 (free ports), TTL 10s, Wait 0 (try once),
// Seed 1, Grace 10s; Dir, Cluster and Identity are empty and must be
// given.
func DefaultConfig() Config {
	return Config{
		Nodes: 4,
		Name:  "palisade-testnet",
		Host:  "127.0.0.1",
		TTL:   10 * time.Second,
		Seed:  1,

		Clients: 1,
		Cycles:  200,

		Listen: "127.0.0.1:7070",

		Grace:    10 * time.Second,
		MaxLocks: 1024,
		Ops:      defaultOps(),
	}
}

// Validate checks the ranges of the settings. Which fields are required
// depends on the command; the commands check that.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("--nodes must be at least 1, got %d", c.Nodes)
	case c.Nodes > 1000:
		return fmt.Errorf("--nodes must be at most 1000, got %d", c.Nodes)
	case c.Name == "":
		return errors.New("--name must not be empty")
	case strings.TrimSpace(c.Host) == "":
		return errors.New("--host must not be empty")
	case c.BasePort < 0 || c.BasePort+c.Nodes > 65535:
		return fmt.Errorf("--base-port %d: node ports %d..%d are not all valid TCP ports", c.BasePort, c.BasePort+1, c.BasePort+c.Nodes)
	case c.TTL <= 0 || c.TTL > protocol.MaxTTL:
		return fmt.Errorf("--ttl %v must be above 0 and at most %v", c.TTL, protocol.MaxTTL)
	case c.Wait < 0:
		return fmt.Errorf("--wait %v must not be negative", c.Wait)
	}
	return nil
}

// Main runs the command line in os.Args and exits: 0 on success, else
// the status ExitCode gives the error. SIGINT and SIGTERM cancel the
// command's context.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

var setupLogging = sync.OnceFunc(func() {
	// libp2p logs through slog; send them through go-log, so GOLOG_*
	// controls every subsystem alike.
	gologshim.SetDefaultHandler(logging.SlogHandler())
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		_ = logging.SetLogLevel("*", "warn") // libp2p and the rest
		setPalisadeLogLevel("info")
	}
	applyPalisadeLogLevel()
})

// setPalisadeLogLevel sets the level of every palisade/* logger; the
// others keep theirs (warn unless GOLOG_LOG_LEVEL says otherwise).
func setPalisadeLogLevel(level string) {
	for _, s := range logging.GetSubsystems() {
		if strings.HasPrefix(s, "palisade/") {
			_ = logging.SetLogLevel(s, level)
		}
	}
}

// command is one subcommand.
type command struct {
	usage string
	run   func(ctx context.Context, e *env, cfg Config, args []string) error
	// flags registers the command's flags on fs, bound to cfg.
	flags func(fs *flag.FlagSet, cfg *Config)
}

var commands = map[string]command{
	"keygen":    {keygenUsage, runKeygen, keygenFlags},
	"node":      {nodeUsage, runNode, nodeFlags},
	"testnet":   {testnetUsage, runTestnetCommand, testnetFlags},
	"acquire":   {acquireUsage, runAcquire, acquireFlags},
	"verify":    {verifyUsage, runVerify, verifyFlags},
	"demo":      {demoUsage, runDemo, func(fs *flag.FlagSet, c *Config) { fs.Uint64Var(&c.Seed, "seed", c.Seed, "") }},
	"bench":     {benchUsage, runBench, benchFlags},
	"evidence":  {evidenceUsage, runEvidence, func(fs *flag.FlagSet, c *Config) { dirFlag(fs, c) }},
	"fork":      {forkUsage, runFork, forkFlags},
	"forensics": {forensicsUsage, runForensics, forensicsFlags},
	"resource":  {resourceUsage, runResource, resourceFlags},
	"identity":  {identityUsage, runIdentity, identityFlags},
	"dkg":       {dkgUsage, runDKG, ceremonyFlags},
	"reshare":   {reshareUsage, runReshare, reshareFlags},
	"release":   {releaseUsage, runRelease, releaseFlags},
	"lock":      {lockUsage, runLock, lockFlags},
	"version":   {versionUsage, runVersion, func(*flag.FlagSet, *Config) {}},
	// "completion" adds itself in completion.go: it reads this map.
	"agent":   {agentUsage, runAgent, agentFlags},
	"probe":   {probeUsage, runProbe, timeoutFlag},
	"status":  {statusUsage, runStatus, statusFlags},
	"audit":   {auditUsage, runAudit, auditFlags},
	"locks":   {locksUsage, runLocks, locksFlags},
	"revoke":  {revokeUsage, runRevoke, revokeFlags},
	"clients": {clientsUsage, runClients, clientsFlags},

	// What docker-compose.yml runs (bootstrap.go, put.go).
	"bootstrap": {bootstrapUsage, runBootstrap, bootstrapFlags},
	"put":       {putUsage, runPut, putFlags},
}

func benchFlags(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "")
	fs.IntVar(&c.Clients, "clients", c.Clients, "")
	fs.IntVar(&c.Cycles, "cycles", c.Cycles, "")
	fs.BoolVar(&c.Contended, "contended", c.Contended, "")
}

func dirFlag(fs *flag.FlagSet, c *Config)     { fs.StringVar(&c.Dir, "dir", c.Dir, "") }
func clusterFlag(fs *flag.FlagSet, c *Config) { fs.StringVar(&c.Cluster, "cluster", c.Cluster, "") }

func keygenFlags(fs *flag.FlagSet, c *Config) {
	dirFlag(fs, c)
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "")
	fs.StringVar(&c.Name, "name", c.Name, "")
	fs.StringVar(&c.Host, "host", c.Host, "")
	fs.IntVar(&c.BasePort, "base-port", c.BasePort, "")
}

func acquireFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	fs.DurationVar(&c.TTL, "ttl", c.TTL, "")
	fs.DurationVar(&c.Wait, "wait", c.Wait, "")
}

// env is what a running command writes to.
type env struct {
	stdout, stderr io.Writer
	// set names the flags given on the command line or by environment.
	set map[string]bool
}

// errUsage marks an error whose message should be followed by a hint to
// read the usage.
type errUsage struct {
	cmd string
	err error
}

func (e errUsage) Error() string { return e.err.Error() }
func (e errUsage) Unwrap() error { return e.err }

func usageErrorf(cmd, format string, args ...any) error {
	return errUsage{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// Run runs one command line (without the program name) and returns the
// exit status (see ExitCode). ctx ends long-running commands (node,
// testnet) and aborts the others.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	setupLogging()
	if err := run(ctx, args, stdout, stderr); err != nil {
		var ce *commandExit
		if errors.As(err, &ce) {
			return ce.code
		}
		fmt.Fprintf(stderr, "palisade: error: %v\n", err)
		var ue errUsage
		if errors.As(err, &ue) {
			if ue.cmd == "" {
				fmt.Fprintf(stderr, "palisade: run \"palisade help\" for usage.\n")
			} else {
				fmt.Fprintf(stderr, "palisade: run \"palisade %s -h\" for usage.\n", ue.cmd)
			}
		}
		return ExitCode(err)
	}
	return 0
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage{err: errors.New("no command given")}
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(stdout, args)
	}
	cmd, ok := commands[name]
	if !ok {
		return usageErrorf("", "unknown command %q", name)
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmd.flags(fs, &cfg)
	explainFlagValues(fs)
	pos, set, err := parseFlagsN(fs, args, ownArgs[name])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, cmd.usage)
		return nil
	}
	if err != nil {
		return usageErrorf(name, "%s: %v", name, err)
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf(name, "%s: %v", name, err)
	}
	return cmd.run(ctx, &env{stdout: stdout, stderr: stderr, set: set}, cfg, pos)
}

func runHelp(stdout io.Writer, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if len(args) > 1 {
		return usageErrorf("", "help takes at most one command")
	}
	if args[0] == "help" {
		fmt.Fprint(stdout, helpUsage)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usageErrorf("", "unknown command %q", args[0])
	}
	fmt.Fprint(stdout, cmd.usage)
	return nil
}

// parseFlags parses flags and positional arguments in any order ("--"
// ends the flags), then sets every flag not given from its environment
// variable. It returns the positional arguments and the names of the flags
// that were set either way.
func parseFlags(fs *flag.FlagSet, args []string) (pos []string, set map[string]bool, err error) {
	return parseFlagsN(fs, args, 0)
}

// parseFlagsN is parseFlags for a command whose first n positional
// arguments are its own and the rest another program's command line
// (lock's RESOURCE COMMAND ARGS; n = 0: no such rest). After the n-th,
// flags are read only up to "--" or the next argument that is not a
// flag, and every argument from there is positional.
func parseFlagsN(fs *flag.FlagSet, args []string, n int) (pos []string, set map[string]bool, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
		if n > 0 && len(pos) == n {
			if err := fs.Parse(args); err != nil {
				return nil, nil, err
			}
			pos = append(pos, fs.Args()...)
			break
		}
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := EnvVar(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%s: %v", name, strconv.Quote(v), e)
			return
		}
		set[f.Name] = true
	})
	if err != nil {
		return nil, nil, err
	}
	return pos, set, nil
}

// requireFlag fails if a required string setting is empty.
func requireFlag(cmd, flagName, value string) error {
	if value == "" {
		return usageErrorf(cmd, "%s: --%s (or %s) is required", cmd, flagName, EnvVar(flagName))
	}
	return nil
}

// dealerWarning prints the trusted-dealer warning so nobody misses it.
func dealerWarning(w io.Writer, warning string) {
	bar := strings.Repeat("!", 72)
	fmt.Fprintf(w, "%s\n%s\n%s\n", bar, warning, bar)
}
