package verifier

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// Bucket names in a bolt database used by BoltStore. Applications that share
// the database (see NewBoltStore and BoltStore.Update) must not write to
// them.
const (
	// BoltBarrierBucket maps a resource name to its barrier, an 8-byte
	// big-endian epoch.
	BoltBarrierBucket = "palisade.barriers"
	// BoltDataBucket holds one nested bucket per resource with the keys
	// written through Tx.
	BoltDataBucket = "palisade.data"
)

// BoltOpenTimeout bounds how long OpenBoltStore waits for the file lock of a
// database that another process holds open.
const BoltOpenTimeout = 5 * time.Second

// BoltStore is the embedded, durable BarrierStore: a bbolt database in which
// each Guard is one read-write transaction (read the barrier, compare, run the
// write, raise the barrier), fsynced on commit. The caller's context is
// checked before the transaction and again just before its commit; the
// commit itself is never interrupted. It is safe for concurrent use;
// bbolt runs one write transaction at a time, so keep guarded writes short.
type BoltStore struct {
	db   *bbolt.DB
	owns bool

	mu     sync.RWMutex // held for reading by transactions, for writing by Close
	closed bool
}

var _ BarrierStore = (*BoltStore)(nil)

// OpenBoltStore opens or creates the bolt database at path (mode 0600) and
// its buckets. Close closes the database.
func OpenBoltStore(path string) (*BoltStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: BoltOpenTimeout})
	if err != nil {
		return nil, fmt.Errorf("verifier: open bolt store %s: %w", path, err)
	}
	s, err := NewBoltStore(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.owns = true
	return s, nil
}

// NewBoltStore keeps barriers in an open bolt database that the application
// also uses, creating BoltStore's buckets if needed. The caller keeps
// ownership of db: Close marks the store closed but leaves db open.
func NewBoltStore(db *bbolt.DB) (*BoltStore, error) {
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{BoltBarrierBucket, BoltDataBucket} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verifier: create bolt buckets: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// Barrier implements BarrierStore.
func (s *BoltStore) Barrier(ctx context.Context, resource string) (epoch uint64, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, ErrClosed
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		epoch, ok, err = readBarrier(tx, resource)
		return err
	})
	return epoch, ok, err
}

// Guard implements BarrierStore.
//
// A Guard that changes nothing (epoch equal to the barrier and no Put or
// Delete, as for a read) rolls back instead of committing, which saves the
// fsync.
func (s *BoltStore) Guard(ctx context.Context, adm Admission, write func(tx Tx) error) error {
	return s.update(ctx, adm, false, func(_ *bbolt.Tx, tx Tx) error {
		if write == nil {
			return nil
		}
		return write(tx)
	})
}

// Update is Guard with native access: fn also receives the underlying bolt
// transaction, so an application that keeps its own buckets in the same
// database commits them atomically with the barrier. If ctx ends before
// the commit, nothing changes and Update returns an error wrapping
// ctx.Err(); a commit that fails (a write or fsync error) may have reached
// the disk, and Update returns an error wrapping ErrOutcomeUnknown. fn must not touch
// BoltBarrierBucket or BoltDataBucket except through tx, and must not
// commit or roll back btx.
//
// Like Guard it takes an Admission, so the application's own writes, too,
// run only for a token that passed verification (Verifier.Admit).
func (s *BoltStore) Update(ctx context.Context, adm Admission, fn func(btx *bbolt.Tx, tx Tx) error) error {
	return s.update(ctx, adm, true, fn)
}

// update runs fn in one bolt transaction. native says fn may have written
// through btx, so the transaction must commit even if tx stayed clean.
func (s *BoltStore) update(ctx context.Context, adm Admission, native bool, fn func(btx *bbolt.Tx, tx Tx) error) error {
	if err := checkGuardArgs(ctx, adm); err != nil {
		return err
	}
	resource, epoch := adm.resource, adm.epoch
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	btx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("verifier: guard %q: begin: %w", resource, err)
	}
	// Rolls back on every path but a commit, also on a panic in fn, which
	// then propagates; after a commit it is a no-op.
	defer func() { _ = btx.Rollback() }()
	changed, err := s.guardTx(btx, resource, epoch, native, fn)
	if err != nil {
		return err
	}
	// The last moment the caller may still cancel. bbolt's commit takes no
	// context, so once it starts it runs to the end.
	if err := ctx.Err(); err != nil {
		return cancelledBeforeCommit(resource, epoch, err)
	}
	if !changed {
		return nil
	}
	if err := btx.Commit(); err != nil {
		// A failed write or fsync may leave the new meta page on disk.
		return fmt.Errorf("%w: commit guarded write to %q at epoch %d: %w", ErrOutcomeUnknown, resource, epoch, err)
	}
	return nil
}

