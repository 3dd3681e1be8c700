package verifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/barriertest"
)

// ownedSQLStore closes its database with the store, as the conformance
// suite expects of the stores it opens.
type ownedSQLStore struct {
	*verifier.SQLStore
	db *sql.DB
}

func (s ownedSQLStore) Close() error {
	return errors.Join(s.SQLStore.Close(), s.db.Close())
}

// openSQLite opens the SQLite database barriers.db in dir as an SQLStore
// that owns it. The DSN sets nothing: the store must bring its own busy
// timeout, durability and locking to a database the application opened.
func openSQLite(t testing.TB, dir string) ownedSQLStore {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	s, err := verifier.NewSQLStore(context.Background(), db, verifier.SQLite)
	if err != nil {
		_ = db.Close()
	}
	require.NoError(t, err)
	return ownedSQLStore{SQLStore: s, db: db}
}

func TestSQLiteStoreConformance(t *testing.T) {
	barriertest.Run(t, func(t *testing.T, dir string) verifier.BarrierStore {
		return openSQLite(t, dir)
	}, barriertest.Options{Durable: true})
}

// TestSQLiteStoreTwoHandles races writers through two separate *sql.DB
// handles on one file, as two processes would: SQLite's file lock, not the
// pool, must serialise them.
func TestSQLiteStoreTwoHandles(t *testing.T) {
	dir := t.TempDir()
	a, b := openSQLite(t, dir), openSQLite(t, dir)
	defer a.Close()
	defer b.Close()
	testTwoHandles(t, a, b)
}

// testTwoHandles runs increments at rising epochs through two stores on
// one database and checks that none was lost and the barrier is the
// highest admitted epoch.
func testTwoHandles(t *testing.T, a, b verifier.BarrierStore) {
	ctx := context.Background()
	const perStore = 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted []uint64
	)
	errs := make(chan error, 2)
	for i, s := range []verifier.BarrierStore{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perStore {
				epoch := uint64(j*2 + i) // interleaved epochs: some go stale
				err := s.Guard(ctx, admit("shared", epoch), func(tx verifier.Tx) error {
					v, _, err := tx.Get("n")
					if err != nil {
						return err
					}
					mu.Lock()
					admitted = append(admitted, epoch)
					mu.Unlock()
					return tx.Put("n", append(v, 'x'))
				})
				if err != nil && !errors.Is(err, verifier.ErrStale) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, a.Guard(ctx, admit("shared", uint64(2*perStore-1)), func(tx verifier.Tx) error {
		v, _, err := tx.Get("n")
		n = len(v)
		return err
	}))
	require.Equal(t, len(admitted), n, "lost update across handles")
	e, ok, err := b.Barrier(ctx, "shared")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 2*perStore-1, e)
}

// TestSQLStoreUpdate writes the application's own table in the guarded
// transaction: it commits and rolls back with the barrier.
func TestSQLStoreUpdate(t *testing.T) {
	s := openSQLite(t, t.TempDir())
	defer s.Close()
	testSQLUpdate(t, s.SQLStore, "?")
}

// testSQLUpdate checks SQLStore.Update against an application table;
// param is the dialect's first placeholder.
func testSQLUpdate(t *testing.T, s *verifier.SQLStore, param string) {
	ctx := context.Background()
	db := s.DB()
	_, err := db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO orders (id, state) VALUES (42, 'new')")
	require.NoError(t, err)
	setState := func(state string, fail error) func(*sql.Tx, verifier.Tx) error {
		return func(stx *sql.Tx, tx verifier.Tx) error {
			if _, err := stx.ExecContext(ctx, "UPDATE orders SET state = "+param+" WHERE id = 42", state); err != nil {
				return err
			}
			if err := tx.Put("last", []byte(state)); err != nil {
				return err
			}
			return fail
		}
	}
	state := func() string {
		var st string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT state FROM orders WHERE id = 42").Scan(&st))
		return st
	}

	require.NoError(t, s.Update(ctx, admit("orders-db", 5), setState("paid", nil)))
	require.Equal(t, "paid", state())

	boom := errors.New("boom")
	require.ErrorIs(t, s.Update(ctx, admit("orders-db", 6), setState("refunded", boom)), boom)
	require.Equal(t, "paid", state(), "the application's row must roll back with the barrier")
	e, _, err := s.Barrier(ctx, "orders-db")
	require.NoError(t, err)
	require.EqualValues(t, 5, e)

	require.ErrorIs(t, s.Update(ctx, admit("orders-db", 4), setState("late", nil)), verifier.ErrStale)
	require.Equal(t, "paid", state())

	require.NoError(t, s.Update(ctx, admit("orders-db", 7), setState("shipped", nil)))
	require.Equal(t, "shipped", state())
	require.Equal(t, s.DB(), db)

	// Close leaves the caller's database open.
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Guard(ctx, admit("orders-db", 8), nil), verifier.ErrClosed)
	require.Equal(t, "shipped", state())
}

