package dkg

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// MemberList is the ceremony input every operator gets, byte for byte
// identical: the cluster name, the members that will hold shares (in share
// index order) and the authorised clients, as they will appear in
// cluster.json.
type MemberList struct {
	// Name is the cluster name (a resharing keeps the old name).
	Name string `json:"name"`
	// Threshold is t; 0 means FaultThreshold(len(Members)), the only value
	// a cluster file accepts.
	Threshold int `json:"threshold,omitempty"`
	// MaxEpochStep goes into cluster.json (0: the default).
	MaxEpochStep uint64 `json:"max_epoch_step,omitempty"`
	// Members are the share holders: share index i+1 is Members[i].
	Members []Member `json:"members"`
	// Clients are the authorised client identities.
	Clients []protocol.ClientInfo `json:"clients"`
	// CeremonyAddrs optionally gives, per peer ID, the addresses a
	// participant listens on during the ceremony when they differ from its
	// node addresses (an old member whose node keeps running during a
	// resharing, or an old member that leaves).
	CeremonyAddrs map[string][]string `json:"ceremony_addrs,omitempty"`
}

// Member is one share holder: its libp2p peer ID and node addresses.
type Member struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// LoadMemberList reads and checks a member list file strictly (unknown
// fields and trailing data are refused).
func LoadMemberList(path string) (*MemberList, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("dkg: read member list: %w", err)
	}
	l, err := ParseMemberList(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, b, nil
}

// ParseMemberList decodes and checks a member list.
func ParseMemberList(b []byte) (*MemberList, error) {
	var l MemberList
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMemberList, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrBadMemberList)
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return &l, nil
}

func (l *MemberList) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadMemberList, fmt.Sprintf(format, args...))
	}
	n := len(l.Members)
	if l.Name == "" {
		return bad("empty name")
	}
	if n < 4 || n > crypto.MaxNodes {
		return bad("%d members: a DKG needs at least 4 (f >= 1) and at most %d", n, crypto.MaxNodes)
	}
	if _, t := crypto.FaultThreshold(n); l.Threshold != 0 && l.Threshold != t {
		return bad("threshold %d: %d members need t = 2f+1 = %d", l.Threshold, n, t)
	}
	seen := map[string]bool{}
	for i, m := range l.Members {
		if _, err := peer.Decode(m.PeerID); err != nil {
			return bad("member %d: peer ID %q: %v", i+1, m.PeerID, err)
		}
		if seen[m.PeerID] {
			return bad("member %d: duplicate peer ID %s", i+1, m.PeerID)
		}
		if len(m.Addrs) == 0 {
			return bad("member %d (%s) has no address", i+1, m.PeerID)
		}
		seen[m.PeerID] = true
	}
	if l.MaxEpochStep > protocol.MaxMaxEpochStep {
		return bad("max_epoch_step %d exceeds the limit %d", l.MaxEpochStep, protocol.MaxMaxEpochStep)
	}
	for _, c := range l.Clients {
		if _, err := peer.Decode(c.PeerID); err != nil || seen[c.PeerID] {
			return bad("client %q: bad or duplicate peer ID", c.Name)
		}
		seen[c.PeerID] = true
		for _, p := range c.Resources {
			if err := protocol.ValidatePattern(p); err != nil {
				return bad("client %q: %v", c.Name, err)
			}
		}
	}
	for p := range l.CeremonyAddrs {
		if _, err := peer.Decode(p); err != nil {
			return bad("ceremony_addrs: peer ID %q: %v", p, err)
		}
	}
	return nil
}

// T is the threshold of the new sharing.
func (l *MemberList) T() int {
	_, t := crypto.FaultThreshold(len(l.Members))
	return t
}

// Index returns the 1-based share index of a peer, or 0.
func (l *MemberList) Index(p string) int {
	for i, m := range l.Members {
		if m.PeerID == p {
			return i + 1
		}
	}
	return 0
}

// nodes returns the cluster file's node entries.
func (l *MemberList) nodes() []protocol.NodeInfo {
	out := make([]protocol.NodeInfo, len(l.Members))
	for i, m := range l.Members {
		out[i] = protocol.NodeInfo{Index: i + 1, PeerID: m.PeerID, Addrs: m.Addrs}
	}
	return out
}

// canonical is the member list re-encoded, so that formatting differences
// between operators' copies do not change the ceremony ID.
func (l *MemberList) canonical() []byte {
	b, _ := json.Marshal(l) // plain structs and maps: cannot fail
	return b
}

// ClusterHash is the SHA-256 of a cluster file's canonical bytes (what
// protocol.ClusterFile.Save writes). Every member of a ceremony prints it.
func ClusterHash(f protocol.ClusterFile) ([32]byte, []byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return [32]byte{}, nil, fmt.Errorf("dkg: encode cluster file: %w", err)
	}
	b = append(b, '\n')
	return sha256.Sum256(b), b, nil
}
