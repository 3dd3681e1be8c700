package verifier_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// Stores written before barrier stores kept the holder: their barriers
// hold the epoch alone. They must still open, admit the next token at the
// barrier epoch as they did, and keep its holder from then on.

// biased is SQLStore's epoch_biased of epoch (epoch − 2^63).
func biased(epoch uint64) int64 { return int64(epoch ^ 1<<63) }

// oldStoreChecks runs against a store whose "orders-db" was written by
// the previous release at epoch 5 with key "k" set to "old": the data
// reads, a token at the barrier epoch is admitted and its holder kept,
// another holder is then a fork, and a lower epoch is stale. reopen
// closes and reopens the store.
func oldStoreChecks(t *testing.T, s verifier.BarrierStore, reopen func() verifier.BarrierStore) verifier.BarrierStore {
	t.Helper()
	ctx := context.Background()
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	const res = "orders-db"
	admit := func(tok protocol.Token) verifier.Admission {
		adm, err := v.Admit(tok, res)
		require.NoError(t, err)
		return adm
	}
	bob, alice := fx.Token(t, res, 5, "bob"), fx.Token(t, res, 5, "alice")

	e, ok, err := s.Barrier(ctx, res)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 5, e)
	require.NoError(t, s.Guard(ctx, admit(bob), func(tx verifier.Tx) error {
		v, ok, err := tx.Get("k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "old", string(v))
		return tx.Put("k", []byte("bob"))
	}), "a barrier without a holder admits its epoch, as before")
	require.NoError(t, s.Guard(ctx, admit(bob), nil), "and its first holder again")

	s = reopen()
	err = s.Guard(ctx, admit(alice), func(verifier.Tx) error { return errors.New("must not run") })
	var fe *verifier.ForkError
	require.ErrorAs(t, err, &fe, "the holder recorded on the first write fences the next")
	require.Equal(t, bob.Holder, fe.Barrier)
	require.True(t, fe.Kept)
	require.NoError(t, protocol.VerifyFork(fx.Cluster, fe.Fork))
	require.ErrorIs(t, s.Guard(ctx, admit(fx.Token(t, res, 4, "carol")), nil), verifier.ErrStale)

	s = reopen()
	forks, err := s.(verifier.ForkLister).Forks(ctx, res)
	require.NoError(t, err)
	require.Len(t, forks, 1)
	require.True(t, forks[0].Equal(fe.Fork))
	return s
}

// TestBoltStoreOldFormat opens a bolt file as the previous release left
// it: 8-byte barriers, and no fork bucket.
func TestBoltStoreOldFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "barriers.db")
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte(verifier.BoltBarrierBucket))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("orders-db"), binary.BigEndian.AppendUint64(nil, 5)); err != nil {
			return err
		}
		d, err := tx.CreateBucket([]byte(verifier.BoltDataBucket))
		if err != nil {
			return err
		}
		r, err := d.CreateBucket([]byte("orders-db"))
		if err != nil {
			return err
		}
		return r.Put([]byte("k"), []byte("old"))
	}))
	require.NoError(t, db.Close())

	open := func() verifier.BarrierStore {
		s, err := verifier.OpenBoltStore(path)
		require.NoError(t, err)
		return s
	}
	s := open()
	s = oldStoreChecks(t, s, func() verifier.BarrierStore {
		require.NoError(t, s.Close())
		s = open()
		return s
	})
	defer s.Close()

	// The barrier now holds the epoch and the first holder's token.
	require.NoError(t, s.(*verifier.BoltStore).DB().View(func(tx *bbolt.Tx) error {
		v := tx.Bucket([]byte(verifier.BoltBarrierBucket)).Get([]byte("orders-db"))
		require.Greater(t, len(v), 8)
		tok, err := protocol.ParseToken(v[8:])
		require.NoError(t, err)
		require.Equal(t, "bob", tok.Holder.ID)
		return nil
	}))
}

// TestBoltStoreCorruptRecordFailsClosed: a barrier record whose token
// does not parse, or names another resource, refuses every write.
func TestBoltStoreCorruptRecordFailsClosed(t *testing.T) {
	ctx := context.Background()
	fx := mainFixture()
	other, err := fx.Token(t, "invoices", 5, "bob").MarshalBinary()
	require.NoError(t, err)
	for name, tail := range map[string][]byte{"garbage": []byte("garbage"), "other resource": other} {
		t.Run(name, func(t *testing.T) {
			s, err := verifier.OpenBoltStore(filepath.Join(t.TempDir(), "barriers.db"))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.DB().Update(func(tx *bbolt.Tx) error {
				return tx.Bucket([]byte(verifier.BoltBarrierBucket)).Put([]byte("orders-db"), append(binary.BigEndian.AppendUint64(nil, 5), tail...))
			}))
			adm, err := verifier.New(fx.Cluster).Admit(fx.Token(t, "orders-db", 6, "alice"), "orders-db")
			require.NoError(t, err)
			err = s.Guard(ctx, adm, nil)
			require.ErrorContains(t, err, "corrupt barrier record")
			_, _, err = s.Barrier(ctx, "orders-db")
			require.ErrorContains(t, err, "corrupt barrier record")
		})
	}
}

