package verifier

// ReplayRecordLen returns how many nonces v's replay record holds, and the
// most any one holder holds, for tests that measure its bounds.
func ReplayRecordLen(v *Verifier) (total, perHolderMax int) { return v.replay.Len() }

// CacheLen returns how many tokens v's verified-token cache holds (0 when
// it is disabled), for tests that check what a refusal leaves behind.
func CacheLen(v *Verifier) int {
	if v.cache == nil {
		return 0
	}
	return v.cache.len()
}
