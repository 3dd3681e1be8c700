package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

// A node notices forks (issue 21): two valid tokens for one (resource,
// epoch) with different holders, which S1 rules out while at most f nodes
// misbehave. It sees one when a Commit (from the holder, or relayed), an
// Acquire's proof or a member's ProtoFork shows it a valid token that
// conflicts with the certified token its record holds. It records the
// fork once (by its ID), hands it to Config.OnFork (Dir.Start appends it
// to the fork file, fsynced), counts it, and passes it to the other
// members, who verify it and do the same without passing it back.

// Sources of a fork, the label of MetricForks: a fixed set, so the
// metric's cardinality is bounded.
const (
	// ForkSourceCommit: the Commit of a forking token by its holder.
	ForkSourceCommit = "commit"
	// ForkSourceRelay: the Commit of a forking token sent by another peer.
	ForkSourceRelay = "relay"
	// ForkSourceProof: the proof token of an Acquire.
	ForkSourceProof = "proof"
	// ForkSourceGossip: a ProtoFork request from a member or a client.
	ForkSourceGossip = "gossip"
)

var forkSources = []string{ForkSourceCommit, ForkSourceRelay, ForkSourceProof, ForkSourceGossip}

// forkWith returns the fork of tok with the certified token cert, if they
// fork: same cluster, resource and epoch, different holders. The caller
// vouches for both signatures (cert is the record's certified token, tok
// was verified); the fork is built without any check of its own.
func forkWith(cert *protocol.Token, tok protocol.Token) (protocol.Fork, bool) {
	if cert == nil || cert.Epoch != tok.Epoch || cert.Resource != tok.Resource || cert.Holder == tok.Holder {
		return protocol.Fork{}, false
	}
	f, err := protocol.NewFork(*cert, tok)
	if err != nil {
		return protocol.Fork{}, false
	}
	return f, true
}

// forkBook remembers the forks a node kept, by ID: at most perResource
// per resource and max in all, so that however many forks a set of
// colluding members can make, each honest node checks, stores and writes
// a bounded number of them. One fork per resource proves the violation;
// a few more show whether it repeats.
type forkBook struct {
	mu          sync.Mutex
	perResource int
	max         int
	seen        map[string]bool // fork ID -> kept
	byResource  map[string]int
}

// wants reports, cheaply and before any signature check, whether f could
// still be kept: it is new, and its resource and the node have room.
func (b *forkBook) wants(f protocol.Fork) (ok bool, known bool) {
	id := f.ID()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[id] {
		return false, true
	}
	return b.byResource[f.Resource()] < b.perResource && len(b.seen) < b.max, false
}

// keep records a verified fork; it reports false for a fork already kept
// or one over a cap.
func (b *forkBook) keep(f protocol.Fork) bool {
	id := f.ID()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[id] || b.byResource[f.Resource()] >= b.perResource || len(b.seen) >= b.max {
		return false
	}
	if b.seen == nil {
		b.seen, b.byResource = map[string]bool{}, map[string]int{}
	}
	b.seen[id] = true
	b.byResource[f.Resource()]++
	return true
}

// len is the number of forks kept.
func (b *forkBook) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

// Forks returns how many forks the node holds on record (its fork file
// included).
func (n *Node) Forks() int { return n.forks.len() }

// recordFork keeps a verified fork once (within Limits.ForksPerResource
// and Limits.Forks), hands it to Config.OnFork before it returns (so a
// refusal naming it leaves only once it is on disk), counts and logs it,
// and passes it to the other members except from. It reports whether the
// fork was new.
func (n *Node) recordFork(f protocol.Fork, source string, from peer.ID) bool {
	if !n.forks.keep(f) {
		return false
	}
	n.limits.forksKept.Add(1)
	n.ops.metrics.forkKept(source, true)
	log.Errorw("fork: two valid tokens for one resource and epoch (more than f members signed twice, or were restored from old copies)",
		"resource", f.Resource(), "epoch", f.Epoch(), "fork", f.ID(), "holders", f.A.Holder.Short()+","+f.B.Holder.Short(), "source", source, "peer", from)
	if fn := n.cfg.OnFork; fn != nil {
		fn(f)
	}
	n.gossipFork(f, from)
	return true
}

