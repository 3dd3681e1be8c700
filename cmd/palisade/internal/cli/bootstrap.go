package cli

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

// BootstrapConfig holds the settings of bootstrap (Config.Bootstrap).
type BootstrapConfig struct {
	// Shared is the directory the members exchange peer IDs through and
	// where the cluster file and the client key end up (--shared). No
	// default; required.
	Shared string
	// Index is this node's share index, 1..Nodes (--index). No default;
	// required for the node role.
	Index int
	// Addr is the multiaddr this node listens on and is reached at, for
	// the ceremony and then as a node (--addr). No default; required for
	// the node role.
	Addr string
	// JoinTimeout bounds each wait for the others: a node for every
	// member's and the client's peer ID, the client and the resource for
	// the cluster file (--join-timeout). Default 2m.
	JoinTimeout time.Duration
}

// defaultJoinTimeout is BootstrapConfig.JoinTimeout's default.
const defaultJoinTimeout = 2 * time.Minute

// Files and directories in the shared directory of bootstrap.
const (
	// bootstrapPeersDir holds one file per member, nodeI.json (a
	// dkg.Member). Only nodes write it.
	bootstrapPeersDir = "peers"
	// bootstrapClientDir is the client's own directory, the only one it
	// writes: docker-compose.yml mounts the rest of the shared directory
	// read-only in the client's container.
	bootstrapClientDir = "client"
	// bootstrapClientPeer is the client's peer file (a
	// protocol.ClientInfo) in bootstrapClientDir.
	bootstrapClientPeer = "client.json"
	// bootstrapMembers is the member list the nodes built and ran the DKG
	// with.
	bootstrapMembers = "members.json"
	// bootstrapClientName is the client's name in the member list.
	bootstrapClientName = "client"
)

// bootstrapPoll is how often bootstrap looks for the files it waits for.
const bootstrapPoll = 250 * time.Millisecond

// bootstrapReport is how often a waiting bootstrap says what it waits for.
const bootstrapReport = 10 * time.Second

func bootstrapFlags(fs *flag.FlagSet, c *Config) {
	b := &c.Bootstrap
	fs.StringVar(&b.Shared, "shared", b.Shared, "")
	fs.IntVar(&b.Index, "index", b.Index, "")
	fs.StringVar(&b.Addr, "addr", b.Addr, "")
	fs.DurationVar(&b.JoinTimeout, "join-timeout", b.JoinTimeout, "")
	adminFlag(fs, c)
	dirFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "")
	fs.StringVar(&c.Name, "name", c.Name, "")
	fs.DurationVar(&c.PhaseTimeout, "phase-timeout", c.PhaseTimeout, "")
	fs.StringVar(&c.Data, "data", c.Data, "")
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
	clusterIDFlagVar(fs, c)
}

// runBootstrap brings up one service of a testnet whose keys come from a
// DKG among its nodes, for images that hold nothing but this binary
// (docker-compose.yml): ROLE is node, client or resource.
func runBootstrap(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("bootstrap", "bootstrap: want one ROLE (node, client or resource), got %d arguments", len(args))
	}
	if err := requireFlag("bootstrap", "shared", cfg.Bootstrap.Shared); err != nil {
		return err
	}
	if cfg.Bootstrap.JoinTimeout < 0 || cfg.PhaseTimeout < 0 {
		return usageErrorf("bootstrap", "bootstrap: --join-timeout and --phase-timeout must not be negative")
	}
	if cfg.Bootstrap.JoinTimeout == 0 {
		cfg.Bootstrap.JoinTimeout = defaultJoinTimeout
	}
	if cfg.ClusterID != "" {
		if _, err := parseClusterPin("bootstrap", cfg.ClusterID); err != nil {
			return err
		}
	}
	switch args[0] {
	case "node":
		return bootstrapNode(ctx, e, cfg)
	case "client":
		return bootstrapClient(ctx, e, cfg)
	case "resource":
		return bootstrapResource(ctx, e, cfg)
	}
	return usageErrorf("bootstrap", "bootstrap: unknown ROLE %q: want node, client or resource", args[0])
}

