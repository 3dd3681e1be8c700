package crypto

import (
	"github.com/palisade-dev/palisade/crypto/bls12381"
)

// Prepared is a signature check started before the signature exists: the
// message is hashed to G1 (the part of a check that depends only on the
// message), so that when the signature arrives only its decoding and one
// multi-pairing remain. A client knows the statement it asks the nodes to
// sign before it sends the Acquire.
type Prepared struct {
	key *bls12381.PublicKey
	h   *bls12381.MessageHash
	err error
}

// Prepare hashes msg for a later check of a signature under k. The key is
// decoded here; an error is reported by Verify.
func (k PublicKey) Prepare(msg []byte) *Prepared {
	pk, err := k.decode()
	if err != nil {
		return &Prepared{err: err}
	}
	return prepare(pk, msg)
}

// Prepare is PublicKey.Prepare under the group public key, kept decoded.
func (g *GroupKey) Prepare(msg []byte) *Prepared { return prepare(g.key, msg) }

func prepare(pk *bls12381.PublicKey, msg []byte) *Prepared {
	h, err := bls12381.HashMessage(msg)
	return &Prepared{key: pk, h: h, err: err}
}

// Verify checks sig as PublicKey.Verify does for the prepared message and
// key: the same strict decoding, the same equation.
func (p *Prepared) Verify(sig Signature) error {
	if p.err != nil {
		return p.err
	}
	return libErr(p.key.VerifyHash(p.h, sig[:]))
}
