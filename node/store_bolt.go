package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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
	// DefaultBoltCheckpointBytes is how much of the write-ahead log the
	// store fills before it moves the logged Saves into the bbolt file.
	DefaultBoltCheckpointBytes = walPrealloc / 2
	// DefaultBoltCheckpointIdle is how long the store waits without a Save
	// before it moves the logged Saves into the bbolt file.
	DefaultBoltCheckpointIdle = 100 * time.Millisecond
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
// ErrStoreVersion. Version 3 adds the write-ahead log (store_wal.go): a
// crash can leave acknowledged votes in the log only, which a release
// reading version 2 would not replay, so such a release must refuse the
// store. A version 2 store (same curve, no log) is upgraded to 3 when it
// opens.
const StoreFormatVersion = 3

// upgradableFormats are the formats of earlier versions this release
// upgrades in place: the same records, without a log.
var upgradableFormats = []string{fmt.Sprintf("2 %s", crypto.CurveName)}

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
// AuditEntry; sequence numbers continue the bucket's sequence, and an
// entry is logged in the same frame as its record and moved into bbolt in
// the same checkpoint (which advances the sequence), so they have no gaps.
// The meta bucket also holds the store's random ID and the number of the
// last log frame the file has (store_wal.go).
//
// Saves use group commit: one goroutine owned by the store takes the first
// waiting request, drains every other request already queued (up to the
// batch cap), writes them all in arrival order as one frame of the store's
// write-ahead log (the file's path with "-wal", store_wal.go), fdatasyncs
// the log once and answers each request with that write's result. A lone
// Save therefore pays one fsync and no added delay; under load, the
// requests that arrive during an fsync share the next one. The logged
// Saves are moved into the bbolt file in one transaction (a checkpoint)
// when the log has grown by DefaultBoltCheckpointBytes, after
// DefaultBoltCheckpointIdle without a Save, before WriteTo and at Close;
// OpenBoltStore replays what a crash left in the log. Until then Load and
// Audit read them from memory.
type BoltStore struct {
	db   *bbolt.DB
	cfg  boltConfig
	reqs chan *boltSaveReq

	// The log; owned by the committer goroutine once the store is open.
	wal      *os.File
	walPath  string
	walOff   int64    // where the next frame goes
	walErr   error    // a failed write or sync of the log: the log is no longer trusted
	lsn      uint64   // number of the last frame written
	id       [16]byte // the store's ID, in every frame
	nextSeq  uint64   // the next audit sequence number
	frameBuf []byte

	// pending holds what the log has and the bbolt file not yet: records
	// by resource (JSON) and audit entries in sequence order. The
	// committer writes it; Load and Audit read it.
	pendingMu    sync.RWMutex
	pendingRecs  map[string][]byte
	pendingAudit []walAudit

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

	// observe, if set, is told each committed frame's duration and
	// batch size (SetCommitObserver).
	observe atomic.Pointer[func(time.Duration, int)]
}

var _ VoteStore = (*BoltStore)(nil)

// StoreStats counts the work of a BoltStore since it was opened.
type StoreStats struct {
	// Saves is the number of Save calls whose write was committed.
	Saves uint64
	// Transactions is the number of log frames (and so of fdatasyncs)
	// that committed them. Saves/Transactions is the mean batch size.
	Transactions uint64
}

// BoltOption configures OpenBoltStore.
type BoltOption func(*boltConfig)

type boltConfig struct {
	maxBatch        int
	openTimeout     time.Duration
	checkpointBytes int64
	checkpointIdle  time.Duration
	// beforeCommit, if set, runs for every batch after it is encoded and
	// before its frame is written to the log; an error fails the whole
	// batch, of which nothing is written. Tests only.
	beforeCommit func() error
}

// WithBoltMaxBatch sets the most Save requests that share one log frame
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
	// checkpoint asks the committer to move the logged Saves into the
	// bbolt file (WriteTo); such a request carries no Save.
	checkpoint bool
}

