package verifier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SQLDialect names the SQL database behind an SQLStore.
type SQLDialect int

// The SQL dialects SQLStore speaks.
const (
	// SQLite is SQLite 3.24 or later (for upserts), for example through the
	// pure-Go driver modernc.org/sqlite.
	SQLite SQLDialect = iota + 1
	// PostgreSQL is PostgreSQL 9.5 or later (for upserts), for example
	// through the driver github.com/jackc/pgx/v5/stdlib.
	PostgreSQL
)

// String returns the dialect's name.
func (d SQLDialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case PostgreSQL:
		return "postgresql"
	default:
		return "SQLDialect(" + strconv.Itoa(int(d)) + ")"
	}
}

// Tables SQLStore keeps in the database. NewSQLStore creates them if they
// are absent; applications that share the database must write to them only
// through SQLStore.
const (
	// SQLBarrierTable maps a resource name (resource, bytes) to its barrier
	// (epoch_biased, a 64-bit signed integer holding the epoch minus 2^63,
	// so that SQL's signed comparison orders every uint64 epoch).
	SQLBarrierTable = "palisade_barriers"
	// SQLDataTable holds the keys written through Tx: (resource, name,
	// value), all bytes, keyed by (resource, name).
	SQLDataTable = "palisade_data"
)

// SQLiteBusyTimeoutMillis is how long a guarded transaction on SQLite waits
// for another connection's write lock before failing with SQLITE_BUSY.
const SQLiteBusyTimeoutMillis = 30_000

// SQLStore is a BarrierStore in a table of an SQL database the application
// already runs, so that a resource can raise the barrier and apply its own
// writes in one database transaction (see Update). Each Guard is one
// transaction:
//
//  1. a conditional upsert of the resource's barrier row ("insert epoch, or
//     set it if the stored barrier is not above epoch"). Its row count tells
//     admitted (1) from stale (0) without a read-then-write race, and it
//     locks the row until commit, so guarded writes on one resource are
//     serialised and two racing writers cannot both pass;
//  2. the write function, through Tx (and, for Update, the *sql.Tx);
//  3. commit, or rollback if any step failed: a failed write leaves barrier
//     and data unchanged.
//
// The caller's context can stop a guarded write up to its COMMIT, never
// during it: the COMMIT runs detached from the caller's context, bounded by
// CommitTimeout. If the COMMIT fails (connection lost, timeout) the write
// may or may not have committed, and Guard and Update return an error
// wrapping ErrOutcomeUnknown; every other error means nothing changed.
//
// On PostgreSQL the transaction runs at READ COMMITTED: the upsert waits for
// a concurrent holder of the row lock and then re-checks the newest
// committed barrier, and each later statement sees everything committed
// before the lock was granted. On SQLite the upsert is the transaction's
// first statement, so it takes the database's write lock before anything is
// read; each connection waits up to SQLiteBusyTimeoutMillis for that lock
// and runs with synchronous=FULL, and NewSQLStore switches the database to
// WAL journaling, so that a committed barrier survives a power failure.
//
// Every uint64 epoch is accepted: the barrier column holds epoch−2^63 (see
// SQLBarrierTable). A Guard at an epoch equal to the barrier still rewrites
// the barrier row, to take its lock.
//
// SQLStore is safe for concurrent use, and several processes may share one
// database. It does not own the *sql.DB: Close marks the store closed and
// leaves the database open. Use an SQLite file, not ":memory:", whose every
// pooled connection is a separate empty database.
type SQLStore struct {
	// CommitTimeout bounds a guarded transaction's COMMIT; zero means
	// DefaultCommitTimeout. Set it before the store is used.
	CommitTimeout time.Duration

	db     *sql.DB
	q      sqlQueries
	txOpts *sql.TxOptions

	mu     sync.RWMutex // held for reading by transactions, for writing by Close
	closed bool
}

var _ BarrierStore = (*SQLStore)(nil)

