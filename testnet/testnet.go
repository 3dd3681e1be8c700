// Package testnet builds Palisade clusters for tests, demos and local
// experiments: trusted-dealer key generation into directories (testnets
// only), and N nodes in one process with fault knobs: Stop, Restart (same
// store and port), CutOff, Reconnect and SetDelay.
package testnet

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// DealerWarning is printed by every command that deals keys.
const DealerWarning = "WARNING: trusted-dealer key generation: one process saw the group secret. For local testnets only; real clusters use distributed key generation."

// Client key file written by Keygen.
const ClientKeyFileName = "client.key"

// KeygenOptions configure Keygen.
type KeygenOptions struct {
	// N is the number of nodes (N = 3f+1 gives t = 2f+1).
	N int
	// Name is the cluster name (default "palisade-testnet").
	Name string
	// Addrs are the nodes' listen multiaddrs, one per node; default
	// /ip4/127.0.0.1/tcp/<free port>.
	Addrs []string
	// Rand supplies all randomness (default crypto/rand).
	Rand io.Reader
	// Clients is how many client identities to create (default 1); the
	// first is written to DIR/client.key. All may acquire any resource
	// unless ClientResources says otherwise.
	Clients int
	// ClientResources are the resource patterns of every client (default
	// "*").
	ClientResources []string
}

// Keys is what Keygen made, for callers that run nodes in process.
type Keys struct {
	Cluster     *protocol.Cluster
	ClusterPath string
	NodeDirs    []string
	Clients     []lcrypto.PrivKey
}

// Keygen deals a fresh threshold key with a trusted dealer and writes
// DIR/cluster.json, DIR/client.key and DIR/node1 … DIR/nodeN. Testnets only.
func Keygen(dir string, o KeygenOptions) (*Keys, error) {
	if o.N < 1 {
		return nil, fmt.Errorf("testnet: keygen: need at least 1 node, got %d", o.N)
	}
	if o.Name == "" {
		o.Name = "palisade-testnet"
	}
	if o.Clients <= 0 {
		o.Clients = 1
	}
	if len(o.ClientResources) == 0 {
		o.ClientResources = []string{"*"}
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = crand.Reader
	}
	if len(o.Addrs) == 0 {
		// Reserved until the Network on these keys closes (ports_linux.go).
		ports, err := ReservePorts(o.N)
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			o.Addrs = append(o.Addrs, "/ip4/127.0.0.1/tcp/"+strconv.Itoa(p))
		}
	}
	if len(o.Addrs) != o.N {
		return nil, fmt.Errorf("testnet: keygen: %d addresses for %d nodes", len(o.Addrs), o.N)
	}
	_, t := crypto.FaultThreshold(o.N)
	gk, shares, err := crypto.Deal(rnd, o.N, t)
	if err != nil {
		return nil, err
	}
	ids := make([]lcrypto.PrivKey, o.N)
	nodes := make([]protocol.NodeInfo, o.N)
	for i := range ids {
		if ids[i], err = transport.GenerateIdentity(rnd); err != nil {
			return nil, err
		}
		pid, err := peer.IDFromPrivateKey(ids[i])
		if err != nil {
			return nil, err
		}
		nodes[i] = protocol.NodeInfo{Index: i + 1, PeerID: pid.String(), Addrs: []string{o.Addrs[i]}}
	}
	keys := &Keys{ClusterPath: filepath.Join(dir, node.ClusterFileName)}
	var clients []protocol.ClientInfo
	for i := 0; i < o.Clients; i++ {
		k, err := transport.GenerateIdentity(rnd)
		if err != nil {
			return nil, err
		}
		pid, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return nil, err
		}
		keys.Clients = append(keys.Clients, k)
		clients = append(clients, protocol.ClientInfo{Name: fmt.Sprintf("client%d", i+1), PeerID: pid.String(), Resources: o.ClientResources})
	}
	cf := protocol.NewClusterFile(o.Name, gk, nodes, clients)
	if keys.Cluster, err = protocol.NewCluster(cf); err != nil {
		return nil, err
	}
	if err := cf.Save(keys.ClusterPath); err != nil {
		return nil, err
	}
	if err := transport.SaveIdentity(filepath.Join(dir, ClientKeyFileName), keys.Clients[0]); err != nil {
		return nil, err
	}
	for i := range shares {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i+1))
		if err := node.WriteDir(d, cf, shares[i], ids[i], []string{o.Addrs[i]}); err != nil {
			return nil, err
		}
		keys.NodeDirs = append(keys.NodeDirs, d)
	}
	return keys, nil
}

