package client

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

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
	// Fork, if not nil, is the fork the members' certified tokens make:
	// two of them, for different holders, that verify under the group key.
	// It was shown to every member (ProtoFork), which records it.
	Fork *protocol.Fork
	// Tokens counts the distinct tokens the members showed for the
	// (resource, epoch); BadTokens those of them that did not verify.
	Tokens, BadTokens int
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
//
// The members also show the certified tokens they keep there. Two that
// verify for different holders are a fork: it is returned (Fork) and
// shown to every member, which records it, as a Commit of the second
// token would have had it. That costs a pairing per distinct token, only
// for holders of which another holder's token was also shown: at most 2N.
func (c *Client) Forensics(ctx context.Context, resource string, epoch uint64) (Forensics, error) {
	if err := protocol.ValidateResource(resource); err != nil {
		return Forensics{}, fmt.Errorf("client: forensics: %w", err)
	}
	ctx, cancel := c.linked(ctx)
	defer cancel()
	req := protocol.ForensicsRequest{Cluster: c.cfg.Cluster.ID, Resource: resource, Epoch: epoch}.Marshal()
	ch := c.fanOut(ctx, protocol.ProtoForensics, req)
	out := Forensics{Resource: resource, Epoch: epoch}
	var tokens []protocol.Token // distinct, of this (resource, epoch)
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
		for _, tok := range fr.Tokens {
			if tok.Cluster == c.cfg.Cluster.ID && tok.Resource == resource && tok.Epoch == epoch &&
				!slices.ContainsFunc(tokens, func(t protocol.Token) bool { return t == tok }) {
				tokens = append(tokens, tok)
			}
		}
	}
	// Members answer in any order: sort what they showed, so that the
	// same members' records always give the same report, down to which
	// two votes prove each culprit and which two tokens make the fork.
	slices.SortFunc(out.Failed, func(a, b *NodeError) int { return cmp.Compare(a.Index, b.Index) })
	slices.SortFunc(out.Certificates, func(a, b protocol.Certificate) int {
		return cmp.Or(cmp.Compare(a.Statement.Holder.String(), b.Statement.Holder.String()), slices.Compare(a.Signers(), b.Signers()))
	})
	slices.SortFunc(tokens, func(a, b protocol.Token) int {
		return cmp.Or(cmp.Compare(a.Holder.String(), b.Holder.String()), bytes.Compare(a.Signature[:], b.Signature[:]))
	})
	if out.Answered == 0 {
		return out, &QuorumError{Op: "forensics", Need: 1, Got: 0, Nodes: out.Failed}
	}
	out.Verdict = protocol.Convict(c.cfg.Cluster, resource, epoch, out.Certificates)
	for _, cu := range out.Verdict.Culprits {
		c.reportEvidence(ctx, cu.Evidence)
	}
	out.Tokens = len(tokens)
	var bad int
	out.Fork, bad = c.forkOf(tokens)
	out.BadTokens = bad
	if out.Fork != nil {
		c.showFork(ctx, *out.Fork)
	}
	return out, nil
}

// forkOf returns a fork among tokens (all of one cluster, resource and
// epoch), if two of them for different holders verify, and how many
// tokens failed their check. Only tokens with another holder's token
// beside them are checked, each at most once.
func (c *Client) forkOf(tokens []protocol.Token) (*protocol.Fork, int) {
	var good []protocol.Token
	bad := 0
	for _, tok := range tokens {
		others := slices.ContainsFunc(tokens, func(t protocol.Token) bool { return t.Holder != tok.Holder })
		if !others || slices.ContainsFunc(good, func(t protocol.Token) bool { return t.Holder == tok.Holder }) {
			continue
		}
		if c.verifier.VerifyFor(tok, tok.Resource) != nil {
			bad++
			continue
		}
		good = append(good, tok)
		if len(good) == 2 {
			f, err := protocol.NewFork(good[0], good[1])
			if err != nil {
				return nil, bad
			}
			return &f, bad
		}
	}
	return nil, bad
}

// showFork sends f to every member and waits for their answers (or ctx),
// so that a command that exits next has shown it; each member verifies
// it and records it once.
func (c *Client) showFork(ctx context.Context, f protocol.Fork) {
	b, err := f.MarshalBinary()
	if err != nil {
		return
	}
	ch := c.fanOut(ctx, protocol.ProtoFork, b)
	for range c.members {
		<-ch
	}
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
