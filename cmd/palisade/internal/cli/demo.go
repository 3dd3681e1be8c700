package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier"
)

// Demo settings: short enough that the story runs in a few seconds.
const (
	demoResource = "orders-db"
	demoTTL      = time.Second
	// demoTimeout bounds the whole demo.
	demoTimeout = time.Minute
)

func runDemo(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("demo", "demo: unexpected argument %q", args[0])
	}
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		// The story is on stdout; keep the nodes' info lines out of it.
		setPalisadeLogLevel("warn")
		defer setPalisadeLogLevel("info")
	}
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "palisade-demo-*")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	d := &demo{out: e.stdout}
	err = d.run(ctx, e, cfg.Seed, dir)
	if err == nil && d.failed {
		err = errors.New("demo: a step did not behave")
	}
	return err
}

// demo tells the fencing story by running it.
type demo struct {
	out    io.Writer
	n      int
	failed bool
}

// step runs one step and prints ✓ or ✗ with what happened. It reports
// whether the step behaved; the story stops at the first step that did not.
func (d *demo) step(fn func() (string, error)) bool {
	d.n++
	msg, err := fn()
	if err != nil {
		d.failed = true
		if msg != "" {
			fmt.Fprintf(d.out, "✗ %d. %s: %v\n", d.n, msg, err)
		} else {
			fmt.Fprintf(d.out, "✗ %d. %v\n", d.n, err)
		}
		return false
	}
	fmt.Fprintf(d.out, "✓ %d. %s\n", d.n, msg)
	return true
}

// seededReader returns a deterministic random stream for the demo's keys.
func seededReader(seed uint64) io.Reader {
	var s [32]byte
	binary.BigEndian.PutUint64(s[:], seed)
	copy(s[8:], "palisade demo seed")
	return rand.NewChaCha8(s)
}

