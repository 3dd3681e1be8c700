package client

import (
	"crypto/rand"
	"fmt"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/internal/transport"
)

// Identity is a client's private key (Ed25519). Its peer ID is the holder
// named in its tokens; the cluster file authorises it per resource pattern
// (S6). Load one with LoadIdentity; an embedder never needs libp2p's
// crypto package.
type Identity = lcrypto.PrivKey

// LoadIdentity reads a client key file (as written by `palisade keygen`
// or SaveIdentity), refusing one that others can read. Its errors are
// the loader's own (they name the file and wrap the cause, such as
// fs.ErrNotExist), so the CLI reports them as before.
func LoadIdentity(path string) (Identity, error) { return transport.LoadIdentity(path) }

// GenerateIdentity makes a new Ed25519 client identity. Its holder ID (see
// HolderID) must be authorised in the cluster file before it can acquire.
func GenerateIdentity() (Identity, error) { return transport.GenerateIdentity(rand.Reader) }

// SaveIdentity writes k to path with mode 0600.
func SaveIdentity(path string, k Identity) error { return transport.SaveIdentity(path, k) }

// HolderID is the holder identity (peer ID) tokens of k name.
func HolderID(k Identity) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("client: holder ID: %w", err)
	}
	return id.String(), nil
}
