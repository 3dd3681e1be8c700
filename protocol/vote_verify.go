package protocol

import (
	"errors"
	"fmt"
)

// ErrBadVote reports a signed vote that is not a member's valid vote.
var ErrBadVote = errors.New("protocol: invalid signed vote")

// VerifyVote checks a signed vote: the voter is a member of c, the vote is
// for c, and the identity signature (by the member's Ed25519 peer ID key,
// see PeerIDKey) is valid over the statement's VoteBytes. Every refusal
// wraps ErrBadVote.
func VerifyVote(c *Cluster, v SignedVote) error {
	if v.Node < 1 || v.Node > len(c.File.Nodes) {
		return fmt.Errorf("%w: node index %d", ErrBadVote, v.Node)
	}
	if v.Statement.Cluster != c.ID {
		return fmt.Errorf("%w: vote for cluster %s", ErrBadVote, v.Statement.Cluster)
	}
	return verifyVoteBytes(c, v.Node, v.Statement.VoteBytes(), v.IdentitySig)
}

// VerifyEvidence checks evidence of equivocation offline: the two votes
// conflict (else ErrNotEvidence) and both carry the node's valid identity
// signature (else ErrBadVote).
func VerifyEvidence(c *Cluster, ev Evidence) error {
	if err := ev.Check(); err != nil {
		return err
	}
	if err := VerifyVote(c, ev.A); err != nil {
		return err
	}
	return VerifyVote(c, ev.B)
}