// sqlV1Schema is the SQL schema of the previous release (version 1, no
// schema table), in a dialect's types.
func sqlV1Schema(blob, integer, withoutRowID string) []string {
	return []string{
		"CREATE TABLE " + verifier.SQLBarrierTable + " (resource " + blob + " PRIMARY KEY, epoch_biased " + integer + " NOT NULL)" + withoutRowID,
		"CREATE TABLE " + verifier.SQLDataTable + " (resource " + blob + " NOT NULL, name " + blob + " NOT NULL, value " + blob + ", PRIMARY KEY (resource, name))" + withoutRowID,
	}
}

// testOldSQLSchema writes the previous release's tables with db, then
// opens them with open: they migrate, and the store behaves as
// oldStoreChecks says. p is the dialect's first placeholder.
func testOldSQLSchema(t *testing.T, db *sql.DB, schema []string, p func(i int) string, open func() ownedSQLStore) {
	ctx := context.Background()
	for _, stmt := range schema {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+verifier.SQLBarrierTable+" (resource, epoch_biased) VALUES ("+p(1)+", "+p(2)+")", []byte("orders-db"), biased(5))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO "+verifier.SQLDataTable+" (resource, name, value) VALUES ("+p(1)+", "+p(2)+", "+p(3)+")", []byte("orders-db"), []byte("k"), []byte("old"))
	require.NoError(t, err)

	s := open()
	var version int
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT version FROM "+verifier.SQLSchemaTable+" WHERE id = 1").Scan(&version))
	require.Equal(t, verifier.SQLSchemaVersion, version)
	var st verifier.BarrierStore = s
	st = oldStoreChecks(t, st, func() verifier.BarrierStore {
		require.NoError(t, st.Close())
		st = open()
		return st
	})
	defer st.Close()
	s = st.(ownedSQLStore)

	// A process of the previous release sharing the database (a rolling
	// upgrade) raises the barrier without a holder: the row keeps the old
	// epoch's holder, which names nobody at the new epoch, so the next
	// token there is admitted and recorded, and another then refused.
	_, err = s.DB().ExecContext(ctx, "UPDATE "+verifier.SQLBarrierTable+" SET epoch_biased = "+p(1)+" WHERE resource = "+p(2), biased(9), []byte("orders-db"))
	require.NoError(t, err)
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	for _, h := range []string{"dave", "dave", "erin"} {
		adm, err := v.Admit(fx.Token(t, "orders-db", 9, h), "orders-db")
		require.NoError(t, err)
		err = s.Guard(ctx, adm, nil)
		if h == "erin" {
			require.ErrorIs(t, err, verifier.ErrFork)
		} else {
			require.NoError(t, err)
		}
	}
}

func TestSQLiteStoreOldSchema(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	defer db.Close()
	testOldSQLSchema(t, db, sqlV1Schema("BLOB", "INTEGER", " WITHOUT ROWID"), func(int) string { return "?" },
		func() ownedSQLStore { return openSQLite(t, dir) })
}

// TestSQLiteStoreConcurrentMigrations opens one database of the previous
// release through several handles at once, as processes starting
// together would: one migrates, the others find it done.
func TestSQLiteStoreConcurrentMigrations(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	defer db.Close()
	for _, stmt := range sqlV1Schema("BLOB", "INTEGER", " WITHOUT ROWID") {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	stores := make([]*verifier.SQLStore, len(errs))
	dbs := make([]*sql.DB, len(errs))
	for i := range errs {
		dbs[i], err = sql.Open("sqlite", "file:"+filepath.Join(dir, "barriers.db"))
		require.NoError(t, err)
		defer dbs[i].Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = verifier.NewSQLStore(context.Background(), dbs[i], verifier.SQLite)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "NewSQLStore %d failed while others migrated", i)
		require.NoError(t, stores[i].Guard(context.Background(), admit("r", uint64(i+1)), nil))
	}
}

// TestSQLStoreNewerSchemaRefused: a database a later release migrated
// further is refused, not written with this release's statements.
func TestSQLStoreNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	_, err := s.DB().Exec("UPDATE "+verifier.SQLSchemaTable+" SET version = ? WHERE id = 1", verifier.SQLSchemaVersion+1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = verifier.NewSQLStore(context.Background(), db, verifier.SQLite)
	require.ErrorContains(t, err, "schema version 3")
}
