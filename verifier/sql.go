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

	"github.com/palisade-dev/palisade/protocol"
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
// are absent, and migrates the tables of an earlier schema version;
// applications that share the database must write to them only through
// SQLStore.
const (
	// SQLBarrierTable maps a resource name (resource, bytes) to its barrier
	// (epoch_biased, a 64-bit signed integer holding the epoch minus 2^63,
	// so that SQL's signed comparison orders every uint64 epoch) and to
	// the holder admitted at it: holder (its text form, protocol.Holder's
	// String), token (the token's binary form) and holder_epoch_biased,
	// the barrier they were admitted at. The holder is known only while
	// holder_epoch_biased equals epoch_biased: rows of schema version 1,
	// and rows whose barrier a process of that version raised since, have
	// none, and take the holder of the next token admitted at their epoch.
	SQLBarrierTable = "palisade_barriers"
	// SQLDataTable holds the keys written through Tx: (resource, name,
	// value), all bytes, keyed by (resource, name).
	SQLDataTable = "palisade_data"
	// SQLForkTable holds the fork records: (resource, epoch_biased, fork),
	// the fork's binary form (protocol.Fork.MarshalBinary), keyed by
	// (resource, epoch_biased).
	SQLForkTable = "palisade_forks"
	// SQLSchemaTable holds the schema version (one row, id 1) that
	// NewSQLStore migrates from. Databases of schema version 1 have no
	// such table.
	SQLSchemaTable = "palisade_schema"
)

// SQLSchemaVersion is the version of the tables NewSQLStore writes.
// Version 1 kept the barrier's epoch only; version 2 added the holder and
// token admitted at it, and the fork records. NewSQLStore refuses a
// database of a later version.
const SQLSchemaVersion = 2

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
// the barrier row, to take its lock. The upsert admits an equal epoch only
// for the holder recorded with the barrier (or when none is recorded), so
// an admitted write costs one statement; a refused one reads the row to
// tell a stale epoch from a fork, and keeps the fork record in the same
// transaction.
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

var (
	_ BarrierStore = (*SQLStore)(nil)
	_ ForkLister   = (*SQLStore)(nil)
)

