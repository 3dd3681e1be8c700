package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// Vote certificates (issue 21): a Commit may carry the identity-signed
// votes the client combined into its token. The node checks them (one
// Ed25519 verification per vote, no pairing) and keeps the certificate in
// the resource's Record, written in the same Save as the Commit, so it is
// as durable as the commit and costs no fsync of its own. Forensics
// (handleForensics) gives them out; two certificates of one (resource,
// epoch) for different holders convict every member that signed both
// (protocol.Convict).

// CertificateEpochs is how many epochs of certificates a node keeps per
// resource: the most recent ones, with forks (two holders at one epoch)
// kept in preference to epochs with one certificate. With at most
// protocol.MaxCertificatesPerEpoch certificates per epoch, a resource's
// record holds at most 8 certificates, whatever the peers send.
//
// Disk cost per resource: a certificate's binary form is 60 bytes plus
// the resource name and the holder's ID (52 bytes for an Ed25519 peer
// ID), plus 66 bytes per vote, kept as
// base64 text in the record's JSON (4/3 of that). A 4-member cluster
// (t = 3) keeps about 420 bytes per certificate for a short name: about
// 1.7 KB per resource without forks (4 epochs), at most 3.4 KB; a
// 10-member cluster (t = 7) about 770 bytes each, at most 6.2 KB; the
// largest certificates (t = 255, the longest names) about 23 KB each, at
// most 185 KB per resource. Each kept certificate keeps its token too
// (Record.CertTokens, for forensics): about 230 bytes of JSON text for a
// short name and an Ed25519 holder, at most 8 per resource, so about
// 0.9 KB more per resource without forks. The record is rewritten on
// every Save of the resource, so each vote writes its certificates and
// tokens again (in the same log frame and fsync).
const CertificateEpochs = 4

// keepCertificate returns rec with cert, and tok (the token it certifies),
// kept, and whether it changed: a
// certificate of a holder already certified at its epoch is not kept
// again, at most protocol.MaxCertificatesPerEpoch are kept per epoch (the
// second only for another holder: a fork), and at most CertificateEpochs
// epochs are kept. When a new epoch does not fit, the oldest epoch with a
// single certificate makes room (the oldest fork only if every kept epoch
// forked); a certificate older than every kept epoch is not kept then.
// The tokens kept (Record.CertTokens) follow the certificates: one per
// kept certificate, dropped with it. A token is kept as its Commit
// carried it, which may be unchecked (the holder's own Commit of the
// statement this node voted for skips the pairing, Shown.unchecked):
// forensics hands tokens out as claims, and the asker checks them before
// it builds a fork. The caller verified cert for its cluster.
func keepCertificate(rec Record, cert protocol.Certificate, tok protocol.Token) (Record, bool) {
	epoch := cert.Statement.Epoch
	count := map[uint64]int{}
	for _, c := range rec.Certificates {
		if c.Statement.Epoch == epoch && c.Statement.Holder == cert.Statement.Holder {
			return rec, false
		}
		count[c.Statement.Epoch]++
	}
	if count[epoch] >= protocol.MaxCertificatesPerEpoch {
		return rec, false
	}
	kept := slices.Clone(rec.Certificates)
	if count[epoch] == 0 && len(count) >= CertificateEpochs {
		epochs := make([]uint64, 0, len(count))
		for e := range count {
			epochs = append(epochs, e)
		}
		slices.Sort(epochs)
		if epoch < epochs[0] {
			return rec, false
		}
		evict := epochs[0]
		for _, e := range epochs {
			if count[e] < protocol.MaxCertificatesPerEpoch {
				evict = e
				break
			}
		}
		kept = slices.DeleteFunc(kept, func(c protocol.Certificate) bool { return c.Statement.Epoch == evict })
	}
	kept = append(kept, cert)
	slices.SortStableFunc(kept, func(a, b protocol.Certificate) int {
		switch {
		case a.Statement.Epoch < b.Statement.Epoch:
			return -1
		case a.Statement.Epoch > b.Statement.Epoch:
			return 1
		}
		return 0
	})
	rec.Certificates = kept
	toks := []protocol.Token{}
	for _, t := range rec.CertTokens {
		if slices.ContainsFunc(kept, func(c protocol.Certificate) bool { return c.Statement == t.Statement }) {
			toks = append(toks, t)
		}
	}
	if tok.Statement == cert.Statement {
		toks = append(toks, tok)
	}
	rec.CertTokens = toks
	return rec, true
}

