package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/palisade-dev/palisade/crypto"
)

// Defaults of OpenBoltStore.
const (
	// DefaultBoltMaxBatch is the most Save requests that share one
	// transaction, and the length of the queue in front of the committer.
	DefaultBoltMaxBatch = 256
	// DefaultBoltOpenTimeout is how long OpenBoltStore waits for the file
	// lock held by another process before it gives up.
	DefaultBoltOpenTimeout = time.Second
)

var (
	boltBucketRecords = []byte("records")
	boltBucketAudit   = []byte("audit")
	// boltBucketMeta holds boltKeyFormat: the store's format version and
	// curve (storeFormat).
	boltBucketMeta = []byte("meta")
	boltKeyFormat  = []byte("format")
)

// StoreFormatVersion is the version of the vote store's format. Records
// hold curve elements (the node's partial vote, the highest certified
// token), so the version names the curve too. Version 1, the stores of
// earlier releases, had no meta bucket and held bn256 votes and version 2
// tokens; a store with records and no format is refused with
// ErrStoreVersion.
const StoreFormatVersion = 2

// storeFormat is the value of the meta bucket's format key.
var storeFormat = fmt.Sprintf("%d %s", StoreFormatVersion, crypto.CurveName)

// ErrStoreVersion reports a vote store of another format version, such as
// one an earlier (bn256) release wrote: the error names the version and
// what to do.
var ErrStoreVersion = errors.New("node: vote store of another format version")

// BoltStore is the durable VoteStore of a node, kept in one bbolt file.
//
// Bucket "meta" holds the store's format (StoreFormatVersion and the
// curve). Bucket "records" maps a resource name to the JSON of its Record.
// Bucket "audit" maps an 8-byte big-endian sequence number to the JSON of an
// AuditEntry; sequence numbers come from the bucket's sequence, which is
// advanced in the same transaction as the record, so they have no gaps.
//
// Saves use group commit: one goroutine owned by the store takes the first
// waiting request, drains every other request already queued (up to the
// batch cap), applies them all in arrival order in one write transaction and
// answers each with that transaction's result. A lone Save therefore pays
// one fsync and no added delay; under load, the requests that arrive during
// an fsync share the next one.
type BoltStore struct {
	db   *bbolt.DB
	cfg  boltConfig
	reqs chan *boltSaveReq

	// mu orders sends on reqs against Close: Save sends while holding the
	// read lock, Close sets closed under the write lock, so after that no
	// request can enter the queue.
	mu     sync.RWMutex
	closed atomic.Bool

	closing   chan struct{} // closed by Close: the committer must stop
	done      chan struct{} // closed by the committer when it has stopped
	closeOnce sync.Once
	closeErr  error

	saves atomic.Uint64
	txns  atomic.Uint64

	// observe, if set, is told each committed transaction's duration and
	// batch size (SetCommitObserver).
	observe atomic.Pointer[func(time.Duration, int)]
}

var _ VoteStore = (*BoltStore)(nil)

// StoreStats counts the work of a BoltStore since it was opened.
type StoreStats struct {
	// Saves is the number of Save calls whose write was committed.
	Saves uint64
	// Transactions is the number of write transactions (and so of fsyncs)
	// that committed them. Saves/Transactions is the mean batch size.
	Transactions uint64
}

// BoltOption configures OpenBoltStore.
type BoltOption func(*boltConfig)

type boltConfig struct {
	maxBatch    int
	openTimeout time.Duration
	// beforeCommit, if set, runs inside every write transaction after the
	// batch is applied and before it commits; an error rolls the whole
	// transaction back. Tests only.
	beforeCommit func() error
}

// WithBoltMaxBatch sets the most Save requests that share one transaction
// (default DefaultBoltMaxBatch). It is also the length of the queue in front
// of the committer. n must be at least 1.
func WithBoltMaxBatch(n int) BoltOption {
	return func(c *boltConfig) { c.maxBatch = n }
}

// WithBoltOpenTimeout sets how long OpenBoltStore waits for the file lock
// when another process holds the file open (default DefaultBoltOpenTimeout).
// Zero waits forever.
func WithBoltOpenTimeout(d time.Duration) BoltOption {
	return func(c *boltConfig) { c.openTimeout = d }
}

// boltSaveReq is one queued Save. done has room for the single answer, so
// the committer never blocks on a caller.
type boltSaveReq struct {
	key   []byte
	value []byte
	audit []AuditEntry
	done  chan error
}

