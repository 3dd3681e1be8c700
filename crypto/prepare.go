package crypto

import (
	"go.dedis.ch/kyber/v3"
)

// Prepared is a signature check started before the signature exists. A
// check is e(H(m), X) = e(S, g2): the left side depends only on the
// message and the key, so a caller that knows the message early (a client
// knows the statement it asks the nodes to sign before it sends the
// Acquire) computes that pairing while it waits for the signature, and
// the check itself is left with one pairing.
type Prepared struct {
	done chan struct{}
	left kyber.Point // e(H(m), X), or nil if the key does not decode
	err  error
}

// Prepare starts the message's half of a check of a signature over msg
// under k. Its work (one hash to G1 and one pairing, about 1.2 ms) runs on
// a goroutine of its own that ends by itself; Verify waits for it.
func (k PublicKey) Prepare(msg []byte) *Prepared {
	p := &Prepared{done: make(chan struct{})}
	m := append([]byte(nil), msg...)
	go func() {
		defer close(p.done)
		X, err := decodeG2(k[:])
		if err != nil {
			p.err = err
			return
		}
		p.left = suite.Pair(hashToG1(m), X)
	}()
	return p
}

// Verify checks sig as PublicKey.Verify does for the prepared message and
// key: the same strict decoding, the same equation.
func (p *Prepared) Verify(sig Signature) error {
	s, err := decodeG1(sig[:])
	if err != nil {
		return err
	}
	right := suite.Pair(s, suite.G2().Point().Base())
	<-p.done
	if p.err != nil {
		return p.err
	}
	if !p.left.Equal(right) {
		return ErrInvalidSignature
	}
	return nil
}
