package client

import (
	"fmt"
	"net/http"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// SignRequest attaches tok and the holder's proof of possession to req, for
// resources whose verifier runs in proof mode (verifier.RequireProof): id
// must be the holder's identity, the key whose peer ID tok names. It buffers
// and restores the body, signs the method, the target
// (req.URL.RequestURI()), a digest of the body and of the token, now and a
// random nonce (pop.SignedBytes), and sets the pop.HeaderToken and
// pop.HeaderProof headers. Each proof is good for one request within the
// verifier's time window: sign again before a retry.
func SignRequest(req *http.Request, tok protocol.Token, id Identity, now time.Time) error {
	if id == nil {
		return fmt.Errorf("client: sign request: no identity key")
	}
	if id.Type() != lcrypto.Ed25519 {
		return fmt.Errorf("client: sign request: identity is a %s key; proofs of possession need Ed25519", id.Type())
	}
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		return fmt.Errorf("client: sign request: %w", err)
	}
	if pid.String() != tok.Holder.ID {
		return fmt.Errorf("client: sign request: token holder %s is not this identity %s", tok.Holder.ID, pid)
	}
	if err := pop.SignRequest(req, tok, id.Sign, now); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// SignRequest attaches the lock's token and a proof of possession signed
// with the client's identity to req, at the client's clock's time (see
// SignRequest).
func (l *Lock) SignRequest(req *http.Request) error {
	return SignRequest(req, l.token, l.c.cfg.Identity, l.c.cfg.Clock.Now())
}