// sqlQueries are the statements of one dialect, with its placeholders.
type sqlQueries struct {
	dialect  SQLDialect
	schema   []string
	raise    string // resource, biased epoch: 1 row affected iff admitted
	barrier  string // resource -> biased epoch
	get      string // resource, name -> value
	put      string // resource, name, value
	del      string // resource, name
	pragmas  []string
	advisory string // serialises concurrent migrations (PostgreSQL)
}

func newSQLQueries(d SQLDialect) (sqlQueries, error) {
	var blob, integer, withoutRowID string
	switch d {
	case SQLite:
		blob, integer, withoutRowID = "BLOB", "INTEGER", " WITHOUT ROWID"
	case PostgreSQL:
		blob, integer = "BYTEA", "BIGINT"
	default:
		return sqlQueries{}, fmt.Errorf("verifier: unknown SQL dialect %v", d)
	}
	q := sqlQueries{
		dialect: d,
		schema: []string{
			"CREATE TABLE IF NOT EXISTS " + SQLBarrierTable + " (resource " + blob + " PRIMARY KEY, epoch_biased " + integer + " NOT NULL)" + withoutRowID,
			"CREATE TABLE IF NOT EXISTS " + SQLDataTable + " (resource " + blob + " NOT NULL, name " + blob + " NOT NULL, value " + blob + ", PRIMARY KEY (resource, name))" + withoutRowID,
		},
		raise: "INSERT INTO " + SQLBarrierTable + " (resource, epoch_biased) VALUES (?, ?) " +
			"ON CONFLICT (resource) DO UPDATE SET epoch_biased = excluded.epoch_biased " +
			"WHERE " + SQLBarrierTable + ".epoch_biased <= excluded.epoch_biased",
		barrier: "SELECT epoch_biased FROM " + SQLBarrierTable + " WHERE resource = ?",
		get:     "SELECT value FROM " + SQLDataTable + " WHERE resource = ? AND name = ?",
		put: "INSERT INTO " + SQLDataTable + " (resource, name, value) VALUES (?, ?, ?) " +
			"ON CONFLICT (resource, name) DO UPDATE SET value = excluded.value",
		del: "DELETE FROM " + SQLDataTable + " WHERE resource = ? AND name = ?",
	}
	switch d {
	case SQLite:
		q.pragmas = []string{
			"PRAGMA busy_timeout = " + strconv.Itoa(SQLiteBusyTimeoutMillis),
			"PRAGMA synchronous = FULL",
		}
	case PostgreSQL:
		// Any constant: "palisade" in ASCII.
		q.advisory = "SELECT pg_advisory_xact_lock(7021781826380555621)"
		for _, p := range []*string{&q.raise, &q.barrier, &q.get, &q.put, &q.del} {
			*p = dollarPlaceholders(*p)
		}
	}
	return q, nil
}

