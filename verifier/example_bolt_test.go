package verifier_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// A resource on the embedded bbolt store, with data versions: a holder
// whose token is fresh but whose data is stale is refused too, and its
// refused write does not raise the barrier.
func ExamplePutIfVersion() {
	// A test cluster from a trusted dealer (tests and examples only); a
	// resource loads a real cluster's file with verifier.Load.
	dealer := verifiertest.NewDealer("example", 1)
	cluster := dealer.Cluster
	issue := func(epoch uint64, holder string) protocol.Token {
		tok, _ := dealer.Issue("orders-db", epoch, holder)
		return tok
	}

	dir, _ := os.MkdirTemp("", "palisade-example-*")
	defer os.RemoveAll(dir)
	store, err := verifier.OpenBoltStore(filepath.Join(dir, "barriers.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	fence := verifier.NewFence(verifier.New(cluster), store)
	ctx := context.Background()

	// read returns the order and its version; write sets it if the version
	// is still the one the caller read.
	read := func(tok protocol.Token) (state string, version uint64) {
		_ = fence.Admit(ctx, tok, "orders-db", func(tx verifier.Tx) error {
			v, ver, err := verifier.GetVersioned(tx, "order/42")
			state, version = string(v), ver
			return err
		})
		return state, version
	}
	write := func(tok protocol.Token, state string, version uint64) error {
		return fence.Admit(ctx, tok, "orders-db", func(tx verifier.Tx) error {
			_, err := verifier.PutIfVersion(tx, "order/42", []byte(state), version)
			return err // a mismatch must abort the transaction
		})
	}

	tokA := issue(6, "client-a")
	fmt.Println(write(tokA, "paid", verifier.NoVersion))
	state, seen := read(tokA)
	fmt.Println(state, seen)
	fmt.Println(write(tokA, "shipped", seen))

	// client-a later acquires again (epoch 8) but still holds the version
	// it read before.
	tokA2 := issue(8, "client-a")
	err = write(tokA2, "refunded", seen)
	fmt.Println(errors.Is(err, verifier.ErrVersionMismatch))
	barrier, _, _ := store.Barrier(ctx, "orders-db")
	fmt.Println("barrier", barrier)
	state, current := read(tokA2)
	fmt.Println(state, current, write(tokA2, "refunded", current))
	// Output:
	// <nil>
	// paid 1
	// <nil>
	// true
	// barrier 6
	// shipped 2 <nil>
}
