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

// startCluster starts a local 4-node test cluster (f = 1) in dir, which
// gets the cluster file cluster.json and one client key client.key, as
// `palisade keygen` writes them. A real deployment runs the nodes
// elsewhere and hands the client these two files.
func startCluster(dir string) (*testnet.Network, error) {
	return testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Clients: 1}})
}

// newClient loads the cluster file and the client key from dir, as an
// embedder does, and starts a client.
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
	dir, _ := os.MkdirTemp("", "palisade-example")
	defer os.RemoveAll(dir)
	nw, err := startCluster(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nw.Close()
	c, err := newClient(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// Acquire waits until the lock is held or ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, err := c.Acquire(ctx, "orders-db", client.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acquired orders-db at epoch", lock.Epoch())

	// The resource side: a verifier for the cluster's tokens and a
	// barrier store (durable in production: verifier.OpenBoltStore or a
	// SQL store).
	v, err := verifier.Load(filepath.Join(dir, "cluster.json"))
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
	dir, _ := os.MkdirTemp("", "palisade-example")
	defer os.RemoveAll(dir)
	nw, err := startCluster(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nw.Close()
	c, err := newClient(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, err := c.Acquire(ctx, "jobs/nightly", client.WithTTL(time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = nw.Stop(3)
	_ = nw.Stop(4)

	select {
	case <-lock.Lost():
		fmt.Println("lost:", errors.Is(lock.Err(), client.ErrLost))
	case <-ctx.Done():
		fmt.Println("still held")
	}
	// Output:
	// lost: true
}