// bootstrapNode makes this node's keys by DKG with the other members if
// its node directory has none yet, then runs the node. The steps are
// idempotent, so a container restarted half-way picks up where it was:
// the identity is made once; the peer file is rewritten with the same
// content; an interrupted ceremony resumes from its crash state; a
// complete node directory is reused as it is, with its votes.
func bootstrapNode(ctx context.Context, e *env, cfg Config) error {
	b := cfg.Bootstrap
	for _, f := range [][2]string{{"dir", cfg.Dir}, {"identity", cfg.Identity}, {"addr", b.Addr}} {
		if err := requireFlag("bootstrap", f[0], f[1]); err != nil {
			return err
		}
	}
	if b.Index < 1 || b.Index > cfg.Nodes {
		return usageErrorf("bootstrap", "bootstrap: --index %d must be in 1..%d (--nodes)", b.Index, cfg.Nodes)
	}
	if cfg.Nodes < 4 {
		return usageErrorf("bootstrap", "bootstrap: a DKG needs --nodes 4 or more, got %d", cfg.Nodes)
	}
	if _, err := ma.NewMultiaddr(b.Addr); err != nil {
		return usageErrorf("bootstrap", "bootstrap: --addr %q: %v", b.Addr, err)
	}
	if inDir(cfg.Identity, cfg.Dir) {
		return usageErrorf("bootstrap", "bootstrap: --identity must lie outside --dir: the ceremony writes a whole node directory")
	}
	if err := mkdirShared(b.Shared, bootstrapPeersDir); err != nil {
		return err
	}

	d, err := node.LoadDir(cfg.Dir)
	switch {
	case err == nil && d.Share.Index() != b.Index:
		return fmt.Errorf("bootstrap: %s holds node %d's keys, not node %d's: is another node's volume mounted here?", cfg.Dir, d.Share.Index(), b.Index)
	case err == nil && cfg.ClusterID != "" && d.Cluster.ID.String() != strings.ToLower(strings.TrimSpace(cfg.ClusterID)):
		return fmt.Errorf("bootstrap: %w: %s holds the keys of cluster %q with ID %s, pinned %s: is another cluster's volume mounted here?",
			errClusterPin, cfg.Dir, d.Cluster.File.Name, d.Cluster.ID, cfg.ClusterID)
	case err == nil:
		if err := eraseStale(filepath.Join(cfg.Dir, dkg.StateFileName)); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "palisade: bootstrap: node %d reuses its keys and votes in %s (cluster %s)\n", d.Share.Index(), cfg.Dir, d.Cluster.ID)
	case exists(filepath.Join(cfg.Dir, node.ShareFileName)):
		if file, detail, ok := earlierRelease(err); ok {
			return explainf(err, "bootstrap: %s holds the keys of another release (its %s: %s): remove the testnet's data (its volumes) to run a new DKG", cfg.Dir, file, detail)
		}
		return fmt.Errorf("bootstrap: %s holds a share but does not load (%w): repair it, or remove the testnet's data to start over", cfg.Dir, err)
	case cfg.ClusterID != "":
		// The pinned cluster exists: a ceremony now would make another
		// one, with this member holding a share of a key nobody uses.
		return fmt.Errorf("bootstrap: %w: %s holds no keys, and a new DKG would make a new cluster, not the pinned %s: restore this node's volume, or have the members admit it again by a reshare (docs/deploy.md, \"A node's lost disk\")",
			errClusterPin, cfg.Dir, cfg.ClusterID)
	default:
		if err := bootstrapKeys(ctx, e, cfg); err != nil {
			return err
		}
	}
	// Every node publishes the cluster file, on each start: the copies are
	// identical (the members compared their hashes), and a shared
	// directory cleared by hand gets it back. One of another cluster
	// found there is replaced, and said so.
	warnForeignCluster(e.stderr, filepath.Join(b.Shared, node.ClusterFileName), filepath.Join(cfg.Dir, node.ClusterFileName))
	if err := publishFile(b.Shared, node.ClusterFileName, filepath.Join(cfg.Dir, node.ClusterFileName)); err != nil {
		return err
	}
	// "palisade node", with --admin (cfg.Ops.Admin) serving its metrics,
	// /healthz and /readyz (store open, at least t members reachable).
	return runNode(ctx, e, cfg, nil)
}

