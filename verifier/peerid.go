package verifier

import (
	"crypto/ed25519"
	"fmt"

	"github.com/palisade-dev/palisade/protocol"
)

// HolderKey returns the Ed25519 public key that a holder identity names: a
// libp2p peer ID string ("12D3KooW…") of an Ed25519 key, which is what
// Palisade clients use as their holder identity. Decoding is strict (see
// protocol.PeerIDKey): base58btc with exactly the identity multihash of the
// protobuf key in libp2p's exact field order and lengths, nothing trailing,
// and the one canonical text form. Anything else (RSA or secp256k1 peer
// IDs, hashed peer IDs, CIDs) wraps ErrHolderKey. It does not import libp2p.
func HolderKey(holder string) (ed25519.PublicKey, error) {
	key, err := protocol.PeerIDKey(holder)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHolderKey, err)
	}
	return key, nil
}

// HolderID returns the holder identity of an Ed25519 public key: its libp2p
// peer ID string, as libp2p's peer.IDFromPublicKey would give it. It panics
// if pub is not ed25519.PublicKeySize bytes long.
func HolderID(pub ed25519.PublicKey) string { return protocol.Ed25519PeerID(pub) }