func (d *demo) run(ctx context.Context, e *env, seed uint64, dir string) (err error) {
	fmt.Fprintf(e.stderr, "palisade: demo keys: %s\n", testnet.DealerWarning)
	tdir := filepath.Join(dir, "testnet")
	if err := os.Mkdir(tdir, 0o700); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	nw, err := testnet.Start(tdir, testnet.Options{
		Keygen: testnet.KeygenOptions{N: 4, Name: "palisade-demo", Rand: seededReader(seed), Clients: 2},
	})
	if err != nil {
		return fmt.Errorf("demo: start testnet: %w", err)
	}
	defer func() { err = errors.Join(err, nw.Close()) }()
	c := nw.Keys.Cluster
	fmt.Fprintf(d.out, "Palisade demo: %d nodes (f=%d, t=%d), cluster %s, keys seeded with %d.\n", c.File.N, c.F, c.File.T, c.File.Name, seed)

	v := verifier.New(c)
	res := &demoServer{v: v, dataDir: filepath.Join(dir, "resource")}
	if err := res.start(ctx); err != nil {
		return fmt.Errorf("demo: start resource: %w", err)
	}
	defer func() { err = errors.Join(err, res.stop()) }()
	fmt.Fprintf(d.out, "The resource %q is a fenced key-value store (palisade resource, at %s); it admits a write only with a valid token whose epoch is not below the highest it has seen.\n\n", demoResource, res.url(demoResource))
	write := func(tok protocol.Token, value string) error {
		_, err := res.do(ctx, http.MethodPut, tok, value)
		return err
	}
	// read returns the value, reading with the current holder's token.
	read := func(tok protocol.Token) string {
		val, err := res.do(ctx, http.MethodGet, tok, "")
		if err != nil {
			return fmt.Sprintf("<%v>", err)
		}
		return val
	}
	newClient := func(i int) (*client.Client, error) {
		return nw.NewClient(i, client.Config{RequestTimeout: time.Second, MaxBackoff: 100 * time.Millisecond})
	}

	c1, err := newClient(0)
	if err != nil {
		return fmt.Errorf("demo: client 1: %w", err)
	}
	defer func() { _ = c1.Close() }()
	c2, err := newClient(1)
	if err != nil {
		return fmt.Errorf("demo: client 2: %w", err)
	}
	defer func() { _ = c2.Close() }()

	var lock1, lock2, lock3 *client.Lock
	steps := []func() (string, error){
		// 1. Client 1 takes the lock and writes.
		func() (string, error) {
			var err error
			if lock1, err = acquireWithin(ctx, c1, 5*time.Second, demoResource, client.WithTTL(demoTTL)); err != nil {
				return "client 1 acquires", err
			}
			if err := write(lock1.Token(), "paid (by client 1)"); err != nil {
				return "client 1 writes", err
			}
			return fmt.Sprintf("client 1 acquired %q at epoch %d (lease %v) and wrote %q over HTTP", demoResource, lock1.Epoch(), demoTTL, read(lock1.Token())), nil
		},
		// 2. Client 1 pauses: a GC pause, a frozen VM. Its renewals stop.
		func() (string, error) {
			if err := c1.Close(); err != nil {
				return "client 1 pauses", err
			}
			return "client 1 pauses (GC pause, VM freeze): it stops renewing, still holding its token", nil
		},
		// 3. Its lease runs out; meanwhile nobody else gets the lock.
		func() (string, error) {
			start := time.Now()
			_, err := c2.TryAcquire(ctx, demoResource, client.WithTTL(demoTTL))
			if !errors.Is(err, client.ErrBusy) {
				return "client 2 is turned away while client 1's lease runs", fmt.Errorf("want busy, got %v", err)
			}
			if err := waitLeaseEnd(ctx, c2, lock1, demoTTL+3*time.Second); err != nil {
				return "client 1's lease runs out", err
			}
			return fmt.Sprintf("client 2 was turned away (busy); client 1's lease ran out after %v", time.Since(start).Round(100*time.Millisecond)), nil
		},
		// 4. Client 2 takes a higher epoch and writes.
		func() (string, error) {
			var err error
			if lock2, err = acquireWithin(ctx, c2, 5*time.Second, demoResource, client.WithTTL(5*time.Second)); err != nil {
				return "client 2 acquires", err
			}
			if lock2.Epoch() <= lock1.Epoch() {
				return "client 2 acquires", fmt.Errorf("epoch %d is not above client 1's %d", lock2.Epoch(), lock1.Epoch())
			}
			if err := write(lock2.Token(), "shipped (by client 2)"); err != nil {
				return "client 2 writes", err
			}
			return fmt.Sprintf("client 2 acquired epoch %d and wrote %q", lock2.Epoch(), read(lock2.Token())), nil
		},
		// 5. Client 1 wakes up and writes with its old token: fenced off.
		func() (string, error) {
			err := write(lock1.Token(), "refunded (by client 1, late)")
			if !errors.Is(err, verifier.ErrStale) {
				return "client 1's late write is refused", fmt.Errorf("want ErrStale, got %v", err)
			}
			return fmt.Sprintf("client 1 wakes up and writes with its epoch-%d token: refused (%v); %s is still %q", lock1.Epoch(), err, demoResource, read(lock2.Token())), nil
		},
		// 6. The barrier is durable: restart the resource.
		func() (string, error) {
			if err := res.stop(); err != nil {
				return "stop the resource", err
			}
			if err := res.start(ctx); err != nil {
				return "restart the resource", err
			}
			if err := write(lock1.Token(), "refunded (by client 1, later)"); !errors.Is(err, verifier.ErrStale) {
				return "after a restart, client 1's token is refused", fmt.Errorf("want ErrStale, got %v", err)
			}
			if err := write(lock2.Token(), "delivered (by client 2)"); err != nil {
				return "after a restart, client 2 writes again with the same token", err
			}
			barrier, _, err := res.store.Barrier(ctx, demoResource)
			if err != nil {
				return "read the barrier", err
			}
			return fmt.Sprintf("the resource restarts from disk (barrier %d): client 1's token is still refused, client 2's equal epoch still admitted: %s = %q", barrier, demoResource, read(lock2.Token())), nil
		},
		// 7. A crashed node does not stop the cluster.
		func() (string, error) {
			if err := nw.Stop(4); err != nil {
				return "stop node 4", err
			}
			if err := lock2.Release(ctx); err != nil {
				return "with node 4 stopped, client 2 releases", err
			}
			nc, err := newClient(0)
			if err != nil {
				return "client 1 restarts", err
			}
			c1 = nc
			if lock3, err = acquireWithin(ctx, c1, 5*time.Second, demoResource, client.WithTTL(demoTTL)); err != nil {
				return "with node 4 stopped, client 1 acquires again", err
			}
			if err := write(lock3.Token(), "archived (by client 1)"); err != nil {
				return "client 1 writes with its new token", err
			}
			return fmt.Sprintf("node 4 stops; client 2 releases, and client 1, restarted, acquires epoch %d from the 3 nodes left and writes %s = %q", lock3.Epoch(), demoResource, read(lock3.Token())), nil
		},
	}
	for _, s := range steps {
		if !d.step(s) {
			return nil
		}
	}
	if err := lock3.Release(ctx); err != nil {
		return fmt.Errorf("demo: release: %w", err)
	}
	fmt.Fprintf(d.out, "\nEvery step behaved: a paused holder cannot write once a newer holder has, and with 1 of 4 nodes down tokens are still issued.\n")
	return nil
}