// bootstrapKeys publishes this node's peer ID, waits for every member's
// and the client's, and runs this member's side of the DKG into cfg.Dir.
func bootstrapKeys(ctx context.Context, e *env, cfg Config) error {
	b := cfg.Bootstrap
	id, created, err := loadOrCreateIdentity(cfg.Identity, "")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		return fmt.Errorf("bootstrap: identity: %w", err)
	}
	if created {
		fmt.Fprintf(e.stderr, "palisade: bootstrap: created this node's identity %s (mode 0600): peer %s\n", cfg.Identity, pid)
	}
	self, err := json.Marshal(dkg.Member{PeerID: pid.String(), Addrs: []string{b.Addr}})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := writeShared(b.Shared, filepath.Join(bootstrapPeersDir, nodePeerFile(b.Index)), append(self, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "palisade: bootstrap: node %d published peer %s at %s; waiting up to %v for the others\n", b.Index, pid, b.Addr, b.JoinTimeout)
	list, err := waitMembers(ctx, e.stderr, cfg, pid)
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	// The same bytes at every node: they read the same peer files.
	if err := writeShared(b.Shared, bootstrapMembers, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "palisade: bootstrap: distributed key generation among %d members (no dealer)\n", len(list.Members))
	res, err := dkg.Run(ctx, dkg.Config{Members: list, Identity: id, OutDir: cfg.Dir, Progress: e.stderr, PhaseTimeout: cfg.PhaseTimeout})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	printCeremony(e.stdout, cfg.Dir, res)
	return nil
}

