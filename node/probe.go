package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// Member probes: a node that runs them (StartProbing) asks every other
// member for its Status of ProbeResource, over libp2p, every interval, each
// probe bounded by a timeout. A member is reachable while its last probe
// was answered in time. A live connection alone is not taken as proof: a
// partitioned member's connection can look open for a long time.

// ProbeResource is the resource name member probes and "palisade status"
// ask about when no resource is given. Nothing acquires it; a Status of it
// changes nothing.
const ProbeResource = "palisade.probe"

// Probe defaults (palisade node --admin).
const (
	DefaultProbeInterval = 2 * time.Second
	DefaultProbeTimeout  = 2 * time.Second
)

// ErrNotReady is returned by Ready while the node cannot serve: its store
// is not usable, or fewer than t members (itself included) answered their
// last probe.
var ErrNotReady = errors.New("node: not ready")

// MemberHealth is what a node knows of one member's reachability.
type MemberHealth struct {
	Index  int
	PeerID string
	// Self marks the node itself, which is always reachable.
	Self bool
	// Probed is false until the first probe of the member has ended.
	Probed    bool
	Reachable bool
	// RTT is the round trip of the last answered probe.
	RTT time.Duration
	// Err says why the last probe failed.
	Err string
}

// Reachability is a node's view of its cluster's members.
type Reachability struct {
	Members []MemberHealth
	// Reachable counts the reachable members, the node itself included.
	Reachable int
	// Threshold is t = 2f+1: the node is ready while Reachable >= t.
	Threshold int
	// Probing reports whether the node runs member probes.
	Probing bool
}

// prober holds the results of the member probes.
type prober struct {
	mu      sync.Mutex
	members []MemberHealth // index order
	started bool
	t       int
}

func (p *prober) init(c *protocol.Cluster, self peer.ID) {
	p.t = c.File.T
	for _, m := range c.File.Nodes {
		p.members = append(p.members, MemberHealth{Index: m.Index, PeerID: m.PeerID, Self: m.PeerID == self.String()})
	}
}

// StartProbing starts the node's member probes: one round at once, then
// one every interval on the node's clock, each probe bounded by timeout
// (real time: it is network I/O). The probing goroutine belongs to the
// node and stops with Close. Calling it again does nothing.
func (n *Node) StartProbing(interval, timeout time.Duration) error {
	if interval <= 0 || timeout <= 0 {
		return fmt.Errorf("%w: probe interval %v and timeout %v must be positive", ErrBadConfig, interval, timeout)
	}
	n.closeMu.RLock()
	defer n.closeMu.RUnlock()
	if n.closed {
		return ErrClosed
	}
	p := &n.ops.probe
	p.mu.Lock()
	started := p.started
	p.started = true
	p.mu.Unlock()
	if started {
		return nil
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := n.clock.NewTicker(interval)
		defer t.Stop()
		for {
			n.ProbeMembers(n.ctx, timeout)
			select {
			case <-n.ctx.Done():
				return
			case <-t.Chan():
			}
		}
	}()
	return nil
}

// ProbeMembers runs one round of member probes, each bounded by timeout,
// and returns when all have ended. StartProbing runs it periodically;
// tests call it to probe at a known moment.
func (n *Node) ProbeMembers(ctx context.Context, timeout time.Duration) {
	p := &n.ops.probe
	var wg sync.WaitGroup
	for i, m := range p.members {
		if m.Self {
			continue
		}
		id, err := peer.Decode(m.PeerID)
		if err != nil {
			continue // NewCluster checked the member list; not reached
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rtt, err := n.probe(ctx, id, timeout)
			n.probed(i, rtt, err)
		}()
	}
	wg.Wait()
}

// probe asks member id for its Status of ProbeResource and returns the
// round-trip time.
func (n *Node) probe(ctx context.Context, id peer.ID, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	b, err := transport.Call(ctx, n.host, id, protocol.ProtoStatus, protocol.StatusRequest{Resource: ProbeResource}.Marshal(), protocol.MaxFrameSize)
	rtt := time.Since(start)
	if err != nil {
		return 0, err
	}
	if _, err := protocol.UnmarshalStatusReply(b); err != nil {
		return 0, fmt.Errorf("bad status reply: %w", err)
	}
	return rtt, nil
}

// probed records the result of one probe of member i (0-based), updates the
// member gauges and logs a change of reachability.
func (n *Node) probed(i int, rtt time.Duration, err error) {
	p := &n.ops.probe
	p.mu.Lock()
	m := &p.members[i]
	was, first := m.Reachable, !m.Probed
	m.Probed, m.Reachable, m.RTT, m.Err = true, err == nil, rtt, ""
	if err != nil {
		m.Err = err.Error()
	}
	now := *m
	p.mu.Unlock()

	label := fmt.Sprint(now.Index)
	if now.Reachable {
		n.ops.metrics.memberUp.WithLabelValues(label).Set(1)
		n.ops.metrics.memberRTT.WithLabelValues(label).Set(rtt.Seconds())
	} else {
		n.ops.metrics.memberUp.WithLabelValues(label).Set(0)
	}
	switch {
	case now.Reachable && (first || !was):
		log.Infow("member reachable", "member", now.Index, "peer", now.PeerID, "rtt", rtt.String())
	case !now.Reachable && (first || was):
		log.Warnw("member unreachable", "member", now.Index, "peer", now.PeerID, "err", now.Err)
	}
}

// Reachability returns the node's current view of its members: the
// results of the last probes (none before StartProbing), the node itself
// counted as reachable while it runs.
func (n *Node) Reachability() Reachability {
	n.closeMu.RLock()
	closed := n.closed
	n.closeMu.RUnlock()
	p := &n.ops.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	r := Reachability{Members: make([]MemberHealth, len(p.members)), Threshold: p.t, Probing: p.started && !closed}
	for i, m := range p.members {
		if m.Self {
			m.Probed, m.Reachable = true, !closed
		}
		if m.Reachable {
			r.Reachable++
		}
		r.Members[i] = m
	}
	return r
}

// Ready reports whether the node can serve: it runs, its vote store
// answers a read, it runs member probes, and at least t = 2f+1 members
// (itself included) answered their last probe. Otherwise the error
// matches ErrNotReady (or is ErrClosed) and says why.
func (n *Node) Ready(ctx context.Context) error {
	n.closeMu.RLock()
	closed := n.closed
	n.closeMu.RUnlock()
	if closed {
		return ErrClosed
	}
	if _, _, err := n.store.Load(ctx, ProbeResource); err != nil {
		return fmt.Errorf("%w: vote store: %w", ErrNotReady, err)
	}
	r := n.Reachability()
	if !r.Probing {
		return fmt.Errorf("%w: member probes are not running", ErrNotReady)
	}
	if r.Reachable < r.Threshold {
		var down []string
		for _, m := range r.Members {
			switch {
			case m.Reachable:
			case !m.Probed:
				down = append(down, fmt.Sprintf("node%d (not probed yet)", m.Index))
			default:
				down = append(down, fmt.Sprintf("node%d (%s)", m.Index, m.Err))
			}
		}
		return fmt.Errorf("%w: %d of %d members reachable, need t=%d; unreachable: %s",
			ErrNotReady, r.Reachable, len(r.Members), r.Threshold, strings.Join(down, ", "))
	}
	return nil
}
