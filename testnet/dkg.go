package testnet

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/internal/dkg/dkgtest"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// DKGOptions configure an in-process DKG ceremony (DKG) or resharing
// (Reshare).
type DKGOptions struct {
	// N is the number of members that will hold shares.
	N int
	// Name is the cluster name (default "palisade-testnet"; a resharing
	// keeps the old one).
	Name string
	// Rand supplies identities (default crypto/rand). Ceremony keys and
	// dealer polynomials always use crypto/rand too.
	Rand io.Reader
	// Clients is how many client identities to create (default 1; a
	// resharing keeps the old clients and Keys.Clients).
	Clients int
	// PhaseTimeout bounds each ceremony phase (default 10 s).
	PhaseTimeout time.Duration
	// Progress receives every member's progress lines (default discarded).
	Progress io.Writer
	// Silent lists participants (1-based: new share index for DKG, old
	// index for Reshare) that never run.
	Silent []int
	// Corrupt lists members that send bad deals and never justify them.
	Corrupt []int
	// Withhold lists members that give no deal to one other member (and
	// justify when it complains).
	Withhold []int
	// Keep is, for Reshare, how many old members (old indices 1..Keep)
	// stay as the first new members; the others leave (default: all that
	// fit).
	Keep int
}

// DKG runs a distributed key generation among o.N in-process members over
// loopback and writes DIR/cluster.json, DIR/client.key and DIR/node1 …
// DIR/nodeN exactly as Keygen does, but no process ever holds the group
// secret. Silent members get no directory (NodeDirs[i] is "").
func DKG(ctx context.Context, dir string, o DKGOptions) (out *Keys, err error) {
	if o.N < 4 {
		return nil, fmt.Errorf("testnet: dkg: need at least 4 members, got %d", o.N)
	}
	if o.Name == "" {
		o.Name = "palisade-testnet"
	}
	if o.Clients <= 0 {
		o.Clients = 1
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = crand.Reader
	}
	// Reserved until the Network on the new keys closes, or until a
	// failed ceremony returns (ports_linux.go).
	ports, err := ReservePorts(o.N)
	if err != nil {
		return nil, err
	}
	defer func() {
		if out == nil {
			ReleasePorts(ports...)
		}
	}()
	ids := make([]lcrypto.PrivKey, o.N)
	list := &dkg.MemberList{Name: o.Name}
	for i := range ids {
		if ids[i], err = transport.GenerateIdentity(rnd); err != nil {
			return nil, err
		}
		pid, _ := peer.IDFromPrivateKey(ids[i])
		list.Members = append(list.Members, dkg.Member{PeerID: pid.String(), Addrs: []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(ports[i])}})
	}
	keys := &Keys{ClusterPath: filepath.Join(dir, node.ClusterFileName)}
	for i := 0; i < o.Clients; i++ {
		k, err := transport.GenerateIdentity(rnd)
		if err != nil {
			return nil, err
		}
		pid, _ := peer.IDFromPrivateKey(k)
		keys.Clients = append(keys.Clients, k)
		list.Clients = append(list.Clients, protocol.ClientInfo{Name: fmt.Sprintf("client%d", i+1), PeerID: pid.String(), Resources: []string{"*"}})
	}
	runs := make([]memberRun, o.N)
	for i := range runs {
		runs[i] = memberRun{
			silent: slices.Contains(o.Silent, i+1),
			byz:    slices.Contains(o.Corrupt, i+1),
			cfg: dkg.Config{
				Members: list, Identity: ids[i], OutDir: filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
				Progress: o.Progress, PhaseTimeout: o.PhaseTimeout, PollInterval: 50 * time.Millisecond,
			},
		}
		switch {
		case runs[i].byz:
			runs[i].dec = dkgtest.Corrupt{}
		case slices.Contains(o.Withhold, i+1):
			runs[i].dec = dkgtest.Withhold{}
		}
	}
	if err := runAll(ctx, runs, o); err != nil {
		return nil, err
	}
	return finish(dir, keys, runs, list.Members)
}

