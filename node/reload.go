package node

import (
	"fmt"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// ReloadReport says what a reload of cluster.json changed.
type ReloadReport struct {
	// Clients is the number of clients now configured.
	Clients int
	// Added and Removed name the clients added and removed.
	Added, Removed []protocol.ClientInfo
}

// ReloadCluster re-reads the node directory's cluster.json and applies its
// client list (what "palisade node" does on SIGHUP). The file must be this
// node's cluster with only the clients changed: a file that does not load,
// or whose group key, cluster ID, N, t, members or epoch parameters differ,
// is refused (the error matches ErrClusterMismatch for the latter) and the
// node keeps its configuration. Either way the outcome is logged and
// counted (palisade_config_reloads_total).
//
// S6: added clients may connect and acquire by their patterns from then
// on; removed clients are refused by the access list at once, taken off
// the connection allowlist, and disconnected.
func (r *Running) ReloadCluster() (ReloadReport, error) {
	path := filepath.Join(r.dirPath, ClusterFileName)
	rep, err := r.reload(path)
	if err != nil {
		r.ops.metrics.reloads.WithLabelValues("refused").Inc()
		log.Errorw("refusing to reload the cluster file; keeping the current configuration", "file", path, "err", err)
		return ReloadReport{}, err
	}
	r.ops.metrics.reloads.WithLabelValues("applied").Inc()
	log.Infow("cluster file reloaded", "file", path, "clients", rep.Clients, "added", clientNames(rep.Added), "removed", clientNames(rep.Removed))
	return rep, nil
}

func (r *Running) reload(path string) (ReloadReport, error) {
	c, err := protocol.LoadCluster(path)
	if err != nil {
		return ReloadReport{}, err
	}
	ids := map[string]peer.ID{}
	for _, cl := range c.File.Clients {
		id, err := peer.Decode(cl.PeerID)
		if err != nil {
			return ReloadReport{}, fmt.Errorf("%w: %s: client %q: %w", protocol.ErrBadClusterFile, path, cl.Name, err)
		}
		ids[cl.PeerID] = id
	}
	added, removed, err := r.SetClients(c)
	if err != nil {
		return ReloadReport{}, err
	}
	for _, cl := range added {
		r.gater.Allow(ids[cl.PeerID])
	}
	// The access list already refuses a removed client; now it is cut off.
	for _, cl := range removed {
		id, err := peer.Decode(cl.PeerID)
		if err != nil {
			continue // it was decoded when the node started
		}
		r.gater.Disallow(id)
		_ = r.host.Network().ClosePeer(id)
	}
	return ReloadReport{Clients: len(c.File.Clients), Added: added, Removed: removed}, nil
}

func clientNames(cs []protocol.ClientInfo) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
