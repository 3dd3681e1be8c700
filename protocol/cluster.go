package protocol

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/palisade-dev/palisade/crypto"
)

// ClusterFileVersion is the version of the cluster.json format. Version 2
// holds BLS12-381 keys (96-byte compressed G2 commitments) and names its
// ciphersuite; version 1 held bn256 keys and is refused with
// ErrClusterFileVersion.
const ClusterFileVersion = 2

// DefaultMaxEpochStep is how far above its known epoch a node votes when the
// cluster file does not say.
const DefaultMaxEpochStep = 1024

// MaxMaxEpochStep is the largest max_epoch_step a cluster may have. An era
// holds 2^EraBits epochs; with a step of at most 2^16 a group needs at
// least 2^32 rounds of votes to cross one, so the step cannot be used to
// exhaust an era, and epochs stay far from the uint64 limit (S5).
const MaxMaxEpochStep = 1 << 16

// ErrBadClusterFile reports a cluster file that is inconsistent or malformed.
var ErrBadClusterFile = errors.New("protocol: bad cluster file")

// ErrClusterFileVersion reports a cluster file of another format version:
// the error names the version and what to do. It wraps ErrBadClusterFile.
var ErrClusterFileVersion = fmt.Errorf("%w: unsupported version", ErrBadClusterFile)

// ClusterFile is cluster.json: everything a client or verifier needs to know
// about a cluster, and nothing secret. Its group key is trusted as read, so
// it must come from a trusted source (keygen or DKG output).
type ClusterFile struct {
	Version int `json:"version"`
	// Ciphersuite names the signature scheme the group key belongs to:
	// crypto.Ciphersuite, so that an outside verifier knows what to call.
	Ciphersuite string `json:"ciphersuite"`
	Name        string `json:"name"`
	ClusterID   string `json:"cluster_id"`
	N           int    `json:"n"`
	T           int    `json:"t"`
	// GroupKey holds the hex commitments of the sharing polynomial; the
	// first is the group public key.
	GroupKey     []string `json:"group_key"`
	MaxEpochStep uint64   `json:"max_epoch_step"`
	// EpochFloor is the start of the cluster's current epoch era: nodes
	// never vote at or below it. Each resharing raises it above every
	// epoch the previous group could have certified, so S1 holds across
	// membership changes (see docs/design-notes.md). The cluster ID does
	// not depend on it.
	EpochFloor uint64       `json:"epoch_floor,omitempty"`
	Nodes      []NodeInfo   `json:"nodes"`
	Clients    []ClientInfo `json:"clients"`
}

