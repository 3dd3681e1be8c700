package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	logging "github.com/ipfs/go-log/v2"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// session is what acquire, release and lock share: the cluster file, the
// identity and its entry in the file's client list, and a client.
type session struct {
	cmd     string
	cfg     Config
	cluster *protocol.Cluster
	// id is the identity, self its peer ID, entry its entry in the
	// cluster file.
	id    client.Identity
	self  string
	entry protocol.ClientInfo
	c     *client.Client
}

// openSession loads --cluster and --identity for cmd and checks, before
// anything is dialled, that the identity is a client of the cluster and,
// if resource is not empty, that its patterns allow resource: nodes
// would refuse both, and without these checks the first reads as an
// outage (the nodes drop the connection) and --wait would retry it.
func openSession(cmd string, cfg Config, resource string) (*session, error) {
	s, err := checkSession(cmd, cfg, resource)
	if err != nil {
		return nil, err
	}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkSession is openSession without the client: the files are loaded
// and the checks done, nothing is dialled.
func checkSession(cmd string, cfg Config, resource string) (*session, error) {
	quietClientLogs()
	if err := requireFlag(cmd, "cluster", cfg.Cluster); err != nil {
		return nil, err
	}
	if err := requireFlag(cmd, "identity", cfg.Identity); err != nil {
		return nil, err
	}
	cluster, err := loadPinnedCluster(cmd, cfg.Cluster, cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	id, err := loadIdentity(cmd, cfg.Identity, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	self, err := client.HolderID(id)
	if err != nil {
		return nil, fmt.Errorf("%s: --identity %s: %w", cmd, cfg.Identity, err)
	}
	entry, err := clientEntry(cmd, cfg, cluster, self)
	if err != nil {
		return nil, err
	}
	if resource != "" && !entry.Allows(resource) {
		return nil, refusedf("%s: %s may not acquire %q: its resource patterns in %s are %s; use a name they match, or add one (\"palisade clients set-patterns\"), copy cluster.json to every node and send them SIGHUP",
			cmd, clientName(entry), resource, cfg.Cluster, patterns(entry))
	}
	return &session{cmd: cmd, cfg: cfg, cluster: cluster, id: id, self: self, entry: entry}, nil
}

// connect starts the session's client.
func (s *session) connect() error {
	c, err := client.New(client.Config{Cluster: s.cluster, Identity: s.id})
	if err != nil {
		return fmt.Errorf("%s: %w", s.cmd, err)
	}
	s.c = c
	return nil
}

// quietClientLogs keeps the client's warnings (a failed renewal, with
// libp2p's multi-line dial report in it) and libp2p's own (an identify
// cut short when a command closes its host after 2f+1 answers) off the
// terminal of a client command, which reports what matters itself in one
// line. GOLOG_LOG_LEVEL brings them back.
func quietClientLogs() {
	if os.Getenv("GOLOG_LOG_LEVEL") != "" {
		return
	}
	_ = logging.SetLogLevel("*", "error") // libp2p and the rest
	setPalisadeLogLevel("info")
	applyPalisadeLogLevel()
	_ = logging.SetLogLevel("palisade/client", "error")
}

// target describes a request of this session about resource, one that
// --wait does not apply to (a release).
func (s *session) target(op, resource string) target {
	return target{op: op, resource: resource, clusterPath: s.cfg.Cluster, cluster: s.cluster, self: s.self}
}

// acquire takes the lease: --wait D waits up to D for the resource (a
// context deadline on Acquire); --wait 0 tries once (TryAcquire). opts
// add to the TTL option. A failure is explained in one line.
func (s *session) acquire(ctx context.Context, resource string, opts ...client.Option) (*client.Lock, error) {
	var lock *client.Lock
	var err error
	opts = append([]client.Option{client.WithTTL(s.cfg.TTL)}, opts...)
	if s.cfg.Wait > 0 {
		lock, err = acquireWithin(ctx, s.c, s.cfg.Wait, resource, opts...)
	} else {
		lock, err = s.c.TryAcquire(ctx, resource, opts...)
	}
	if err != nil {
		t := s.target(fmt.Sprintf("%s %q", s.cmd, resource), resource)
		t.wait, t.waits = s.cfg.Wait, true
		return nil, explainRequest(t, diagnose(ctx, s.c, resource, err))
	}
	return lock, nil
}

// clientEntry finds the identity's entry in the cluster file's client
// list, or says what to do about its absence.
func clientEntry(cmd string, cfg Config, cluster *protocol.Cluster, self string) (protocol.ClientInfo, error) {
	if entry, ok := cluster.Client(self); ok {
		return entry, nil
	}
	if i := cluster.NodeIndex(self); i > 0 {
		return protocol.ClientInfo{}, refusedf("%s: --identity %s is the identity of node %d, not of a client: give a client's key file (keygen writes DIR/client.key)", cmd, cfg.Identity, i)
	}
	return protocol.ClientInfo{}, refusedf("%s: identity %s (peer ID %s) is not a client of cluster %q in %s: add it with \"palisade clients add\", copy cluster.json to every node and send them SIGHUP, or give the --identity of a listed client",
		cmd, cfg.Identity, self, cluster.File.Name, cfg.Cluster)
}

// clientName names a client entry for messages.
func clientName(c protocol.ClientInfo) string {
	if c.Name != "" {
		return fmt.Sprintf("client %q", c.Name)
	}
	return "client " + shortPeer(c.PeerID)
}

// patterns lists a client's resource patterns, quoted.
func patterns(c protocol.ClientInfo) string {
	if len(c.Resources) == 0 {
		return "empty"
	}
	q := make([]string, len(c.Resources))
	for i, p := range c.Resources {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, ", ")
}

// loadCluster reads --cluster, saying what to do when it cannot.
func loadCluster(cmd, path string) (*protocol.Cluster, error) {
	cluster, err := protocol.LoadCluster(path)
	switch {
	case err == nil:
		return cluster, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, explainf(err, "%s: cluster file %s does not exist: give --cluster the cluster.json that keygen or dkg wrote", cmd, path)
	case errors.Is(err, protocol.ErrClusterFileVersion):
		return nil, clusterLoadError(cmd, path, err)
	case errors.Is(err, protocol.ErrBadClusterFile):
		detail := strings.TrimPrefix(reason(err), path+": ")
		detail = strings.TrimPrefix(detail, "bad cluster file: ")
		detail = strings.TrimPrefix(detail, path+": ")
		return nil, explainf(err, "%s: --cluster %s is not a valid cluster file (%s): give the cluster.json that keygen or dkg wrote", cmd, path, detail)
	}
	return nil, explainf(err, "%s: --cluster %s: %s", cmd, path, reason(err))
}

// loadIdentity reads --identity, saying what to do when it cannot. A
// JSON file (the cluster file, given by mistake) is named as such rather
// than refused for its mode.
func loadIdentity(cmd, path, clusterPath string) (client.Identity, error) {
	if sameFile(path, clusterPath) || isJSON(path) {
		return nil, &exitError{code: ExitUsage, err: fmt.Errorf("%s: --identity %s is a JSON file (a cluster file?), not a key: give the client's key file (keygen writes DIR/client.key; palisade identity makes one)", cmd, path)}
	}
	id, err := client.LoadIdentity(path)
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, explainf(err, "%s: identity file %s does not exist: give the client key keygen wrote (DIR/client.key), or make one with palisade identity and add its peer ID to the cluster's clients", cmd, path)
	case errors.Is(err, transport.ErrInsecureKeyFile):
		mode := ""
		if st, serr := os.Stat(path); serr == nil {
			mode = fmt.Sprintf(" (mode %04o)", st.Mode().Perm())
		}
		return nil, explainf(err, "%s: key file %s is readable by others%s: run chmod 600 %s", cmd, path, mode, path)
	}
	return nil, explainf(err, "%s: --identity %s: %s", cmd, path, reason(err))
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// isJSON reports whether the file at path starts like a JSON object (a
// key file is a binary protobuf).
func isJSON(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		b, err := r.ReadByte()
		if err != nil {
			return false
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b == '{'
	}
}

// acquireWithin is Acquire waiting at most d: a context with timeout d.
func acquireWithin(ctx context.Context, c *client.Client, d time.Duration, resource string, opts ...client.Option) (*client.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Acquire(ctx, resource, opts...)
}
