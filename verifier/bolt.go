package verifier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/protocol"
)

// Bucket names in a bolt database used by BoltStore. Applications that share
// the database (see NewBoltStore and BoltStore.Update) must not write to
// them.
const (
	// BoltBarrierBucket maps a resource name to its barrier: an 8-byte
	// big-endian epoch, followed by the binary form of the token admitted
	// at that epoch (protocol.Token.MarshalBinary) once its holder is
	// known. Stores written before holders were kept hold the epoch alone,
	// and still open: such a barrier takes the holder of the next token
	// admitted at its epoch. (An older release refuses a barrier with a
	// token as corrupt, never admitting on it.)
	BoltBarrierBucket = "palisade.barriers"
	// BoltDataBucket holds one nested bucket per resource with the keys
	// written through Tx.
	BoltDataBucket = "palisade.data"
	// BoltForkBucket holds one nested bucket per resource with its fork
	// records: the 8-byte big-endian epoch to the fork's binary form
	// (protocol.Fork.MarshalBinary).
	BoltForkBucket = "palisade.forks"
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

var (
	_ BarrierStore = (*BoltStore)(nil)
	_ ForkLister   = (*BoltStore)(nil)
)

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
		for _, name := range []string{BoltBarrierBucket, BoltDataBucket, BoltForkBucket} {
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
		var rec barrierRecord
		rec, ok, err = readBarrier(tx, resource)
		epoch = rec.epoch
		return err
	})
	return epoch, ok, err
}

// Forks implements ForkLister.
func (s *BoltStore) Forks(ctx context.Context, resource string) ([]protocol.Fork, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []protocol.Fork
	err := s.db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket([]byte(BoltForkBucket))
		if root == nil || resource == "" {
			return nil
		}
		b := root.Bucket([]byte(resource))
		if b == nil {
			return nil
		}
		// Keys are big-endian epochs: the cursor walks them in order.
		return b.ForEach(func(k, v []byte) error {
			f, err := protocol.ParseFork(v)
			if err != nil {
				return fmt.Errorf("verifier: fork record of %q at %x: %w", resource, k, err)
			}
			out = append(out, f)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	changed, err := s.guardTx(btx, adm, native, fn)
	if fe, isFork := asFork(err); isFork && changed {
		// The refused write never ran; only the fork record commits,
		// whatever ctx says: it is the store's own record.
		if cerr := btx.Commit(); cerr != nil {
			fe.Kept = false
			return errors.Join(fe, fmt.Errorf("verifier: keep fork record of %q at epoch %d: %w", resource, epoch, cerr))
		}
		return fe
	}
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
// reports whether btx must commit. S4: the check (epoch >= barrier, and
// at the barrier only its holder) and the raise are in the one bolt
// transaction that also holds fn's writes. For a fork it returns the
// *ForkError without running fn, and changed true if btx now holds the
// new fork record.
func (s *BoltStore) guardTx(btx *bbolt.Tx, adm Admission, native bool, fn func(btx *bbolt.Tx, tx Tx) error) (changed bool, err error) {
	resource, epoch := adm.resource, adm.epoch
	rec, ok, err := readBarrier(btx, resource)
	if err != nil {
		return false, err
	}
	v, err := judge(adm, rec, ok)
	if fe, isFork := asFork(err); isFork {
		kept, kerr := keepBoltFork(btx, resource, fe.Fork)
		if kerr != nil {
			return false, errors.Join(fe, kerr)
		}
		fe.Kept = kept
		return kept, fe
	}
	if err != nil {
		return false, err
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
	if v == keepRecord {
		return native || tx.dirty, nil
	}
	val := binary.BigEndian.AppendUint64(nil, epoch)
	if !adm.token.Holder.IsZero() {
		tb, err := adm.token.MarshalBinary()
		if err != nil {
			return false, fmt.Errorf("verifier: barrier record of %q: %w", resource, err)
		}
		val = append(val, tb...)
	}
	if err := btx.Bucket([]byte(BoltBarrierBucket)).Put([]byte(resource), val); err != nil {
		return false, fmt.Errorf("verifier: raise barrier of %q to %d: %w", resource, epoch, err)
	}
	return true, nil
}

// keepBoltFork stores f as the fork record of its epoch in btx unless one
// is kept there already or the resource holds MaxForksPerResource, and
// reports whether it did.
func keepBoltFork(btx *bbolt.Tx, resource string, f protocol.Fork) (bool, error) {
	root := btx.Bucket([]byte(BoltForkBucket))
	if root == nil {
		return false, fmt.Errorf("verifier: bolt bucket %s missing", BoltForkBucket)
	}
	key := binary.BigEndian.AppendUint64(nil, f.Epoch())
	if b := root.Bucket([]byte(resource)); b != nil {
		if b.Get(key) != nil {
			return false, nil
		}
		n := 0
		c := b.Cursor()
		for k, _ := c.First(); k != nil && n < MaxForksPerResource; k, _ = c.Next() {
			n++
		}
		if n >= MaxForksPerResource {
			return false, nil
		}
	}
	b, err := root.CreateBucketIfNotExists([]byte(resource))
	if err != nil {
		return false, fmt.Errorf("verifier: fork bucket of %q: %w", resource, err)
	}
	v, err := f.MarshalBinary()
	if err != nil {
		return false, fmt.Errorf("verifier: fork record of %q: %w", resource, err)
	}
	if err := b.Put(key, v); err != nil {
		return false, fmt.Errorf("verifier: keep fork record of %q at epoch %d: %w", resource, f.Epoch(), err)
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

// readBarrier reads a resource's barrier record: the epoch alone (as
// stores written before holders were kept have it: holder unknown), or the
// epoch and the token admitted at it.
func readBarrier(tx *bbolt.Tx, resource string) (barrierRecord, bool, error) {
	if resource == "" {
		return barrierRecord{}, false, nil
	}
	b := tx.Bucket([]byte(BoltBarrierBucket))
	if b == nil {
		return barrierRecord{}, false, fmt.Errorf("verifier: bolt bucket %s missing", BoltBarrierBucket)
	}
	v := b.Get([]byte(resource))
	if v == nil {
		return barrierRecord{}, false, nil
	}
	if len(v) < 8 {
		// Fail closed: a corrupt barrier must not admit old epochs.
		return barrierRecord{}, false, fmt.Errorf("verifier: corrupt barrier for %q: %d bytes", resource, len(v))
	}
	rec := barrierRecord{epoch: binary.BigEndian.Uint64(v)}
	if len(v) > 8 {
		tok, err := parseRecordToken(resource, rec.epoch, v[8:])
		if err != nil {
			return barrierRecord{}, false, err
		}
		rec.token = tok
	}
	return rec, true, nil
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
