package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/testnet"
)

// run runs one command line in process and returns its exit status and
// output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestStatusExitStatus: with one node of four stopped, status shows it
// unreachable and exits 0; with two stopped, fewer than t = 3 answer and
// it exits 4, "not enough nodes".
func TestStatusExitStatus(t *testing.T) {
	dir := t.TempDir()
	nw, err := testnet.Start(dir, testnet.Options{Keygen: testnet.KeygenOptions{N: 4, Rand: rand.New(rand.NewSource(1))}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	cluster := filepath.Join(dir, node.ClusterFileName)
	identity := filepath.Join(dir, testnet.ClientKeyFileName)
	status := func() (int, string, string) {
		return runCmd(t, "status", "--cluster", cluster, "--identity", identity, "--timeout", "10s")
	}

	require.NoError(t, nw.Stop(4))
	code, out, errs := status()
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^node=4 peer=12D3KooW\S+ reachable=false error="`, out)
	for _, i := range []string{"1", "2", "3"} {
		require.Regexp(t, `(?m)^node=`+i+` peer=12D3KooW\S+ reachable=true version=`+transport.Agent()+` rtt=\S+$`, out)
	}
	require.Contains(t, out, "3 of 4 members reachable (t=3)\n")

	require.NoError(t, nw.Stop(3))
	code, out, errs = status()
	require.Equal(t, ExitNoQuorum, code, errs)
	require.Contains(t, out, "2 of 4 members reachable (t=3)\n")
	require.Contains(t, errs, "palisade: error: status: not enough nodes: 2 of 4 members answered")
}

// TestAuditReportsGaps: a store whose audit log lost an entry prints what
// is left and fails naming the gap.
func TestAuditReportsGaps(t *testing.T) {
	dir := t.TempDir()
	s, err := node.OpenBoltStore(filepath.Join(dir, node.StoreFileName))
	require.NoError(t, err)
	for e := uint64(1); e <= 3; e++ {
		require.NoError(t, s.Save(context.Background(), node.Record{Resource: "r", LastEpoch: e}, node.AuditEntry{Kind: node.AuditVote, Resource: "r", Epoch: e, Holder: "12D3KooWx/00"}))
	}
	require.NoError(t, s.Close())

	code, out, errs := runCmd(t, "audit", "--dir", dir)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^seq=1 time=\S+ kind=vote resource=r epoch=1 holder=12D3KooWx/00$`, out)
	require.Contains(t, out, "3 entries, sequence 1..3 without gaps\n")

	db, err := bbolt.Open(filepath.Join(dir, node.StoreFileName), 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("audit")).Delete(binary.BigEndian.AppendUint64(nil, 2))
	}))
	require.NoError(t, db.Close())
	code, out, errs = runCmd(t, "audit", "--dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "seq=1 ")
	require.Contains(t, out, "seq=3 ")
	require.NotContains(t, out, "seq=2 ")
	require.Contains(t, out, "2 entries; the store's counter is at 3\n")
	require.Contains(t, errs, "palisade: audit: gap: entry 2 is missing\n")
	require.Contains(t, errs, "palisade: error: audit: "+dir+": node: audit log is broken: gap: entry 2 is missing")
}

// TestProbe: 2xx exits 0 with one line, anything else 1, and a server that
// does not answer is given up on after --timeout.
func TestProbe(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte("fine\nsecond line\n"))
		case "/slow":
			select {
			case <-block:
			case <-r.Context().Done():
			}
		default:
			http.Error(w, "not ready: reasons", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	defer close(block)

	code, out, errs := runCmd(t, "probe", srv.URL+"/ok")
	require.Equal(t, 0, code, errs)
	require.Equal(t, srv.URL+"/ok: 200 OK: fine\n", out)
	require.Empty(t, errs)

	code, out, errs = runCmd(t, "probe", srv.URL+"/down")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "palisade: error: probe "+srv.URL+"/down: 503 Service Unavailable: not ready: reasons\n", errs)

	start := time.Now()
	code, _, errs = runCmd(t, "probe", "--timeout", "200ms", srv.URL+"/slow")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "context deadline exceeded")
	require.Less(t, time.Since(start), 30*time.Second, "hang ceiling")
	require.Equal(t, 1, strings.Count(errs, "\n"), "one line")
}

func TestAdminAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		i    int
		want string
	}{
		{"127.0.0.1:9090", 1, "127.0.0.1:9090"},
		{"127.0.0.1:9090", 4, "127.0.0.1:9093"},
		{"0.0.0.0:0", 3, "0.0.0.0:0"},
		{"[::1]:9100", 2, "[::1]:9101"},
	} {
		got, err := adminAddr(c.addr, c.i)
		require.NoError(t, err, c.addr)
		require.Equal(t, c.want, got)
	}
	for _, bad := range []string{"9090", "host:port", "127.0.0.1:65535x"} {
		_, err := adminAddr(bad, 1)
		require.Error(t, err, bad)
	}
	_, err := adminAddr("127.0.0.1:65535", 2)
	require.ErrorContains(t, err, "not a valid TCP port")
}

// TestOpsHelp: each operator command is in "palisade help" with its
// synopsis, and its own usage has an example.
func TestOpsHelp(t *testing.T) {
	_, out, _ := runCmd(t, "help")
	for _, syn := range []string{
		"palisade node    --dir DIR/nodeI [--listen ADDRS] [--admin ADDR]",
		"palisade testnet --nodes N --dir DIR [--dkg] [--admin ADDR]",
		"palisade status  --cluster FILE [--cluster-id ID] --identity FILE [--timeout D] [RESOURCE]",
		"palisade audit   --dir DIR/nodeI",
		"palisade clients (list | add NAME PEERID | set-patterns NAME | remove NAME)",
		"palisade probe   [--timeout D] URL",
		"GOLOG_LOG_FMT=json",
		"PALISADE_LOG_LEVEL",
	} {
		require.Contains(t, out, syn)
	}
	for _, cmd := range []string{"status", "audit", "clients", "probe"} {
		code, out, _ := runCmd(t, "help", cmd)
		require.Equal(t, 0, code)
		require.Contains(t, out, "Usage:\n    palisade "+cmd, cmd)
		require.Contains(t, out, "Example:\n    $ ", cmd)
	}
}
