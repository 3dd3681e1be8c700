package verifier_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/barriertest"
)

// EnvTestPostgres names the environment variable with the DSN of a
// PostgreSQL server the tests may use (they create and drop their own
// schemas in it). Without it, the tests start a private server if the
// PostgreSQL binaries are installed, and skip otherwise.
const EnvTestPostgres = "PALISADE_TEST_POSTGRES"

// EnvRequirePostgres, when set (as .ci/run does), turns the skip for a
// missing PostgreSQL into a failure.
const EnvRequirePostgres = "PALISADE_REQUIRE_POSTGRES"

// skipNoPostgres skips, or fails if EnvRequirePostgres is set.
func skipNoPostgres(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "SKIPPING the PostgreSQL tests: " + fmt.Sprintf(format, args...) +
		"; install PostgreSQL or set " + EnvTestPostgres + " to a server's DSN"
	if os.Getenv(EnvRequirePostgres) != "" {
		t.Fatalf("%s (and %s is set)", msg, EnvRequirePostgres)
	}
	t.Skip(msg)
}

// TestSQLStorePostgres runs the conformance suite and the SQLStore tests
// against a real PostgreSQL server.
func TestSQLStorePostgres(t *testing.T) {
	pg := newPostgres(t)

	t.Run("Conformance", func(t *testing.T) {
		var (
			mu      sync.Mutex
			schemas = map[string]string{} // suite dir -> schema, for reopens
		)
		barriertest.Run(t, func(t *testing.T, dir string) verifier.BarrierStore {
			mu.Lock()
			schema, ok := schemas[dir]
			if !ok {
				schema = pg.newSchema(t)
				schemas[dir] = schema
			}
			mu.Unlock()
			return pg.open(t, schema)
		}, barriertest.Options{Durable: true})
	})

	t.Run("TwoHandles", func(t *testing.T) {
		schema := pg.newSchema(t)
		a, b := pg.open(t, schema), pg.open(t, schema)
		defer a.Close()
		defer b.Close()
		testTwoHandles(t, a, b)
	})

	t.Run("CommitTimeout", func(t *testing.T) {
		s := pg.open(t, pg.newSchema(t))
		defer s.Close()
		testCommitTimeout(t, s.SQLStore)
	})

	t.Run("Update", func(t *testing.T) {
		s := pg.open(t, pg.newSchema(t))
		defer s.Close()
		testSQLUpdate(t, s.SQLStore, "$1")
	})

	t.Run("OldSchema", func(t *testing.T) {
		schema := pg.newSchema(t)
		cfg, err := pgx.ParseConfig(pg.dsn)
		require.NoError(t, err)
		cfg.RuntimeParams["search_path"] = schema
		db := stdlib.OpenDB(*cfg)
		defer db.Close()
		testOldSQLSchema(t, db, sqlV1Schema("BYTEA", "BIGINT", ""), func(i int) string { return "$" + strconv.Itoa(i) },
			func() ownedSQLStore { return pg.open(t, schema) })
	})

	t.Run("ConcurrentMigrations", func(t *testing.T) {
		schema := pg.newSchema(t)
		var wg sync.WaitGroup
		stores := make([]ownedSQLStore, 4)
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stores[i] = pg.openErr(t, schema)
			}()
		}
		wg.Wait()
		for _, s := range stores {
			require.NotNil(t, s.SQLStore, "NewSQLStore failed while others migrated")
			require.NoError(t, s.Guard(context.Background(), admit("r", 1), nil))
			require.NoError(t, s.Close())
		}
	})
}

// postgres is a server the test may use.
type postgres struct {
	dsn   string
	admin *sql.DB
	next  int
	mu    sync.Mutex
}

// newPostgres returns the server named by PALISADE_TEST_POSTGRES (failing
// the test if it is unreachable) or a private one it starts, or skips.
func newPostgres(t testing.TB) *postgres {
	dsn := os.Getenv(EnvTestPostgres)
	if dsn == "" {
		dsn = startPostgres(t)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("%s does not parse: %v", EnvTestPostgres, err)
	}
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		// Not the DSN: it may hold a password.
		t.Fatalf("the PostgreSQL server in %s is unreachable: %v", EnvTestPostgres, err)
	}
	return &postgres{dsn: dsn, admin: admin}
}

// newSchema creates an empty schema, dropped when the test ends.
func (p *postgres) newSchema(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	p.next++
	schema := fmt.Sprintf("palisade_test_%d_%d", os.Getpid(), p.next)
	p.mu.Unlock()
	_, err := p.admin.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = p.admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	return schema
}

// open opens an SQLStore whose tables live in schema.
func (p *postgres) open(t testing.TB, schema string) ownedSQLStore {
	t.Helper()
	s := p.openErr(t, schema)
	require.NotNil(t, s.SQLStore)
	return s
}

// openErr is open that reports failure with t.Error and a zero store, so
// that it can run in other goroutines.
func (p *postgres) openErr(t testing.TB, schema string) ownedSQLStore {
	cfg, err := pgx.ParseConfig(p.dsn)
	if err != nil {
		t.Error(err)
		return ownedSQLStore{}
	}
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	s, err := verifier.NewSQLStore(context.Background(), db, verifier.PostgreSQL)
	if err != nil {
		_ = db.Close()
		t.Errorf("NewSQLStore: %v", err)
		return ownedSQLStore{}
	}
	return ownedSQLStore{SQLStore: s, db: db}
}

// startPostgres starts a private PostgreSQL server listening only on a
// unix socket in a fresh directory, stopped and removed when the test ends,
// and returns its DSN. It skips the test if the binaries are missing.
// PostgreSQL refuses to run as root, so as root it runs the server as the
// postgres system user.
func startPostgres(t testing.TB) string {
	bin := postgresBinDir()
	if bin == "" {
		skipNoPostgres(t, "no initdb/pg_ctl found and %s is not set", EnvTestPostgres)
	}
	var asUser []string
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skipNoPostgres(t, "running as root without a postgres user (%v)", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			skipNoPostgres(t, "running as root without runuser (%v)", err)
		}
		asUser = []string{runuser, "-u", "postgres", "--"}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	// Not t.TempDir(): its parents are private to this user, and the
	// server may run as another, who must reach the directory (hence /tmp
	// rather than a private $TMPDIR as root). The unix socket's path must
	// also stay short.
	base := ""
	if uid >= 0 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "palisade-pg-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if uid >= 0 {
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		if asUser != nil {
			cmd = exec.Command(asUser[0], append(append(asUser[1:], filepath.Join(bin, name)), args...)...)
		}
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
	}
	run("initdb", "-D", data, "-U", "palisade", "--auth=trust", "-E", "UTF8", "--no-sync")
	// fsync off: the tests reopen stores, they do not crash the server.
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories='%s' -c fsync=off -c max_connections=200", dir)
	run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		if asUser != nil {
			cmd = exec.Command(asUser[0], append(append(asUser[1:], filepath.Join(bin, "pg_ctl")), "-D", data, "-m", "immediate", "-w", "stop")...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stop PostgreSQL: %v: %s", err, out)
		}
	})
	t.Logf("private PostgreSQL server in %s (set %s to use another)", dir, EnvTestPostgres)
	return fmt.Sprintf("host=%s user=palisade dbname=postgres sslmode=disable", dir)
}

// postgresBinDir finds the directory with initdb and pg_ctl.
func postgresBinDir() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}
