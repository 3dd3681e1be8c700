package dkg

import (
	"context"
	"encoding/binary"
	"fmt"
	mrand "math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
	"github.com/palisade-dev/palisade/internal/dkg/dkgtest"
	"github.com/palisade-dev/palisade/node"
)

// This file plays one Byzantine member (f = 1 of 4) that relays forgeries
// to the honest members, and a network that delivers what it relays before
// anything from honest members. The Byzantine behaviour lives in test
// hooks (runWith); the honest members run the production code.

// relayGate is an honest member's network: in the relayed phases, nothing
// from an honest member is processed before the Byzantine member's reply
// has been processed in full.
type relayGate struct {
	byz  peer.ID
	mu   sync.Mutex
	done map[string]bool
}

func (g *relayGate) step(phase string, p peer.ID, next func() bool) bool {
	if p == g.byz {
		ok := next()
		if ok {
			g.mu.Lock()
			g.done[phase] = true
			g.mu.Unlock()
		}
		return ok
	}
	switch phase {
	case "keys", "responses", "complaints", "justifications":
		g.mu.Lock()
		open := g.done[phase]
		g.mu.Unlock()
		if !open {
			return false
		}
	}
	return next()
}

// forger rewrites the Byzantine member's replies.
type forger struct {
	tm      testMembers
	self    int // 0-based index of the Byzantine member
	keys    bool
	relays  bool
	junk    int // junk justifications ahead of its genuine ones
	flood   int
	badRand *mrand.Rand
	mu      sync.Mutex
	sids    map[uint32][]byte
	sig     []byte
}

// listOf returns the items of a list reply (nil for another reply).
func listOf(kind uint8, reply []byte) [][]byte {
	if len(reply) == 0 || reply[0] != statusOK || kind == kindDeal || kind == kindHash {
		return nil
	}
	items, _ := decodeList(reply[1:])
	return items
}

// learn records, from the Byzantine member's own genuine responses, the
// session ID of each dealer's deal and one validly encoded signature. f.mu
// must be held.
func (f *forger) learn(genuine [][]byte) {
	if f.sids == nil {
		f.sids = map[uint32][]byte{}
	}
	// Byte offsets of the crypto/dkg response encoding: version, kind, dealer (4),
	// session ID, responder (4), status, signature.
	const sidAt, fromAt, sigAt = 6, 6 + cdkg.SessionIDSize, 6 + cdkg.SessionIDSize + 5
	for _, it := range genuine {
		if len(it) != sigAt+cdkg.SchnorrSignatureSize || int(binary.BigEndian.Uint32(it[fromAt:])) != f.self {
			continue
		}
		f.sids[binary.BigEndian.Uint32(it[2:])] = it[sidAt:fromAt]
		f.sig = it[sigAt:]
	}
}

