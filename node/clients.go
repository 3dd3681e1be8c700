package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// ErrClusterMismatch reports a cluster file that a running node refuses to
// load: it changes more than the client list (the group key, cluster ID,
// N, t, members or another parameter differ from the node's).
var ErrClusterMismatch = errors.New("node: cluster file differs from this node's in more than its clients")

// clientTable is one immutable version of the node's client list. Requests
// read the current one through an atomic pointer (ops.clients) while a
// reload swaps in a new one, so a request sees either the whole old list
// or the whole new one.
type clientTable struct {
	list   []protocol.ClientInfo
	byPeer map[string]protocol.ClientInfo
}

// newClientTable copies cs into a table.
func newClientTable(cs []protocol.ClientInfo) *clientTable {
	t := &clientTable{byPeer: make(map[string]protocol.ClientInfo, len(cs))}
	for _, c := range cs {
		c.Resources = slices.Clone(c.Resources)
		t.list = append(t.list, c)
		t.byPeer[c.PeerID] = c
	}
	return t
}

// client returns the entry of a client peer ID in the node's current
// client list: the access list of S6.
func (n *Node) client(peerID string) (protocol.ClientInfo, bool) {
	c, ok := n.ops.clients.Load().byPeer[peerID]
	return c, ok
}

// Clients returns a copy of the node's current client list.
func (n *Node) Clients() []protocol.ClientInfo {
	t := n.ops.clients.Load()
	out := make([]protocol.ClientInfo, len(t.list))
	for i, c := range t.list {
		c.Resources = slices.Clone(c.Resources)
		out[i] = c
	}
	return out
}

// peerName names a peer for logs: its client name, "nodeI" for a member,
// else its peer ID.
func (n *Node) peerName(p peer.ID) string {
	id := p.String()
	if c, ok := n.client(id); ok && c.Name != "" {
		return c.Name
	}
	if i := n.cfg.Cluster.NodeIndex(id); i > 0 {
		return fmt.Sprintf("node%d", i)
	}
	return id
}

// SetClients replaces the node's client list with that of c, which must be
// this node's cluster with nothing but its clients changed: otherwise it
// returns an error matching ErrClusterMismatch that names what differs,
// and the node keeps its list. Requests in progress finish under the list
// they started with; the next ones see the new list. It reports the
// clients added and removed (by peer ID); a client whose patterns or name
// changed is in neither.
//
// SetClients changes only which identities the node serves (S6); the
// caller also changes which peers may connect (Running.ReloadCluster does
// both).
func (n *Node) SetClients(c *protocol.Cluster) (added, removed []protocol.ClientInfo, err error) {
	if diff := clusterDiff(n.cfg.Cluster, c); len(diff) > 0 {
		return nil, nil, fmt.Errorf("%w: %s", ErrClusterMismatch, strings.Join(diff, ", "))
	}
	next := newClientTable(c.File.Clients)
	n.ops.clientsMu.Lock()
	defer n.ops.clientsMu.Unlock()
	prev := n.ops.clients.Load()
	for _, cl := range next.list {
		if _, ok := prev.byPeer[cl.PeerID]; !ok {
			added = append(added, cl)
		}
	}
	for _, cl := range prev.list {
		if _, ok := next.byPeer[cl.PeerID]; !ok {
			removed = append(removed, cl)
		}
	}
	n.ops.clients.Store(next)
	return added, removed, nil
}

// clusterDiff names what differs between two clusters besides their
// client lists.
func clusterDiff(a, b *protocol.Cluster) []string {
	fa, fb := a.File, b.File
	var diff []string
	add := func(differs bool, what string, va, vb any) {
		if differs {
			diff = append(diff, fmt.Sprintf("%s (%v, file has %v)", what, va, vb))
		}
	}
	add(a.ID != b.ID, "cluster ID", a.ID, b.ID)
	add(fa.Name != fb.Name, "name", fa.Name, fb.Name)
	add(!slices.Equal(fa.GroupKey, fb.GroupKey), "group key", short(fa.GroupKey), short(fb.GroupKey))
	add(fa.N != fb.N, "n", fa.N, fb.N)
	add(fa.T != fb.T, "threshold t", fa.T, fb.T)
	if len(fa.Nodes) != len(fb.Nodes) {
		add(true, "members", len(fa.Nodes), len(fb.Nodes))
	} else if !slices.EqualFunc(fa.Nodes, fb.Nodes, sameNode) {
		var idx []string
		for i := range fa.Nodes {
			if !sameNode(fa.Nodes[i], fb.Nodes[i]) {
				idx = append(idx, fmt.Sprint(fa.Nodes[i].Index))
			}
		}
		diff = append(diff, "members (node "+strings.Join(idx, ", ")+" differ in peer ID or addresses)")
	}
	add(fa.MaxEpochStep != fb.MaxEpochStep, "max_epoch_step", fa.MaxEpochStep, fb.MaxEpochStep)
	add(fa.EpochFloor != fb.EpochFloor, "epoch_floor", fa.EpochFloor, fb.EpochFloor)
	add(fa.Version != fb.Version, "version", fa.Version, fb.Version)
	return diff
}

func sameNode(a, b protocol.NodeInfo) bool {
	return a.Index == b.Index && a.PeerID == b.PeerID && slices.Equal(a.Addrs, b.Addrs)
}

// short abbreviates a group key for an error message.
func short(key []string) string {
	if len(key) == 0 || len(key[0]) < 16 {
		return strings.Join(key, ",")
	}
	return key[0][:16] + "…"
}