// guardTx runs the barrier check, fn and the barrier raise in btx, and
// reports whether btx must commit. S4: the check (epoch >= barrier) and the
// raise are in the one bolt transaction that also holds fn's writes.
func (s *BoltStore) guardTx(btx *bbolt.Tx, resource string, epoch uint64, native bool, fn func(btx *bbolt.Tx, tx Tx) error) (changed bool, err error) {
	barrier, ok, err := readBarrier(btx, resource)
	if err != nil {
		return false, err
	}
	if ok && epoch < barrier {
		return false, &StaleError{Resource: resource, Epoch: epoch, Barrier: barrier}
	}
	root := btx.Bucket([]byte(BoltDataBucket))
	if root == nil {
		return false, fmt.Errorf("verifier: bolt bucket %s missing", BoltDataBucket)
	}
	tx := &boltTx{root: root, resource: []byte(resource)}
	err = func() error {
		defer func() { tx.done = true }()
		return fn(btx, tx)
	}()
	if err != nil {
		return false, wrapWriteErr(resource, epoch, err)
	}
	if ok && epoch == barrier {
		return native || tx.dirty, nil
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], epoch)
	if err := btx.Bucket([]byte(BoltBarrierBucket)).Put([]byte(resource), v[:]); err != nil {
		return false, fmt.Errorf("verifier: raise barrier of %q to %d: %w", resource, epoch, err)
	}
	return true, nil
}

// DB returns the underlying bolt database, for reads of the application's
// own buckets.
func (s *BoltStore) DB() *bbolt.DB { return s.db }

// Close implements BarrierStore. It waits for running transactions and
// closes the database if OpenBoltStore opened it.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.owns {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("verifier: close bolt store: %w", err)
	}
	return nil
}

func readBarrier(tx *bbolt.Tx, resource string) (uint64, bool, error) {
	if resource == "" {
		return 0, false, nil
	}
	b := tx.Bucket([]byte(BoltBarrierBucket))
	if b == nil {
		return 0, false, fmt.Errorf("verifier: bolt bucket %s missing", BoltBarrierBucket)
	}
	v := b.Get([]byte(resource))
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 8 {
		// Fail closed: a corrupt barrier must not admit old epochs.
		return 0, false, fmt.Errorf("verifier: corrupt barrier for %q: %d bytes", resource, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// boltTx is a resource's nested bucket inside BoltDataBucket, created on the
// first Put.
type boltTx struct {
	root     *bbolt.Bucket
	resource []byte
	b        *bbolt.Bucket
	done     bool
	dirty    bool // a Put or Delete ran
}

func (t *boltTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	if key == "" {
		return errEmptyKey
	}
	return nil
}

func (t *boltTx) bucket(create bool) (*bbolt.Bucket, error) {
	if t.b != nil {
		return t.b, nil
	}
	if !create {
		t.b = t.root.Bucket(t.resource)
		return t.b, nil
	}
	b, err := t.root.CreateBucketIfNotExists(t.resource)
	if err != nil {
		return nil, fmt.Errorf("verifier: data bucket for %q: %w", t.resource, err)
	}
	t.b = b
	return b, nil
}

func (t *boltTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	b, err := t.bucket(false)
	if err != nil || b == nil {
		return nil, false, err
	}
	// Seek rather than Get: Get cannot tell an empty value from a missing
	// key.
	k, v := b.Cursor().Seek([]byte(key))
	if k == nil || !bytes.Equal(k, []byte(key)) {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

func (t *boltTx) Put(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	b, err := t.bucket(true)
	if err != nil {
		return err
	}
	t.dirty = true
	// bbolt keeps the slice until commit: copy it so callers may reuse theirs.
	if err := b.Put([]byte(key), append([]byte{}, value...)); err != nil {
		return fmt.Errorf("verifier: put %q: %w", key, err)
	}
	return nil
}

func (t *boltTx) Delete(key string) error {
	if err := t.check(key); err != nil {
		return err
	}
	b, err := t.bucket(false)
	if err != nil || b == nil {
		return err
	}
	t.dirty = true
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("verifier: delete %q: %w", key, err)
	}
	return nil
}
