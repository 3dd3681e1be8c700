package client

import (
	"errors"
	"strings"
)

// droppedText is what libp2p's NewStream says when the connection it has
// just made is already gone: the remote's connection gater closed it after
// the handshake, which is how a node turns away a peer that is neither a
// member nor a client in its cluster.json.
const droppedText = "connection failed"

// Dropped reports whether one node's error (a NodeError's Err) is a
// connection the node closed right after the handshake: the node does not
// admit this client's identity. A node that is down or unreachable fails
// the dial instead.
func Dropped(err error) bool {
	return err != nil && strings.Contains(err.Error(), droppedText)
}

// NotAdmitted reports whether err shows that the cluster does not admit
// this client's identity: it is a *QuorumError in which more than f of the
// nodes (f = (Need-1)/2) dropped the connection (Dropped). More than f
// such nodes include an honest one, so retrying is useless until the
// nodes' cluster.json lists the identity among its clients: callers treat
// it like ErrRefused, not like an outage, whatever their own copy of the
// cluster file says.
func NotAdmitted(err error) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	f := (qe.Need - 1) / 2
	dropped := 0
	for _, n := range qe.Nodes {
		if Dropped(n.Err) {
			dropped++
		}
	}
	return dropped > f
}