// Reshare reshares the cluster of old (whose node directories must not be
// in use by running nodes' shares afterwards: old members' share files are
// erased) to o.N members in DIR, keeping the group public key and cluster
// ID. Old members 1..o.Keep stay (with their identities) as new members
// 1..Keep; new members get fresh identities. Every participant runs the
// ceremony on fresh loopback ports, so the old nodes may keep running
// meanwhile. Keys.Clients carries over from old.
func Reshare(ctx context.Context, dir string, old *Keys, o DKGOptions) (out *Keys, err error) {
	oldN := len(old.NodeDirs)
	if o.Keep <= 0 {
		o.Keep = min(oldN, o.N)
	}
	if o.N < 4 || o.Keep > oldN || o.Keep > o.N {
		return nil, fmt.Errorf("testnet: reshare: bad sizes n=%d keep=%d old=%d", o.N, o.Keep, oldN)
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = crand.Reader
	}
	oldDirs := make([]*node.Dir, oldN)
	for i, d := range old.NodeDirs {
		if d == "" {
			continue
		}
		nd, err := node.LoadDir(d)
		if err != nil {
			return nil, err
		}
		oldDirs[i] = nd
	}
	// The old members' ceremony ports are reserved for the ceremony; the
	// new members' until the Network on the new keys closes, or until a
	// failed ceremony returns (ports_linux.go).
	ports, err := ReservePorts(o.N + oldN)
	if err != nil {
		return nil, err
	}
	defer func() {
		ReleasePorts(ports[o.N:]...)
		if out == nil {
			ReleasePorts(ports[:o.N]...)
		}
	}()
	oc := old.Cluster
	list := &dkg.MemberList{Name: oc.File.Name, MaxEpochStep: oc.File.MaxEpochStep, Clients: oc.File.Clients, CeremonyAddrs: map[string][]string{}}
	ids := make([]lcrypto.PrivKey, o.N)
	for i := range ids {
		if i < o.Keep {
			if oldDirs[i] == nil {
				return nil, fmt.Errorf("testnet: reshare: staying old member %d has no directory", i+1)
			}
			ids[i] = oldDirs[i].Identity
		} else if ids[i], err = transport.GenerateIdentity(rnd); err != nil {
			return nil, err
		}
		pid, _ := peer.IDFromPrivateKey(ids[i])
		list.Members = append(list.Members, dkg.Member{PeerID: pid.String(), Addrs: []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(ports[i])}})
	}
	// Ceremony addresses: every old member on a port of its own.
	for i, n := range oc.File.Nodes {
		list.CeremonyAddrs[n.PeerID] = []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(ports[o.N+i])}
	}
	var runs []memberRun
	for i := range oldN {
		if i < o.Keep {
			continue // runs below as a new member with its old share
		}
		id := oldDirs[i]
		r := memberRun{silent: slices.Contains(o.Silent, i+1) || id == nil}
		if id != nil {
			r.cfg = dkg.Config{Members: list, Identity: id.Identity, OldCluster: oc, OldShare: id.Share,
				OutDir: filepath.Join(dir, fmt.Sprintf("old%d", i+1))}
			r.oldDir = id.Path
		}
		runs = append(runs, r)
	}
	newRuns := make([]memberRun, o.N)
	for i := range newRuns {
		r := memberRun{cfg: dkg.Config{Members: list, Identity: ids[i], OldCluster: oc, OutDir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}}
		if i < o.Keep {
			r.cfg.OldShare = oldDirs[i].Share
			r.oldDir = oldDirs[i].Path
			r.silent = slices.Contains(o.Silent, i+1)
			// A staying member listens on its ceremony address, not on the
			// node address its running old node holds.
			r.cfg.Listen = list.CeremonyAddrs[list.Members[i].PeerID]
		}
		newRuns[i] = r
	}
	all := append(newRuns, runs...)
	for i := range all {
		all[i].cfg.Progress, all[i].cfg.PhaseTimeout, all[i].cfg.PollInterval = o.Progress, o.PhaseTimeout, 50*time.Millisecond
	}
	if err := runAll(ctx, all, o); err != nil {
		return nil, err
	}
	for _, r := range all {
		if r.oldDir != "" && !r.silent {
			if err := dkg.EraseShare(r.oldDir); err != nil {
				return nil, err
			}
		}
	}
	keys := &Keys{ClusterPath: filepath.Join(dir, node.ClusterFileName), Clients: old.Clients}
	return finish(dir, keys, all[:o.N], list.Members)
}