// waitMembers waits, at most cfg.Bootstrap.JoinTimeout, until every
// member and the client have published their peer files, and returns the
// member list they make: members in index order, the one client allowed
// every resource.
func waitMembers(ctx context.Context, progress io.Writer, cfg Config, self peer.ID) (*dkg.MemberList, error) {
	b := cfg.Bootstrap
	var list *dkg.MemberList
	err := waitFor(ctx, progress, b.JoinTimeout, "peer IDs", func() ([]string, error) {
		l := &dkg.MemberList{Name: cfg.Name}
		var missing []string
		for i := 1; i <= cfg.Nodes; i++ {
			var m dkg.Member
			switch ok, err := readPeerFile(b.Shared, filepath.Join(bootstrapPeersDir, nodePeerFile(i)), &m); {
			case err != nil:
				return nil, err
			case !ok:
				missing = append(missing, fmt.Sprintf("node%d", i))
			default:
				l.Members = append(l.Members, m)
			}
		}
		var c protocol.ClientInfo
		switch ok, err := readPeerFile(b.Shared, filepath.Join(bootstrapClientDir, bootstrapClientPeer), &c); {
		case err != nil:
			return nil, err
		case !ok:
			missing = append(missing, "client")
		default:
			l.Clients = []protocol.ClientInfo{c}
		}
		if len(missing) > 0 {
			return missing, nil
		}
		if got := l.Members[b.Index-1].PeerID; got != self.String() {
			return nil, fmt.Errorf("bootstrap: %s names peer %s, not this node's %s: another node was given --index %d", nodePeerFile(b.Index), got, self, b.Index)
		}
		for i, m := range l.Members {
			if m.PeerID == self.String() && i+1 != b.Index {
				return nil, fmt.Errorf("bootstrap: %s names this node's peer %s, which is node %d: refused", nodePeerFile(i+1), self, b.Index)
			}
		}
		list = l
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := dkg.ParseMemberList(mustJSON(list)); err != nil {
		return nil, fmt.Errorf("bootstrap: the peer files in %s: %w", filepath.Join(b.Shared, bootstrapPeersDir), err)
	}
	return list, nil
}

// bootstrapClient makes the client identity in the shared directory if
// there is none (the host may have made it with "palisade identity"),
// publishes its peer ID for the nodes' member list, waits for the cluster
// file that allows it, then stays up, serving --admin, so that fault
// scenarios can run client commands in this container (docker exec).
func bootstrapClient(ctx context.Context, e *env, cfg Config) error {
	b := cfg.Bootstrap
	if err := mkdirShared(b.Shared, bootstrapClientDir); err != nil {
		return err
	}
	keyPath := cfg.Identity
	if keyPath == "" {
		keyPath = filepath.Join(b.Shared, testnet.ClientKeyFileName)
	}
	id, created, err := loadOrCreateIdentity(keyPath, b.Shared)
	if errors.Is(err, syscall.EROFS) {
		return explainf(err, "bootstrap: there is no client key %s, and this client cannot make one there (its file system is read-only): make it where the shared directory is writable, e.g. on the host with \"palisade identity --identity compose-data/%s\"", keyPath, testnet.ClientKeyFileName)
	}
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		return fmt.Errorf("bootstrap: client identity: %w", err)
	}
	if created {
		fmt.Fprintf(e.stderr, "palisade: bootstrap: created the client identity %s (mode 0600): peer %s\n", keyPath, pid)
	}
	info, err := json.Marshal(protocol.ClientInfo{Name: bootstrapClientName, PeerID: pid.String(), Resources: []string{"*"}})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := writeShared(b.Shared, filepath.Join(bootstrapClientDir, bootstrapClientPeer), append(info, '\n'), 0o644); err != nil {
		return err
	}
	clusterPath := filepath.Join(b.Shared, node.ClusterFileName)
	admitted := func() error {
		c, err := loadSharedCluster(clusterPath, cfg.ClusterID)
		if err != nil {
			return err
		}
		if _, ok := c.Client(pid.String()); !ok {
			return fmt.Errorf("bootstrap: %s does not list this client (%s)", clusterPath, pid)
		}
		return nil
	}
	fmt.Fprintf(e.stderr, "palisade: bootstrap: client %s published; waiting up to %v for %s%s\n", pid, b.JoinTimeout, clusterPath, pinNote(cfg.ClusterID))
	if err := waitFor(ctx, e.stderr, b.JoinTimeout, "the cluster file", func() ([]string, error) {
		if err := admitted(); err != nil {
			return []string{clusterPath + " listing this client" + staleCluster(err)}, nil
		}
		return nil, nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "palisade: bootstrap: client %s is in the cluster; try:\n    palisade acquire --cluster %s --identity %s orders-db\n", pid, clusterPath, keyPath)
	fmt.Fprintln(e.stdout, "ready")
	return serveHealth(ctx, cfg.Ops.Admin, admitted)
}

// bootstrapResource waits for the cluster file the nodes publish (with
// the pinned cluster ID, if --cluster-id is given), then runs "palisade
// resource" with it; --admin is the resource's own (/metrics, /healthz
// once its store answers).
func bootstrapResource(ctx context.Context, e *env, cfg Config) error {
	b := cfg.Bootstrap
	if err := requireFlag("bootstrap", "data", cfg.Data); err != nil {
		return err
	}
	cfg.Cluster = filepath.Join(b.Shared, node.ClusterFileName)
	fmt.Fprintf(e.stderr, "palisade: bootstrap: resource waiting up to %v for %s%s\n", b.JoinTimeout, cfg.Cluster, pinNote(cfg.ClusterID))
	if err := waitFor(ctx, e.stderr, b.JoinTimeout, "the cluster file", func() ([]string, error) {
		if _, err := loadSharedCluster(cfg.Cluster, cfg.ClusterID); err != nil {
			return []string{cfg.Cluster + staleCluster(err)}, nil
		}
		return nil, nil
	}); err != nil {
		return err
	}
	// runResource loads the file again; "resource" as a command checks
	// the pin first, as here.
	if err := precheckPin("bootstrap", cfg); err != nil {
		return err
	}
	return runResource(ctx, e, cfg, nil)
}

// serveHealth serves the health endpoints on addr until ctx ends (or
// just waits for ctx if addr is empty): /healthz answers 200 while the
// process runs, /readyz 200 when ready returns nil and 503 with its error
// otherwise.
func serveHealth(ctx context.Context, addr string, ready func() error) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bootstrap: admin: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("bootstrap: admin: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("bootstrap: admin: %w", err)
	}
	return nil
}

// waitFor calls check every bootstrapPoll until it reports nothing
// missing or fails, for at most limit. Every bootstrapReport it prints
// what is still missing; at the limit it fails naming it.
func waitFor(ctx context.Context, progress io.Writer, limit time.Duration, what string, check func() (missing []string, err error)) error {
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	poll := time.NewTicker(bootstrapPoll)
	defer poll.Stop()
	report := time.NewTicker(bootstrapReport)
	defer report.Stop()
	for {
		missing, err := check()
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bootstrap: waiting for %s: %w", what, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("bootstrap: after %v still waiting for %s: %s (are their containers running?)", limit, what, strings.Join(missing, ", "))
		case <-report.C:
			fmt.Fprintf(progress, "palisade: bootstrap: %v: still waiting for %s: %s\n", time.Since(start).Round(time.Second), what, strings.Join(missing, ", "))
		case <-poll.C:
		}
	}
}