// NodeInfo describes one member.
type NodeInfo struct {
	Index  int      `json:"index"`
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// ClientInfo describes an authorised client identity and the resource name
// patterns it may acquire. In a pattern, '*' matches any run of characters
// (including '/'); everything else matches itself.
type ClientInfo struct {
	Name      string   `json:"name"`
	PeerID    string   `json:"peer_id"`
	Resources []string `json:"resources"`
}

// Allows reports whether the client may acquire resource.
func (c ClientInfo) Allows(resource string) bool {
	for _, p := range c.Resources {
		if globMatch(p, resource) {
			return true
		}
	}
	return false
}

// globMatch matches pattern against s where '*' matches any run of
// characters. It backtracks only to the last star, so it runs in
// O(len(pattern) * len(s)) whatever the pattern.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Cluster is a parsed and checked cluster file.
type Cluster struct {
	File ClusterFile
	ID   ClusterID
	Key  *crypto.GroupKey
	F    int
}

// NewCluster checks a cluster file: version, parameters (N = 3f+1 or more,
// t = 2f+1), group key, and that the cluster ID is the hash of the name and
// the group public key.
func NewCluster(f ClusterFile) (*Cluster, error) {
	bad := func(format string, args ...any) (*Cluster, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadClusterFile, fmt.Sprintf(format, args...))
	}
	switch {
	case f.Version == 1:
		return nil, fmt.Errorf("%w: version 1 holds a bn256 group key, which this release no longer uses; run a new DKG (palisade dkg) to make a BLS12-381 key and a version %d cluster file", ErrClusterFileVersion, ClusterFileVersion)
	case f.Version != ClusterFileVersion:
		return nil, fmt.Errorf("%w: version %d, this release reads version %d", ErrClusterFileVersion, f.Version, ClusterFileVersion)
	case f.Ciphersuite != crypto.Ciphersuite:
		return bad("ciphersuite %q, want %q", f.Ciphersuite, crypto.Ciphersuite)
	}
	if f.Name == "" {
		return bad("empty name")
	}
	ff, t := crypto.FaultThreshold(f.N)
	if f.N < 1 || f.T != t {
		return bad("n=%d needs t=%d, file says t=%d", f.N, t, f.T)
	}
	if len(f.GroupKey) != f.T {
		return bad("%d group key commitments, want t=%d", len(f.GroupKey), f.T)
	}
	commits := make([][]byte, len(f.GroupKey))
	for i, h := range f.GroupKey {
		b, err := hex.DecodeString(h)
		if err != nil {
			return bad("group key commitment %d: %v", i, err)
		}
		commits[i] = b
	}
	key, err := crypto.NewGroupKey(f.N, commits)
	if err != nil {
		// %w twice: callers can match ErrBadClusterFile and the crypto
		// reason (crypto.ErrNotInSubgroup, for one).
		return nil, fmt.Errorf("%w: group key: %w", ErrBadClusterFile, err)
	}
	id := NewClusterID(f.Name, key.PublicKey())
	if f.ClusterID != id.String() {
		return bad("cluster_id %q does not match name and group key (%s)", f.ClusterID, id)
	}
	if len(f.Nodes) != 0 && len(f.Nodes) != f.N {
		return bad("%d nodes listed, n=%d", len(f.Nodes), f.N)
	}
	seen := map[string]bool{}
	for i, n := range f.Nodes {
		if n.Index != i+1 {
			return bad("node %d has index %d, want %d", i, n.Index, i+1)
		}
		if n.PeerID == "" || seen[n.PeerID] {
			return bad("node %d: empty or duplicate peer ID", n.Index)
		}
		seen[n.PeerID] = true
		for _, a := range n.Addrs {
			if err := ValidateNodeAddr(a); err != nil {
				return bad("node %d: %v", n.Index, err)
			}
		}
	}
	for _, c := range f.Clients {
		if c.PeerID == "" || seen[c.PeerID] {
			return bad("client %q: empty or duplicate peer ID", c.Name)
		}
		seen[c.PeerID] = true
	}
	for _, c := range f.Clients {
		for _, p := range c.Resources {
			if err := ValidatePattern(p); err != nil {
				return bad("client %q: %v", c.Name, err)
			}
		}
	}
	if f.MaxEpochStep == 0 {
		f.MaxEpochStep = DefaultMaxEpochStep
	}
	if f.MaxEpochStep > MaxMaxEpochStep {
		return bad("max_epoch_step %d exceeds the limit %d", f.MaxEpochStep, MaxMaxEpochStep)
	}
	if f.EpochFloor%(1<<EraBits) != 0 {
		return bad("epoch_floor %d is not the start of an era (a multiple of 2^%d)", f.EpochFloor, EraBits)
	}
	return &Cluster{File: f, ID: id, Key: key, F: ff}, nil
}

// NewClusterFile fills a cluster file for a group key.
func NewClusterFile(name string, key *crypto.GroupKey, nodes []NodeInfo, clients []ClientInfo) ClusterFile {
	f := ClusterFile{
		Version:      ClusterFileVersion,
		Ciphersuite:  crypto.Ciphersuite,
		Name:         name,
		ClusterID:    NewClusterID(name, key.PublicKey()).String(),
		N:            key.N(),
		T:            key.Threshold(),
		MaxEpochStep: DefaultMaxEpochStep,
		Nodes:        nodes,
		Clients:      clients,
	}
	for _, c := range key.Commitments() {
		f.GroupKey = append(f.GroupKey, hex.EncodeToString(c))
	}
	return f
}