// OpenBoltStore opens (or creates, with mode 0600) the bbolt file at path
// and starts the store's committer goroutine, which Close stops.
func OpenBoltStore(path string, opts ...BoltOption) (*BoltStore, error) {
	cfg := boltConfig{maxBatch: DefaultBoltMaxBatch, openTimeout: DefaultBoltOpenTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxBatch < 1 {
		return nil, fmt.Errorf("node: bolt store: open: max batch %d, must be at least 1", cfg.maxBatch)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: cfg.openTimeout})
	if err != nil {
		return nil, fmt.Errorf("node: bolt store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := checkStoreFormat(tx); err != nil {
			return err
		}
		for _, name := range [][]byte{boltBucketRecords, boltBucketAudit} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("node: bolt store: open %s: %w", path, err)
	}
	s := &BoltStore{
		db:      db,
		cfg:     cfg,
		reqs:    make(chan *boltSaveReq, cfg.maxBatch),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// Load returns the record of resource; ok is false if there is none.
func (s *BoltStore) Load(ctx context.Context, resource string) (rec Record, ok bool, err error) {
	if s.closed.Load() {
		return Record{}, false, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("node: bolt store: load: %w", err)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(boltBucketRecords).Get([]byte(resource))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &rec) // copies out of the mmap
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return Record{}, false, ErrStoreClosed
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("node: bolt store: load %q: %w", resource, err)
	}
	return rec, ok, nil
}

// Save durably writes rec and appends the audit entries, assigning their
// Seq, in one transaction that it may share with concurrent Saves. When it
// returns nil the transaction has been fsynced.
//
// ctx is respected only while the request waits to enter the committer's
// queue (which happens at once unless the queue is full). Once queued, Save
// waits for the transaction's result whatever ctx does: a caller must never
// believe a write failed that in fact landed, since the node would then
// forget a vote it is bound by. An error from a failed transaction is given
// to every request in it, none of which was applied. A request whose own
// record or audit entries cannot be encoded fails alone, before or inside
// the batch, without being applied.
func (s *BoltStore) Save(ctx context.Context, rec Record, audit ...AuditEntry) error {
	if s.closed.Load() {
		return ErrStoreClosed
	}
	value, err := recordJSON(rec)
	if err != nil {
		return fmt.Errorf("node: bolt store: save: %w", err)
	}
	req := &boltSaveReq{
		key:   []byte(rec.Resource),
		value: value,
		audit: append([]AuditEntry(nil), audit...),
		done:  make(chan error, 1),
	}
	if err := s.enqueue(ctx, req); err != nil {
		return err
	}
	return <-req.done
}

func (s *BoltStore) enqueue(ctx context.Context, req *boltSaveReq) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrStoreClosed
	}
	// Checked first: a select with both cases ready picks one at random.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node: bolt store: save: %w", err)
	}
	select {
	case s.reqs <- req:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: bolt store: save: %w", ctx.Err())
	}
}

// commitLoop is the committer goroutine: it owns every write transaction.
func (s *BoltStore) commitLoop() {
	defer close(s.done)
	batch := make([]*boltSaveReq, 0, s.cfg.maxBatch)
	for {
		// Close wins over queued work: requests still queued when Close
		// starts fail with ErrStoreClosed rather than race it.
		select {
		case <-s.closing:
			s.failQueued()
			return
		default:
		}
		select {
		case <-s.closing:
			s.failQueued()
			return
		case req := <-s.reqs:
			batch = append(batch[:0], req)
		}
	drain:
		for len(batch) < s.cfg.maxBatch {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch) // drop references to answered requests
	}
}

// failQueued answers every queued request with ErrStoreClosed. It runs after
// Close has set closed under mu, so nothing enters the queue any more.
func (s *BoltStore) failQueued() {
	for {
		select {
		case req := <-s.reqs:
			req.done <- ErrStoreClosed
		default:
			return
		}
	}
}

// commit applies batch in arrival order in one write transaction and answers
// every request.
func (s *BoltStore) commit(batch []*boltSaveReq) {
	own := make([]error, len(batch)) // per-request encoding errors
	applied := 0
	start := time.Now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		applied = 0
		records := tx.Bucket(boltBucketRecords)
		audit := tx.Bucket(boltBucketAudit)
		for i, req := range batch {
			own[i] = nil
			// Encode this request's entries before touching the buckets, so
			// a bad entry fails its own request only.
			values, err := auditJSONs(req.audit, audit.Sequence()+1)
			if err != nil {
				own[i] = fmt.Errorf("node: bolt store: save: %w", err)
				continue
			}
			if err := records.Put(req.key, req.value); err != nil {
				return fmt.Errorf("put record %q: %w", req.key, err)
			}
			for _, v := range values {
				seq, err := audit.NextSequence()
				if err != nil {
					return fmt.Errorf("audit sequence: %w", err)
				}
				if err := audit.Put(seqKey(seq), v); err != nil {
					return fmt.Errorf("put audit entry %d: %w", seq, err)
				}
			}
			applied++
		}
		if s.cfg.beforeCommit != nil {
			if err := s.cfg.beforeCommit(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("node: bolt store: save: commit %d requests: %w", len(batch), err)
		for _, req := range batch {
			req.done <- err
		}
		return
	}
	s.txns.Add(1)
	s.saves.Add(uint64(applied))
	if fn := s.observe.Load(); fn != nil {
		(*fn)(time.Since(start), len(batch))
	}
	for i, req := range batch {
		req.done <- own[i]
	}
}

// Audit returns up to limit audit entries with Seq >= from, in order. A
// limit below 1 returns no entries.
func (s *BoltStore) Audit(ctx context.Context, from uint64, limit int) ([]AuditEntry, error) {
	if s.closed.Load() {
		return nil, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("node: bolt store: audit: %w", err)
	}
	if limit < 1 {
		return nil, nil
	}
	var out []AuditEntry
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(boltBucketAudit).Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil && len(out) < limit; k, v = c.Next() {
			var e AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, e)
		}
		return nil
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return nil, ErrStoreClosed
	}
	if err != nil {
		return nil, fmt.Errorf("node: bolt store: audit: %w", err)
	}
	return out, nil
}

