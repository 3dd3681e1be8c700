package protocol

import (
	"fmt"
)

// MaxProofVotes caps the signed votes an Acquire may carry as catch-up
// proof (f+1 are needed; 64 allows clusters of up to 190 nodes).
const MaxProofVotes = 64

// ErrNotEvidence reports two votes that do not conflict.
// It wraps ErrInvalidField.
var ErrNotEvidence = fmt.Errorf("%w: votes do not conflict", ErrInvalidField)

// SignedVote is a node's attributable vote: the statement it voted for and
// its identity signature over Statement.VoteBytes. (The partial signature
// alone is not attributable: any t partials can forge another's.)
type SignedVote struct {
	// Node is the voter's index, 1..N.
	Node        int
	Statement   Statement
	IdentitySig []byte
}

func (e *encoder) vote(v SignedVote) {
	e.u64(uint64(v.Node))
	e.fixed(v.Statement.Cluster[:])
	e.str(v.Statement.Resource)
	e.u64(v.Statement.Epoch)
	e.holder(v.Statement.Holder)
	e.bytes(v.IdentitySig)
}

func (d *decoder) vote() SignedVote {
	var v SignedVote
	n := d.u64("vote node")
	if d.err == nil && (n < 1 || n > 1<<16) {
		d.fail("vote node index %d out of range", n)
	}
	v.Node = int(n)
	copy(v.Statement.Cluster[:], d.take(ClusterIDSize, "vote cluster"))
	v.Statement.Resource = d.resource()
	v.Statement.Epoch = d.u64("vote epoch")
	v.Statement.Holder = d.optHolder("vote holder")
	if d.err == nil && v.Statement.Holder.IsZero() {
		d.fail("vote without holder")
	}
	v.IdentitySig = d.bytes("vote identity signature", MaxIdentitySigLen)
	if d.err == nil && len(v.IdentitySig) == 0 {
		d.fail("vote without identity signature")
	}
	return v
}

// Marshal encodes the vote.
func (v SignedVote) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.vote(v)
	return e.b
}

// UnmarshalSignedVote decodes a SignedVote strictly.
func UnmarshalSignedVote(b []byte) (SignedVote, error) {
	return decode(b, func(d *decoder) SignedVote {
		v := d.vote()
		return v
	})
}

// Evidence is two votes of one node for different holders at the same
// (cluster, resource, epoch): proof, checkable offline with the node's
// public identity key, that the node equivocated.
type Evidence struct {
	A, B SignedVote
}

// Check reports whether the two votes conflict (same node, cluster,
// resource and epoch, different holders). It does not check signatures:
// that needs the node's identity key (see VerifyEvidence).
func (ev Evidence) Check() error {
	a, b := ev.A, ev.B
	if a.Node != b.Node || a.Statement.Cluster != b.Statement.Cluster || a.Statement.Resource != b.Statement.Resource || a.Statement.Epoch != b.Statement.Epoch {
		return fmt.Errorf("%w: not the same node, cluster, resource and epoch", ErrNotEvidence)
	}
	if a.Statement.Holder == b.Statement.Holder {
		return fmt.Errorf("%w: same holder", ErrNotEvidence)
	}
	return nil
}

// Marshal encodes the evidence.
func (ev Evidence) Marshal() []byte {
	e := encoder{}
	e.u8(Version)
	e.vote(ev.A)
	e.vote(ev.B)
	return e.b
}

// UnmarshalEvidence decodes Evidence strictly (and checks the votes
// conflict).
func UnmarshalEvidence(b []byte) (Evidence, error) {
	ev, err := decode(b, func(d *decoder) Evidence { return Evidence{A: d.vote(), B: d.vote()} })
	if err != nil {
		return Evidence{}, err
	}
	if err := ev.Check(); err != nil {
		return Evidence{}, err
	}
	return ev, nil
}
