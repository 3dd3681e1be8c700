package verifier_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/barriertest"
)

func openBolt(t *testing.T, dir string) verifier.BarrierStore {
	s, err := verifier.OpenBoltStore(filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	return s
}

func TestMemoryStoreConformance(t *testing.T) {
	barriertest.Run(t, func(*testing.T, string) verifier.BarrierStore {
		return verifier.NewMemoryStore()
	}, barriertest.Options{Durable: false})
}

func TestBoltStoreConformance(t *testing.T) {
	barriertest.Run(t, openBolt, barriertest.Options{Durable: true})
}

// TestBoltStoreSharedDB keeps barriers in a database the application owns
// and writes the application's own bucket in the guarded transaction.
func TestBoltStoreSharedDB(t *testing.T) {
	ctx := context.Background()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "app.db"), 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	s, err := verifier.NewBoltStore(db)
	require.NoError(t, err)
	require.Same(t, db, s.DB())

	appWrite := func(value string, fail error) func(*bbolt.Tx, verifier.Tx) error {
		return func(btx *bbolt.Tx, tx verifier.Tx) error {
			b, err := btx.CreateBucketIfNotExists([]byte("app"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("row"), []byte(value)); err != nil {
				return err
			}
			if err := tx.Put("row", []byte(value)); err != nil {
				return err
			}
			return fail
		}
	}
	appRow := func() string {
		var v string
		require.NoError(t, db.View(func(btx *bbolt.Tx) error {
			if b := btx.Bucket([]byte("app")); b != nil {
				v = string(b.Get([]byte("row")))
			}
			return nil
		}))
		return v
	}

	require.NoError(t, s.Update(ctx, admit("orders-db", 5), appWrite("v5", nil)))
	require.Equal(t, "v5", appRow())

	boom := errors.New("boom")
	require.ErrorIs(t, s.Update(ctx, admit("orders-db", 6), appWrite("v6", boom)), boom)
	require.Equal(t, "v5", appRow(), "the application's bucket must roll back with the barrier")
	e, _, err := s.Barrier(ctx, "orders-db")
	require.NoError(t, err)
	require.EqualValues(t, 5, e)

	require.ErrorIs(t, s.Update(ctx, admit("orders-db", 4), appWrite("v4", nil)), verifier.ErrStale)
	require.Equal(t, "v5", appRow())

	// Close leaves a database the caller owns open.
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Guard(ctx, admit("orders-db", 7), nil), verifier.ErrClosed)
	require.Equal(t, "v5", appRow())
}

// TestBoltStoreCorruptBarrierFailsClosed: a barrier that does not decode must
// refuse every epoch, never admit as if the resource were fresh.
func TestBoltStoreCorruptBarrierFailsClosed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "barriers.db")
	s, err := verifier.OpenBoltStore(path)
	require.NoError(t, err)
	require.NoError(t, s.Guard(ctx, admit("orders-db", 5), nil))
	require.NoError(t, s.DB().Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(verifier.BoltBarrierBucket)).Put([]byte("orders-db"), []byte{1, 2, 3})
	}))
	ran := false
	err = s.Guard(ctx, admit("orders-db", 9), func(verifier.Tx) error { ran = true; return nil })
	require.ErrorContains(t, err, "corrupt barrier")
	require.False(t, ran)
	_, _, err = s.Barrier(ctx, "orders-db")
	require.Error(t, err)
	require.NoError(t, s.Close())
}

func TestOpenBoltStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "barriers.db")
	s, err := verifier.OpenBoltStore(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	_, err = verifier.OpenBoltStore(dir) // a directory
	require.Error(t, err)
	_, err = verifier.OpenBoltStore(filepath.Join(dir, "missing", "barriers.db"))
	require.Error(t, err)
}