type memberRun struct {
	cfg    dkg.Config
	silent bool
	byz    bool          // corrupts its deals: its own output is not trusted
	dec    dkg.Decorator // a faulty dealer (Corrupt, Withhold), or nil
	oldDir string
	res    *dkg.Result
	err    error
}

// runAll runs every non-silent member's ceremony concurrently.
func runAll(ctx context.Context, runs []memberRun, o DKGOptions) error {
	if o.PhaseTimeout <= 0 {
		o.PhaseTimeout = 10 * time.Second
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range runs {
		r := &runs[i]
		if r.silent {
			continue
		}
		if r.cfg.PhaseTimeout <= 0 {
			r.cfg.PhaseTimeout = o.PhaseTimeout
		}
		if r.cfg.Progress == nil {
			r.cfg.Progress = o.Progress
		}
		if r.cfg.Progress != nil {
			r.cfg.Progress = &lockedWriter{mu: &mu, w: r.cfg.Progress}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.res, r.err = dkg.RunDecorated(ctx, r.cfg, r.dec)
		}()
	}
	wg.Wait()
	var errs []error
	for i, r := range runs {
		if r.err != nil && !r.byz {
			errs = append(errs, fmt.Errorf("member %d: %w", i+1, r.err))
		}
	}
	return errors.Join(errs...)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// finish writes DIR/cluster.json and DIR/client.key from the members'
// results and fills keys.
func finish(dir string, keys *Keys, runs []memberRun, members []dkg.Member) (*Keys, error) {
	var cf *protocol.ClusterFile
	for i, r := range runs {
		if r.silent || r.byz || r.res == nil {
			keys.NodeDirs = append(keys.NodeDirs, "")
			continue
		}
		if cf == nil {
			cf = &r.res.Cluster
		} else if h, _, _ := dkg.ClusterHash(*cf); h != r.res.ClusterHash {
			return nil, fmt.Errorf("testnet: member %d wrote another cluster.json", i+1)
		}
		keys.NodeDirs = append(keys.NodeDirs, r.cfg.OutDir)
	}
	if cf == nil {
		return nil, errors.New("testnet: no member completed the ceremony")
	}
	c, err := protocol.NewCluster(*cf)
	if err != nil {
		return nil, err
	}
	keys.Cluster = c
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := cf.Save(keys.ClusterPath); err != nil {
		return nil, err
	}
	if len(keys.Clients) > 0 {
		p := filepath.Join(dir, ClientKeyFileName)
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			if err := transport.SaveIdentity(p, keys.Clients[0]); err != nil {
				return nil, err
			}
		}
	}
	return keys, nil
}

// StartKeys starts an in-process network from key directories made by
// Keygen, DKG or Reshare. Members without a directory (silent in the
// ceremony) stay stopped.
func StartKeys(keys *Keys, o Options) (*Network, error) {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	nw := &Network{Keys: keys, clock: o.Clock, clocks: o.NodeClock, rules: o.Rules}
	for i, d := range keys.NodeDirs {
		m := &Member{Index: i + 1}
		nw.Members = append(nw.Members, m)
		if d == "" {
			continue
		}
		nd, err := node.LoadDir(d)
		if err != nil {
			return nil, errors.Join(err, nw.Close())
		}
		m.Dir = nd
		m.PeerID, _ = peer.IDFromPrivateKey(nd.Identity)
		if err := nw.Restart(m.Index); err != nil {
			return nil, errors.Join(err, nw.Close())
		}
	}
	return nw, nil
}

// GroupPublicKey is a convenience for tests: the group public key of keys.
func (k *Keys) GroupPublicKey() crypto.PublicKey { return k.Cluster.Key.PublicKey() }