// sqlQueries are the statements of one dialect, with its placeholders.
type sqlQueries struct {
	dialect SQLDialect
	// migrations[v] takes the schema from version v to v+1 (version 0 is
	// an empty database).
	migrations [][]string
	schemaTable,
	version, // -> schema version
	setVersion string // version
	raise     string // resource, biased epoch, holder epoch, holder, token: 1 row affected iff admitted
	barrier   string // resource -> biased epoch
	record    string // resource -> biased epoch, holder epoch, token
	setHolder string // holder epoch, holder, token, resource, biased epoch
	countFork string // resource -> fork records
	keepFork  string // resource, biased epoch, fork: 1 row affected iff kept
	forks     string // resource -> forks by epoch
	get       string // resource, name -> value
	put       string // resource, name, value
	del       string // resource, name
	pragmas   []string
	advisory  string // serialises concurrent migrations (PostgreSQL)
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
	const b = SQLBarrierTable
	q := sqlQueries{
		dialect: d,
		migrations: [][]string{
			// Version 1: the barrier's epoch and the data.
			{
				"CREATE TABLE IF NOT EXISTS " + b + " (resource " + blob + " PRIMARY KEY, epoch_biased " + integer + " NOT NULL)" + withoutRowID,
				"CREATE TABLE IF NOT EXISTS " + SQLDataTable + " (resource " + blob + " NOT NULL, name " + blob + " NOT NULL, value " + blob + ", PRIMARY KEY (resource, name))" + withoutRowID,
			},
			// Version 2: the holder and token admitted at the barrier, and
			// the fork records. (SQLite adds one column per statement.)
			{
				"ALTER TABLE " + b + " ADD COLUMN holder_epoch_biased " + integer,
				"ALTER TABLE " + b + " ADD COLUMN holder " + blob,
				"ALTER TABLE " + b + " ADD COLUMN token " + blob,
				"CREATE TABLE " + SQLForkTable + " (resource " + blob + " NOT NULL, epoch_biased " + integer + " NOT NULL, fork " + blob + " NOT NULL, PRIMARY KEY (resource, epoch_biased))" + withoutRowID,
			},
		},
		schemaTable: "CREATE TABLE IF NOT EXISTS " + SQLSchemaTable + " (id " + integer + " PRIMARY KEY, version " + integer + " NOT NULL)",
		version:     "SELECT version FROM " + SQLSchemaTable + " WHERE id = 1",
		setVersion: "INSERT INTO " + SQLSchemaTable + " (id, version) VALUES (1, ?) " +
			"ON CONFLICT (id) DO UPDATE SET version = excluded.version",
		// Admitted: above the barrier, or at it for the holder recorded
		// there, or when none is recorded at this epoch (then this
		// holder is recorded), or for an Admission without a token
		// (which records nothing).
		raise: "INSERT INTO " + b + " (resource, epoch_biased, holder_epoch_biased, holder, token) VALUES (?, ?, ?, ?, ?) " +
			"ON CONFLICT (resource) DO UPDATE SET epoch_biased = excluded.epoch_biased, " +
			"holder_epoch_biased = COALESCE(excluded.holder_epoch_biased, " + b + ".holder_epoch_biased), " +
			"holder = COALESCE(excluded.holder, " + b + ".holder), " +
			"token = COALESCE(excluded.token, " + b + ".token) " +
			"WHERE " + b + ".epoch_biased < excluded.epoch_biased OR (" + b + ".epoch_biased = excluded.epoch_biased AND (" +
			"excluded.holder IS NULL OR " + b + ".holder IS NULL OR " + b + ".holder_epoch_biased IS NULL OR " +
			b + ".holder_epoch_biased <> " + b + ".epoch_biased OR " + b + ".holder = excluded.holder))",
		barrier:   "SELECT epoch_biased FROM " + b + " WHERE resource = ?",
		record:    "SELECT epoch_biased, holder_epoch_biased, token FROM " + b + " WHERE resource = ?",
		setHolder: "UPDATE " + b + " SET holder_epoch_biased = ?, holder = ?, token = ? WHERE resource = ? AND epoch_biased = ?",
		countFork: "SELECT COUNT(*) FROM " + SQLForkTable + " WHERE resource = ?",
		keepFork: "INSERT INTO " + SQLForkTable + " (resource, epoch_biased, fork) VALUES (?, ?, ?) " +
			"ON CONFLICT (resource, epoch_biased) DO NOTHING",
		forks: "SELECT fork FROM " + SQLForkTable + " WHERE resource = ? ORDER BY epoch_biased",
		get:   "SELECT value FROM " + SQLDataTable + " WHERE resource = ? AND name = ?",
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
		for _, p := range []*string{&q.setVersion, &q.raise, &q.barrier, &q.record, &q.setHolder, &q.countFork, &q.keepFork, &q.forks, &q.get, &q.put, &q.del} {
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
// (the application chooses and imports the driver), creating its tables
// (SQLBarrierTable, SQLDataTable, SQLForkTable, SQLSchemaTable) if they
// do not exist and migrating the tables of an earlier schema version
// (SQLSchemaVersion) in one transaction: a database written by an earlier
// release opens, its barriers with no holder known. It refuses a database
// of a later schema version. On SQLite it also switches the database to
// WAL journaling. Running it concurrently from several processes
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

// sqlRunner is what migrate runs statements on: a *sql.Tx, or a *sql.Conn
// inside a transaction it began itself.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// migrate creates the tables, or brings them to SQLSchemaVersion, in one
// transaction that holds the database's write lock (SQLite) or an
// advisory lock (PostgreSQL) from its start, so that concurrent
// migrations run one after the other and each reads the version the
// previous one left.
func (s *SQLStore) migrate(ctx context.Context) (err error) {
	fail := func(err error) error {
		return fmt.Errorf("verifier: create or migrate %s tables: %w", s.q.dialect, err)
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	var (
		run      sqlRunner
		commit   func() error
		rollback func()
	)
	switch s.q.dialect {
	case SQLite:
		// journal_mode answers with the mode now in force ("memory" for an
		// in-memory database, which cannot use WAL).
		if err := setSQLiteWAL(ctx, conn); err != nil {
			return fmt.Errorf("verifier: set sqlite journal mode: %w", err)
		}
		// BEGIN IMMEDIATE takes the write lock before the version is read
		// (database/sql cannot ask for it); busy_timeout bounds the wait.
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return fail(err)
		}
		run = conn
		commit = func() error { _, err := conn.ExecContext(ctx, "COMMIT"); return err }
		rollback = func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") }
	default:
		tx, err := conn.BeginTx(ctx, s.txOpts)
		if err != nil {
			return fail(err)
		}
		// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL.
		if _, err := tx.ExecContext(ctx, s.q.advisory); err != nil {
			_ = tx.Rollback()
			return fail(err)
		}
		run, commit, rollback = tx, tx.Commit, func() { _ = tx.Rollback() }
	}
	committed := false
	defer func() {
		if !committed {
			rollback()
		}
	}()
	if _, err := run.ExecContext(ctx, s.q.schemaTable); err != nil {
		return fail(err)
	}
	// No version row: an empty database, or one of schema version 1,
	// whose tables the version-1 step creates only if they are absent.
	var version int64
	err = run.QueryRowContext(ctx, s.q.version).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		version = 0
	case err != nil:
		return fail(fmt.Errorf("read schema version: %w", err))
	case version < 1 || version > SQLSchemaVersion:
		return fail(fmt.Errorf("schema version %d in %s: this release knows versions 1 to %d (a later release wrote it?)", version, SQLSchemaTable, SQLSchemaVersion))
	}
	for v := version; v < SQLSchemaVersion; v++ {
		for _, stmt := range s.q.migrations[v] {
			if _, err := run.ExecContext(ctx, stmt); err != nil {
				return fail(fmt.Errorf("schema version %d to %d: %w", v, v+1, err))
			}
		}
	}
	if version != SQLSchemaVersion {
		if _, err := run.ExecContext(ctx, s.q.setVersion, SQLSchemaVersion); err != nil {
			return fail(fmt.Errorf("set schema version: %w", err))
		}
	}
	if err := commit(); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	committed = true
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

	// S4: the conditional upsert admits epoch >= barrier (at the barrier,
	// only its holder) and raises the barrier in this transaction, locking
	// the row until the commit.
	holderEpoch, holder, token, err := sqlHolderArgs(adm)
	if err != nil {
		return err
	}
	res, err := stx.ExecContext(ctx, s.q.raise, []byte(resource), biasEpoch(epoch), holderEpoch, holder, token)
	if err != nil {
		return fmt.Errorf("verifier: check barrier of %q at epoch %d: %w", resource, epoch, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("verifier: check barrier of %q at epoch %d: %w", resource, epoch, err)
	}
	if n != 1 {
		err := s.refused(ctx, stx, adm, n)
		if fe, isFork := asFork(err); isFork && fe.Kept {
			// The refused write never runs; only the fork record
			// commits, detached from ctx: it is the store's own record.
			stopCancel()
			timer := time.AfterFunc(s.commitTimeout(), cancelTx)
			defer timer.Stop()
			committing = true
			if cerr := stx.Commit(); cerr != nil {
				fe.Kept = false
				return errors.Join(fe, fmt.Errorf("verifier: keep fork record of %q at epoch %d: %w", resource, epoch, cerr))
			}
			return fe
		}
		if err != nil {
			return err
		}
		// Admitted after all: the barrier held a token of another cluster
		// at this epoch, now replaced by this one.
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

// sqlHolderArgs are the holder_epoch_biased, holder and token values of
// the barrier row adm writes: NULL for an Admission without a token, whose
// holder the store does not know.
func sqlHolderArgs(adm Admission) (holderEpoch any, holder, token []byte, err error) {
	if adm.token.Holder.IsZero() {
		return nil, nil, nil, nil
	}
	token, err = adm.token.MarshalBinary()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("verifier: barrier record of %q: %w", adm.resource, err)
	}
	return biasEpoch(adm.epoch), []byte(adm.token.Holder.String()), token, nil
}

// refused explains an upsert that affected n rows, not one: it reads the
// barrier row and returns the *StaleError, or the *ForkError after
// keeping the fork record in stx (Kept true if stx must commit), or nil
// after replacing a token of another cluster at the barrier epoch with
// adm's (the write may run). Anything else means the table was changed
// behind the store's back, and fails closed.
func (s *SQLStore) refused(ctx context.Context, stx *sql.Tx, adm Admission, n int64) error {
	resource, epoch := adm.resource, adm.epoch
	var (
		barrier     int64
		holderEpoch sql.NullInt64
		token       []byte
	)
	err := stx.QueryRowContext(ctx, s.q.record, []byte(resource)).Scan(&barrier, &holderEpoch, &token)
	if err != nil {
		return fmt.Errorf("verifier: read barrier of %q after refusing epoch %d: %w", resource, epoch, err)
	}
	rec := barrierRecord{epoch: unbiasEpoch(barrier)}
	if holderEpoch.Valid && holderEpoch.Int64 == barrier && token != nil {
		if rec.token, err = parseRecordToken(resource, rec.epoch, token); err != nil {
			return err
		}
	}
	v, err := judge(adm, rec, true)
	if fe, isFork := asFork(err); isFork && n == 0 {
		kept, kerr := s.keepFork(ctx, stx, resource, fe.Fork)
		if kerr != nil {
			return errors.Join(fe, kerr)
		}
		fe.Kept = kept
		return fe
	}
	var stale *StaleError
	switch {
	case errors.As(err, &stale) && n == 0:
		return stale
	case err == nil && v == replaceRecord && n == 0:
		holderEpoch, holder, token, err := sqlHolderArgs(adm)
		if err != nil {
			return err
		}
		if _, err := stx.ExecContext(ctx, s.q.setHolder, holderEpoch, holder, token, []byte(resource), biasEpoch(epoch)); err != nil {
			return fmt.Errorf("verifier: record holder of %q at epoch %d: %w", resource, epoch, err)
		}
		return nil
	}
	// Fail closed: the table was changed behind the store's back.
	return fmt.Errorf("verifier: inconsistent barrier of %q: upsert of epoch %d affected %d rows, barrier %d", resource, epoch, n, rec.epoch)
}

// keepFork inserts f as the fork record of its epoch in stx unless one is
// kept there already or the resource holds MaxForksPerResource, and
// reports whether it did. The barrier row's lock serialises it with every
// other guarded write on the resource.
func (s *SQLStore) keepFork(ctx context.Context, stx *sql.Tx, resource string, f protocol.Fork) (bool, error) {
	var n int64
	if err := stx.QueryRowContext(ctx, s.q.countFork, []byte(resource)).Scan(&n); err != nil {
		return false, fmt.Errorf("verifier: count fork records of %q: %w", resource, err)
	}
	if n >= MaxForksPerResource {
		return false, nil
	}
	b, err := f.MarshalBinary()
	if err != nil {
		return false, fmt.Errorf("verifier: fork record of %q: %w", resource, err)
	}
	res, err := stx.ExecContext(ctx, s.q.keepFork, []byte(resource), biasEpoch(f.Epoch()), b)
	if err != nil {
		return false, fmt.Errorf("verifier: keep fork record of %q at epoch %d: %w", resource, f.Epoch(), err)
	}
	kept, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("verifier: keep fork record of %q at epoch %d: %w", resource, f.Epoch(), err)
	}
	return kept == 1, nil
}

// Forks implements ForkLister.
func (s *SQLStore) Forks(ctx context.Context, resource string) ([]protocol.Fork, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, s.q.forks, []byte(resource))
	if err != nil {
		return nil, fmt.Errorf("verifier: read fork records of %q: %w", resource, err)
	}
	defer rows.Close()
	var out []protocol.Fork
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("verifier: read fork records of %q: %w", resource, err)
		}
		f, err := protocol.ParseFork(b)
		if err != nil {
			return nil, fmt.Errorf("verifier: fork record of %q: %w", resource, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("verifier: read fork records of %q: %w", resource, err)
	}
	return out, nil
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

// setSQLiteWAL switches a SQLite database to write-ahead logging (the
// answer, the mode now in force, is "memory" for an in-memory database,
// which cannot use WAL). Changing the journal mode needs the database to
// itself, and SQLite answers SQLITE_BUSY at once, without waiting
// busy_timeout, while another connection holds it: as when several
// processes open a new database together. So it tries again every 10 ms
// for up to SQLiteBusyTimeoutMillis, or until ctx ends.
func setSQLiteWAL(ctx context.Context, conn *sql.Conn) error {
	deadline := time.Now().Add(time.Duration(SQLiteBusyTimeoutMillis) * time.Millisecond)
	for {
		var mode string
		err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil || !sqliteBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY (primary code 5),
// from a driver whose errors have a Code method, or by its message.
func sqliteBusy(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code()&0xff == 5
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}
