package node

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Files in a node directory.
const (
	// ClusterFileName is the cluster file (protocol.ClusterFileVersion).
	ClusterFileName = "cluster.json"
	// ShareFileName holds the node's secret share, mode 0600, in the
	// versioned format of WriteShareFile (ShareFileVersion).
	ShareFileName = "share.key"
	// IdentityFileName holds the node's libp2p identity key, mode 0600, in
	// libp2p's own encoding, which names the key type (Ed25519). It holds
	// nothing of the signing curve, so it needs no version of Palisade's:
	// a member keeps its identity, and its peer ID, through a new DKG.
	IdentityFileName = "identity.key"
	// NodeFileName holds the node's own settings (NodeFile).
	NodeFileName = "node.json"
	// StoreFileName is the node's vote store (BoltStore,
	// StoreFormatVersion).
	StoreFileName = "votes.db"
	// StoreLogFileName is the vote store's write-ahead log, beside it:
	// the store is the two files together. After a clean close (and in a
	// copy, CopyStore) the log holds nothing the bbolt file lacks.
	StoreLogFileName = StoreFileName + walSuffix
	// EvidenceFileName holds evidence of equivocation the node saw, one
	// JSON object per line: {"a": "<hex SignedVote>", "b": "..."}.
	EvidenceFileName = "evidence.jsonl"
	// ForkFileName holds the forks the node saw (two valid tokens for one
	// resource and epoch with different holders, issue 21), one JSON
	// object a line ({"fork": text form}), appended and fsynced. It sits
	// beside the evidence file rather than in it, so that releases that
	// read only evidence of equivocation keep reading theirs.
	ForkFileName = "forks.jsonl"
)

// NodeFile is node.json: the node's own settings.
type NodeFile struct {
	Index  int      `json:"index"`
	Listen []string `json:"listen"`
}

// WriteDir creates a node directory: the cluster file, the secret share
// (in the versioned share file format, see ShareFileVersion) and identity
// (mode 0600) and node.json.
func WriteDir(dir string, cf protocol.ClusterFile, share *crypto.Share, id lcrypto.PrivKey, listen []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("node: create %s: %w", dir, err)
	}
	if err := cf.Save(filepath.Join(dir, ClusterFileName)); err != nil {
		return err
	}
	if err := WriteShareFile(filepath.Join(dir, ShareFileName), share); err != nil {
		return err
	}
	if err := transport.SaveIdentity(filepath.Join(dir, IdentityFileName), id); err != nil {
		return err
	}
	b, err := json.MarshalIndent(NodeFile{Index: share.Index(), Listen: listen}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, NodeFileName), append(b, '\n'), 0o644)
}

// Dir is a loaded node directory.
type Dir struct {
	Path     string
	Cluster  *protocol.Cluster
	Share    *crypto.Share
	Identity lcrypto.PrivKey
	Listen   []string
}

// LoadDir reads and checks a node directory: the share must belong to the
// group key, the identity must be the cluster file's node of that index, and
// secret files must not be readable by others. A directory of an earlier
// release is refused: its cluster file with protocol.ErrClusterFileVersion,
// its share file with ErrShareFileVersion (both say to run a new DKG).
func LoadDir(dir string) (*Dir, error) {
	c, err := protocol.LoadCluster(filepath.Join(dir, ClusterFileName))
	if err != nil {
		return nil, err
	}
	share, err := ReadShareFile(filepath.Join(dir, ShareFileName))
	if err != nil {
		return nil, err
	}
	if err := c.Key.CheckShare(share); err != nil {
		return nil, fmt.Errorf("node: %s: %w", ShareFileName, err)
	}
	id, err := transport.LoadIdentity(filepath.Join(dir, IdentityFileName))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, NodeFileName))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var nf NodeFile
	if err := json.Unmarshal(b, &nf); err != nil {
		return nil, fmt.Errorf("node: %s: %w", NodeFileName, err)
	}
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		return nil, fmt.Errorf("node: identity: %w", err)
	}
	if nf.Index != share.Index() || c.NodeIndex(pid.String()) != share.Index() {
		return nil, fmt.Errorf("%w: %s: index %d, share %d, identity is node %d in cluster file", ErrBadConfig, dir, nf.Index, share.Index(), c.NodeIndex(pid.String()))
	}
	return &Dir{Path: dir, Cluster: c, Share: share, Identity: id, Listen: nf.Listen}, nil
}

