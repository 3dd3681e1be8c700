package verifier

import (
	"sync"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// tokenCache remembers tokens whose signature verified under the verifier's
// group key, so that a token presented again skips the signature check.
//
// What it remembers is exactly "this statement with this signature
// verified". An entry is found by the signature's bytes and is a hit only if
// the stored statement equals the presented one field by field. The
// statement's canonical signed bytes (protocol.Statement.SignedBytes) are an
// injective, length-prefixed encoding of those fields, so equal fields is
// equal signed bytes: no digest, and no collision argument, stands between a
// hit and the check it replaces.
//
// The cache is consulted first, before the signature is decompressed or
// checked for the subgroup: a hit costs a map lookup and a statement
// comparison. That is sound because only signatures that went through
// crypto's strict decoding and verified are ever stored, and a compressed
// encoding names at most one point: another encoding of a cached
// signature's point (x+p, or other flag bits) differs in its bytes, misses,
// and is refused by the fresh check; the sort flag flipped is the negated
// point, another signature, which misses and does not verify. The raw token
// text is never a key.
//
// The cache is sharded by a byte of the signature (uniform for valid
// signatures; invalid ones are never stored), each shard a mutex and two
// generations of maps: a lookup that hits the old generation moves the
// entry to the current one, and when the current generation is full it
// becomes the old one and the previous old one is dropped. So the cache holds
// at most its size and keeps recently used tokens.
type tokenCache struct {
	shards []cacheShard
	mask   byte
}

type cacheShard struct {
	mu       sync.Mutex
	cur, old map[crypto.Signature]protocol.Statement
	genMax   int
	_        [32]byte // pad to 64 bytes: shards on separate cache lines
}

// cacheShardByte picks the shard: the last byte of the compressed
// signature, the low byte of its x coordinate.
const cacheShardByte = crypto.SignatureSize - 1

// newTokenCache returns a cache of at most max(size, 2) entries.
func newTokenCache(size int) *tokenCache {
	shards := 1
	if size >= 2048 {
		shards = 16
	}
	genMax := max(1, size/(2*shards))
	c := &tokenCache{shards: make([]cacheShard, shards), mask: byte(shards - 1)}
	for i := range c.shards {
		c.shards[i] = cacheShard{cur: make(map[crypto.Signature]protocol.Statement, genMax), genMax: genMax}
	}
	return c
}

func (c *tokenCache) shard(sig *crypto.Signature) *cacheShard {
	return &c.shards[sig[cacheShardByte]&c.mask]
}

// contains reports whether tok's exact statement and signature verified
// before.
func (c *tokenCache) contains(tok *protocol.Token) bool {
	s := c.shard(&tok.Signature)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.cur[tok.Signature]; ok {
		return st == tok.Statement
	}
	if st, ok := s.old[tok.Signature]; ok && st == tok.Statement {
		s.put(tok) // keep it through the next rotation
		return true
	}
	return false
}

// add remembers that tok verified. Call it only after a successful strict
// verification under the verifier's key.
func (c *tokenCache) add(tok *protocol.Token) {
	s := c.shard(&tok.Signature)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(tok)
}

func (s *cacheShard) put(tok *protocol.Token) {
	if _, ok := s.cur[tok.Signature]; !ok && len(s.cur) >= s.genMax {
		s.old = s.cur
		s.cur = make(map[crypto.Signature]protocol.Statement, s.genMax)
	}
	s.cur[tok.Signature] = tok.Statement
}

// len returns the number of entries, for tests.
func (c *tokenCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.cur)
		for k := range s.old {
			if _, dup := s.cur[k]; !dup {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}
