package protocol

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// ErrPeerID reports text that is not the libp2p peer ID of an Ed25519 key
// in its default (base58btc) string form.
var ErrPeerID = errors.New("protocol: not the peer ID of an Ed25519 key")

// A libp2p peer ID of an Ed25519 key, in its default string form, is the
// base58btc encoding of an identity multihash (code 0x00, length 36) of the
// protobuf PublicKey message {Type (field 1) = 1 (Ed25519), Data (field 2)
// = the 32-byte key}. These are its first six bytes.
var ed25519PeerIDPrefix = [...]byte{
	0x00, 0x24, // multihash: identity, 36 bytes
	0x08, 0x01, // field 1 (varint): KeyType Ed25519
	0x12, 0x20, // field 2 (bytes): 32 bytes
}

const (
	peerIDSize = len(ed25519PeerIDPrefix) + ed25519.PublicKeySize
	// maxPeerIDText bounds the text before decoding: 38 bytes need at most
	// 52 base58 digits.
	maxPeerIDText = 52
)

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Digits = func() (d [256]int8) {
	for i := range d {
		d[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		d[base58Alphabet[i]] = int8(i)
	}
	return d
}()

// PeerIDKey returns the Ed25519 public key that a libp2p peer ID string
// ("12D3KooW…") names. Palisade nodes and clients use Ed25519 identities,
// so this is how their identity signatures are checked without libp2p.
// Decoding is strict: base58btc with exactly the identity multihash of the
// protobuf key in libp2p's exact field order and lengths, nothing
// trailing, and the one canonical text form. Anything else (RSA or
// secp256k1 peer IDs, hashed peer IDs, CIDs) wraps ErrPeerID.
func PeerIDKey(id string) (ed25519.PublicKey, error) {
	if len(id) > maxPeerIDText {
		return nil, fmt.Errorf("%w: %d characters, an Ed25519 peer ID has at most %d", ErrPeerID, len(id), maxPeerIDText)
	}
	b, ok := base58Decode(id)
	if !ok {
		return nil, fmt.Errorf("%w: not base58btc", ErrPeerID)
	}
	if len(b) != peerIDSize || [6]byte(b[:6]) != ed25519PeerIDPrefix {
		return nil, fmt.Errorf("%w: not an identity multihash of an Ed25519 public key", ErrPeerID)
	}
	return ed25519.PublicKey(b[len(ed25519PeerIDPrefix):]), nil
}

// Ed25519PeerID returns the libp2p peer ID string of an Ed25519 public key,
// as libp2p's peer.IDFromPublicKey would give it. It panics if pub is not
// ed25519.PublicKeySize bytes long (a caller bug).
func Ed25519PeerID(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		panic(fmt.Sprintf("protocol: Ed25519PeerID: Ed25519 key of %d bytes", len(pub)))
	}
	b := make([]byte, 0, peerIDSize)
	b = append(b, ed25519PeerIDPrefix[:]...)
	return base58Encode(append(b, pub...))
}

// base58Decode decodes bitcoin-alphabet base58: each leading '1' is a zero
// byte, the rest a big-endian number. The encoding is a bijection, so the
// result re-encodes to s. Callers bound len(s): the work is quadratic.
func base58Decode(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// Little-endian base-256 digits of the number.
	num := make([]byte, 0, len(s))
	for i := zeros; i < len(s); i++ {
		d := base58Digits[s[i]]
		if d < 0 {
			return nil, false
		}
		carry := int(d)
		for j := range num {
			carry += int(num[j]) * 58
			num[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			num = append(num, byte(carry))
			carry >>= 8
		}
	}
	out := make([]byte, zeros+len(num))
	for i, v := range num {
		out[len(out)-1-i] = v
	}
	return out, true
}

// base58Encode is the inverse of base58Decode.
func base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// Little-endian base-58 digits of the number.
	var digits []byte
	for _, v := range b[zeros:] {
		carry := int(v)
		for j := range digits {
			carry += int(digits[j]) << 8
			digits[j] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits = append(digits, byte(carry%58))
			carry /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := 0; i < zeros; i++ {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}
