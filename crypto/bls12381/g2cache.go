package bls12381

import (
	"sync"

	circl "github.com/cloudflare/circl/ecc/bls12381"
)

// Decoding a compressed G2 point costs a square root in Fp2 and a
// subgroup check (about 0.3 ms with circl), and the DKG decodes the same
// few points again and again: kyber's Schnorr verification takes the
// signer's public key as bytes and decodes it at every call, and every
// deal and response names the members' long-term keys. Profiles of the
// scenario sweep put 35% of its CPU time in G2 decoding, most of it in
// the DKG's checks. So valid encodings are remembered: a point decoded
// once is copied out of the cache the next time its exact 96 bytes come.
// Encodings that fail are never cached, so every bad one is checked and
// refused as before. The cache holds public data only, and a hit reveals
// only that those bytes were seen before.

// g2CacheSize bounds the decoded points kept: 1,024 entries of about
// 400 bytes (the key and circl's projective point), about 0.4 MB.
const g2CacheSize = 1024

// g2Decoded is the process's cache of valid G2 encodings.
var g2Decoded = &g2Cache{m: make(map[[G2Size]byte]circl.G2, g2CacheSize)}

// g2Cache maps a strict compressed G2 encoding to its point. When full, a
// random entry (Go's map order) makes room: long-term keys, looked up far
// more often than the one-off points of signatures, come back at once.
type g2Cache struct {
	mu sync.Mutex
	m  map[[G2Size]byte]circl.G2
}

// get returns the point of b if b was decoded before.
func (c *g2Cache) get(b []byte) (circl.G2, bool) {
	if len(b) != G2Size {
		return circl.G2{}, false
	}
	c.mu.Lock()
	q, ok := c.m[[G2Size]byte(b)]
	c.mu.Unlock()
	return q, ok
}

// put remembers that b decodes to q; the caller decoded b strictly.
func (c *g2Cache) put(b []byte, q circl.G2) {
	if len(b) != G2Size {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= g2CacheSize {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[[G2Size]byte(b)] = q
}

// len is the number of points cached.
func (c *g2Cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
