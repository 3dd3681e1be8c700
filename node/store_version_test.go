package node

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// legacyStore writes a vote store as an earlier release did: the records
// and audit buckets, no meta bucket, and, if record is set, one record
// holding a bn256 vote and a version 2 token.
func legacyStore(t *testing.T, record bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), StoreFileName)
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		recs, err := tx.CreateBucket(boltBucketRecords)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(boltBucketAudit); err != nil {
			return err
		}
		if !record {
			return nil
		}
		// A 66-byte bn256 partial and a pt2 token: neither decodes here.
		return recs.Put([]byte("orders-db"), []byte(`{"resource":"orders-db","last_epoch":3,"vote":"0003`+
			`11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111`+
			`","certified":"pt2.AnrQlyFmN_eTGwo"}`))
	}))
	require.NoError(t, db.Close())
	return path
}

// TestBoltStoreFormat: a new store records its format; a store an earlier
// (bn256) release wrote, with records and no format, is refused at open
// with ErrStoreVersion saying what to do; an empty one is adopted; a
// store of another format is refused. ReadAudit still reads an old store,
// whose audit entries hold no curve element.
func TestBoltStoreFormat(t *testing.T) {
	ctx := context.Background()

	path := filepath.Join(t.TempDir(), StoreFileName)
	s, err := OpenBoltStore(path)
	require.NoError(t, err)
	require.NoError(t, s.Save(ctx, Record{Resource: "r", LastEpoch: 1}, AuditEntry{Kind: AuditVote, Resource: "r", Epoch: 1}))
	require.NoError(t, s.Close())
	require.Equal(t, "3 BLS12-381", readFormat(t, path))
	s, err = OpenBoltStore(path)
	require.NoError(t, err, "a store of this release reopens")
	rec, ok, err := s.Load(ctx, "r")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, rec.LastEpoch)
	require.NoError(t, s.Close())

	old := legacyStore(t, true)
	s, err = OpenBoltStore(old)
	require.Nil(t, s)
	require.ErrorIs(t, err, ErrStoreVersion)
	require.ErrorContains(t, err, "version 1 store")
	require.ErrorContains(t, err, "bn256")
	require.ErrorContains(t, err, "run a new DKG")
	require.Empty(t, readFormat(t, old), "a refused store is left as it was")
	_, err = ReadAudit(filepath.Dir(old), func(AuditEntry) error { return nil })
	require.NoError(t, err, "palisade audit still reads an old store")

	empty := legacyStore(t, false)
	s, err = OpenBoltStore(empty)
	require.NoError(t, err, "an empty store of an earlier release holds nothing to misread")
	require.NoError(t, s.Close())
	require.Equal(t, "3 BLS12-381", readFormat(t, empty))

	for _, format := range []string{"1 bn256", "4 BLS12-381", "2 bn256", "3 bn256", ""} {
		p := filepath.Join(t.TempDir(), StoreFileName)
		db, err := bbolt.Open(p, 0o600, nil)
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
			m, err := tx.CreateBucket(boltBucketMeta)
			if err != nil {
				return err
			}
			return m.Put(boltKeyFormat, []byte(format))
		}))
		require.NoError(t, db.Close())
		s, err := OpenBoltStore(p)
		require.Nil(t, s, format)
		require.ErrorIs(t, err, ErrStoreVersion, format)
		require.ErrorContains(t, err, "this release reads \"3 BLS12-381\"", format)
	}
}

// TestBoltStoreUpgradesVersion2: a store of the previous format (the same
// records, without the write-ahead log) opens, keeps its records and is
// marked version 3, so that a release reading version 2, which would not
// replay the log, refuses it from then on.
func TestBoltStoreUpgradesVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), StoreFileName)
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		m, err := tx.CreateBucket(boltBucketMeta)
		if err != nil {
			return err
		}
		if err := m.Put(boltKeyFormat, []byte("2 BLS12-381")); err != nil {
			return err
		}
		recs, err := tx.CreateBucket(boltBucketRecords)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(boltBucketAudit); err != nil {
			return err
		}
		return recs.Put([]byte("orders-db"), []byte(`{"resource":"orders-db","last_epoch":7}`))
	}))
	require.NoError(t, db.Close())

	s, err := OpenBoltStore(path)
	require.NoError(t, err)
	rec, ok, err := s.Load(ctx, "orders-db")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 7, rec.LastEpoch)
	require.NoError(t, s.Save(ctx, Record{Resource: "orders-db", LastEpoch: 8}))
	require.NoError(t, s.Close())
	require.Equal(t, "3 BLS12-381", readFormat(t, path))
}

// readFormat returns the store's format, or "" if it has none.
func readFormat(t *testing.T, path string) string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var out string
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		if m := tx.Bucket(boltBucketMeta); m != nil {
			out = string(m.Get(boltKeyFormat))
		}
		return nil
	}))
	return out
}