// FreePorts asks the kernel for n free TCP ports on 127.0.0.1.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testnet: free port: %w", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// Options configure an in-process network.
type Options struct {
	Keygen KeygenOptions
	// Clock is shared by every node (default real). Clients get their own
	// through NewClient's config.
	Clock clockwork.Clock
	// NodeClock, if set, gives node i (1-based) a clock of its own
	// instead of Clock where it returns one (nil: Clock), for example a
	// NewRateClock that drifts.
	NodeClock func(i int) clockwork.Clock
	// Rules override the nodes' voting rules when non-zero.
	Rules node.Rules
}

// Member is one node of an in-process network.
type Member struct {
	Index  int
	Dir    *node.Dir
	PeerID peer.ID

	mu      sync.Mutex
	running *node.Running
	cut     bool
	delay   time.Duration
	filter  func(proto string, reply []byte) []byte
	byz     Behaviour
	observe func(proto string, from peer.ID, req []byte)
}

// Behaviour makes a node Byzantine. It decorates the honest node: it sees
// every request frame first and may answer it itself (handled), or let
// the honest node answer and rewrite that reply. Implementations get the
// member, so they can sign with its share and identity.
type Behaviour interface {
	// Request may answer a request instead of the honest node. A non-nil
	// error resets the stream.
	Request(ctx context.Context, m *Member, proto string, from peer.ID, req []byte) (reply []byte, handled bool, err error)
	// Reply may rewrite the honest node's reply.
	Reply(m *Member, proto string, from peer.ID, reply []byte) []byte
}

// SetBehaviour makes node i Byzantine with b (nil: honest again). It takes
// effect for the next request.
func (nw *Network) SetBehaviour(i int, b Behaviour) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byz = b
}

// ObserveRequests makes every node pass each request frame it gets
// (before a Byzantine behaviour sees it) to fn with the node's index (nil:
// none). fn must not block.
func (nw *Network) ObserveRequests(fn func(i int, proto string, from peer.ID, req []byte)) {
	for _, m := range nw.Members {
		m.mu.Lock()
		if fn == nil {
			m.observe = nil
		} else {
			i := m.Index
			m.observe = func(proto string, from peer.ID, req []byte) { fn(i, proto, from, req) }
		}
		m.mu.Unlock()
	}
}

func (m *Member) handle(ctx context.Context, proto string, from peer.ID, req []byte) ([]byte, bool, error) {
	m.mu.Lock()
	b, observe := m.byz, m.observe
	m.mu.Unlock()
	if observe != nil {
		observe(proto, from, req)
	}
	if b == nil {
		return nil, false, nil
	}
	return b.Request(ctx, m, proto, from, req)
}

// Network is N nodes in one process.
type Network struct {
	Keys    *Keys
	Members []*Member
	clock   clockwork.Clock
	clocks  func(i int) clockwork.Clock // Options.NodeClock
	rules   node.Rules
}

// Start generates keys into dir and starts every node.
func Start(dir string, o Options) (*Network, error) {
	keys, err := Keygen(dir, o.Keygen)
	if err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	nw := &Network{Keys: keys, clock: o.Clock, clocks: o.NodeClock, rules: o.Rules}
	for i, d := range keys.NodeDirs {
		nd, err := node.LoadDir(d)
		if err != nil {
			return nil, errors.Join(err, nw.Close())
		}
		pid, _ := peer.IDFromPrivateKey(nd.Identity)
		m := &Member{Index: i + 1, Dir: nd, PeerID: pid}
		nw.Members = append(nw.Members, m)
		if err := nw.Restart(m.Index); err != nil {
			return nil, errors.Join(err, nw.Close())
		}
	}
	return nw, nil
}

// Member returns node i (1-based).
func (nw *Network) Member(i int) *Member { return nw.Members[i-1] }

