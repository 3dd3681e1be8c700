package client

import (
	"context"
	"fmt"

	"github.com/palisade-dev/palisade/protocol"
)

// Forensics is what the members showed of one (resource, epoch): the
// vote certificates they keep, and the verdict on them.
type Forensics struct {
	Resource string
	Epoch    uint64
	// Certificates are the distinct certificates the members gave out.
	Certificates []protocol.Certificate
	// Verdict is protocol.Convict over them: the certified holders, the
	// members proven to have voted for two of them, and what was refused.
	Verdict protocol.Verdict
	// Answered is how many members answered; Failed the others, with why.
	Answered int
	Failed   []*NodeError
}

// Forensics asks every member for the vote certificates it keeps for
// (resource, epoch) and intersects them (protocol.Convict): a member with
// identity-signed votes for two holders there is a culprit, and its two
// votes are the proof. Each culprit's evidence is recorded (Evidence) and
// sent to every member, as equivocation seen in Status is. It waits for
// every member's answer (or ctx, or the request timeout): certificates
// are evidence whoever holds them, so no quorum is needed, but it fails if
// no member answers. Checking costs one Ed25519 verification per distinct
// vote, at most 2N certificates of at most N votes; no pairing.
func (c *Client) Forensics(ctx context.Context, resource string, epoch uint64) (Forensics, error) {
	if err := protocol.ValidateResource(resource); err != nil {
		return Forensics{}, fmt.Errorf("client: forensics: %w", err)
	}
	ctx, cancel := c.linked(ctx)
	defer cancel()
	req := protocol.ForensicsRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch}.Marshal()
	ch := c.fanOut(ctx, protocol.ProtoForensics, req)
	out := Forensics{Resource: resource, Epoch: epoch}
	for range c.members {
		r := <-ch
		var fr protocol.ForensicsReply
		err := r.err
		if err == nil {
			fr, err = protocol.UnmarshalForensicsReply(r.b)
		}
		if err == nil && fr.Code != protocol.CodeOK {
			err = &protocol.RefusedError{Code: fr.Code, Message: fr.Message}
		}
		if err != nil {
			out.Failed = append(out.Failed, &NodeError{Index: r.m.index, Peer: r.m.id.String(), Err: err})
			continue
		}
		out.Answered++
		for _, cert := range fr.Certificates {
			if !containsCert(out.Certificates, cert) {
				out.Certificates = append(out.Certificates, cert)
			}
		}
	}
	if out.Answered == 0 {
		return out, &QuorumError{Op: "forensics", Need: 1, Got: 0, Nodes: out.Failed}
	}
	out.Verdict = protocol.Convict(c.cfg.Cluster, resource, epoch, out.Certificates)
	for _, cu := range out.Verdict.Culprits {
		c.reportEvidence(ctx, cu.Evidence)
	}
	return out, nil
}

func containsCert(certs []protocol.Certificate, c protocol.Certificate) bool {
	for _, x := range certs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// reportEvidence records verified evidence (once) and sends it to every
// member, which checks and keeps it; it waits for their answers (or ctx),
// so a command that exits next has delivered it.
func (c *Client) reportEvidence(ctx context.Context, ev protocol.Evidence) {
	c.mu.Lock()
	for _, old := range c.evidence {
		if old.A.Node == ev.A.Node && old.A.Statement == ev.A.Statement && old.B.Statement == ev.B.Statement {
			c.mu.Unlock()
			return
		}
	}
	c.evidence = append(c.evidence, ev)
	c.mu.Unlock()
	ch := c.fanOut(ctx, protocol.ProtoEvidence, ev.Marshal())
	for range c.members {
		<-ch
	}
}
