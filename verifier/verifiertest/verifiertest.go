// Package verifiertest makes a Palisade cluster with a trusted dealer and
// issues its tokens without any node, for tests and examples only. It also
// gives tests deterministic holder keys and proofs of possession, a
// settable clock, and a check for fuzz seed corpora.
//
// A dealer knows every share of the group key, so it can sign any token:
// exactly what a real cluster must never allow (S2 unforgeability rests on no
// machine holding the group secret). Never use this package outside tests
// and examples; real clusters come from "palisade dkg" (or, for local
// testnets only, "palisade keygen").
package verifiertest

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// Size and threshold of a dealt cluster: 4 nodes, threshold 3 (f = 1).
const (
	Nodes     = 4
	Threshold = 3
)

// Session is the lock session of every token a Dealer issues.
var Session = protocol.SessionID{1}

// Dealer is a dealt test cluster: its public description and every share of
// its group key. Tests and examples only.
type Dealer struct {
	// Cluster is the cluster's public description: what a verifier is
	// built from (verifier.New).
	Cluster *protocol.Cluster
	shares  []*crypto.Share
}

// NewDealer deals a cluster named name deterministically from seed: the
// same name and seed give the same cluster and tokens. It panics if
// dealing fails, which only a bug can cause.
func NewDealer(name string, seed int64) *Dealer {
	key, shares, err := crypto.Deal(rand.New(rand.NewSource(seed)), Nodes, Threshold)
	if err != nil {
		panic(fmt.Sprintf("verifiertest: deal %q: %v", name, err))
	}
	c, err := protocol.NewCluster(protocol.NewClusterFile(name, key, nil, nil))
	if err != nil {
		panic(fmt.Sprintf("verifiertest: cluster %q: %v", name, err))
	}
	return &Dealer{Cluster: c, shares: shares}
}

// Sign returns the group signature over st, combined from the partials of
// nodes 2 to 4 (so interpolation is not the trivial prefix).
func (d *Dealer) Sign(st protocol.Statement) (crypto.Signature, error) {
	msg := st.SignedBytes()
	parts := make([]crypto.PartialSig, 0, Threshold)
	for _, s := range d.shares[Nodes-Threshold:] {
		p, err := s.Sign(msg)
		if err != nil {
			return crypto.Signature{}, fmt.Errorf("verifiertest: partial sign: %w", err)
		}
		parts = append(parts, p)
	}
	sig, bad, err := d.Cluster.Key.Combine(msg, parts)
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("bad partials %v", bad)
	}
	if err != nil {
		return crypto.Signature{}, fmt.Errorf("verifiertest: combine: %w", err)
	}
	return sig, nil
}

// Issue returns a valid token of the cluster for resource at epoch, held by
// holder (an identity; the session is Session).
func (d *Dealer) Issue(resource string, epoch uint64, holder string) (protocol.Token, error) {
	st := d.Cluster.Statement(resource, epoch, protocol.Holder{ID: holder, Session: Session})
	sig, err := d.Sign(st)
	if err != nil {
		return protocol.Token{}, err
	}
	return protocol.Token{Statement: st, Signature: sig}, nil
}

// Token is Issue for a test: it fails tb if the token cannot be made.
func (d *Dealer) Token(tb testing.TB, resource string, epoch uint64, holder string) protocol.Token {
	tb.Helper()
	tok, err := d.Issue(resource, epoch, holder)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
