package verifier_test

import (
	"errors"
	"fmt"
	"math/rand"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func ExampleVerifier_Verify() {
	// A testnet cluster of 4 nodes (t = 3) from a trusted dealer; real
	// clusters run the DKG, and a resource loads their cluster file with
	// verifier.Load("cluster.json").
	key, shares, _ := crypto.Deal(rand.New(rand.NewSource(1)), 4, 3)
	cluster, _ := protocol.NewCluster(protocol.NewClusterFile("example", key, nil, nil))

	// Three nodes sign; the client combines their partials into a token.
	st := cluster.Statement("orders-db", 7, protocol.Holder{ID: "client-a", Session: protocol.SessionID{1}})
	var partials []crypto.PartialSig
	for _, s := range shares[:3] {
		p, _ := s.Sign(st.SignedBytes())
		partials = append(partials, p)
	}
	sig, _, _ := key.Combine(st.SignedBytes(), partials)
	tok := protocol.Token{Statement: st, Signature: sig}

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
