package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
	"github.com/palisade-dev/palisade/verifier"
)

// exampleEnv is a local 4-node test cluster (f = 1) in the folder dir,
// which holds the cluster file cluster.json and one client key client.key,
// as `palisade keygen` writes them, and a client loaded from these two
// files, as an embedder does. (A real deployment runs the nodes elsewhere
// and hands the client the two files.)
type exampleEnv struct {
	dir string
	nw  *testnet.Network
	c   *client.Client
	ctx context.Context // ends after 10 s
	end []func()
}

// exampleCluster starts an exampleEnv; on failure it prints why and
// returns nil.
func exampleCluster() *exampleEnv {
	dir, err := os.MkdirTemp("", "palisade-example")
	if err != nil {
		fmt.Println(err)
		return nil
	}
	env := &exampleEnv{dir: dir, end: []func(){func() { _ = os.RemoveAll(dir) }}}
	var cancel context.CancelFunc
	env.ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	env.end = append(env.end, cancel)
	if env.nw, err = testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 1}}); err == nil {
		env.end = append(env.end, func() { _ = env.nw.Close() })
		if env.c, err = newClient(dir); err == nil {
			env.end = append(env.end, func() { _ = env.c.Close() })
		}
	}
	if err != nil {
		fmt.Println(err)
		env.close()
		return nil
	}
	return env
}

// close stops the client and the cluster and removes the folder.
func (e *exampleEnv) close() {
	for i := len(e.end) - 1; i >= 0; i-- {
		e.end[i]()
	}
}

// newClient loads the cluster file and the client key from dir and starts
// a client.
func newClient(dir string) (*client.Client, error) {
	cluster, err := protocol.LoadCluster(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, err
	}
	id, err := client.LoadIdentity(filepath.Join(dir, "client.key"))
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Cluster: cluster, Identity: id})
}

// Acquire a lock, write to the resource under its fencing token, and
// release. The resource (here an in-memory store) admits the write only if
// the token verifies for it and its epoch is not below the highest it has
// seen.
func Example() {
	env := exampleCluster()
	if env == nil {
		return
	}
	defer env.close()
	c, ctx := env.c, env.ctx

	// Acquire waits until the lock is held or ctx ends.
	lock, err := c.Acquire(ctx, "orders-db", client.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acquired orders-db at epoch", lock.Epoch())

	// The resource side: a verifier for the cluster's tokens and a
	// barrier store (durable in production: verifier.OpenBoltStore or a
	// SQL store).
	v, err := verifier.Load(filepath.Join(env.dir, "cluster.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fence := verifier.NewFence(v, verifier.NewMemoryStore())
	err = fence.Admit(ctx, lock.Token(), "orders-db", func(tx verifier.Tx) error {
		return tx.Put("order/42", []byte("paid"))
	})
	fmt.Println("fenced write:", err)

	// TryAcquire does not wait: the lock is this client's already.
	_, err = c.TryAcquire(ctx, "orders-db")
	fmt.Println("second lock refused:", errors.Is(err, client.ErrHeldLocally))

	fmt.Println("release:", lock.Release(ctx))
	// Output:
	// acquired orders-db at epoch 1
	// fenced write: <nil>
	// second lock refused: true
	// release: <nil>
}

// Watch a lost lease: once the client cannot renew (here two of the four
// nodes stop, so no 2f+1 quorum answers), Lost closes at the lease's
// deadline and Err says why. Stop using the token then: the resource may
// already admit a newer holder.
func ExampleLock_Lost() {
	env := exampleCluster()
	if env == nil {
		return
	}
	defer env.close()

	lock, err := env.c.Acquire(env.ctx, "jobs/nightly", client.WithTTL(time.Second))
	fmt.Println("acquired:", err)
	if err != nil {
		return
	}
	_ = env.nw.Stop(3)
	_ = env.nw.Stop(4)

	select {
	case <-lock.Lost():
		fmt.Println("lost:", errors.Is(lock.Err(), client.ErrLost))
	case <-env.ctx.Done():
		fmt.Println("still held")
	}
	// Output:
	// acquired: <nil>
	// lost: true
}
