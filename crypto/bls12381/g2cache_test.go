package bls12381

import (
	"bytes"
	"testing"
)

// TestG2DecodeCache: a valid encoding decodes to the same point from the
// cache as without it, twice in a row, and a copy handed out cannot
// change the cached point; no invalid encoding is ever cached, so each is
// refused every time it comes (the strict cases of TestDecodeG2Strict,
// each decoded twice); the cache stays within g2CacheSize.
func TestG2DecodeCache(t *testing.T) {
	var p G2Point
	p.Pick(stream("g2cache"))
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want, err := g2Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		q, err := DecodeG2(b)
		if err != nil {
			t.Fatal(err)
		}
		if !q.p.IsEqual(&want) {
			t.Fatalf("decode %d gave another point", i)
		}
		if _, ok := g2Decoded.get(b); !ok {
			t.Fatalf("decode %d: not cached", i)
		}
		q.Add(q, q) // the caller's copy, not the cache's
	}
	if got, _ := g2Decoded.get(b); !got.IsEqual(&want) {
		t.Fatal("changing a decoded point changed the cached one")
	}

	for _, c := range g2Cases(t) {
		if c.wantKyber == nil {
			continue
		}
		for i := 0; i < 2; i++ {
			var k G2Point
			if err := k.UnmarshalBinary(c.in); err == nil {
				t.Fatalf("%s: decode %d accepted an invalid encoding", c.name, i)
			}
			if _, ok := g2Decoded.get(c.in); ok {
				t.Fatalf("%s: an invalid encoding was cached", c.name)
			}
		}
	}

	fill := stream("g2cache-fill")
	for i := 0; i < g2CacheSize+10; i++ {
		var r G2Point
		r.Pick(fill)
		enc, _ := r.MarshalBinary()
		if err := new(G2Point).UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
	}
	if n := g2Decoded.len(); n > g2CacheSize {
		t.Fatalf("cache holds %d points, bound %d", n, g2CacheSize)
	}
	q, err := DecodeG2(b)
	if err != nil || !bytes.Equal(mustMarshal(t, q), b) {
		t.Fatalf("after evictions: %v", err)
	}
}

// BenchmarkDecodeG2 decodes one public key, as the DKG's Schnorr checks
// do at every call: "uncached" is the strict decode alone, "cached" the
// same bytes again through the cache.
func BenchmarkDecodeG2(b *testing.B) {
	var p G2Point
	p.Pick(stream("g2cache-bench"))
	enc, _ := p.MarshalBinary()
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := g2Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeG2(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func mustMarshal(t *testing.T, p *G2Point) []byte {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
