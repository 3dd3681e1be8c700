package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// evidenceBook remembers the evidence of equivocation a node kept: at most
// max pieces per accused member, so a Byzantine member sending any number
// of self-incriminating vote pairs makes each honest node check, store and
// write at most max of them. A few pieces prove the member lied as well as
// thousands do.
type evidenceBook struct {
	mu   sync.Mutex
	max  int
	kept map[int]int // accused member index -> pieces kept
	seen map[[32]byte]bool
}

func evidenceKey(ev protocol.Evidence) [32]byte { return sha256.Sum256(ev.Marshal()) }

// wants reports, cheaply and before any signature check, whether ev could
// still be kept: it is new and its member has room.
func (b *evidenceBook) wants(ev protocol.Evidence) bool {
	key := evidenceKey(ev)
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.seen[key] && b.kept[ev.A.Node] < b.max
}

// keep records verified evidence; it reports false for a piece already
// kept or a member already at the cap.
func (b *evidenceBook) keep(ev protocol.Evidence) bool {
	key := evidenceKey(ev)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[key] || b.kept[ev.A.Node] >= b.max {
		return false
	}
	if b.seen == nil {
		b.seen, b.kept = map[[32]byte]bool{}, map[int]int{}
	}
	b.seen[key] = true
	b.kept[ev.A.Node]++
	return true
}

// keepEvidence is recordEvidence's gate: it reports whether ev is new and
// within its member's cap, counting what it keeps.
func (n *Node) keepEvidence(ev protocol.Evidence) bool {
	if !n.evidence.keep(ev) {
		return false
	}
	n.limits.evidenceKept.Add(1)
	n.ops.metrics.evidenceKept(ev.A.Node, true)
	return true
}

// seedEvidence counts evidence the node already wrote down (its evidence
// file) against the per-member cap, so a restart does not make room for
// more.
func (n *Node) seedEvidence(evs []protocol.Evidence) {
	for _, ev := range evs {
		if n.evidence.keep(ev) {
			n.ops.metrics.evidenceKept(ev.A.Node, false)
		}
	}
}

// handleEvidenceBounded answers ProtoEvidence. Cheap checks come first:
// the encoding, that the two votes conflict, the member index, and whether
// the member still has room under Limits.EvidencePerMember. Only then are
// the two identity signatures checked, under the sender's budget of failed
// signature checks, and the evidence kept (and written, Config.OnEvidence).
// Evidence dropped for the cap is acknowledged: the node already holds
// enough proof against that member.
func (n *Node) handleEvidenceBounded(_ context.Context, from peer.ID, b []byte) ([]byte, error) {
	bad := func(msg string) ([]byte, error) {
		return protocol.Ack{Code: protocol.CodeBadRequest, Message: msg}.Marshal(), nil
	}
	ev, err := protocol.UnmarshalEvidence(b)
	if err != nil {
		return bad(err.Error())
	}
	if err := ev.Check(); err != nil {
		return bad(err.Error())
	}
	if ev.A.Node < 1 || ev.A.Node > len(n.cfg.Cluster.File.Nodes) {
		return bad(fmt.Sprintf("evidence names node %d, not a member", ev.A.Node))
	}
	if !n.evidence.wants(ev) { // S6: evidence kept is bounded per accused member
		n.limits.evidenceDropped.Add(1)
		return protocol.Ack{Code: protocol.CodeOK, Message: fmt.Sprintf("evidence against node %d already recorded", ev.A.Node)}.Marshal(), nil
	}
	if !n.sigBudget.allow(from, n.clock.Now()) {
		n.limits.throttled.Add(1)
		return bad("too many bad signatures from this peer: evidence not checked, try again later")
	}
	n.limits.evidenceChecks.Add(1)
	if err := protocol.VerifyEvidence(n.cfg.Cluster, ev); err != nil {
		n.sigBudget.charge(from, n.clock.Now())
		return bad(err.Error())
	}
	n.recordEvidence(ev)
	return protocol.Ack{Code: protocol.CodeOK}.Marshal(), nil
}