// Node returns the running node i, or nil if stopped.
func (nw *Network) Node(i int) *node.Running {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// Stop crashes node i: its host and store close; its votes stay on disk.
func (nw *Network) Stop(i int) error {
	m := nw.Member(i)
	m.mu.Lock()
	r := m.running
	m.running = nil
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.Close()
}

// Restart starts node i again from its directory (same store, key, port).
func (nw *Network) Restart(i int) error {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running != nil {
		return fmt.Errorf("testnet: node %d is running", i)
	}
	d := *m.Dir
	clock := nw.clock
	if nw.clocks != nil {
		if c := nw.clocks(i); c != nil {
			clock = c
		}
	}
	var r *node.Running
	var err error
	// The port may linger briefly after a stop; retry a few times.
	for try := 0; try < 50; try++ {
		r, err = d.StartWith(clock, node.Hooks{Intercept: m.intercept, Handle: m.handle, Reply: m.reply}, nw.rules)
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("testnet: start node %d: %w", i, err)
	}
	m.running = r
	return nil
}

// Backup copies node i's vote store as an operator's backup would: a
// consistent copy taken while the node runs, or the file itself if the
// node is stopped.
func (nw *Network) Backup(i int) ([]byte, error) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == nil {
		b, err := os.ReadFile(filepath.Join(m.Dir.Path, node.StoreFileName))
		if err != nil {
			return nil, fmt.Errorf("testnet: back up node %d: %w", i, err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	if err := m.running.CopyStore(&buf); err != nil {
		return nil, fmt.Errorf("testnet: back up node %d: %w", i, err)
	}
	return buf.Bytes(), nil
}

// RestoreBackup puts backup in stopped node i's directory in place of its
// vote store and starts the node: the node forgets every vote it cast
// since the backup, which no honest node does (docs/deploy.md), so it
// counts against f.
func (nw *Network) RestoreBackup(i int, backup []byte) error {
	m := nw.Member(i)
	m.mu.Lock()
	running := m.running != nil
	m.mu.Unlock()
	if running {
		return fmt.Errorf("testnet: restore node %d: it is running", i)
	}
	if err := os.WriteFile(filepath.Join(m.Dir.Path, node.StoreFileName), backup, 0o600); err != nil {
		return fmt.Errorf("testnet: restore node %d: %w", i, err)
	}
	// The backup is the whole store as of its copy (CopyStore checkpoints
	// the log first, and a stopped node's log holds nothing the file
	// lacks): the log the node wrote since is not part of it. Left in
	// place, its frames could continue the old file and bring back the
	// votes the restore is meant to forget.
	if err := os.Remove(filepath.Join(m.Dir.Path, node.StoreLogFileName)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("testnet: restore node %d: %w", i, err)
	}
	return nw.Restart(i)
}

// CutOff makes node i drop every request, as if partitioned from every
// client, until Reconnect.
func (nw *Network) CutOff(i int) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cut = true
}

// Reconnect undoes CutOff.
func (nw *Network) Reconnect(i int) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cut = false
}

// SetDelay makes node i wait d before handling each request.
func (nw *Network) SetDelay(i int, d time.Duration) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// SetReplyFilter makes node i pass every reply through fn before sending
// it (nil: honest again). It is how tests make a node Byzantine.
func (nw *Network) SetReplyFilter(i int, fn func(proto string, reply []byte) []byte) {
	m := nw.Member(i)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.filter = fn
}

func (m *Member) reply(proto string, from peer.ID, b []byte) []byte {
	m.mu.Lock()
	f, byz := m.filter, m.byz
	m.mu.Unlock()
	if byz != nil {
		b = byz.Reply(m, proto, from, b)
	}
	if f == nil {
		return b
	}
	return f(proto, b)
}

// errCutOff is what a cut-off node's interceptor returns.
var errCutOff = errors.New("testnet: node is cut off")

func (m *Member) intercept(ctx context.Context, _ string, _ peer.ID) error {
	m.mu.Lock()
	cut, delay := m.cut, m.delay
	m.mu.Unlock()
	if cut {
		return errCutOff
	}
	if delay <= 0 {
		return nil
	}
	return sleepCtx(ctx, delay)
}

// NewClient returns a client with client identity i (0-based) of the
// network's key set. cfg may set Clock, timeouts and Seed; Cluster and
// Identity are filled in.
func (nw *Network) NewClient(i int, cfg client.Config) (*client.Client, error) {
	cfg.Cluster = nw.Keys.Cluster
	cfg.Identity = nw.Keys.Clients[i]
	if cfg.VoteTimeout == 0 {
		cfg.VoteTimeout = nw.rules.VoteTimeout // the members' (zero: both defaults)
	}
	return client.New(cfg)
}

// Close stops every node.
func (nw *Network) Close() error {
	var errs []error
	for _, m := range nw.Members {
		errs = append(errs, nw.Stop(m.Index))
		if m.Dir != nil {
			ReleasePorts(listenPorts(m.Dir.Listen)...)
		}
	}
	return errors.Join(errs...)
}

// listenPorts are the TCP ports of listen multiaddrs ("/ip4/…/tcp/PORT").
func listenPorts(addrs []string) []int {
	var out []int
	for _, a := range addrs {
		parts := strings.Split(a, "/")
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == "tcp" {
				if p, err := strconv.Atoi(parts[i+1]); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