// staleCluster notes, for a wait's progress line, that the cluster file
// there is one an earlier release wrote (the nodes replace it once their
// new DKG completes; nodes whose volumes hold keys of that release stop
// and say so), or one of another cluster than the pinned one.
func staleCluster(err error) string {
	switch {
	case errors.Is(err, protocol.ErrClusterFileVersion):
		return " (the one there is of an earlier release; the nodes replace it after their DKG)"
	case errors.Is(err, errClusterPin):
		return " (the one there is REFUSED: " + strings.TrimPrefix(err.Error(), errClusterPin.Error()+": ") + ")"
	}
	return ""
}

// loadSharedCluster loads the cluster file in the shared directory and,
// if pin is not empty, refuses it unless its cluster ID is pin: the
// shared directory is where anyone who can write it may plant a file.
func loadSharedCluster(path, pin string) (*protocol.Cluster, error) {
	c, err := protocol.LoadCluster(path)
	if err != nil || pin == "" {
		return c, err
	}
	want, err := protocol.ParseClusterID(strings.TrimSpace(pin))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: --%s: %w", clusterIDFlag, err)
	}
	if err := checkClusterPin(c, want, path); err != nil {
		return nil, err
	}
	return c, nil
}

// pinNote says, in a waiting line, which cluster ID the file must have.
func pinNote(pin string) string {
	if pin == "" {
		return " (no --cluster-id: the first valid one is trusted)"
	}
	return " with cluster ID " + pin
}

// warnForeignCluster says so when the shared cluster file at shared is
// valid but of another cluster than this node's own file at own: a file
// planted there, or left by an earlier testnet; the node replaces it.
func warnForeignCluster(w io.Writer, shared, own string) {
	theirs, err := protocol.LoadCluster(shared)
	if err != nil {
		return
	}
	mine, err := protocol.LoadCluster(own)
	if err != nil || mine.ID == theirs.ID {
		return
	}
	fmt.Fprintf(w, "palisade: bootstrap: WARNING: %s held cluster %q with ID %s, not this node's %s: replacing it (was it planted? consumers that pin --cluster-id %s refuse such a file)\n",
		shared, theirs.File.Name, theirs.ID, mine.ID, mine.ID)
}

