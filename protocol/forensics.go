package protocol

import (
	"fmt"
	"sort"
)

// Culprit is a member proven to have voted for two holders at one
// (resource, epoch): Evidence holds its two identity-signed votes, which
// anyone with the cluster file can check (VerifyEvidence).
type Culprit struct {
	Node     int
	Evidence Evidence
}

// Verdict is what Convict finds in the certificates of one (resource,
// epoch).
type Verdict struct {
	// Certified are the holders with a certificate of at least t valid
	// votes, in the order of Holder.String. Two or more are a fork.
	Certified []Holder
	// Culprits are the members with valid votes for two holders, in
	// member order. Each is named once, with its votes for the first two
	// holders (in Holder.String order) it signed for.
	Culprits []Culprit
	// Rejected says why certificates or votes were left out: another
	// cluster, resource or epoch, a malformed certificate, or an identity
	// signature that does not verify (ErrBadVote). Nothing rejected
	// counts as evidence.
	Rejected []error
}

// Fork reports whether the verdict found certificates of two holders.
func (v Verdict) Fork() bool { return len(v.Certified) >= 2 }

// Convict intersects the vote certificates gathered for (resource,
// epoch): every member with a valid vote for two different holders there
// is a culprit. Each vote counts only if its identity signature verifies
// under the member's key in c (one Ed25519 check per distinct vote, no
// pairing); a certificate that is malformed or for another cluster,
// resource or epoch is rejected whole.
//
// The bound (docs/design-notes.md, "Forensics"): two certificates of
// different holders each hold t = 2f+1 valid votes of distinct members
// out of N = 3f+1, so their signers meet in at least 2t-N = f+1 members,
// and all of them are culprits. An honest member never signs votes for
// two holders at one (resource, epoch) (S1, S3), and a vote it did not
// sign does not verify, so no honest member is ever named.
func Convict(c *Cluster, resource string, epoch uint64, certs []Certificate) Verdict {
	var v Verdict
	// votes[holder][member] is the member's valid vote for holder.
	votes := map[Holder]map[int]SignedVote{}
	seen := map[string]bool{} // votes already checked: node, holder and signature
	for _, cert := range certs {
		st := cert.Statement
		if err := cert.Check(); err != nil {
			v.Rejected = append(v.Rejected, err)
			continue
		}
		if st.Cluster != c.ID || st.Resource != resource || st.Epoch != epoch {
			v.Rejected = append(v.Rejected, fmt.Errorf("%w: certificate for cluster %s, resource %q, epoch %d; want %s, %q, %d",
				ErrBadCertificate, st.Cluster, st.Resource, st.Epoch, c.ID, resource, epoch))
			continue
		}
		msg := st.VoteBytes()
		for _, cv := range cert.Votes {
			key := fmt.Sprintf("%d/%s/%x", cv.Node, st.Holder, cv.Sig)
			if seen[key] {
				continue
			}
			seen[key] = true
			if err := verifyVoteBytes(c, cv.Node, msg, cv.Sig); err != nil {
				v.Rejected = append(v.Rejected, fmt.Errorf("holder %s: %w", st.Holder.Short(), err))
				continue
			}
			if votes[st.Holder] == nil {
				votes[st.Holder] = map[int]SignedVote{}
			}
			votes[st.Holder][cv.Node] = SignedVote{Node: cv.Node, Statement: st, IdentitySig: cv.Sig}
		}
	}
	holders := make([]Holder, 0, len(votes))
	for h := range votes {
		holders = append(holders, h)
	}
	sort.Slice(holders, func(i, j int) bool { return holders[i].String() < holders[j].String() })
	for _, h := range holders {
		if len(votes[h]) >= c.File.T {
			v.Certified = append(v.Certified, h)
		}
	}
	named := map[int]bool{}
	for i, a := range holders {
		for _, b := range holders[i+1:] {
			for node, va := range votes[a] {
				vb, ok := votes[b][node]
				if !ok || named[node] {
					continue
				}
				named[node] = true
				v.Culprits = append(v.Culprits, Culprit{Node: node, Evidence: Evidence{A: va, B: vb}})
			}
		}
	}
	sort.Slice(v.Culprits, func(i, j int) bool { return v.Culprits[i].Node < v.Culprits[j].Node })
	return v
}
