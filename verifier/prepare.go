package verifier

import (
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// Prepared is a token check started before the token exists: the part of
// the check that depends only on the statement, its hash to G1 (see
// crypto.Prepared). A client knows the statement it asks the nodes to
// sign, so it prepares the check while the votes come in, and checking
// the combined token then costs only the signature's decoding and one
// multi-pairing.
type Prepared struct {
	st protocol.Statement
	p  *crypto.Prepared
}

// Prepare starts the check of a token of st.
func (v *Verifier) Prepare(st protocol.Statement) *Prepared {
	return &Prepared{st: st, p: v.key.Prepare(st.SignedBytes())}
}

// VerifyPrepared is VerifyFor(tok, tok.Resource) for a token of the
// prepared statement: the same cheap checks first, the same cache, the
// same equation, with its statement half already computed. A token of
// another statement is checked in full.
func (v *Verifier) VerifyPrepared(tok protocol.Token, p *Prepared) error {
	if p == nil || tok.Statement != p.st {
		return v.VerifyFor(tok, tok.Resource)
	}
	cached, err := v.precheckFor(&tok, tok.Resource)
	if err != nil || cached {
		return err
	}
	if v.proofRequired {
		return v.VerifyFor(tok, tok.Resource) // refuses as proof mode does
	}
	v.checked.Add(1)
	if err := p.p.Verify(tok.Signature); err != nil {
		return invalid(tok, err)
	}
	if v.cache != nil {
		v.cache.add(&tok)
	}
	return nil
}
