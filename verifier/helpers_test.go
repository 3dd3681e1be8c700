package verifier_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/internal/mint"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// The dealt clusters the tests sign real tokens with.
var (
	mainFixture  = sync.OnceValue(func() *verifiertest.Dealer { return verifiertest.NewDealer("palisade-test", 1) })
	otherFixture = sync.OnceValue(func() *verifiertest.Dealer { return verifiertest.NewDealer("other-cluster", 2) })
)

// sign returns d's group signature over st.
func sign(tb testing.TB, d *verifiertest.Dealer, st protocol.Statement) crypto.Signature {
	tb.Helper()
	sig, err := d.Sign(st)
	require.NoError(tb, err)
	return sig
}

// holder names the holder of an epoch in tests.
func holder(epoch uint64) string { return fmt.Sprintf("client-%d", epoch) }

// admit is the Admission of a token for resource at epoch, for store tests
// that drive a store at any epoch without signing a token for each.
func admit(resource string, epoch uint64) verifier.Admission {
	return mint.Admission(resource, epoch).(verifier.Admission)
}
