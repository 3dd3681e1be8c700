package dkg

// How a member keeps and relays the items of the responses, complaints
// and justifications phases: every item is checked before it takes a
// slot, and a peer that relays forged items is reported and cut short.

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"

	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
)

// maxPerSlot bounds the responses kept per (dealer, responder): one per
// dealer session a responder could have signed (see sessionsOf).
func (r *runner) maxPerSlot() int {
	n := 0
	for _, p := range r.parts {
		if r.isDealer(p) {
			n++
		}
	}
	return max(n, 1)
}

// maxRefused is how many refused items (forged, for another session, or
// repeated) one reply may hold before the rest of it is skipped unread,
// which bounds the decoding and signature checks a peer can cause per
// phase. Every member serves its own items first and relays only items it
// checked, so what a reply loses this way is at most relayed copies of
// items their authors serve themselves; a Byzantine member can only make
// honest members skip what it sends, which it could withhold anyway.
func (r *runner) maxRefused() int { return 2 * len(r.parts) }

// refuse counts a refused item in p's reply (bad counts them for this
// reply), counts and reports it against p if it is forged (the first time
// per peer), and reports whether the rest of the reply must be skipped.
func (r *runner) refuse(p *participant, what string, err error, bad *int) bool {
	*bad++
	if !errors.Is(err, cdkg.ErrSession) {
		r.mu.Lock()
		r.refused[p.id]++
		n := r.refused[p.id]
		r.mu.Unlock()
		if n == 1 {
			r.printf("dkg: %s relayed by %s refused: %v", what, p, err)
		}
	}
	if *bad == r.maxRefused() {
		r.printf("dkg: %s sent %d refused items in one reply: skipping the rest of it", p, *bad)
	}
	return *bad >= r.maxRefused()
}

// fresh reports whether item it is neither stored already nor repeated in
// the current reply (seen); a repeat counts as refused, and skip reports
// whether the rest of the reply must be skipped.
func (r *runner) fresh(p *participant, what string, it []byte, seen map[[32]byte]bool, bad *int) (ok, skip bool) {
	h := sha256.Sum256(it)
	if seen[h] {
		return false, r.refuse(p, what, errors.New("item repeated in one reply"), bad)
	}
	seen[h] = true
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.stored[h], false
}

// pullResponses is the phase step that fetches one member's responses or
// complaints (kind; both are kyber responses), checks each before it
// takes a slot, keeps the new ones and records the justifications they
// call for.
func (r *runner) pullResponses(cd *cdkg.DKG, kind uint8, what string) func(context.Context, *participant) bool {
	return r.pullRelayed(kind, what, what, cd.CheckResponse, r.storeResponse, func(_ *participant, it []byte) {
		r.processResponse(cd, it)
	})
}

// pullJustifications is the phase step that fetches one member's
// justifications, checks each before it takes a slot and processes the
// new ones.
func (r *runner) pullJustifications(cd *cdkg.DKG) func(context.Context, *participant) bool {
	store := func(s cdkg.Slot, it []byte) bool { return r.storeJustification(slot{s.Dealer, s.Member}, it) }
	return r.pullRelayed(kindJustifications, "justifications", "justification", cd.CheckJustification, store, func(p *participant, it []byte) {
		if err := cd.ProcessJustification(it); err != nil {
			r.printf("dkg: justification relayed by %s: %v", p, err)
		}
	})
}

// pullRelayed is the phase step that fetches one member's list of relayed
// items of kind: each new item is checked before it takes a slot (store,
// called with r.mu held, reports whether it is new), then processed. A
// peer whose reply holds too many refused items is cut short.
func (r *runner) pullRelayed(kind uint8, list, what string, check func([]byte) (cdkg.Slot, error), store func(cdkg.Slot, []byte) bool, process func(*participant, []byte)) func(context.Context, *participant) bool {
	return func(ctx context.Context, p *participant) bool {
		bad := 0
		items, ready, ok := r.fetchList(ctx, p, kind, list, &bad)
		if !ok {
			return ready
		}
		seen := map[[32]byte]bool{}
		for _, it := range items {
			ok, skip := r.fresh(p, what, it, seen, &bad)
			if skip {
				return true
			}
			if !ok {
				continue
			}
			s, err := check(it)
			if err != nil {
				if r.refuse(p, what, err, &bad) {
					return true
				}
				continue
			}
			r.mu.Lock()
			isNew := store(s, it)
			r.mu.Unlock()
			if isNew {
				process(p, it)
			}
		}
		return true
	}
}

// processResponse feeds a response to the DKG and keeps the justification
// it calls for, if any (a duplicate is refused by kyber and ignored).
func (r *runner) processResponse(cd *cdkg.DKG, it []byte) {
	j, err := cd.ProcessResponse(it)
	if err != nil || j == nil {
		return
	}
	s, err := cdkg.JustificationSlot(j)
	if err != nil || r.dec != nil && !r.dec.Justify(int(s.Member)+1, r.victim()) {
		return
	}
	r.mu.Lock()
	r.storeJustification(slot{s.Dealer, s.Member}, j)
	r.mu.Unlock()
}

// addOwnResponse stores a response or complaint this member made. r.mu
// must be held.
func (r *runner) addOwnResponse(b []byte) {
	s, err := cdkg.ResponseSlot(b)
	if err != nil {
		return
	}
	r.storeResponse(s, b)
}

// storeResponse stores a checked response in its slot unless it is there
// already or the slot is full; it reports whether it stored it. r.mu must
// be held.
func (r *runner) storeResponse(s cdkg.Slot, b []byte) bool {
	k, h := slot{s.Dealer, s.Member}, sha256.Sum256(b)
	if vs := r.responses[k]; len(vs) >= r.maxPerSlot() || r.stored[h] {
		return false
	}
	r.responses[k] = append(r.responses[k], b)
	r.stored[h] = true
	return true
}

// storeJustification is storeResponse for justifications. r.mu must be
// held.
func (r *runner) storeJustification(k slot, b []byte) bool {
	h := sha256.Sum256(b)
	if len(r.justifs[k]) >= maxJustPerSlot || r.stored[h] {
		return false
	}
	r.justifs[k] = append(r.justifs[k], b)
	r.stored[h] = true
	return true
}

// allResponses lists every stored response: this member's own first (so
// that a reader never skips them, see maxRefused), then in slot order.
// r.mu must be held.
func (r *runner) allResponses() [][]byte {
	keys := make([]slot, 0, len(r.responses))
	for k := range r.responses {
		keys = append(keys, k)
	}
	own := uint32(max(r.me.newIdx-1, 0))
	slices.SortFunc(keys, func(a, b slot) int {
		if ao, bo := r.me.newIdx > 0 && a.member == own, r.me.newIdx > 0 && b.member == own; ao != bo {
			if ao {
				return -1
			}
			return 1
		}
		if a.dealer != b.dealer {
			return int(a.dealer) - int(b.dealer)
		}
		return int(a.member) - int(b.member)
	})
	var out [][]byte
	for _, k := range keys {
		out = append(out, r.responses[k]...)
	}
	return out
}

// fetchList fetches p's list reply of kind: ready is false when p has
// nothing for this member yet; a list that does not decode is refused
// (counted in bad) and gives ok false.
func (r *runner) fetchList(ctx context.Context, p *participant, kind uint8, what string, bad *int) (items [][]byte, ready, ok bool) {
	st, payload := r.fetch(ctx, p, kind)
	if st != statusOK {
		return nil, false, false
	}
	items, err := decodeList(payload)
	if err != nil {
		r.refuse(p, what, err, bad)
		return nil, true, false
	}
	return items, true, true
}
