package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

const lockUsage = `Usage:
    palisade lock --cluster FILE [--cluster-id ID] --identity FILE [--ttl D] [--wait D] [--grace D]
                  RESOURCE -- COMMAND [ARGS]

Holds a lease on RESOURCE while COMMAND runs, like "etcdctl lock" and
"consul lock". It acquires (waiting up to --wait, as acquire does), then
runs COMMAND with the fencing token in its environment:

    PALISADE_TOKEN      the token's text form: send it with every write
    PALISADE_EPOCH      the token's epoch
    PALISADE_RESOURCE   RESOURCE

and renews the lease every TTL/3 while COMMAND runs. COMMAND gets
palisade's stdin, stdout and stderr; SIGINT, SIGTERM and SIGHUP sent to
palisade are passed on to it. When COMMAND ends, palisade releases the
lease at once (another client acquires at once) and exits with COMMAND's
status (128+N if signal N ended it).

If the lease is lost (no renewal reached 2f+1 nodes before it ran out),
COMMAND no longer holds the lock: palisade sends it SIGTERM, then SIGKILL
after --grace, and exits 4. The resource stays safe meanwhile: once a
newer holder writes, COMMAND's token is stale there. COMMAND should pass
signals on to its own children (sh -c 'exec prog' does).

Flags go before RESOURCE or between RESOURCE and "--"; everything after
"--" (or from the first word after RESOURCE that is not a flag) is
COMMAND.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   the client's key file, mode 0600 [PALISADE_IDENTITY]
    --ttl D           lease length, at most 1h (10s) [PALISADE_TTL]
    --wait D          wait up to D for a busy resource or for nodes to come
                      back; 0 tries once (0) [PALISADE_WAIT]
    --grace D         how long COMMAND has to exit after SIGTERM once the
                      lease is lost, before SIGKILL (10s) [PALISADE_GRACE]

Example:
    $ export PALISADE_CLUSTER=/tmp/palisade/cluster.json
    $ export PALISADE_IDENTITY=/tmp/palisade/client.key
    $ palisade lock --wait 5m nightly-report -- ./report.sh --since yesterday
    $ palisade lock orders-db -- sh -c 'curl -X PUT --data paid \
        -H "Palisade-Token: $PALISADE_TOKEN" http://127.0.0.1:7070/kv/orders-db'
`

// ownArgs is, for a command whose arguments end with another program's
// command line, how many positional arguments are its own (see
// parseFlagsN).
var ownArgs = map[string]int{"lock": 1}

func lockFlags(fs *flag.FlagSet, c *Config) {
	acquireFlags(fs, c)
	fs.DurationVar(&c.Grace, "grace", c.Grace, "")
}

// lockSignals are the signals lock passes on to COMMAND.
var lockSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

const (
	// releaseTimeout bounds the release after COMMAND ends.
	releaseTimeout = 10 * time.Second
	// signalSettle is how long lock waits, once its context ends, for the
	// signal that ended it: that signal is passed on as it is; with none
	// (a caller cancelled), COMMAND gets SIGTERM.
	signalSettle = 200 * time.Millisecond
)

func runLock(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) < 2 {
		return usageErrorf("lock", "lock: want RESOURCE -- COMMAND [ARGS], got %d arguments", len(args))
	}
	if cfg.Grace < 0 {
		return usageErrorf("lock", "lock: --grace %v must not be negative", cfg.Grace)
	}
	resource, argv := args[0], args[1:]
	if err := protocol.ValidateResource(resource); err != nil {
		return usageErrorf("lock", "lock: %v", stripPrefixes(err.Error()))
	}
	s, err := openSession("lock", cfg, resource)
	if err != nil {
		return err
	}
	defer s.c.Close()
	// Signals that arrive from here on are COMMAND's once it runs; one
	// that arrives while acquiring ends the acquisition through ctx.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, lockSignals...)
	defer signal.Stop(sigs)

	lock, err := s.acquire(ctx, resource)
	if err != nil {
		return err
	}
	tok := lock.Token()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		"PALISADE_TOKEN="+tok.String(),
		"PALISADE_EPOCH="+strconv.FormatUint(tok.Epoch, 10),
		"PALISADE_RESOURCE="+resource)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	if err := cmd.Start(); err != nil {
		s.release(ctx, e, lock)
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // exec.Error and fs.PathError repeat the name
		}
		return fmt.Errorf("lock %q: cannot run %s: %s", resource, argv[0], reason(err))
	}
	return s.supervise(ctx, e, lock, cmd, sigs)
}

// supervise waits for COMMAND while passing signals on to it, stops it
// if the lease is lost, and releases the lease when it ends. It returns
// once COMMAND has exited, whatever happened.
func (s *session) supervise(ctx context.Context, e *env, lock *client.Lock, cmd *exec.Cmd, sigs <-chan os.Signal) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // every return below follows <-done
	var (
		lost      = lock.Lost()
		ctxDone   = ctx.Done()
		settle    <-chan time.Time
		kill      <-chan time.Time
		forwarded bool
		lostErr   error
		stopped   string
	)
	for {
		select {
		case <-done:
			code := exitStatus(cmd.ProcessState)
			if lostErr != nil {
				return s.lostError(lock, lostErr, stopped, code)
			}
			s.release(ctx, e, lock)
			return &commandExit{code: code}
		case <-lost:
			lost = nil
			lostErr = lock.Err()
			if lostErr == nil {
				lostErr = client.ErrLost
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			stopped = "SIGTERM"
			kill = time.After(s.cfg.Grace)
		case <-kill:
			kill = nil
			_ = cmd.Process.Kill()
			stopped = fmt.Sprintf("SIGTERM, then SIGKILL after --grace %v", s.cfg.Grace)
		case sig := <-sigs:
			forwarded = true
			_ = cmd.Process.Signal(sig)
		case <-ctxDone:
			ctxDone = nil
			settle = time.After(signalSettle)
		case <-settle:
			settle = nil
			if !forwarded {
				forwarded = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		}
	}
}

// release ends the lease after COMMAND; a failure is a warning (the lease
// then ends by its TTL), not COMMAND's failure.
func (s *session) release(ctx context.Context, e *env, lock *client.Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lock.Release(rctx); err != nil {
		res := lock.Token().Resource
		fmt.Fprintf(e.stderr, "palisade: warning: %v; the lease ends by its TTL (%v)\n",
			explainRequest(s.target(fmt.Sprintf("release %q", res), res), err), s.cfg.TTL)
	}
}

// lostError reports a lease lost while COMMAND ran, and how COMMAND was
// stopped.
func (s *session) lostError(lock *client.Lock, err error, stopped string, code int) error {
	tok := lock.Token()
	why := fmt.Sprintf("no renewal reached %d of %d nodes before it ran out", s.cluster.File.T, s.cluster.File.N)
	var qe *client.QuorumError
	if errors.As(err, &qe) {
		why = fmt.Sprintf("renewals did not reach %d of %d nodes: %s", qe.Need, s.cluster.File.N, nodeReasons(qe.Nodes))
	}
	return &exitError{code: ExitNoQuorum, err: explainf(err,
		"lock %q: lease lost at epoch %d (%s): stopped COMMAND with %s; it exited with status %d; its token may be stale at the resource by now",
		tok.Resource, tok.Epoch, why, stopped, code)}
}

// exitStatus is a finished process's exit status as a shell reports it:
// its exit code, or 128+N if signal N ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
