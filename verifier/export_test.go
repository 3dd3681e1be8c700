package verifier

// ReplayRecordLen returns how many nonces v's replay record holds, and the
// most any one holder holds, for tests that measure its bounds.
func ReplayRecordLen(v *Verifier) (total, perHolderMax int) { return v.replay.Len() }
