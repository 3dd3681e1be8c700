package verifiertest

import (
	"crypto/ed25519"
	"encoding/binary"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// Key returns a deterministic Ed25519 key from seed: a holder's identity
// in tests (verifier.HolderID names it in a token).
func Key(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed + byte(i)
	}
	return ed25519.NewKeyFromSeed(s)
}

// Prove returns key's proof of possession for req with tok, signed at at,
// with n in the last 8 bytes of the nonce (tests count nonces so that
// proofs are deterministic).
func Prove(tok protocol.Token, req pop.Request, key ed25519.PrivateKey, at time.Time, n uint64) pop.Proof {
	pr := pop.Proof{UnixMilli: at.UnixMilli()}
	binary.BigEndian.PutUint64(pr.Nonce[pop.NonceSize-8:], n)
	copy(pr.Signature[:], ed25519.Sign(key, pop.SignedBytes(tok, req, pr.UnixMilli, pr.Nonce)))
	return pr
}

// Clock is a settable clock for a verifier's proof window (pop.Config.Now).
// It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at 2026-11-21 12:00 UTC.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (backwards for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
