package node

import (
	"context"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// maxLocksScan bounds the records one Locks request makes the node read
// from its store (S6: what a peer can make a node compute is bounded); a
// page that reached it ends early, and its Next says where to go on.
const maxLocksScan = 1024

// handleLocks answers ProtoLocks: one page of this node's live, committed
// leases in resource order, with holders shown by identity and a hash of
// their session. Who may ask mirrors Status (the guard's ACL): a member
// sees every resource, a client only those its patterns allow; nobody else
// reaches the node (its connection gater).
func (n *Node) handleLocks(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalLocksRequest(b)
	if err != nil {
		return protocol.LocksReply{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Cluster != n.cfg.Cluster.ID {
		return protocol.LocksReply{Code: protocol.CodeWrongCluster, Message: "request is for cluster " + req.Cluster.String()}.Marshal(), nil
	}
	member := n.cfg.Cluster.NodeIndex(from.String()) > 0
	c, isClient := n.client(from.String())
	if !member && !isClient {
		n.turnedAway(TurnedAwayUnauthorised)
		return protocol.LocksReply{Code: protocol.CodeUnauthorised, Message: fmt.Sprintf("%s is neither a member nor a client", from)}.Marshal(), nil
	}
	scan, ok := n.ops.raw.(recordScanner)
	if !ok {
		return protocol.LocksReply{Code: protocol.CodeInternal, Message: "this node's store cannot list leases"}.Marshal(), nil
	}
	limit := int(req.Limit)
	if limit <= 0 || limit > protocol.MaxLocksPerPage {
		limit = protocol.MaxLocksPerPage
	}
	now := n.clock.Now()
	var out protocol.LocksReply
	last, more, err := scan.ScanRecords(ctx, req.After, maxLocksScan, func(rec Record) bool {
		l := rec.Lease
		if !l.Committed || !l.Active(now) || (!member && !c.Allows(rec.Resource)) {
			return true
		}
		out.Leases = append(out.Leases, protocol.LeaseInfo{
			Resource: rec.Resource, HolderID: l.Holder.ID, Session: l.Holder.Session.Hash(),
			Epoch: l.Epoch, Left: l.Expires.Sub(now),
		})
		return len(out.Leases) < limit
	})
	if err != nil {
		logFailed(ctx, "locks failed", err, "peer", from)
		return protocol.LocksReply{Code: protocol.CodeInternal, Message: "node failed to read its store"}.Marshal(), nil
	}
	if more {
		out.Next = last
	}
	return out.Marshal(), nil
}