// waitLeaseEnd polls the cluster until 2f+1 nodes no longer report lock's
// lease as live, or until limit.
func waitLeaseEnd(ctx context.Context, c *client.Client, lock *client.Lock, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	holder := lock.Token().Holder // replies name it by reference
	for {
		sts, err := c.Status(ctx, lock.Token().Resource)
		if err == nil {
			live := false
			for _, s := range sts {
				if s.Holder.Is(holder) && s.LeaseEpoch == lock.Epoch() && s.LeaseLeft > 0 {
					live = true
				}
			}
			if !live {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease still live after %v (last status error: %v)", limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// demoServer is the demo's resource: "palisade resource" in process, on a
// free port of 127.0.0.1, with its bolt store in dataDir.
type demoServer struct {
	v       *verifier.Verifier
	dataDir string
	http    http.Client

	store  *verifier.BoltStore
	addr   string
	cancel context.CancelFunc
	done   chan error // Serve's result
}

// start opens the store and serves it until stop or ctx ends.
func (s *demoServer) start(ctx context.Context) error {
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return err
	}
	store, err := verifier.OpenBoltStore(filepath.Join(s.dataDir, resourceDBName))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return errors.Join(err, store.Close())
	}
	sctx, cancel := context.WithCancel(ctx)
	s.store, s.addr, s.cancel, s.done = store, ln.Addr().String(), cancel, make(chan error, 1)
	s.http.Timeout = 10 * time.Second
	srv := resource.New(verifier.NewFence(s.v, store))
	go func() { s.done <- srv.Serve(sctx, ln) }()
	return nil
}

// stop shuts the server down and closes the store; it does nothing if the
// server is not running.
func (s *demoServer) stop() error {
	if s.store == nil {
		return nil
	}
	s.cancel()
	err := <-s.done
	s.http.CloseIdleConnections()
	err = errors.Join(err, s.store.Close())
	s.store = nil
	return err
}

func (s *demoServer) url(key string) string {
	return "http://" + s.addr + resource.PathPrefix + key
}

// do sends one request with tok for tok's resource and returns the response
// body. A 409 is an error wrapping verifier.ErrFork if the resource says
// the token forks from the barrier holder's (HeaderConflict), else
// verifier.ErrStale; any other status above 299 is an error too. A demo
// step that expects a stale refusal then fails on a fork instead of
// passing.
func (s *demoServer) do(ctx context.Context, method string, tok protocol.Token, body string) (string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url(tok.Resource), rd)
	if err != nil {
		return "", err
	}
	req.Header.Set(verifier.HeaderToken, tok.String())
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(string(b))
	switch {
	case resp.StatusCode == http.StatusConflict && resp.Header.Get(verifier.HeaderConflict) == verifier.ConflictFork:
		return "", fmt.Errorf("%w (HTTP %d, fork %s: %s)", verifier.ErrFork, resp.StatusCode, resp.Header.Get(verifier.HeaderForkID), text)
	case resp.StatusCode == http.StatusConflict:
		return "", fmt.Errorf("%w (HTTP %d: %s)", verifier.ErrStale, resp.StatusCode, text)
	case resp.StatusCode > 299:
		return "", fmt.Errorf("%s %s: %s", method, resp.Status, text)
	}
	return string(b), nil
}
