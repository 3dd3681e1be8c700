package verifier

// ReplayRecordLen returns how many nonces v's replay record holds, and the
// most any one holder holds, for tests that measure its bounds.
func ReplayRecordLen(v *Verifier) (total, perHolderMax int) {
	r := v.replay
	r.mu.Lock()
	defer r.mu.Unlock()
	held := map[string]int{}
	for k := range r.seen {
		held[k.holder]++
		perHolderMax = max(perHolderMax, held[k.holder])
	}
	return len(r.seen), perHolderMax
}
