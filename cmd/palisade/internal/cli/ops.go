package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	logging "github.com/ipfs/go-log/v2"

	"github.com/palisade-dev/palisade/node"
)

// The operator's commands and flags: --admin on node and testnet, probe,
// status, audit and clients (status.go, audit.go, clients.go).

// OpsConfig holds the settings of the operator commands; it is
// Config.Ops.
type OpsConfig struct {
	// Admin is the address node and testnet serve the admin HTTP API on
	// (/metrics, /healthz, /readyz), apart from the libp2p address; a
	// testnet's node i uses the port plus i-1 (--admin). Default: none.
	Admin string
	// Timeout bounds probe's request and each member's answer in status
	// (--timeout). Default 5s.
	Timeout time.Duration
	// Patterns are the resource patterns of "clients add" and "clients
	// set-patterns", separated by commas (--patterns). Default "*".
	Patterns string
}

// defaultOps are the operator commands' defaults.
func defaultOps() OpsConfig {
	return OpsConfig{Timeout: 5 * time.Second, Patterns: "*"}
}

// errNotEnoughNodes is what status fails with when fewer than t members
// answer (exit status ExitNoQuorum).
var errNotEnoughNodes = errors.New("not enough nodes")

func adminFlag(fs *flag.FlagSet, c *Config) { fs.StringVar(&c.Ops.Admin, "admin", c.Ops.Admin, "") }

func nodeFlags(fs *flag.FlagSet, c *Config) {
	dirFlag(fs, c)
	adminFlag(fs, c)
}

func timeoutFlag(fs *flag.FlagSet, c *Config) {
	fs.DurationVar(&c.Ops.Timeout, "timeout", c.Ops.Timeout, "")
}

// adminAddr is the admin address of node i (1-based) of a testnet whose
// --admin is addr: the port plus i-1, or a free port for each node when
// the port is 0.
func adminAddr(addr string, i int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--admin %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("--admin %q: bad port", addr)
	}
	if p == 0 {
		return addr, nil
	}
	if p+i-1 > 65535 {
		return "", fmt.Errorf("--admin %q: node %d's port %d is not a valid TCP port", addr, i, p+i-1)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i-1)), nil
}

// adminServerTimeout bounds the admin server's reads, writes and shutdown.
const adminServerTimeout = 10 * time.Second

// adminServer serves one node's admin API until Close.
type adminServer struct {
	srv  *http.Server
	addr string
	done chan error
}

// startAdmin listens on addr and serves r's admin API, after starting its
// member probes (readiness needs them).
func startAdmin(r *node.Running, addr string) (*adminServer, error) {
	if err := r.StartProbing(node.DefaultProbeInterval, node.DefaultProbeTimeout); err != nil {
		return nil, fmt.Errorf("node %d: admin: %w", r.Index(), err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node %d: admin: %w", r.Index(), err)
	}
	a := &adminServer{
		srv: &http.Server{
			Handler:           r.AdminHandler(),
			ReadHeaderTimeout: adminServerTimeout,
			ReadTimeout:       adminServerTimeout,
			WriteTimeout:      adminServerTimeout,
		},
		addr: ln.Addr().String(),
		done: make(chan error, 1),
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	log.Infow("admin listening", "node", r.Index(), "url", "http://"+a.addr)
	return a, nil
}

// Close shuts the server down and waits for it.
func (a *adminServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), adminServerTimeout)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if serr := <-a.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// maxProbeLine bounds the body text probe prints.
const maxProbeLine = 200

// runProbe is "palisade probe URL": one GET, exit 0 on a 2xx answer, 1
// otherwise, one line of output either way. It is a healthcheck for
// containers without curl.
func runProbe(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("probe", "probe: want exactly one URL, got %d arguments", len(args))
	}
	if cfg.Ops.Timeout <= 0 {
		return usageErrorf("probe", "probe: --timeout %v must be above 0", cfg.Ops.Timeout)
	}
	url := args[0]
	ctx, cancel := context.WithTimeout(ctx, cfg.Ops.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	line := firstLineOf(resp.Body)
	status := resp.Status
	if line != "" {
		status += ": " + line
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: %s", url, status)
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", url, status)
	return nil
}

// firstLineOf returns the first line of r, at most maxProbeLine bytes.
func firstLineOf(r io.Reader) string {
	sc := bufio.NewScanner(io.LimitReader(r, 4096))
	if !sc.Scan() {
		return ""
	}
	l := strings.TrimSpace(sc.Text())
	if len(l) > maxProbeLine {
		l = l[:maxProbeLine] + "…"
	}
	return l
}

// PalisadeLogLevelEnv names the environment variable that sets the level
// of every palisade/* logger (debug, info, warn, error), whatever
// GOLOG_LOG_LEVEL says; libp2p's loggers keep theirs.
const PalisadeLogLevelEnv = "PALISADE_LOG_LEVEL"

// applyPalisadeLogLevel applies PALISADE_LOG_LEVEL, if set.
func applyPalisadeLogLevel() {
	v := os.Getenv(PalisadeLogLevelEnv)
	if v == "" {
		return
	}
	if _, err := logging.Parse(v); err != nil {
		fmt.Fprintf(os.Stderr, "palisade: ignoring %s=%q: %v\n", PalisadeLogLevelEnv, v, err)
		return
	}
	setPalisadeLogLevel(v)
}

// serveUntilDone waits for ctx to end; on each SIGHUP meanwhile, every
// node re-reads the cluster.json of its directory and takes its new client
// list (Running.ReloadCluster logs the outcome; a refused file changes
// nothing).
func serveUntilDone(ctx context.Context, nodes []*node.Running) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			for _, r := range nodes {
				_, _ = r.ReloadCluster()
			}
		}
	}
}
