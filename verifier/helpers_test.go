package verifier_test

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// fixture is a dealt 4-node cluster (t = 3) that signs real tokens.
type fixture struct {
	cluster *protocol.Cluster
	shares  []*crypto.Share
}

// newFixture deals a cluster deterministically from seed.
func newFixture(seed int64, name string) *fixture {
	key, shares, err := crypto.Deal(rand.New(rand.NewSource(seed)), 4, 3)
	if err != nil {
		panic(err)
	}
	c, err := protocol.NewCluster(protocol.NewClusterFile(name, key, nil, nil))
	if err != nil {
		panic(err)
	}
	return &fixture{cluster: c, shares: shares}
}

var (
	mainFixture  = sync.OnceValue(func() *fixture { return newFixture(1, "palisade-test") })
	otherFixture = sync.OnceValue(func() *fixture { return newFixture(2, "other-cluster") })
)

// sign returns the group signature over st from three partials (nodes 2, 3
// and 4, so interpolation is not the trivial prefix).
func (f *fixture) sign(tb testing.TB, st protocol.Statement) crypto.Signature {
	tb.Helper()
	msg := st.SignedBytes()
	var parts []crypto.PartialSig
	for _, s := range f.shares[1:] {
		p, err := s.Sign(msg)
		require.NoError(tb, err)
		parts = append(parts, p)
	}
	sig, bad, err := f.cluster.Key.Combine(msg, parts)
	require.NoError(tb, err)
	require.Empty(tb, bad)
	return sig
}

// token issues a real token of f's cluster.
func (f *fixture) token(tb testing.TB, resource string, epoch uint64, holder string) protocol.Token {
	tb.Helper()
	st := f.cluster.Statement(resource, epoch, protocol.Holder{ID: holder, Session: protocol.SessionID{1}})
	return protocol.Token{Statement: st, Signature: f.sign(tb, st)}
}

// holder names the holder of an epoch in tests.
func holder(epoch uint64) string { return fmt.Sprintf("client-%d", epoch) }
