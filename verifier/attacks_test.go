package verifier_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// encodingAttack is a signature encoding that must never verify: the
// BLS12-381 successors of bn256's malleable x+p signatures.
type encodingAttack struct {
	name string
	sig  crypto.Signature
	// byteLevel: the token parser refuses it (length, flags, x < p, the
	// identity), so a token's text never reaches the cache or a check.
	// Otherwise it parses, and the strict decoding of the check refuses it.
	byteLevel bool
	// cause is what the refusal wraps besides the verifier's sentinel;
	// says is a part of its message.
	cause error
	says  string
}

// modulusP is the BLS12-381 base-field modulus p, big-endian.
var modulusP = [crypto.SignatureSize]byte{
	0x1a, 0x01, 0x11, 0xea, 0x39, 0x7f, 0xe6, 0x9a, 0x4b, 0x1b, 0xa7, 0xb6,
	0x43, 0x4b, 0xac, 0xd7, 0x64, 0x77, 0x4b, 0x84, 0xf3, 0x85, 0x12, 0xbf,
	0x67, 0x30, 0xd2, 0xa0, 0xf6, 0xb0, 0xf6, 0x24, 0x1e, 0xab, 0xff, 0xfe,
	0xb1, 0x53, 0xff, 0xff, 0xb9, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xaa, 0xab,
}

// withModulus returns a valid token of fx for orders-db whose signature's
// x leaves room for x+p beside the flag bits (about one in four), and that
// x+p encoding.
func withModulus(t testing.TB) (protocol.Token, crypto.Signature) {
	t.Helper()
	fx := mainFixture()
	for epoch := uint64(1); epoch < 100; epoch++ {
		tok := fx.Token(t, "orders-db", epoch, "client-a")
		if enc, ok := bls12381test.AddModulus(tok.Signature[:]); ok {
			return tok, crypto.Signature(enc)
		}
	}
	t.Fatal("no signature with x+p below 2^381")
	return protocol.Token{}, crypto.Signature{}
}

// encodingAttacks returns the encoding attacks on the valid signature sig,
// with xPlusP the x+p encoding of some valid signature.
func encodingAttacks(sig, xPlusP crypto.Signature) []encodingAttack {
	flip := func(mask byte, set bool) crypto.Signature {
		s := sig
		if set {
			s[0] |= mask
		} else {
			s[0] ^= mask
		}
		return s
	}
	xIsP := crypto.Signature(modulusP)
	xIsP[0] |= 0x80
	identitySorted := crypto.Signature(bls12381test.Identity(crypto.SignatureSize))
	identitySorted[0] |= 0x20
	return []encodingAttack{
		{"compression flag cleared", flip(0x80, false), true, crypto.ErrMalformedPoint, "compression flag not set"},
		{"all zero", crypto.Signature{}, true, crypto.ErrMalformedPoint, "compression flag not set"},
		{"infinity flag on a point", flip(0x40, true), true, crypto.ErrMalformedPoint, "point at infinity with non-zero"},
		{"x+p", xPlusP, true, crypto.ErrMalformedPoint, "not below p"},
		{"x = p", xIsP, true, crypto.ErrMalformedPoint, "not below p"},
		{"identity", crypto.Signature(bls12381test.Identity(crypto.SignatureSize)), true, crypto.ErrMalformedPoint, "identity"},
		{"identity with the sort flag", identitySorted, true, crypto.ErrMalformedPoint, "sort flag set on the point at infinity"},
		{"not on the curve", bls12381test.NotOnCurveG1(7), false, crypto.ErrMalformedPoint, "not on the curve"},
		{"outside the subgroup", bls12381test.NonSubgroupG1(7), false, crypto.ErrNotInSubgroup, "subgroup"},
		{"sort flag flipped (the negated signature)", flip(0x20, false), false, crypto.ErrInvalidSignature, "invalid signature"},
	}
}

// TestSignatureEncodingAttacks: every attack is refused, by Verify,
// VerifyFor, ParseAndVerify, VerifyBatch and a fence, with the verifier's
// sentinel and a cause that names it; none enters the verified-token
// cache, and the valid token keeps verifying from the cache.
func TestSignatureEncodingAttacks(t *testing.T) {
	fx := mainFixture()
	tok, xPlusP := withModulus(t)
	v := verifier.New(fx.Cluster)
	fresh := verifier.New(fx.Cluster, verifier.WithCacheSize(0))
	require.NoError(t, v.Verify(tok))
	require.Equal(t, 1, verifier.CacheLen(v))

	for _, a := range encodingAttacks(tok.Signature, xPlusP) {
		t.Run(a.name, func(t *testing.T) {
			bad := tok
			bad.Signature = a.sig
			require.NotEqual(t, tok.Signature, bad.Signature)
			t.Logf("%v", v.Verify(bad))
			_, parseErr := crypto.ParseSignature(a.sig[:])
			require.Equal(t, a.byteLevel, parseErr != nil, "byte-level rules: %v", parseErr)

			// Twice each: a refusal is never cached.
			for range 2 {
				for _, err := range []error{v.Verify(bad), v.VerifyFor(bad, "orders-db"), fresh.Verify(bad)} {
					require.ErrorIs(t, err, verifier.ErrInvalidToken)
					require.ErrorIs(t, err, a.cause)
					require.Contains(t, err.Error(), a.says)
				}
				_, err := v.ParseAndVerify(bad.String())
				if a.byteLevel {
					require.ErrorIs(t, err, verifier.ErrMalformedToken)
					require.ErrorIs(t, err, protocol.ErrMalformed)
				} else {
					require.ErrorIs(t, err, verifier.ErrInvalidToken)
				}
				require.ErrorIs(t, err, a.cause)
				require.Contains(t, err.Error(), a.says)

				errs := v.VerifyBatch([]protocol.Token{tok, bad, tok})
				require.NoError(t, errs[0])
				require.ErrorIs(t, errs[1], verifier.ErrInvalidToken)
				require.ErrorIs(t, errs[1], a.cause)
				require.NoError(t, errs[2])
				errs = fresh.VerifyBatch([]protocol.Token{tok, bad})
				require.NoError(t, errs[0])
				require.ErrorIs(t, errs[1], a.cause)
			}
			require.Equal(t, 1, verifier.CacheLen(v), "the cache holds the valid token only")

			store := verifier.NewMemoryStore()
			defer store.Close()
			wrote := false
			err := verifier.NewFence(v, store).Admit(context.Background(), bad, "orders-db", func(verifier.Tx) error { wrote = true; return nil })
			require.ErrorIs(t, err, verifier.ErrInvalidToken)
			require.False(t, wrote)
			_, ok, err := store.Barrier(context.Background(), "orders-db")
			require.NoError(t, err)
			require.False(t, ok, "a refused token raises no barrier")

			before := v.SignatureChecks()
			require.NoError(t, v.Verify(tok))
			require.Equal(t, before, v.SignatureChecks(), "the valid token is still answered by the cache")
		})
	}
}
