package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier"
)

// Demo settings: short enough that the story runs in a few seconds.
const (
	demoResource = "orders-db"
	demoKey      = "order/42"
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
	fmt.Fprintf(d.out, "The resource %q is a fenced key-value store; it admits a write only with a valid token whose epoch is not below the highest it has seen.\n\n", demoResource)

	storePath := filepath.Join(dir, "orders.db")
	store, err := verifier.OpenBoltStore(storePath)
	if err != nil {
		return fmt.Errorf("demo: open store: %w", err)
	}
	defer func() {
		if store != nil {
			err = errors.Join(err, store.Close())
		}
	}()
	v := verifier.New(c)
	fence := verifier.NewFence(v, store)
	write := func(tok protocol.Token, value string) error {
		return fence.Admit(ctx, tok, demoResource, func(tx verifier.Tx) error {
			return tx.Put(demoKey, []byte(value))
		})
	}
	read := func() string {
		var val string
		_ = store.DB().View(func(tx *bbolt.Tx) error {
			if b := tx.Bucket([]byte(verifier.BoltDataBucket)).Bucket([]byte(demoResource)); b != nil {
				val = string(b.Get([]byte(demoKey)))
			}
			return nil
		})
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
			if lock1, err = c1.Acquire(ctx, demoResource, client.WithTTL(demoTTL), client.WithWait(5*time.Second)); err != nil {
				return "client 1 acquires", err
			}
			if err := write(lock1.Token(), "paid (by client 1)"); err != nil {
				return "client 1 writes", err
			}
			return fmt.Sprintf("client 1 acquired %q at epoch %d (lease %v) and wrote %s = %q", demoResource, lock1.Epoch(), demoTTL, demoKey, read()), nil
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
			_, err := c2.Acquire(ctx, demoResource, client.WithTTL(demoTTL))
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
			if lock2, err = c2.Acquire(ctx, demoResource, client.WithTTL(5*time.Second), client.WithWait(5*time.Second)); err != nil {
				return "client 2 acquires", err
			}
			if lock2.Epoch() <= lock1.Epoch() {
				return "client 2 acquires", fmt.Errorf("epoch %d is not above client 1's %d", lock2.Epoch(), lock1.Epoch())
			}
			if err := write(lock2.Token(), "shipped (by client 2)"); err != nil {
				return "client 2 writes", err
			}
			return fmt.Sprintf("client 2 acquired epoch %d and wrote %s = %q", lock2.Epoch(), demoKey, read()), nil
		},
		// 5. Client 1 wakes up and writes with its old token: fenced off.
		func() (string, error) {
			err := write(lock1.Token(), "refunded (by client 1, late)")
			if !errors.Is(err, verifier.ErrStale) {
				return "client 1's late write is refused", fmt.Errorf("want ErrStale, got %v", err)
			}
			return fmt.Sprintf("client 1 wakes up and writes with its epoch-%d token: refused (%v); %s is still %q", lock1.Epoch(), err, demoKey, read()), nil
		},
		// 6. The barrier is durable: restart the store.
		func() (string, error) {
			if err := store.Close(); err != nil {
				return "close the store", err
			}
			store = nil
			s, err := verifier.OpenBoltStore(storePath)
			if err != nil {
				return "reopen the store", err
			}
			store = s
			fence = verifier.NewFence(v, store)
			if err := write(lock1.Token(), "refunded (by client 1, later)"); !errors.Is(err, verifier.ErrStale) {
				return "after a restart, client 1's token is refused", fmt.Errorf("want ErrStale, got %v", err)
			}
			if err := write(lock2.Token(), "delivered (by client 2)"); err != nil {
				return "after a restart, client 2 writes again with the same token", err
			}
			barrier, _, err := store.Barrier(ctx, demoResource)
			if err != nil {
				return "read the barrier", err
			}
			return fmt.Sprintf("the store restarts from disk (barrier %d): client 1's token is still refused, client 2's equal epoch still admitted: %s = %q", barrier, demoKey, read()), nil
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
			if lock3, err = c1.Acquire(ctx, demoResource, client.WithTTL(demoTTL), client.WithWait(5*time.Second)); err != nil {
				return "with node 4 stopped, client 1 acquires again", err
			}
			if err := write(lock3.Token(), "archived (by client 1)"); err != nil {
				return "client 1 writes with its new token", err
			}
			return fmt.Sprintf("node 4 stops; client 2 releases, and client 1, restarted, acquires epoch %d from the 3 nodes left and writes %s = %q", lock3.Epoch(), demoKey, read()), nil
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
	holder := lock.Token().Holder
	for {
		sts, err := c.Status(ctx, lock.Token().Resource)
		if err == nil {
			live := false
			for _, s := range sts {
				if s.Holder == holder && s.LeaseEpoch == lock.Epoch() && s.LeaseLeft > 0 {
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
