// Package dkgtest holds faulty dealers for ceremony tests: decorators
// (dkg.Decorator) that testnet and the ceremony's own tests plug into
// dkg.RunDecorated. Tests only.
package dkgtest

import cdkg "github.com/palisade-dev/palisade/crypto/dkg"

// Corrupt is a Byzantine dealer: it sends its victim a deal whose share
// does not match its commitments and never justifies it, so every member
// excludes it.
type Corrupt struct{}

// Deal serves a corrupted deal to the victim and honest deals elsewhere.
func (Corrupt) Deal(cd *cdkg.DKG, to, victim int, deal []byte) ([]byte, error) {
	if to == victim {
		return cd.CorruptDeal(to)
	}
	return deal, nil
}

// Justify refuses to justify the deal the victim complains about.
func (Corrupt) Justify(from, victim int) bool { return from != victim }

// Withhold is a dealer that never gives its victim a deal, but justifies
// when the victim complains, so the deal stays qualified.
type Withhold struct{}

// Deal serves no deal to the victim.
func (Withhold) Deal(_ *cdkg.DKG, to, victim int, deal []byte) ([]byte, error) {
	if to == victim {
		return nil, nil
	}
	return deal, nil
}

// Justify always justifies.
func (Withhold) Justify(int, int) bool { return true }
