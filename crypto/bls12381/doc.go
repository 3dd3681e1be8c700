// Package bls12381 adapts BLS12-381 curve libraries beneath kyber v3's
// interfaces (kyber.Group, kyber.Point, kyber.Scalar, pairing.Suite) and
// provides the primitives of the min-sig variant of
// draft-irtf-cfrg-bls-signature: signatures in G1 (48-byte compressed
// points), public keys in G2 (96-byte compressed points), hash_to_curve
// suite BLS12381G1_XMD:SHA-256_SSWU_RO_ (RFC 9380) with the ciphersuite ID
// SignatureDST as domain separation tag.
//
// The package does no curve arithmetic of its own. It uses two libraries,
// each where its documentation allows:
//
//   - github.com/cloudflare/circl/ecc/bls12381 backs every kyber type
//     (Scalar, G1Point, G2Point, GTPoint, Suite), hence every operation that
//     touches a secret: partial signing (Sign, SignShare), the dealing and
//     share decryption of kyber's share/dkg/pedersen and share/vss, resharing.
//     circl does not state a guarantee in the package's own documentation;
//     its README, section "Constant-Time Caveats", says: "Not every package
//     in CIRCL is constant time. The following packages document, at the top
//     of their `doc.go` or main source file, the specific operations that are
//     known to leak timing information", and ecc/bls12381 is not among the
//     packages it lists. We checked the v1.6.5 sources this module pins:
//     G1/G2 ScalarMult and Gt Exp use a fixed 4-bit window whose table entry
//     is selected with subtle.ConstantTimeByteEq and a conditional move, over
//     complete addition formulas, and Fr arithmetic is fiat-crypto Montgomery
//     code. circl's Scalar.SetBytes and Scalar.Random go through math/big,
//     which is not constant time, so Scalar never calls them: it reduces
//     bytes with Montgomery multiplications only (see Scalar.SetBytes).
//
//   - github.com/consensys/gnark-crypto/ecc/bls12-381 backs what handles
//     public data only: PublicKey.Verify and Verify check a signature with
//     one multi-pairing (a single Miller loop over the two pairs and one
//     final exponentiation), VerifyBatch weighs a batch with its
//     multi-scalar multiplication, and DecodePublicG1 and InterpolateG1
//     recover a group signature from partial signatures. gnark's package documentation
//     warns: "In particular, there is no security guarantees such as
//     constant time implementation or side-channel attack resistance." Never
//     hand it a secret.
//
// # Decoding
//
// Every point that comes from outside (network, file, token) must go
// through a strict decoder: DecodeG1 for signatures and partial signatures,
// DecodeG2 or NewPublicKey for keys. They accept only the compressed
// ZCash/IETF serialization of exactly the right length, with the
// compression flag set, the sort flag clear on the point at infinity,
// coordinates below p, a point on the curve and in the prime-order subgroup
// (G1 has a cofactor, so the check matters for every signature), and they
// refuse the identity. Failures wrap the sentinel errors ErrEncoding,
// ErrNotInSubgroup and ErrIdentity with %w.
//
// The kyber adapters' UnmarshalBinary applies the same rules except that it
// accepts the identity, because the identity is a group element that
// kyber's protocols and kyber's own conformance tests (util/test) must be
// able to round-trip. Consequently kyber's sign/bls.Verify over this suite
// accepts the identity signature under the identity key for every message:
// verify with PublicKey.Verify or Verify instead, which refuse it.
//
// # Randomness
//
// G1Point.Pick and G2Point.Pick hash stream bytes to the curve with their
// own domain separation tags (PickDSTG1, PickDSTG2), never with
// SignatureDST, so a point picked by kyber (for instance the second Pedersen
// generator of share/vss/pedersen) has no known discrete logarithm and is
// never a valid message hash.
package bls12381
