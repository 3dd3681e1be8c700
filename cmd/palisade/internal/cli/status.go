package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

func statusFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	timeoutFlag(fs, c)
}

// memberStatus is one member's answer to status.
type memberStatus struct {
	info    protocol.NodeInfo
	err     error
	rtt     time.Duration
	version string
	reply   protocol.StatusReply
	// self: the member is the identity's own, checked by askSelf.
	self bool
}

// runStatus asks every member of the cluster for its Status, as the
// client or member identity of --identity (the members' gaters admit only
// members and clients, so a throwaway key would be refused), and prints
// one line per member: reachable or not, its version from libp2p
// identify, the round trip of its Status call and, with RESOURCE, its
// view of it. A member's own identity cannot ask that member (libp2p never
// dials its own peer ID): its line checks the member's address by TCP
// instead (askSelf). More than f members dropping the connection is a
// refusal (exit status 5: they do not admit the identity, whatever
// --cluster says); fewer than t answers otherwise fail with
// errNotEnoughNodes (exit status 4).
func runStatus(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) > 1 {
		return usageErrorf("status", "status: want at most one RESOURCE, got %d arguments", len(args))
	}
	quietClientLogs() // libp2p's identify warnings: the lines say it all
	if err := requireFlag("status", "cluster", cfg.Cluster); err != nil {
		return err
	}
	if err := requireFlag("status", "identity", cfg.Identity); err != nil {
		return err
	}
	if cfg.Ops.Timeout <= 0 {
		return usageErrorf("status", "status: --timeout %v must be above 0", cfg.Ops.Timeout)
	}
	resource := node.ProbeResource
	if len(args) == 1 {
		resource = args[0]
		if err := protocol.ValidateResource(resource); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	cluster, err := protocol.LoadCluster(cfg.Cluster)
	if err != nil {
		return clusterLoadError("status", cfg.Cluster, err)
	}
	if err := checkLoadedPin("status", cfg, cluster); err != nil {
		return err
	}
	key, err := transport.LoadIdentity(cfg.Identity)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return fmt.Errorf("status: identity: %w", err)
	}
	// S6: nodes admit only the cluster file's members and clients, and
	// show a client only the resources its patterns allow.
	selfIndex := cluster.NodeIndex(self.String())
	if c, ok := cluster.Client(self.String()); ok {
		if len(args) == 1 && !c.Allows(resource) {
			fmt.Fprintf(e.stderr, "palisade: note: client %q may not access %q: nodes answer it as for an unused resource\n", c.Name, resource)
		}
	} else if selfIndex == 0 {
		return refusedf("status: identity %s (peer ID %s) is neither a client nor a member in %s: the nodes refuse its connections; give the --identity of a listed client or member", cfg.Identity, self, cfg.Cluster)
	}

	var ids []peer.ID
	for _, m := range cluster.File.Nodes {
		id, err := peer.Decode(m.PeerID)
		if err != nil {
			return fmt.Errorf("status: node %d: %w", m.Index, err)
		}
		ids = append(ids, id)
	}
	h, err := transport.NewHost(key, nil, transport.NewGater(ids...))
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer h.Close()
	results := make([]memberStatus, len(cluster.File.Nodes))
	var wg sync.WaitGroup
	for i, m := range cluster.File.Nodes {
		results[i].info = m
		if err := transport.AddPeer(h, ids[i], m.Addrs); err != nil {
			results[i].err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m.Index == selfIndex {
				results[i] = askSelf(ctx, m, cfg.Ops.Timeout)
				return
			}
			results[i] = askStatus(ctx, h, ids[i], m, resource, cfg.Ops.Timeout)
		}()
	}
	wg.Wait()

	answered := 0
	var dropped []*client.NodeError
	for _, r := range results {
		line := fmt.Sprintf("node=%d peer=%s", r.info.Index, r.info.PeerID)
		if r.err != nil {
			if client.Dropped(r.err) {
				dropped = append(dropped, &client.NodeError{Index: r.info.Index, Peer: r.info.PeerID, Err: r.err})
			}
			fmt.Fprintf(e.stdout, "%s reachable=false error=%q\n", line, r.err.Error())
			continue
		}
		answered++
		if r.self {
			line += fmt.Sprintf(" reachable=true self=true rtt=%s", r.rtt.Round(time.Microsecond))
			fmt.Fprintln(e.stdout, line)
			continue
		}
		line += fmt.Sprintf(" reachable=true version=%s rtt=%s", r.version, r.rtt.Round(time.Microsecond))
		if len(args) == 1 {
			line += " " + describeStatus(cluster, r.reply)
		}
		fmt.Fprintln(e.stdout, line)
	}
	fmt.Fprintf(e.stdout, "%d of %d members reachable (t=%d)\n", answered, len(results), cluster.File.T)
	if f := (cluster.File.T - 1) / 2; len(dropped) > f && answered < cluster.File.T {
		// As client.NotAdmitted: more than f members turn the identity
		// away, an honest one among them; not an outage.
		return refusedf("status: refused: %s dropped the connection: their cluster.json does not admit identity %s (--identity %s) as a client or member: have every node's operator add it (\"palisade clients add\") and send the node SIGHUP",
			nodeNames(dropped), self, cfg.Identity)
	}
	if answered < cluster.File.T {
		return fmt.Errorf("status: %w: %d of %d members answered, t=%d are needed to issue tokens", errNotEnoughNodes, answered, len(results), cluster.File.T)
	}
	return nil
}