// OpenBoltStore opens (or creates, with mode 0600) the bbolt file at path
// and starts the store's committer goroutine, which Close stops.
func OpenBoltStore(path string, opts ...BoltOption) (*BoltStore, error) {
	cfg := boltConfig{maxBatch: DefaultBoltMaxBatch, openTimeout: DefaultBoltOpenTimeout,
		checkpointBytes: DefaultBoltCheckpointBytes, checkpointIdle: DefaultBoltCheckpointIdle}
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
	s := &BoltStore{
		db:          db,
		cfg:         cfg,
		reqs:        make(chan *boltSaveReq, cfg.maxBatch),
		walPath:     path + walSuffix,
		pendingRecs: map[string][]byte{},
		closing:     make(chan struct{}),
		done:        make(chan struct{}),
	}
	if err := s.open(); err != nil {
		if s.wal != nil {
			_ = s.wal.Close()
		}
		_ = db.Close()
		return nil, fmt.Errorf("node: bolt store: open %s: %w", path, err)
	}
	go s.commitLoop()
	return s, nil
}

// open checks the format, creates what a new store lacks (buckets, its
// ID, the log) and replays the log into the bbolt file.
func (s *BoltStore) open() error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if err := checkStoreFormat(tx); err != nil {
			return err
		}
		for _, name := range [][]byte{boltBucketRecords, boltBucketAudit} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(boltBucketMeta)
		if id := meta.Get(boltKeyStoreID); len(id) == len(s.id) {
			s.id = [16]byte(id)
			s.lsn = walLSN(meta)
			return nil
		}
		id, err := newStoreID()
		if err != nil {
			return fmt.Errorf("store ID: %w", err)
		}
		s.id = id
		return meta.Put(boltKeyStoreID, id[:])
	})
	if err != nil {
		return err
	}
	if s.wal, err = openWAL(s.walPath); err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	fi, err := s.wal.Stat()
	if err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	frames, last, err := readFrames(s.wal, fi.Size(), s.lsn+1, s.id)
	if err != nil {
		return fmt.Errorf("write-ahead log %s: %w", s.walPath, err)
	}
	for _, saves := range frames {
		s.addPending(saves)
	}
	s.lsn = last
	err = s.db.Update(func(tx *bbolt.Tx) error {
		if err := s.moveInto(tx); err != nil {
			return err
		}
		s.nextSeq = tx.Bucket(boltBucketAudit).Sequence() + 1
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay the write-ahead log: %w", err)
	}
	s.clearPending()
	return nil
}

// walLSN is the number of the last log frame the bbolt file has.
func walLSN(meta *bbolt.Bucket) uint64 {
	if v := meta.Get(boltKeyWALLSN); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// addPending adds a written frame's Saves to pending.
func (s *BoltStore) addPending(saves []walSave) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	for _, sv := range saves {
		s.pendingRecs[string(sv.key)] = sv.value
		s.pendingAudit = append(s.pendingAudit, sv.audit...)
	}
}

func (s *BoltStore) clearPending() {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	clear(s.pendingRecs)
	s.pendingAudit = nil
}

// moveInto writes pending into tx, with the audit counter and the number
// of the last frame written (s.lsn): once tx commits, the log's frames are
// no longer needed.
func (s *BoltStore) moveInto(tx *bbolt.Tx) error {
	s.pendingMu.RLock()
	defer s.pendingMu.RUnlock()
	records, audit := tx.Bucket(boltBucketRecords), tx.Bucket(boltBucketAudit)
	for k, v := range s.pendingRecs {
		if err := records.Put([]byte(k), v); err != nil {
			return fmt.Errorf("put record %q: %w", k, err)
		}
	}
	for _, a := range s.pendingAudit {
		if err := audit.Put(seqKey(a.seq), a.value); err != nil {
			return fmt.Errorf("put audit entry %d: %w", a.seq, err)
		}
	}
	if n := len(s.pendingAudit); n > 0 && s.pendingAudit[n-1].seq > audit.Sequence() {
		if err := audit.SetSequence(s.pendingAudit[n-1].seq); err != nil {
			return fmt.Errorf("audit sequence: %w", err)
		}
	}
	return tx.Bucket(boltBucketMeta).Put(boltKeyWALLSN, binary.BigEndian.AppendUint64(nil, s.lsn))
}

// flush has the committer move the logged Saves into the bbolt file, for
// the readers that read that file alone (WriteTo, ScanRecords,
// AuditSequence: operators' requests, not the votes' path).
func (s *BoltStore) flush(ctx context.Context) error {
	req := &boltSaveReq{checkpoint: true, done: make(chan error, 1)}
	if err := s.enqueue(ctx, req); err != nil {
		return err
	}
	return <-req.done
}