// Running is a node started from a directory, with the host, connection
// gater and store it owns.
type Running struct {
	*Node
	gater   *transport.Gater
	host    host.Host
	store   *BoltStore
	dirPath string // for ReloadCluster
}

// Block refuses connections and streams from p even if the cluster file
// admits it (operator revocation, fault injection in tests) until Unblock.
// S6: only admitted peers reach the node.
func (r *Running) Block(p peer.ID) { r.gater.Block(p) }

// Unblock undoes Block.
func (r *Running) Unblock(p peer.ID) { r.gater.Unblock(p) }

// Start opens the directory's vote store, starts a closed libp2p host that
// admits only members and configured clients, and runs the node with the
// default rules.
func (d *Dir) Start(clock clockwork.Clock) (*Running, error) {
	return d.StartWith(clock, Hooks{}, Rules{})
}

// StartWith is Start with fault hooks and rules (zero Rules: defaults).
func (d *Dir) StartWith(clock clockwork.Clock, hooks Hooks, rules Rules) (*Running, error) {
	var ids []string
	for _, n := range d.Cluster.File.Nodes {
		ids = append(ids, n.PeerID)
	}
	for _, c := range d.Cluster.File.Clients {
		ids = append(ids, c.PeerID)
	}
	allowed, err := transport.PeerIDs(ids...)
	if err != nil {
		return nil, err
	}
	secret, err := EnsureAdminSecret(d.Path)
	if err != nil {
		return nil, err
	}
	store, err := OpenBoltStore(filepath.Join(d.Path, StoreFileName))
	if err != nil {
		return nil, err
	}
	gater := transport.NewGater(allowed...) // S6: only the cluster file's members and clients connect
	h, err := transport.NewHost(d.Identity, d.Listen, gater)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	for _, n := range d.Cluster.File.Nodes {
		id, _ := peer.Decode(n.PeerID)
		if id != h.ID() {
			_ = transport.AddPeer(h, id, n.Addrs)
		}
	}
	evPath := filepath.Join(d.Path, EvidenceFileName)
	onEvidence := func(ev protocol.Evidence) {
		if err := appendEvidence(evPath, ev); err != nil {
			log.Errorw("cannot record evidence", "file", evPath, "err", err)
		}
	}
	forkPath := filepath.Join(d.Path, ForkFileName)
	onFork := func(f protocol.Fork) {
		if err := appendFork(forkPath, f); err != nil {
			log.Errorw("cannot record fork", "file", forkPath, "fork", f.ID(), "err", err)
		}
	}
	n, err := New(Config{Cluster: d.Cluster, Share: d.Share, Hooks: hooks, Rules: rules, OnEvidence: onEvidence, OnFork: onFork, AdminSecret: secret}, store, h, clock)
	if err != nil {
		_ = h.Close()
		_ = store.Close()
		return nil, err
	}
	// What is already on disk counts against the per-member cap.
	if prior, err := parseEvidenceFile(evPath); err != nil {
		log.Warnw("cannot read the evidence file; its entries do not count against the cap", "file", evPath, "err", err)
	} else {
		n.seedEvidence(prior)
	}
	if prior, err := parseForkFile(forkPath); err != nil {
		log.Warnw("cannot read the fork file; its entries do not count against the caps", "file", forkPath, "err", err)
	} else {
		n.seedForks(prior)
	}
	return &Running{Node: n, gater: gater, host: h, store: store, dirPath: d.Path}, nil
}

// CopyStore writes a consistent copy of the running node's vote store to
// w (see BoltStore.WriteTo: never restore it).
func (r *Running) CopyStore(w io.Writer) error {
	_, err := r.store.WriteTo(w)
	return err
}

// Close stops the node, then its host and store.
func (r *Running) Close() error {
	err := r.Node.Close()
	err = errors.Join(err, r.host.Close(), r.store.Close())
	return err
}

type evidenceLine struct {
	A string `json:"a"`
	B string `json:"b"`
}

var evidenceMu sync.Mutex