// TestSQLStoreCorruptBarrierFailsClosed: a barrier row changed behind the
// store's back must never admit a lower epoch.
func TestSQLStoreInconsistentBarrierFailsClosed(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, t.TempDir())
	defer s.Close()
	require.NoError(t, s.Guard(ctx, admit("orders-db", 5), nil))
	// A trigger that swallows updates makes the upsert affect no row while
	// the barrier stays below the epoch.
	_, err := s.DB().ExecContext(ctx, `CREATE TRIGGER freeze BEFORE UPDATE ON `+verifier.SQLBarrierTable+`
		BEGIN SELECT RAISE(IGNORE); END`)
	require.NoError(t, err)
	ran := false
	err = s.Guard(ctx, admit("orders-db", 9), func(verifier.Tx) error { ran = true; return nil })
	require.ErrorContains(t, err, "inconsistent barrier")
	require.NotErrorIs(t, err, verifier.ErrStale)
	require.False(t, ran)
}

func TestNewSQLStoreErrors(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = verifier.NewSQLStore(ctx, db, verifier.SQLDialect(0))
	require.ErrorContains(t, err, "unknown SQL dialect")

	// The PostgreSQL schema does not run on SQLite.
	_, err = verifier.NewSQLStore(ctx, db, verifier.PostgreSQL)
	require.Error(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = verifier.NewSQLStore(cancelled, db, verifier.SQLite)
	require.ErrorIs(t, err, context.Canceled)

	require.Equal(t, "sqlite", verifier.SQLite.String())
	require.Equal(t, "postgresql", verifier.PostgreSQL.String())
	require.Equal(t, "SQLDialect(9)", verifier.SQLDialect(9).String())
}

// TestSQLiteStoreCommitTimeout: see testCommitTimeout.
func TestSQLiteStoreCommitTimeout(t *testing.T) {
	s := openSQLite(t, t.TempDir())
	defer s.Close()
	testCommitTimeout(t, s.SQLStore)
}

// testCommitTimeout runs guarded writes whose commit timeout is too short
// to confirm a commit: each returns nil or ErrOutcomeUnknown, never a
// plain failure, and the ones that returned nil are all present.
func testCommitTimeout(t *testing.T, s *verifier.SQLStore) {
	ctx := context.Background()
	s.CommitTimeout = time.Nanosecond
	const writes = 20
	var ok, unknown int
	committed := map[string]bool{}
	for i := range writes {
		key := fmt.Sprint("k", i)
		err := s.Guard(ctx, admit("r", uint64(i+1)), func(tx verifier.Tx) error { return tx.Put(key, []byte("v")) })
		switch {
		case err == nil:
			ok++
			committed[key] = true
		case errors.Is(err, verifier.ErrOutcomeUnknown):
			unknown++
		default:
			t.Fatalf("write %d: %v, want nil or ErrOutcomeUnknown", i, err)
		}
	}
	t.Logf("commit timeout 1ns: %d confirmed, %d outcome unknown", ok, unknown)
	s.CommitTimeout = 0
	barrier, found, err := s.Barrier(ctx, "r")
	require.NoError(t, err)
	if !found {
		require.Zero(t, ok)
		return
	}
	require.NoError(t, s.Guard(ctx, admit("r", barrier), func(tx verifier.Tx) error {
		for key := range committed {
			_, present, err := tx.Get(key)
			require.NoError(t, err)
			require.True(t, present, "confirmed write %s is absent", key)
		}
		return nil
	}))
}

// TestSQLiteStoreWAL: NewSQLStore switches a file database to WAL.
func TestSQLiteStoreWAL(t *testing.T) {
	s := openSQLite(t, t.TempDir())
	defer s.Close()
	var mode string
	require.NoError(t, s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
}

// TestNoSQLDriverImported: the application picks the SQL driver; verifier
// itself must not pull one in.
func TestNoSQLDriverImported(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./barriertest").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "database/sql")
	for _, d := range deps {
		for _, driver := range []string{"modernc.org/", "github.com/jackc/", "github.com/lib/pq", "github.com/mattn/"} {
			if strings.HasPrefix(d, driver) {
				t.Errorf("verifier depends on SQL driver package %s", d)
			}
		}
	}
}

// BenchmarkGuardSQL is one guarded write (a raise of the barrier and one
// Put, committed) on SQLite and, if available, PostgreSQL, to compare with
// BenchmarkGuardBolt. SQLite fsyncs every commit; the private PostgreSQL
// server runs with fsync off, so its number is the SQL overhead only.
func BenchmarkGuardSQL(b *testing.B) {
	bench := func(b *testing.B, s verifier.BarrierStore) {
		ctx := context.Background()
		value := []byte("value")
		epoch := uint64(0)
		b.ResetTimer()
		for b.Loop() {
			epoch++
			if err := s.Guard(ctx, admit("orders-db", epoch), func(tx verifier.Tx) error {
				return tx.Put("k", value)
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sqlite", func(b *testing.B) {
		s := openSQLite(b, b.TempDir())
		defer s.Close()
		bench(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		pg := newPostgres(b)
		s := pg.open(b, pg.newSchema(b))
		defer s.Close()
		bench(b, s)
	})
}