// readPeerFile decodes SHARED/name into v strictly; ok is false if the
// file does not exist yet.
func readPeerFile(shared, name string, v any) (ok bool, err error) {
	path := filepath.Join(shared, name)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bootstrap: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("bootstrap: %s: %w", path, err)
	}
	return true, nil
}

func nodePeerFile(i int) string { return fmt.Sprintf("node%d.json", i) }

// mustJSON encodes a value of plain structs, which cannot fail.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// loadOrCreateIdentity loads the identity key file at path, or makes one
// (mode 0600) if there is none. A new file is written under a temporary
// name and renamed, so a crash never leaves a half-written key. If shared
// is not empty, a new file gets the shared directory's owner.
func loadOrCreateIdentity(path, shared string) (k lcrypto.PrivKey, created bool, err error) {
	k, err = transport.LoadIdentity(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, false, err
	}
	if k, err = transport.GenerateIdentity(crand.Reader); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err := transport.SaveIdentity(tmp, k); err != nil {
		return nil, false, err
	}
	if shared != "" {
		if err := chownLike(tmp, shared); err != nil {
			return nil, false, err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// mkdirShared creates the shared directory and sub inside it, with the
// shared directory's owner.
func mkdirShared(shared, sub string) error {
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	p := filepath.Join(shared, sub)
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := chownLike(p, shared); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// writeShared writes SHARED/name atomically (a temporary file renamed
// over it), so readers never see half a file, and gives it the shared
// directory's owner, so a host user who made the directory can read and
// remove what containers running as root wrote there.
func writeShared(shared, name string, b []byte, mode os.FileMode) error {
	path := filepath.Join(shared, name)
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = chownLike(tmp, shared)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("bootstrap: write %s: %w", path, err)
	}
	return nil
}

// publishFile copies the file at src to SHARED/name (see writeShared).
func publishFile(shared, name, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return writeShared(shared, name, b, 0o644)
}

// eraseStale overwrites a leftover secret file with zeros and removes it:
// the crash state of a ceremony that completed before its member exited.
func eraseStale(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.Write(make([]byte, st.Size()))
		if err == nil {
			err = f.Sync()
		}
		err = errors.Join(err, f.Close())
	}
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil {
		return fmt.Errorf("bootstrap: erase %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// inDir reports whether path lies in dir or below it.
func inDir(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

const bootstrapUsage = `Usage:
    palisade bootstrap node --shared DIR --index I --addr MULTIADDR --dir DIR
                            --identity FILE [--nodes N] [--name NAME]
                            [--join-timeout D] [--phase-timeout D] [--admin ADDR]
                            [--cluster-id ID]
    palisade bootstrap client --shared DIR [--identity FILE] [--join-timeout D]
                              [--admin ADDR] [--cluster-id ID]
    palisade bootstrap resource --shared DIR --data DIR [--listen ADDR]
                                [--join-timeout D] [--admin ADDR] [--cluster-id ID]

Brings up one service of a testnet whose keys the nodes make by distributed
key generation among themselves (no dealer), when the only program at hand
is this binary (docker-compose.yml runs it in FROM-scratch images). The
services find each other through the shared directory DIR:

    DIR/peers/nodeI.json   node I's peer ID and address (written by node I)
    DIR/client/client.json the client's peer ID (written by the client, the
                           only place it writes)
    DIR/members.json       the member list the nodes ran the DKG with
    DIR/cluster.json       the cluster file, once the DKG is done (written
                           by the nodes only)
    DIR/client.key         the client identity (unless --identity says
                           otherwise; the host may make it first with
                           "palisade identity")

node: if --dir holds no share yet, makes this node's identity (--identity,
mode 0600, outside --dir) unless it exists, publishes its peer ID and
--addr, waits for all N nodes' and the client's, writes the member list
(members in index order, the client allowed every resource) and runs this
member's side of "palisade dkg" into --dir, resuming an interrupted
ceremony. Then, and on every later start, it publishes cluster.json
(replacing, and warning about, one of another cluster found there) and
runs the node from --dir, with the votes it kept.

client: makes the client identity unless it exists, publishes its peer ID,
waits for a cluster.json that lists it, prints "ready" and stays up (so
client commands can run in its container) until SIGINT or SIGTERM.

resource: waits for cluster.json, then runs "palisade resource" with it.

Nothing in DIR is trusted beyond what --cluster-id ID (PALISADE_CLUSTER_ID,
the id= the ceremony printed, which resharing and client changes keep)
pins: client and resource take only a cluster.json with that ID, and
report any other as REFUSED while they wait; a node refuses a --dir with
keys of another cluster, and refuses to run a new ceremony when its --dir
has no keys (a node that lost them rejoins by a reshare). Without
--cluster-id the first valid cluster.json is taken: docker-compose.yml
therefore mounts DIR read-only in the client and resource containers, so
that only nodes can write it.

Each wait lasts at most --join-timeout and names what is still missing.
Files written to DIR get DIR's owner. --admin ADDR serves health endpoints
for "palisade probe": a node's are those of "palisade node --admin"
(GET /readyz: 200 once its store is open and at least t members answer);
the resource's those of "palisade resource --admin" (GET /healthz: 200
while its barrier store answers; GET /metrics), once the cluster file is
there; the client serves GET /healthz (200 while running) and GET /readyz
(200 once the cluster file admits the client; 503 with the reason before).

Flags (environment variable in brackets):
    --shared DIR         the shared directory [PALISADE_SHARED]
    --index I            this node's share index, 1..N [PALISADE_INDEX]
    --addr MULTIADDR     where this node listens and is reached, e.g.
                         /ip4/10.77.0.11/tcp/4001 [PALISADE_ADDR]
    --dir DIR            the node directory [PALISADE_DIR]
    --identity FILE      the node's identity key, or the client's
                         (DIR/client.key) [PALISADE_IDENTITY]
    --nodes N            number of nodes, at least 4 (4) [PALISADE_NODES]
    --name NAME          cluster name (palisade-testnet) [PALISADE_NAME]
    --join-timeout D     bound of each wait for the others (2m) [PALISADE_JOIN_TIMEOUT]
    --phase-timeout D    timeout of each DKG phase, 0 for 60s (0) [PALISADE_PHASE_TIMEOUT]
    --data DIR           the resource's data directory [PALISADE_DATA]
    --listen ADDR        the resource's HTTP address (127.0.0.1:7070) [PALISADE_LISTEN]
    --admin ADDR         health endpoints' HTTP address (none) [PALISADE_ADMIN]
    --cluster-id ID      the cluster ID cluster.json must have, 64 hex
                         digits (none: no pin) [PALISADE_CLUSTER_ID]

Example (one host, loopback; docker-compose.yml does the same with one
container per service):
    $ palisade bootstrap client --shared /tmp/tn &
    $ for i in 1 2 3 4; do palisade bootstrap node --shared /tmp/tn --index $i \
        --addr /ip4/127.0.0.1/tcp/500$i --dir /tmp/tn-node$i/node \
        --identity /tmp/tn-node$i/identity.key & done
    [...]
    cluster palisade-testnet n=4 t=3 id=[...]
    $ palisade bootstrap resource --shared /tmp/tn --data /tmp/tn-res &
    $ palisade acquire --cluster /tmp/tn/cluster.json --identity /tmp/tn/client.key orders-db
    pt3.A[...]
`