// seedForks counts forks the node already wrote down (its fork file)
// against the caps, so a restart neither makes room for more nor counts
// or passes on the same fork again.
func (n *Node) seedForks(fs []protocol.Fork) {
	for _, f := range fs {
		if n.forks.keep(f) {
			n.ops.metrics.forkKept("", false)
		}
	}
}

// gossipFork sends f to every other member but skip, in the background,
// each call bounded by Config.RequestTimeout and ended by Close. Only a
// fork new to this node is passed on, so each node sends each fork at
// most once to each member.
func (n *Node) gossipFork(f protocol.Fork, skip peer.ID) {
	b, err := f.MarshalBinary()
	if err != nil {
		return // NewFork and ParseFork made it: not reached
	}
	for _, m := range n.cfg.Cluster.File.Nodes {
		id, err := peer.Decode(m.PeerID)
		if err != nil || id == n.host.ID() || id == skip {
			continue
		}
		n.closeMu.RLock()
		if n.closed {
			n.closeMu.RUnlock()
			return
		}
		n.wg.Add(1)
		n.closeMu.RUnlock()
		go func() {
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
			defer cancel()
			reply, err := transport.Call(ctx, n.host, id, protocol.ProtoFork, b, protocol.MaxFrameSize)
			if err == nil {
				var a protocol.Ack
				if a, err = protocol.UnmarshalAck(reply); err == nil && a.Code != protocol.CodeOK {
					err = &protocol.RefusedError{Code: a.Code, Message: a.Message}
				}
			}
			if err != nil {
				log.Warnw("cannot pass a fork on", "member", m.Index, "peer", id, "fork", f.ID(), "err", err)
			}
		}()
	}
}

// handleFork answers ProtoFork. Cheap checks come first: the encoding
// (ParseFork: two tokens that fork), the cluster, and whether the fork is
// new and has room under Limits.ForksPerResource and Limits.Forks (a fork
// the node already holds is acknowledged unchecked, and not passed on
// again). Only then are the two threshold signatures checked
// (VerifyFork), under the sender's budget of failed signature checks:
// a forged fork is charged to the sender, and once its budget is spent
// its forks are refused unchecked. A fork that verifies is recorded as the
// node's own (recordFork).
func (n *Node) handleFork(_ context.Context, from peer.ID, b []byte) ([]byte, error) {
	bad := func(code protocol.Code, msg string) ([]byte, error) {
		return protocol.Ack{Code: code, Message: msg}.Marshal(), nil
	}
	f, err := protocol.ParseFork(b)
	if err != nil {
		return bad(protocol.CodeBadRequest, err.Error())
	}
	if f.A.Cluster != n.cfg.Cluster.ID {
		return bad(protocol.CodeWrongCluster, "fork is for cluster "+f.A.Cluster.String())
	}
	switch ok, known := n.forks.wants(f); {
	case known:
		return protocol.Ack{Code: protocol.CodeOK, Message: "fork " + f.ID() + " already recorded"}.Marshal(), nil
	case !ok: // S6: forks kept are bounded per resource and in all
		n.limits.forksDropped.Add(1)
		return protocol.Ack{Code: protocol.CodeOK, Message: fmt.Sprintf("enough forks of %q recorded; fork %s not kept", f.Resource(), f.ID())}.Marshal(), nil
	}
	if !n.sigBudget.allow(from, n.clock.Now()) {
		n.limits.throttled.Add(1)
		return bad(protocol.CodeBadRequest, "too many bad signatures from this peer: fork not checked, try again later")
	}
	n.limits.forkChecks.Add(1)
	if err := protocol.VerifyFork(n.cfg.Cluster, f); err != nil {
		n.sigBudget.charge(from, n.clock.Now())
		return bad(protocol.CodeBadRequest, err.Error())
	}
	n.recordFork(f, ForkSourceGossip, from)
	return protocol.Ack{Code: protocol.CodeOK}.Marshal(), nil
}

// forkMessage is the refusal message of a Commit of a forking token.
func forkMessage(f protocol.Fork) string {
	return fmt.Sprintf("token forks the certified token at epoch %d: fork %s recorded", f.Epoch(), f.ID())
}
