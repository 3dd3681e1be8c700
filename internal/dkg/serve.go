package dkg

// The ceremony's one protocol, ProtoFetch, from both ends: fetch asks a
// peer for what it has for a phase, serve and answer reply.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/internal/transport"
)

// fetchKeys asks p for every ceremony key it holds and keeps the valid ones.
func (r *runner) fetchKeys(ctx context.Context, p *participant) bool {
	bad := 0
	items, _, ok := r.fetchList(ctx, p, kindKeys, "keys", &bad)
	if !ok {
		return false
	}
	for _, it := range items {
		if bad >= r.maxRefused() {
			break
		}
		k, err := parseKeyRecord(it)
		if err == nil && k.Ceremony != r.ceremony {
			err = errors.New("key for another ceremony")
		}
		if err != nil {
			r.refuse(p, "ceremony key", err, &bad)
			continue
		}
		pid, err := peer.Decode(k.PeerID)
		if err != nil || r.byID[pid] == nil {
			r.refuse(p, "ceremony key", fmt.Errorf("not a member: %q", k.PeerID), &bad)
			continue
		}
		r.mu.Lock()
		have, ok := r.keys[pid]
		r.mu.Unlock()
		if ok && have.Key == k.Key {
			continue // already verified
		}
		pub, err := pid.ExtractPublicKey()
		if err != nil {
			continue
		}
		if ok, err := pub.Verify(k.signedBytes(), k.Sig); err != nil || !ok {
			r.refuse(p, "ceremony key", fmt.Errorf("bad signature for %s", pid), &bad)
			continue
		}
		r.mu.Lock()
		if old, ok := r.keys[pid]; ok && old.Key != k.Key && !r.keySetDone {
			r.printf("dkg: %s published two ceremony keys; keeping the first", r.byID[pid])
		} else if !ok && !r.keySetDone {
			r.keys[pid] = k
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, have := r.keys[p.id]
	return have
}

// fetch sends one request to p and returns the reply's status and payload;
// a failed exchange is statusNotReady.
func (r *runner) fetch(ctx context.Context, p *participant, kind uint8) (uint8, []byte) {
	req := request{Ceremony: r.ceremony, Kind: kind}
	if kind != kindKeys {
		r.mu.Lock()
		req.KeySet = r.keySet
		r.mu.Unlock()
	}
	reply, err := transport.Call(ctx, r.h, p.id, ProtoFetch, req.marshal(), MaxFrameSize)
	if err != nil || len(reply) == 0 {
		return statusNotReady, nil
	}
	if reply[0] == statusWrong {
		r.printf("dkg: %s is in another ceremony or has another key set: %s", p, string(reply[1:min(len(reply), 200)]))
		r.mu.Lock()
		r.wrong[p.id] = true
		r.mu.Unlock()
	}
	return reply[0], reply[1:]
}

// serve answers one fetch request from a member.
func (r *runner) serve(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	from := s.Conn().RemotePeer()
	b, err := readFrame(s, 128)
	if err != nil {
		_ = s.Reset()
		return
	}
	req, err := parseRequest(b)
	if err != nil {
		_ = s.Reset()
		return
	}
	reply := r.answer(from, req)
	if h := r.hooks; h != nil && h.answer != nil {
		reply = h.answer(r, from, req.Kind, reply)
	}
	if err := writeFrame(s, reply); err != nil {
		_ = s.Reset()
		return
	}
	// A member lingers until the others have its justifications and its
	// cluster.json hash, then closes its host. Count an item as fetched
	// only once the reader has it (it closes the stream after reading the
	// reply), not when the reply is written: written bytes can still be
	// lost with the host, and the reader would then wait out a phase.
	if len(reply) == 0 || reply[0] != statusOK || (req.Kind != kindHash && req.Kind != kindJustifications) {
		return
	}
	_ = s.CloseWrite()
	if _, err := io.Copy(io.Discard, io.LimitReader(s, 1)); err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Kind == kindHash {
		r.hashFetch[from] = true
	} else {
		r.justFetch[from] = true
	}
}

func (r *runner) answer(from peer.ID, req request) []byte {
	wrong := func(msg string) []byte { return append([]byte{statusWrong}, msg...) }
	if req.Ceremony != r.ceremony {
		return wrong("ceremony ID differs: check that both run the same member list (and old cluster file)")
	}
	p := r.byID[from]
	if p == nil {
		return []byte{statusNone}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Kind == kindKeys {
		items := make([][]byte, 0, len(r.keys))
		for _, q := range r.parts {
			if k, ok := r.keys[q.id]; ok {
				items = append(items, k.marshal())
			}
		}
		return append([]byte{statusOK}, encodeList(items)...)
	}
	if !r.keySetDone {
		return []byte{statusNotReady}
	}
	if req.KeySet != r.keySet {
		return wrong("key set differs: members saw different members' keys; restart the ceremony")
	}
	switch req.Kind {
	case kindDeal:
		if !r.dealsDone {
			return []byte{statusNotReady}
		}
		d, ok := r.deals[from]
		if !ok {
			return []byte{statusNone}
		}
		return append([]byte{statusOK}, d...)
	case kindResponses:
		if !r.respDone {
			return []byte{statusNotReady}
		}
		return append([]byte{statusOK}, encodeList(r.allResponses())...)
	case kindJustifications:
		if !r.justDone {
			return []byte{statusNotReady}
		}
		// Our own justifications first (see maxRefused).
		var own, relayed [][]byte
		for k, js := range r.justifs {
			if r.isDealer(r.me) && int(k.dealer) == r.dealerIndex(r.me)-1 {
				own = append(own, js...)
			} else {
				relayed = append(relayed, js...)
			}
		}
		return append([]byte{statusOK}, encodeList(append(own, relayed...))...)
	case kindComplaints:
		if !r.complDone {
			return []byte{statusNotReady}
		}
		return append([]byte{statusOK}, encodeList(r.complaints)...)
	case kindHash:
		if r.hash == nil {
			return []byte{statusNotReady}
		}
		return append([]byte{statusOK}, r.hash[:]...)
	}
	return []byte{statusNone}
}
