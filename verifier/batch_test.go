package verifier_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func TestVerifyBatch(t *testing.T) {
	fx := mainFixture()
	var toks []protocol.Token
	for epoch := uint64(1); epoch <= 8; epoch++ {
		toks = append(toks, fx.Token(t, "orders-db", epoch, holder(epoch)))
	}
	other := otherFixture().Token(t, "orders-db", 1, "client-1")
	tamper := func(tok protocol.Token, f func(*protocol.Token)) protocol.Token { f(&tok); return tok }

	tests := []struct {
		name string
		toks []protocol.Token
	}{
		{"empty", nil},
		{"one valid", toks[:1]},
		{"one invalid", []protocol.Token{tamper(toks[0], func(x *protocol.Token) { x.Epoch = 99 })}},
		{"all valid", toks},
		{"one invalid among valid", append(append([]protocol.Token{}, toks[:5]...), tamper(toks[5], func(x *protocol.Token) { x.Holder.ID = "thief" }), toks[6])},
		{"swapped signatures", []protocol.Token{
			toks[0], tamper(toks[1], func(x *protocol.Token) { x.Signature = toks[2].Signature }),
			tamper(toks[2], func(x *protocol.Token) { x.Signature = toks[1].Signature }), toks[3],
		}},
		{"cheap failures and duplicates", []protocol.Token{
			toks[0], other, tamper(toks[1], func(x *protocol.Token) { x.Resource = "a b" }), toks[0],
			tamper(toks[2], func(x *protocol.Token) { x.Signature = crypto.Signature{} }), toks[2],
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
			v := verifier.New(fx.Cluster)
			// Twice: the second run is served by the cache the first
			// filled, and must agree too.
			for round := 0; round < 2; round++ {
				errs := v.VerifyBatch(tt.toks)
				require.Len(t, errs, len(tt.toks))
				for i, tok := range tt.toks {
					want := fresh.Verify(tok)
					require.Equal(t, sentinel(t, want), sentinel(t, errs[i]), "round %d token %d: %v", round, i, errs[i])
				}
			}
		})
	}
}