// appendEvidence appends one piece of evidence to the file and fsyncs it.
func appendEvidence(path string, ev protocol.Evidence) error {
	evidenceMu.Lock()
	defer evidenceMu.Unlock()
	b, err := json.Marshal(evidenceLine{A: hex.EncodeToString(ev.A.Marshal()), B: hex.EncodeToString(ev.B.Marshal())})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ReadEvidence reads a node directory's evidence file (none: empty) and
// verifies every entry against the cluster file: each is returned only if
// anyone could check it offline with the node's public identity key.
func ReadEvidence(dir string) ([]protocol.Evidence, error) {
	c, err := protocol.LoadCluster(filepath.Join(dir, ClusterFileName))
	if err != nil {
		return nil, err
	}
	evs, err := parseEvidenceFile(filepath.Join(dir, EvidenceFileName))
	if err != nil {
		return nil, err
	}
	for i, ev := range evs {
		if err := protocol.VerifyEvidence(c, ev); err != nil {
			return nil, fmt.Errorf("node: evidence line %d does not verify: %w", i+1, err)
		}
	}
	return evs, nil
}

// parseEvidenceFile decodes an evidence file (none: empty) without
// checking signatures.
func parseEvidenceFile(path string) ([]protocol.Evidence, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read evidence: %w", err)
	}
	var out []protocol.Evidence
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var l evidenceLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("node: evidence line %d: %w", i+1, err)
		}
		a, errA := hex.DecodeString(l.A)
		bb, errB := hex.DecodeString(l.B)
		if err := errors.Join(errA, errB); err != nil {
			return nil, fmt.Errorf("node: evidence line %d: %w", i+1, err)
		}
		va, errA := protocol.UnmarshalSignedVote(a)
		vb, errB := protocol.UnmarshalSignedVote(bb)
		if err := errors.Join(errA, errB); err != nil {
			return nil, fmt.Errorf("node: evidence line %d: %w", i+1, err)
		}
		out = append(out, protocol.Evidence{A: va, B: vb})
	}
	return out, nil
}

// forkLine is one line of the fork file.
type forkLine struct {
	Fork string `json:"fork"` // protocol.Fork's text form
}

// appendFork appends one fork to the fork file and fsyncs it.
func appendFork(path string, f protocol.Fork) error {
	if err := f.Check(); err != nil {
		return fmt.Errorf("node: record fork: %w", err)
	}
	b, err := json.Marshal(forkLine{Fork: f.String()})
	if err != nil {
		return fmt.Errorf("node: encode fork: %w", err)
	}
	evidenceMu.Lock()
	defer evidenceMu.Unlock()
	file, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("node: open fork file: %w", err)
	}
	if _, err := file.Write(append(b, '\n')); err != nil {
		_ = file.Close()
		return fmt.Errorf("node: write fork file: %w", err)
	}
	if err := file.Sync(); err != nil {
		_ = file.Close()
		return fmt.Errorf("node: sync fork file: %w", err)
	}
	return file.Close()
}

// ReadForks reads a node directory's fork file (none: empty) and verifies
// every fork against the cluster file (protocol.VerifyFork): each is
// returned only if anyone with the cluster file could check it offline.
func ReadForks(dir string) ([]protocol.Fork, error) {
	c, err := protocol.LoadCluster(filepath.Join(dir, ClusterFileName))
	if err != nil {
		return nil, err
	}
	fs, err := parseForkFile(filepath.Join(dir, ForkFileName))
	if err != nil {
		return nil, err
	}
	for i, f := range fs {
		if err := protocol.VerifyFork(c, f); err != nil {
			return nil, fmt.Errorf("node: fork line %d does not verify: %w", i+1, err)
		}
	}
	return fs, nil
}

// parseForkFile decodes a fork file (none: empty) strictly
// (protocol.ParseForkText), without checking signatures.
func parseForkFile(path string) ([]protocol.Fork, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read forks: %w", err)
	}
	var out []protocol.Fork
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var l forkLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("node: fork line %d: %w", i+1, err)
		}
		f, err := protocol.ParseForkText(l.Fork)
		if err != nil {
			return nil, fmt.Errorf("node: fork line %d: %w", i+1, err)
		}
		out = append(out, f)
	}
	return out, nil
}