// tokensAt returns the certified tokens rec keeps for epoch, one per
// holder and at most protocol.MaxCertificatesPerEpoch: those kept with
// certificates, then the record's certified token (records written before
// tokens were kept with certificates have only that).
func tokensAt(rec Record, epoch uint64) []protocol.Token {
	var out []protocol.Token
	add := func(t protocol.Token) {
		if t.Epoch != epoch || len(out) >= protocol.MaxCertificatesPerEpoch {
			return
		}
		if slices.ContainsFunc(out, func(o protocol.Token) bool { return o.Holder == t.Holder }) {
			return
		}
		out = append(out, t)
	}
	for _, t := range rec.CertTokens {
		add(t)
	}
	if rec.Certified != nil {
		add(*rec.Certified)
	}
	return out
}

// certificatesAt returns the certificates rec keeps for epoch.
func certificatesAt(rec Record, epoch uint64) []protocol.Certificate {
	var out []protocol.Certificate
	for _, c := range rec.Certificates {
		if c.Statement.Epoch == epoch {
			out = append(out, c)
		}
	}
	return out
}

// checkCommitCertificate verifies the certificate a Commit carries, if
// any: at least t and at most N votes of distinct members, each for the
// token's statement (the encoding gives them no other), each identity
// signature valid. It costs one Ed25519 check per vote, no pairing, but
// none for the vote this node gave and still has in memory (its record's,
// compared byte for byte); the vote count is checked before any
// signature.
func (n *Node) checkCommitCertificate(req protocol.CommitRequest) (*protocol.Certificate, error) {
	cert, ok := req.Cert()
	if !ok {
		return nil, nil
	}
	var own *protocol.SignedVote
	if rec, ok := n.cachedRecord(req.Token.Resource); ok {
		own = n.signedVote(rec)
	}
	if err := protocol.VerifyCertificateKnowing(n.cfg.Cluster, cert, own); err != nil {
		return nil, err
	}
	return &cert, nil
}

// withCertificate keeps cert (if any) in the outcome of a Commit of tok,
// unless the token is of another era (then nothing of it is learned).
// The certificate is kept whether or not the Commit started a lease: it
// is evidence of who voted, which a stale or relayed Commit shows as well.
func (r Rules) withCertificate(o Outcome, tok protocol.Token, cert *protocol.Certificate) Outcome {
	if cert == nil || r.laterEra(tok.Epoch) || r.earlierEra(tok) {
		return o
	}
	if next, changed := keepCertificate(o.Next, *cert, tok); changed {
		o.Next, o.Changed = next, true
	}
	return o
}

// handleForensics answers a ForensicsRequest with the certificates and
// certified tokens the node keeps for the (resource, epoch). Access is checked as for Status
// (guard): members, and clients whose patterns allow the resource.
func (n *Node) handleForensics(ctx context.Context, _ peer.ID, b []byte) ([]byte, error) {
	req, err := protocol.UnmarshalForensicsRequest(b)
	if err != nil {
		return protocol.ForensicsReply{Code: protocol.CodeBadRequest, Message: err.Error()}.Marshal(), nil
	}
	if req.Cluster != n.cfg.Cluster.ID {
		return protocol.ForensicsReply{Code: protocol.CodeWrongCluster, Message: "request is for cluster " + req.Cluster.String()}.Marshal(), nil
	}
	rec, err := n.Record(ctx, req.Resource)
	if err != nil {
		logFailed(ctx, "forensics failed", err, "resource", req.Resource)
		return protocol.ForensicsReply{Code: protocol.CodeInternal, Message: "node failed to load the resource"}.Marshal(), nil
	}
	return protocol.ForensicsReply{Code: protocol.CodeOK, Certificates: certificatesAt(rec, req.Epoch), Tokens: tokensAt(rec, req.Epoch)}.Marshal(), nil
}

// certificateRefusal is the Ack of a Commit whose certificate does not
// verify.
func certificateRefusal(err error) []byte {
	return protocol.Ack{Code: protocol.CodeBadRequest, Message: fmt.Sprintf("certificate: %v", err)}.Marshal()
}