// dollarPlaceholders numbers the ? placeholders of query as $1, $2, ….
func dollarPlaceholders(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// biasEpoch maps a uint64 epoch to an int64 of the same order.
func biasEpoch(e uint64) int64 { return int64(e ^ 1<<63) }

// unbiasEpoch inverts biasEpoch.
func unbiasEpoch(v int64) uint64 { return uint64(v) ^ 1<<63 }

// NewSQLStore keeps barriers in db, an open database of the given dialect
// (the application chooses and imports the driver), creating SQLBarrierTable
// and SQLDataTable if they do not exist. On SQLite it also switches the
// database to WAL journaling. Running it concurrently from several processes
// is safe. The caller keeps ownership of db.
func NewSQLStore(ctx context.Context, db *sql.DB, dialect SQLDialect) (*SQLStore, error) {
	q, err := newSQLQueries(dialect)
	if err != nil {
		return nil, err
	}
	s := &SQLStore{db: db, q: q}
	if dialect == PostgreSQL {
		s.txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// migrate creates the tables in one transaction.
func (s *SQLStore) migrate(ctx context.Context) (err error) {
	conn, err := s.conn(ctx)
	if err != nil {
		return fmt.Errorf("verifier: create %s tables: %w", s.q.dialect, err)
	}
	defer conn.Close()
	if s.q.dialect == SQLite {
		// journal_mode answers with the mode now in force ("memory" for an
		// in-memory database, which cannot use WAL).
		var mode string
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
			return fmt.Errorf("verifier: set sqlite journal mode: %w", err)
		}
	}
	tx, err := conn.BeginTx(ctx, s.txOpts)
	if err != nil {
		return fmt.Errorf("verifier: create %s tables: %w", s.q.dialect, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	stmts := s.q.schema
	if s.q.advisory != "" {
		// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL.
		stmts = append([]string{s.q.advisory}, stmts...)
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("verifier: create %s tables: %w", s.q.dialect, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("verifier: create %s tables: commit: %w", s.q.dialect, err)
	}
	return nil
}

// conn takes a connection from the pool and applies the dialect's
// per-connection settings.
func (s *SQLStore) conn(ctx context.Context) (*sql.Conn, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range s.q.pragmas {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return conn, nil
}

// Barrier implements BarrierStore.
func (s *SQLStore) Barrier(ctx context.Context, resource string) (epoch uint64, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, ErrClosed
	}
	if resource == "" {
		return 0, false, nil
	}
	var v int64
	err = s.db.QueryRowContext(ctx, s.q.barrier, []byte(resource)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("verifier: read barrier of %q: %w", resource, err)
	}
	return unbiasEpoch(v), true, nil
}

// Guard implements BarrierStore.
func (s *SQLStore) Guard(ctx context.Context, adm Admission, write func(tx Tx) error) error {
	return s.Update(ctx, adm, func(_ *sql.Tx, tx Tx) error {
		if write == nil {
			return nil
		}
		return write(tx)
	})
}

// Update is Guard with native access: fn also receives the underlying
// database transaction, so the application's own statements commit
// atomically with the barrier (or roll back with it). If ctx ends before
// the COMMIT, the transaction rolls back and Update returns an error
// wrapping ctx.Err(); once the COMMIT has started, ctx no longer matters,
// and a COMMIT that fails or outlasts CommitTimeout returns an error
// wrapping ErrOutcomeUnknown (the write may have committed: the driver's
// error is wrapped too).
//
// fn must use stx with the ctx given to Update or one derived from it,
// must not touch SQLBarrierTable or SQLDataTable except through tx, and
// must not commit or roll back stx.
//
// Like Guard it takes an Admission, so the application's own statements,
// too, run only for a token that passed verification (Verifier.Admit).
func (s *SQLStore) Update(ctx context.Context, adm Admission, fn func(stx *sql.Tx, tx Tx) error) (err error) {
	if err := checkGuardArgs(ctx, adm); err != nil {
		return err
	}
	resource, epoch := adm.resource, adm.epoch
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	// database/sql binds a transaction to the context of BeginTx, and
	// drivers run COMMIT under it: a caller's deadline expiring during the
	// COMMIT would abandon a commit the server may already have applied.
	// So the transaction runs under txCtx, detached from ctx: the caller's
	// cancellation reaches it only until the commit starts, after which
	// only the commit timeout can end it.
	txCtx, cancelTx := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTx()
	stopCancel := context.AfterFunc(ctx, cancelTx)
	defer stopCancel()

	conn, err := s.conn(ctx)
	if err != nil {
		return fmt.Errorf("verifier: guard %q: %w", resource, err)
	}
	defer conn.Close()
	stx, err := conn.BeginTx(txCtx, s.txOpts)
	if err != nil {
		return fmt.Errorf("verifier: guard %q: begin: %w", resource, err)
	}
	committing := false
	defer func() {
		// Also on a panic in fn, which then propagates.
		if !committing {
			_ = stx.Rollback()
		}
	}()

	// S4: the conditional upsert admits epoch >= barrier and raises the
	// barrier in this transaction, locking the row until the commit.
	res, err := stx.ExecContext(ctx, s.q.raise, []byte(resource), biasEpoch(epoch))
	if err != nil {
		return fmt.Errorf("verifier: check barrier of %q at epoch %d: %w", resource, epoch, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("verifier: check barrier of %q at epoch %d: %w", resource, epoch, err)
	}
	if n != 1 {
		return s.stale(ctx, stx, resource, epoch, n)
	}

	tx := &sqlTx{ctx: ctx, stx: stx, q: &s.q, resource: []byte(resource)}
	err = func() error {
		defer func() { tx.done = true }()
		return fn(stx, tx)
	}()
	if err != nil {
		return wrapWriteErr(resource, epoch, err)
	}
	// The last moment the caller may still cancel: after stopCancel, ctx
	// no longer reaches txCtx.
	stopCancel()
	if err := ctx.Err(); err != nil {
		return cancelledBeforeCommit(resource, epoch, err)
	}
	timer := time.AfterFunc(s.commitTimeout(), cancelTx)
	defer timer.Stop()
	committing = true
	if err := stx.Commit(); err != nil {
		// The COMMIT may have reached the server and been applied before
		// the connection failed or the timeout cut it off.
		return fmt.Errorf("%w: commit guarded write to %q at epoch %d: %w", ErrOutcomeUnknown, resource, epoch, err)
	}
	return nil
}

// commitTimeout is CommitTimeout or its default.
func (s *SQLStore) commitTimeout() time.Duration {
	if s.CommitTimeout > 0 {
		return s.CommitTimeout
	}
	return DefaultCommitTimeout
}

// stale builds the StaleError of a refused upsert (n rows affected), reading
// the barrier that refused it.
func (s *SQLStore) stale(ctx context.Context, stx *sql.Tx, resource string, epoch uint64, n int64) error {
	var v int64
	err := stx.QueryRowContext(ctx, s.q.barrier, []byte(resource)).Scan(&v)
	if err != nil {
		return fmt.Errorf("verifier: read barrier of %q after refusing epoch %d: %w", resource, epoch, err)
	}
	barrier := unbiasEpoch(v)
	if n != 0 || barrier <= epoch {
		// Fail closed: the table was changed behind the store's back.
		return fmt.Errorf("verifier: inconsistent barrier of %q: upsert of epoch %d affected %d rows, barrier %d", resource, epoch, n, barrier)
	}
	return &StaleError{Resource: resource, Epoch: epoch, Barrier: barrier}
}

// DB returns the underlying database.
func (s *SQLStore) DB() *sql.DB { return s.db }

// Dialect returns the store's SQL dialect.
func (s *SQLStore) Dialect() SQLDialect { return s.q.dialect }

// Close implements BarrierStore. It waits for running transactions and
// leaves the database open.
func (s *SQLStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// sqlTx is a resource's rows of SQLDataTable inside a guarded transaction.
type sqlTx struct {
	ctx      context.Context
	stx      *sql.Tx
	q        *sqlQueries
	resource []byte
	done     bool
}

func (t *sqlTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	if key == "" {
		return errEmptyKey
	}
	return nil
}

func (t *sqlTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	var v []byte
	err := t.stx.QueryRowContext(t.ctx, t.q.get, t.resource, []byte(key)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("verifier: get %q: %w", key, err)
	}
	// A NULL (SQLite may store an empty blob so) is an empty value; Scan
	// already copied the bytes.
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

func (t *sqlTx) Put(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	if _, err := t.stx.ExecContext(t.ctx, t.q.put, t.resource, []byte(key), append([]byte{}, value...)); err != nil {
		return fmt.Errorf("verifier: put %q: %w", key, err)
	}
	return nil
}

func (t *sqlTx) Delete(key string) error {
	if err := t.check(key); err != nil {
		return err
	}
	if _, err := t.stx.ExecContext(t.ctx, t.q.del, t.resource, []byte(key)); err != nil {
		return fmt.Errorf("verifier: delete %q: %w", key, err)
	}
	return nil
}