// SetCommitObserver makes the store call fn after each committed write
// transaction with its duration (applying the batch, writing and fsyncing)
// and the number of Saves it carried; nil stops it. fn runs on the
// committer goroutine, before the Saves are answered, so it must be quick.
func (s *BoltStore) SetCommitObserver(fn func(d time.Duration, batch int)) {
	if fn == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&fn)
}

// Stats returns counts of committed Saves and write transactions.
func (s *BoltStore) Stats() StoreStats {
	return StoreStats{Saves: s.saves.Load(), Transactions: s.txns.Load()}
}

// WriteTo writes a consistent copy of the store's file (every committed
// transaction up to now) to w while the store runs, for audits and
// forensics. Restoring such a copy in a node's directory makes the node
// forget the votes it cast since: it may then vote twice at one epoch and
// counts against f like a Byzantine node (docs/deploy.md).
func (s *BoltStore) WriteTo(w io.Writer) (n int64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, ErrStoreClosed
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("node: bolt store: copy: %w", err)
	}
	return n, nil
}

// Close stops the committer, waiting for a transaction in progress to
// finish, fails the Saves still queued with ErrStoreClosed and closes the
// file. Every later call returns ErrStoreClosed, except Close, which returns
// nil.
func (s *BoltStore) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		close(s.closing)
		<-s.done
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("node: bolt store: close: %w", err)
		}
	})
	if !first {
		return nil
	}
	return s.closeErr
}

// checkStoreFormat checks the store's format version, writing it into a
// new (or empty) store. A store with records or audit entries but no
// format was written by an earlier release, on bn256.
func checkStoreFormat(tx *bbolt.Tx) error {
	if meta := tx.Bucket(boltBucketMeta); meta != nil {
		got := meta.Get(boltKeyFormat)
		if string(got) == storeFormat {
			return nil
		}
		return fmt.Errorf("%w: format %q, this release reads %q: the store belongs to a cluster of another release; a node directory from a new DKG starts without one", ErrStoreVersion, got, storeFormat)
	}
	for _, name := range [][]byte{boltBucketRecords, boltBucketAudit} {
		if b := tx.Bucket(name); b != nil && firstKey(b) != nil {
			return fmt.Errorf("%w: a version 1 store, which an earlier release wrote with bn256 votes and tokens this release cannot read; its cluster must run a new DKG (palisade dkg), whose node directory starts without a vote store (keep this one aside for palisade audit)", ErrStoreVersion)
		}
	}
	meta, err := tx.CreateBucket(boltBucketMeta)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", boltBucketMeta, err)
	}
	if err := meta.Put(boltKeyFormat, []byte(storeFormat)); err != nil {
		return fmt.Errorf("write the store format: %w", err)
	}
	return nil
}

// firstKey returns the bucket's first key, or nil if it is empty.
func firstKey(b *bbolt.Bucket) []byte {
	k, _ := b.Cursor().First()
	return k
}

// seqKey is the audit bucket's key for seq: 8 bytes big-endian, so keys sort
// by sequence number.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// recordJSON checks that rec can be stored under its resource name and
// encodes it.
func recordJSON(rec Record) ([]byte, error) {
	if rec.Resource == "" {
		return nil, errors.New("record has an empty resource name")
	}
	if len(rec.Resource) > bbolt.MaxKeySize {
		return nil, fmt.Errorf("resource name is %d bytes, limit %d", len(rec.Resource), bbolt.MaxKeySize)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record %q: %w", rec.Resource, err)
	}
	return b, nil
}

// auditJSONs encodes entries with Seq first, first+1, … It does not modify
// entries.
func auditJSONs(entries []AuditEntry, first uint64) ([][]byte, error) {
	out := make([][]byte, len(entries))
	for i, e := range entries {
		e.Seq = first + uint64(i)
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode audit entry %d (%s %q): %w", i, e.Kind, e.Resource, err)
		}
		out[i] = b
	}
	return out, nil
}