// LoadCluster reads and checks a cluster file.
func LoadCluster(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("protocol: read cluster file: %w", err)
	}
	var f ClusterFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadClusterFile, path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: data after the JSON object", ErrBadClusterFile, path)
	}
	c, err := NewCluster(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Save writes the cluster file (it holds nothing secret: mode 0644).
func (f ClusterFile) Save(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("protocol: encode cluster file: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("protocol: write cluster file: %w", err)
	}
	return nil
}

// Client returns the client entry for a peer ID.
func (c *Cluster) Client(peerID string) (ClientInfo, bool) {
	for _, cl := range c.File.Clients {
		if cl.PeerID == peerID {
			return cl, true
		}
	}
	return ClientInfo{}, false
}

// NodeIndex returns the 1-based index of a member peer ID, or 0.
func (c *Cluster) NodeIndex(peerID string) int {
	for _, n := range c.File.Nodes {
		if n.PeerID == peerID {
			return n.Index
		}
	}
	return 0
}

// Statement builds the statement for this cluster.
func (c *Cluster) Statement(resource string, epoch uint64, holder Holder) Statement {
	return Statement{Cluster: c.ID, Resource: resource, Epoch: epoch, Holder: holder}
}

// ValidateNodeAddr checks one of a member's announced addresses: a TCP
// multiaddr, the only transport the nodes speak, whose host part is an
// IP address or a DNS name that the dialling side resolves:
//
//	/ip4/203.0.113.7/tcp/4001
//	/ip6/2001:db8::7/tcp/4001
//	/dns4/node-a.example/tcp/4001   (A records)
//	/dns6/node-a.example/tcp/4001   (AAAA records)
//	/dns/node-a.example/tcp/4001    (either)
//
// An address is what others dial, never what a node binds: a node
// listens on node.json's "listen" (for instance /ip4/0.0.0.0/tcp/4001)
// and announces these. The check takes no import beyond the standard
// library, so that resources that load a cluster file stay free of
// libp2p.
func ValidateNodeAddr(addr string) error {
	bad := func(why string) error { return fmt.Errorf("address %q: %s", addr, why) }
	parts := strings.Split(addr, "/")
	// "", proto, host, "tcp", port
	if len(parts) != 5 || parts[0] != "" || parts[3] != "tcp" {
		return bad("want /ip4|/ip6|/dns4|/dns6|/dns/HOST/tcp/PORT")
	}
	host := parts[2]
	switch parts[1] {
	case "ip4", "ip6":
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" || ip.Is4() != (parts[1] == "ip4") {
			return bad("not an " + map[string]string{"ip4": "IPv4", "ip6": "IPv6"}[parts[1]] + " address")
		}
		if ip.IsUnspecified() {
			return bad("an unspecified address can be listened on, not dialled: announce the address others reach this node at, and put 0.0.0.0 in node.json's listen")
		}
	case "dns", "dns4", "dns6":
		if err := validDNSName(host); err != nil {
			return bad(err.Error())
		}
	default:
		return bad("protocol " + strconv.Quote(parts[1]) + ": want ip4, ip6, dns4, dns6 or dns")
	}
	port, err := strconv.ParseUint(parts[4], 10, 16)
	if err != nil || port == 0 || strconv.FormatUint(port, 10) != parts[4] {
		return bad("TCP port " + strconv.Quote(parts[4]) + ": want 1..65535")
	}
	return nil
}

// validDNSName checks a host name as DNS allows it: at most 253
// characters, dot-separated labels of 1 to 63 letters, digits, '-' or
// '_', no label starting or ending with '-'; one trailing dot allowed.
func validDNSName(name string) error {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return errors.New("DNS name must have 1 to 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("DNS label %q must have 1 to 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("DNS label %q starts or ends with '-'", label)
		}
		for _, r := range label {
			if r > unicode.MaxASCII || !(r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return fmt.Errorf("DNS label %q: character %q (use the punycode form of a non-ASCII name)", label, r)
			}
		}
	}
	return nil
}