func (f *forger) answer(t *testing.T) func(r *runner, to peer.ID, kind uint8, reply []byte) []byte {
	return func(r *runner, to peer.ID, kind uint8, reply []byte) []byte {
		if len(reply) == 0 || reply[0] != statusOK {
			return reply
		}
		genuine := listOf(kind, reply)
		var forged [][]byte
		switch kind {
		case kindKeys:
			if !f.keys {
				return reply
			}
			// Its own ceremony key, outside the G2 subgroup but signed by
			// its identity, ahead of the genuine one; and another member's
			// key under its own signature.
			nonSub := bls12381test.NonSubgroupG2(uint64(len(to)))
			bad := crypto.PublicKey(nonSub)
			k := keyRecord{Ceremony: r.ceremony, PeerID: r.self.String(), Key: bad}
			sig, err := f.tm.ids[f.self].Sign(k.signedBytes())
			require.NoError(t, err)
			k.Sig = sig
			forged = append(forged, k.marshal())
			for _, it := range genuine {
				other, err := parseKeyRecord(it)
				require.NoError(t, err)
				if other.PeerID != r.self.String() {
					other.Sig = sig
					forged = append(forged, other.marshal())
				}
			}
		case kindResponses, kindComplaints:
			if !f.relays && f.flood == 0 {
				return reply
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.learn(genuine)
			sids, sig := f.sids, f.sig
			if f.relays {
				// Genuine responses relabelled to another dealer: validly
				// signed, wrong session.
				for _, it := range genuine {
					for d := range len(f.tm.list.Members) {
						if b := relabel(it, uint32(d)); b != nil {
							forged = append(forged, b)
						}
					}
				}
				// Badly signed copies of every honest member's response
				// (approval and complaint) to every dealer, its own deal
				// first (hiding member 1's complaint about it).
				n := len(f.tm.list.Members)
				for k := range n {
					d := uint32((f.self + k) % n)
					for x := range n {
						if x == f.self || sids[d] == nil {
							continue
						}
						for _, st := range []byte{0, 1} {
							forged = append(forged, forgeResponse(d, sids[d], uint32(x), st, sig))
						}
					}
				}
			}
			for range f.flood {
				sid := make([]byte, cdkg.SessionIDSize)
				f.badRand.Read(sid)
				d, x := uint32(f.badRand.Intn(4)), uint32(f.badRand.Intn(4))
				forged = append(forged, forgeResponse(d, sid, x, 1, sig))
			}
		case kindJustifications:
			f.mu.Lock()
			for range f.flood + f.junk {
				junk := make([]byte, 64+f.badRand.Intn(200))
				f.badRand.Read(junk)
				junk[0], junk[1] = cdkg.WireVersion, 3
				forged = append(forged, junk)
			}
			f.mu.Unlock()
		default:
			return reply
		}
		return append([]byte{statusOK}, encodeList(append(forged, genuine...))...)
	}
}

// forgeResponse encodes a response with the given fields and a signature
// that is well-formed but not its responder's.
func forgeResponse(dealer uint32, sid []byte, responder uint32, status byte, sig []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{cdkg.WireVersion, 2}, dealer)
	b = append(b, sid...)
	b = binary.BigEndian.AppendUint32(b, responder)
	b = append(b, status)
	return append(b, sig...)
}

// relabel returns a genuine response with another dealer index (bytes 2
// to 5 of the encoding), or nil.
func relabel(it []byte, dealer uint32) []byte {
	if len(it) < 6 || binary.BigEndian.Uint32(it[2:6]) == dealer {
		return nil
	}
	b := append([]byte(nil), it...)
	binary.BigEndian.PutUint32(b[2:6], dealer)
	return b
}

// served records the largest list each honest member served per kind.
type served struct {
	mu  sync.Mutex
	max map[uint8]int
}

func (s *served) answer(t *testing.T) func(*runner, peer.ID, uint8, []byte) []byte {
	return func(_ *runner, _ peer.ID, kind uint8, reply []byte) []byte {
		n := len(listOf(kind, reply))
		s.mu.Lock()
		s.max[kind] = max(s.max[kind], n)
		s.mu.Unlock()
		return reply
	}
}

type byzRun struct {
	results []*Result
	errs    []error
	outs    []*syncBuf
	served  []*served
	dirs    []string
}

// runByzantine runs a 4-member ceremony in which member 4 is Byzantine.
// byzDeals sets how the Byzantine member deals to member 1.
type byzDeals int

const (
	dealsHonest byzDeals = iota
	dealsCorrupt
	dealsWithheld
)

