package verifier_test

import (
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

func ExampleVerifier_Verify() {
	// A testnet cluster of 4 nodes (t = 3) from a trusted dealer, for tests
	// and examples only; real clusters run the DKG, and a resource loads
	// their cluster file with verifier.Load("cluster.json"). The dealer
	// signs as three nodes would, and combines their partials into a token.
	dealer := verifiertest.NewDealer("example", 1)
	cluster := dealer.Cluster
	tok, _ := dealer.Issue("orders-db", 7, "client-a")

	// The resource needs only the cluster ID and the group public key.
	v := verifier.New(cluster)
	fmt.Println("valid:", v.Verify(tok))
	fmt.Println("for orders-db:", v.VerifyFor(tok, "orders-db"))

	forged := tok
	forged.Epoch = 8
	fmt.Println("forged epoch refused:", errors.Is(v.Verify(forged), verifier.ErrInvalidToken))

	parsed, err := v.ParseAndVerify(tok.String())
	fmt.Println("from text:", parsed.Resource, parsed.Epoch, parsed.Holder, err)
	// Output:
	// valid: <nil>
	// for orders-db: <nil>
	// forged epoch refused: true
	// from text: orders-db 7 client-a/01000000000000000000000000000000 <nil>
}