// askSelf checks the member whose identity status runs with: libp2p never
// dials its own peer ID, so its Status cannot be asked; a TCP connection to
// one of its addresses in the cluster file shows that it listens. The
// round trip is the connection's.
func askSelf(ctx context.Context, m protocol.NodeInfo, timeout time.Duration) memberStatus {
	r := memberStatus{info: m, self: true}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	r.err = fmt.Errorf("no TCP address in %v", m.Addrs)
	for _, a := range m.Addrs {
		hostport, err := tcpHostPort(a)
		if err != nil {
			r.err = err
			continue
		}
		start := time.Now()
		c, err := d.DialContext(ctx, "tcp", hostport)
		if err != nil {
			r.err = fmt.Errorf("own member's address %s: %w", a, err)
			continue
		}
		r.rtt, r.err = time.Since(start), nil
		_ = c.Close()
		return r
	}
	return r
}

// tcpHostPort is the host:port of a /ip4, /ip6 or /dns* TCP multiaddr.
func tcpHostPort(addr string) (string, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := m.ValueForProtocol(ma.P_TCP)
	if err != nil {
		return "", fmt.Errorf("address %q: no TCP port", addr)
	}
	for _, p := range []int{ma.P_IP4, ma.P_IP6, ma.P_DNS, ma.P_DNS4, ma.P_DNS6} {
		if host, err := m.ValueForProtocol(p); err == nil {
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", fmt.Errorf("address %q: no IP address or DNS name", addr)
}

// askStatus connects to one member, then times one Status call over the
// open connection.
func askStatus(ctx context.Context, h host.Host, id peer.ID, m protocol.NodeInfo, resource string, timeout time.Duration) memberStatus {
	r := memberStatus{info: m}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: id}); err != nil {
		r.err = err
		return r
	}
	start := time.Now()
	b, err := transport.Call(ctx, h, id, protocol.ProtoStatus, protocol.StatusRequest{Resource: resource}.Marshal(), protocol.MaxFrameSize)
	r.rtt = time.Since(start)
	if err == nil {
		r.reply, err = protocol.UnmarshalStatusReply(b)
	}
	if err != nil {
		r.err = err
		return r
	}
	r.version = "unknown"
	if v, err := h.Peerstore().Get(id, "AgentVersion"); err == nil {
		if s, ok := v.(string); ok && s != "" {
			r.version = s
		}
	}
	return r
}

// describeStatus prints a member's view of a resource: its last epoch and
// the lease holder, by client name where the cluster file has one.
func describeStatus(c *protocol.Cluster, st protocol.StatusReply) string {
	s := fmt.Sprintf("last_epoch=%d", st.LastEpoch)
	if st.Holder.IsZero() {
		s += " holder=none"
		if !st.Reserved.IsZero() {
			// Free, but held for the first waiter (push handoff).
			s += fmt.Sprintf(" reserved_for=%s session=%s reserved_left=%s", nameOfClient(c, st.Reserved.ID), shortHash(st.Reserved.Session), st.ReservedLeft.Round(time.Millisecond))
		}
		return s
	}
	return s + fmt.Sprintf(" holder=%s session=%s lease_epoch=%d lease_left=%s", nameOfClient(c, st.Holder.ID), shortHash(st.Holder.Session), st.LeaseEpoch, st.LeaseLeft.Round(time.Millisecond))
}

// nameOfClient is the cluster file's name of client identity id, or id.
func nameOfClient(c *protocol.Cluster, id string) string {
	if cl, ok := c.Client(id); ok && cl.Name != "" {
		return cl.Name
	}
	return id
}

// shortHash is the first 8 hex digits of a session's hash: replies never
// show a session ID.
func shortHash(h protocol.SessionHash) string { return h.String()[:8] }