func runByzantine(t *testing.T, f *forger, deals byzDeals) byzRun {
	tm := newTestMembers(t, 4)
	f.tm, f.self = tm, 3
	f.badRand = mrand.New(mrand.NewSource(int64(len(t.Name()))))
	byz, _ := peer.IDFromPrivateKey(tm.ids[3])
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang ceiling
	defer cancel()
	br := byzRun{results: make([]*Result, 4), errs: make([]error, 4), outs: make([]*syncBuf, 4), served: make([]*served, 4), dirs: make([]string, 4)}
	var wg sync.WaitGroup
	for i := range 4 {
		br.outs[i] = &syncBuf{}
		br.dirs[i] = filepath.Join(dir, fmt.Sprint(i+1))
		cfg := Config{Members: tm.list, Identity: tm.ids[i], OutDir: br.dirs[i], Progress: br.outs[i],
			// A phase waits this long only for a member that is gone (the
			// Byzantine member may exit before the others read its hash).
			PhaseTimeout: 10 * time.Second, PollInterval: 20 * time.Millisecond,
			Rand: mrand.New(mrand.NewSource(int64(i + 1)))}
		var dec Decorator
		var hooks *testHooks
		if i == 3 {
			switch deals {
			case dealsCorrupt:
				dec = dkgtest.Corrupt{}
			case dealsWithheld:
				dec = dkgtest.Withhold{}
			}
			hooks = &testHooks{answer: f.answer(t)}
		} else {
			g := &relayGate{byz: byz, done: map[string]bool{}}
			br.served[i] = &served{max: map[uint8]int{}}
			hooks = &testHooks{step: g.step, answer: br.served[i].answer(t)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			br.results[i], br.errs[i] = runWith(ctx, cfg, dec, hooks)
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "hang ceiling")
	return br
}

// honestAgree checks that every honest member finished with the same
// cluster.json and a node directory holding its own share.
func (br byzRun) honestAgree(t *testing.T) {
	t.Helper()
	for i := range 3 {
		require.NoError(t, br.errs[i], "member %d:\n%s", i+1, br.outs[i].String())
		require.Equal(t, br.results[0].ClusterHash, br.results[i].ClusterHash, "member %d", i+1)
		require.Equal(t, i+1, br.results[i].Index)
		nd, err := node.LoadDir(br.dirs[i])
		require.NoError(t, err, "member %d", i+1)
		require.Equal(t, i+1, nd.Share.Index())
		require.NoError(t, nd.Cluster.Key.CheckShare(nd.Share), "member %d holds its own share of the group key", i+1)
	}
}

// TestDKGByzantineRelays: f = 1 Byzantine member relays forgeries to every
// honest member before the genuine items arrive, and sends points outside
// the G2 subgroup. Every honest member still ends with the same
// cluster.json and its own share.
func TestDKGByzantineRelays(t *testing.T) {
	t.Run("forged responses, complaints and justifications", func(t *testing.T) {
		// The Byzantine member also deals a bad share to member 1 and never
		// justifies: its forged copies of member 1's complaint must not
		// hide that complaint from members 2 and 3.
		br := runByzantine(t, &forger{relays: true, junk: 16}, dealsCorrupt)
		br.honestAgree(t)
		for i := range 3 {
			require.Equal(t, []string{br.results[i].Excluded[0]}, br.results[i].Excluded, "member %d", i+1)
			require.True(t, strings.HasPrefix(br.results[i].Excluded[0], "node4 ("), "member %d excluded %v", i+1, br.results[i].Excluded)
			require.Contains(t, br.outs[i].String(), "relayed by node4 (", "member %d counted the forgeries", i+1)
		}
	})
	t.Run("withheld deal and relabelled responses", func(t *testing.T) {
		// The Byzantine member withholds member 1's deal and relays the
		// other dealers' responses relabelled as responses to its own deal:
		// member 1's complaint must still name the real session, so the
		// Byzantine member must justify in public and everyone qualifies it.
		br := runByzantine(t, &forger{relays: true, junk: 3}, dealsWithheld)
		br.honestAgree(t)
		for i := range 3 {
			require.Empty(t, br.results[i].Excluded, "member %d", i+1)
		}
		require.Contains(t, br.outs[0].String(), "complained that node4 (")
	})
	t.Run("points outside the subgroup", func(t *testing.T) {
		br := runByzantine(t, &forger{keys: true}, dealsHonest)
		br.honestAgree(t)
		for i := range 3 {
			require.Contains(t, br.outs[i].String(), "subgroup", "member %d", i+1)
		}
	})
	t.Run("a flood is bounded", func(t *testing.T) {
		// 3,000 forged responses and justifications per reply: an honest
		// member stores (and relays) no more than its slots hold, and stops
		// reading the Byzantine member after a few invalid items.
		br := runByzantine(t, &forger{flood: 3000}, dealsHonest)
		br.honestAgree(t)
		n := 4
		for i := range 3 {
			s := br.served[i]
			s.mu.Lock()
			require.LessOrEqual(t, s.max[kindResponses], n*n*n, "member %d relays at most dealers×members×%d responses", i+1, n)
			require.LessOrEqual(t, s.max[kindJustifications], n*n*maxJustPerSlot, "member %d", i+1)
			s.mu.Unlock()
			require.Contains(t, br.outs[i].String(), "skipping the rest", "member %d", i+1)
		}
	})
}
