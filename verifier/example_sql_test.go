package verifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the application picks the driver

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// An application keeps its orders in SQLite (PostgreSQL works the same
// with verifier.PostgreSQL) and fences its own UPDATE: the barrier check,
// the barrier raise and the UPDATE are one database transaction.
func ExampleSQLStore_Update() {
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
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db"))
	defer db.Close()
	ctx := context.Background()
	_, _ = db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
	_, _ = db.ExecContext(ctx, "INSERT INTO orders (id, state) VALUES (42, 'new')")

	// The barrier table lives next to the application's tables.
	store, err := verifier.NewSQLStore(ctx, db, verifier.SQLite)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	v := verifier.New(cluster)
	setState := func(tok protocol.Token, state string) error {
		// Only verification yields the Admission the store needs.
		adm, err := v.Admit(tok, "orders-db")
		if err != nil {
			return err
		}
		return store.Update(ctx, adm, func(stx *sql.Tx, _ verifier.Tx) error {
			_, err := stx.ExecContext(ctx, "UPDATE orders SET state = ? WHERE id = 42", state)
			return err
		})
	}

	old, current := issue(6, "client-a"), issue(7, "client-b")
	fmt.Println("client-a:", setState(old, "paid"))
	fmt.Println("client-b:", setState(current, "shipped"))
	err = setState(old, "refunded") // client-a wakes up from a GC pause
	fmt.Println("client-a late:", errors.Is(err, verifier.ErrStale), err)

	var state string
	_ = db.QueryRowContext(ctx, "SELECT state FROM orders WHERE id = 42").Scan(&state)
	fmt.Println("order 42:", state)
	// Output:
	// client-a: <nil>
	// client-b: <nil>
	// client-a late: true verifier: stale token for resource "orders-db": epoch 6 below barrier 7
	// order 42: shipped
}