// checkpoint moves the logged Saves into the bbolt file (one transaction,
// fsynced by bbolt), after which the log is written again from its start.
// The committer calls it.
func (s *BoltStore) checkpoint() error {
	if s.walOff == 0 {
		return nil
	}
	if err := s.db.Update(s.moveInto); err != nil {
		return fmt.Errorf("node: bolt store: checkpoint: %w", err)
	}
	s.clearPending()
	s.walOff = 0
	return nil
}

// Load returns the record of resource; ok is false if there is none.
func (s *BoltStore) Load(ctx context.Context, resource string) (rec Record, ok bool, err error) {
	if s.closed.Load() {
		return Record{}, false, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("node: bolt store: load: %w", err)
	}
	// A checkpoint commits to bbolt before it clears pending, so a record
	// is always in one or the other.
	s.pendingMu.RLock()
	v, logged := s.pendingRecs[resource]
	s.pendingMu.RUnlock()
	if logged {
		if err := json.Unmarshal(v, &rec); err != nil {
			return Record{}, false, fmt.Errorf("node: bolt store: load %q: %w", resource, err)
		}
		return rec, true, nil
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
// Seq, in one log frame that it may share with concurrent Saves. When it
// returns nil the frame has been fdatasynced.
//
// ctx is respected only while the request waits to enter the committer's
// queue (which happens at once unless the queue is full). Once queued, Save
// waits for the frame's result whatever ctx does: a caller must never
// believe a write failed that in fact landed, since the node would then
// forget a vote it is bound by. An error from a failed frame is given
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

// commitLoop is the committer goroutine: it owns the log and every write transaction.
func (s *BoltStore) commitLoop() {
	defer close(s.done)
	batch := make([]*boltSaveReq, 0, s.cfg.maxBatch)
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	stop := func() {
		s.failQueued()
		if err := s.checkpoint(); err != nil {
			log.Errorw("vote store: the last checkpoint failed; the write-ahead log keeps the votes and the next open replays it", "err", err)
		}
	}
	for {
		// Close wins over queued work: requests still queued when Close
		// starts fail with ErrStoreClosed rather than race it.
		select {
		case <-s.closing:
			stop()
			return
		default:
		}
		if s.walOff > 0 {
			idle.Reset(s.cfg.checkpointIdle)
		}
		select {
		case <-s.closing:
			stop()
			return
		case <-idle.C:
			if err := s.checkpoint(); err != nil {
				log.Warnw("vote store: checkpoint failed; will retry", "err", err)
			}
			continue
		case req := <-s.reqs:
			batch = append(batch[:0], req)
		}
		idle.Stop()
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
		if s.walOff >= s.cfg.checkpointBytes {
			if err := s.checkpoint(); err != nil {
				log.Warnw("vote store: checkpoint failed; will retry", "err", err)
			}
		}
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

// commit writes batch in arrival order as one log frame, fdatasyncs the
// log and answers every request. Checkpoint requests in the batch are
// answered after the frame, by one checkpoint.
func (s *BoltStore) commit(batch []*boltSaveReq) {
	start := time.Now()
	own := make([]error, len(batch)) // per-request encoding errors
	saves := make([]walSave, 0, len(batch))
	seq := s.nextSeq
	checkpoint := false
	for i, req := range batch {
		if req.checkpoint {
			checkpoint = true
			continue
		}
		// Encode this request's entries first, so that a bad entry fails
		// its own request only.
		values, err := auditJSONs(req.audit, seq)
		if err != nil {
			own[i] = fmt.Errorf("node: bolt store: save: %w", err)
			continue
		}
		sv := walSave{key: req.key, value: req.value, audit: make([]walAudit, len(values))}
		for k, v := range values {
			sv.audit[k] = walAudit{seq: seq, value: v}
			seq++
		}
		saves = append(saves, sv)
	}
	var err error
	if len(saves) > 0 {
		err = s.writeFrame(saves)
		if err == nil {
			s.nextSeq = seq
			s.addPending(saves)
			s.txns.Add(1)
			s.saves.Add(uint64(len(saves)))
			if fn := s.observe.Load(); fn != nil {
				(*fn)(time.Since(start), len(saves))
			}
		} else {
			err = fmt.Errorf("node: bolt store: save: commit %d requests: %w", len(saves), err)
		}
	}
	var cerr error
	if checkpoint {
		cerr = s.checkpoint()
	}
	for i, req := range batch {
		switch {
		case req.checkpoint:
			req.done <- cerr
		case own[i] != nil:
			req.done <- own[i]
		default:
			req.done <- err
		}
	}
}

// writeFrame writes saves as the next frame of the log and fdatasyncs it.
// A failed write or sync leaves the log untrusted (walErr): what reached
// the disk is unknown, and Linux may drop the pages of a failed sync, so
// every later Save fails until the store is reopened (and replays).
func (s *BoltStore) writeFrame(saves []walSave) error {
	if s.walErr != nil {
		return s.walErr
	}
	if s.cfg.beforeCommit != nil {
		if err := s.cfg.beforeCommit(); err != nil {
			return err
		}
	}
	s.frameBuf = appendFrame(s.frameBuf[:0], s.lsn+1, s.id, saves)
	if _, err := s.wal.WriteAt(s.frameBuf, s.walOff); err != nil {
		s.walErr = fmt.Errorf("write-ahead log: write: %w", err)
		return s.walErr
	}
	if err := fdatasync(s.wal); err != nil {
		s.walErr = fmt.Errorf("write-ahead log: sync: %w", err)
		return s.walErr
	}
	s.walOff += int64(len(s.frameBuf))
	s.lsn++
	if cap(s.frameBuf) > walPrealloc {
		s.frameBuf = nil // do not keep an outsized buffer
	}
	return nil
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
	// The logged entries are taken first: a checkpoint may move them into
	// bbolt meanwhile, and then they are read there (and skipped here).
	s.pendingMu.RLock()
	logged := s.pendingAudit[:len(s.pendingAudit):len(s.pendingAudit)]
	s.pendingMu.RUnlock()
	var out []AuditEntry
	next := from
	add := func(seq uint64, v []byte) error {
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("entry %d: %w", seq, err)
		}
		out = append(out, e)
		next = seq + 1
		return nil
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(boltBucketAudit).Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil && len(out) < limit; k, v = c.Next() {
			if err := add(binary.BigEndian.Uint64(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	for _, a := range logged {
		if err != nil || len(out) >= limit {
			break
		}
		if a.seq >= next {
			err = add(a.seq, a.value)
		}
	}
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return nil, ErrStoreClosed
	}
	if err != nil {
		return nil, fmt.Errorf("node: bolt store: audit: %w", err)
	}
	return out, nil
}

// SetCommitObserver makes the store call fn after each committed log frame
// with its duration (encoding the batch, writing and fdatasyncing)
// and the number of Saves it carried; nil stops it. fn runs on the
// committer goroutine, before the Saves are answered, so it must be quick.
func (s *BoltStore) SetCommitObserver(fn func(d time.Duration, batch int)) {
	if fn == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&fn)
}

// Stats returns counts of committed Saves and log frames.
func (s *BoltStore) Stats() StoreStats {
	return StoreStats{Saves: s.saves.Load(), Transactions: s.txns.Load()}
}

// WriteTo writes a consistent copy of the store's file (every committed
// transaction up to now) to w while the store runs, for audits and
// forensics. Restoring such a copy in a node's directory makes the node
// forget the votes it cast since: it may then vote twice at one epoch and
// counts against f like a Byzantine node (docs/deploy.md).
func (s *BoltStore) WriteTo(w io.Writer) (n int64, err error) {
	// The logged Saves go into the bbolt file first: the copy is that
	// file alone.
	if err := s.flush(context.Background()); err != nil {
		return 0, err
	}
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

// Close stops the committer, waiting for a write in progress to finish,
// fails the Saves still queued with ErrStoreClosed, moves the logged Saves
// into the bbolt file (if that fails, the next open replays the log) and
// closes the files. Every later call returns ErrStoreClosed, except Close, which returns
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
		if err := errors.Join(s.wal.Close(), s.db.Close()); err != nil {
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
		if slices.Contains(upgradableFormats, string(got)) {
			if err := meta.Put(boltKeyFormat, []byte(storeFormat)); err != nil {
				return fmt.Errorf("upgrade the store format from %q: %w", got, err)
			}
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
