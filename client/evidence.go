package client

import (
	"errors"
	"fmt"
	"sort"

	"github.com/palisade-dev/palisade/protocol"
)

// This file holds what the client checks in other nodes' signed words:
// the identity signature on each vote, equivocation (two votes of one node
// at one epoch), the signed votes shown as proof to a lagging node, and
// the certified token shown as proof.

// Evidence returns the evidence of equivocation this client has found:
// a node's signed vote for another holder at an epoch where it also voted
// for this client. Each piece was also sent to every node.
func (c *Client) Evidence() []protocol.Evidence {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Evidence(nil), c.evidence...)
}

// rememberVotes keeps the votes of one round, to compare with what nodes
// later report.
func (c *Client) rememberVotes(resource string, vs map[int]protocol.SignedVote) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.myVotes) >= 1024 {
		clear(c.myVotes)
	}
	c.myVotes[resource] = vs
}

// checkEquivocation compares the signed votes nodes report in Status with
// the votes they gave this client; a conflict is verified, recorded and
// sent to every node. S1 and S3 rest on honest nodes voting once per
// (resource, epoch): this is how a node that did not is caught.
func (c *Client) checkEquivocation(resource string, sts []NodeStatus) {
	c.mu.Lock()
	mine := c.myVotes[resource]
	c.mu.Unlock()
	for _, st := range sts {
		v := st.Vote
		if v == nil || v.Node != st.Index {
			continue
		}
		own, ok := mine[v.Node]
		if !ok || own.Statement.Epoch != v.Statement.Epoch || own.Statement.Holder == v.Statement.Holder {
			continue
		}
		ev := protocol.Evidence{A: own, B: *v}
		if protocol.VerifyEvidence(c.cfg.Cluster, ev) != nil {
			continue
		}
		log.Warnw("evidence of equivocation", "node", v.Node, "resource", resource, "epoch", v.Statement.Epoch)
		c.mu.Lock()
		c.evidence = append(c.evidence, ev)
		c.mu.Unlock()
		req := ev.Marshal()
		for _, m := range c.members {
			c.goFunc(func() { _, _ = c.call(c.ctx, m, protocol.ProtoEvidence, req) })
		}
	}
}

// voteProof collects valid signed votes of distinct nodes from status
// reports, for nodes that refused an epoch as too far ahead: f+1 of them
// show that an honest node voted that high (S5: a node moves its window
// only on proof).
func (c *Client) voteProof(resource string, sts []NodeStatus) []protocol.SignedVote {
	var out []protocol.SignedVote
	for _, st := range sts {
		v := st.Vote
		if v == nil || v.Node != st.Index || v.Statement.Resource != resource {
			continue
		}
		if protocol.VerifyVote(c.cfg.Cluster, *v) == nil {
			out = append(out, *v)
		}
	}
	if len(out) <= c.f {
		return nil
	}
	return out
}

// bestToken returns the highest certified token among the reports that
// verifies, checking at most f+1 claims so liars cannot make us pay a
// pairing per node. The verifier checks the cluster, the resource and the
// signature (S2), and remembers good tokens (keyed on their canonical
// encoding), so the token nodes report again and again costs one pairing.
func (c *Client) bestToken(resource string, sts []NodeStatus) *protocol.Token {
	var claims []*protocol.Token
	for _, s := range sts {
		if t := s.Certified; t != nil && t.Cluster == c.cfg.Cluster.ID && t.Resource == resource {
			claims = append(claims, t)
		}
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Epoch > claims[j].Epoch })
	for i, t := range claims {
		if i > c.f {
			break
		}
		if c.verifier.VerifyFor(*t, resource) == nil {
			return t
		}
	}
	return nil
}

// findFork looks for a fork among the certified tokens nodes report: two
// claims at one epoch with different holders, both of which verify. Only
// such pairs are checked (the cheap comparison comes first), each claim
// at most once and at most t of them, and the verifier remembers good
// tokens: liars make the client pay at most a few pairings, never one per
// round. A fork found is also sent to every node (ProtoFork), which
// records it.
func (c *Client) findFork(resource string, sts []NodeStatus) *protocol.Fork {
	var claims []protocol.Token
	for _, s := range sts {
		if t := s.Certified; t != nil && t.Cluster == c.cfg.Cluster.ID && t.Resource == resource {
			claims = append(claims, *t)
		}
	}
	valid := map[int]bool{} // claim index -> verified
	checks := 0
	ok := func(i int) bool {
		if v, done := valid[i]; done {
			return v
		}
		if checks >= c.t {
			return false
		}
		checks++
		valid[i] = c.verifier.VerifyFor(claims[i], resource) == nil
		return valid[i]
	}
	for i := range claims {
		for j := i + 1; j < len(claims); j++ {
			x, y := claims[i], claims[j]
			if x.Epoch != y.Epoch || x.Holder == y.Holder || !ok(i) || !ok(j) {
				continue
			}
			f, err := protocol.NewFork(x, y)
			if err != nil {
				continue
			}
			c.reportFork(f)
			return &f
		}
	}
	return nil
}

// reportFork sends f to every node in the background, once per fork per
// client (at most 1024 remembered).
func (c *Client) reportFork(f protocol.Fork) {
	b, err := f.MarshalBinary()
	if err != nil {
		return
	}
	id := f.ID()
	c.mu.Lock()
	if c.forksSent[id] {
		c.mu.Unlock()
		return
	}
	if c.forksSent == nil || len(c.forksSent) >= 1024 {
		c.forksSent = map[string]bool{}
	}
	c.forksSent[id] = true
	c.mu.Unlock()
	log.Errorw("fork: two valid tokens for one resource and epoch", "resource", f.Resource(), "epoch", f.Epoch(), "fork", id)
	for _, m := range c.members {
		c.goFunc(func() { _, _ = c.call(c.ctx, m, protocol.ProtoFork, b) })
	}
}

// checkVote does the cheap checks on a vote: the partial's index is the
// sender's, and the identity signature over the statement is the sender's
// (what makes two conflicting votes evidence). The partial itself is
// checked by the combination.
func checkVote(m member, stmt protocol.Statement, ar protocol.AcquireReply) error {
	if ar.Partial.Index != m.index {
		return fmt.Errorf("vote carries share index %d", ar.Partial.Index)
	}
	ok, err := m.pub.Verify(stmt.VoteBytes(), ar.IdentitySig)
	if err != nil || !ok {
		return errors.New("vote identity signature does not verify")
	}
	return nil
}
