package client

import "time"

// WithWait makes Acquire wait at most d, like a context with timeout d
// around Acquire.
//
// Deprecated: wrap ctx with context.WithTimeout instead. This file goes
// once its last callers (testnet/scenario.go) are converted.
func WithWait(d time.Duration) Option { return func(o *acquireOptions) { o.wait = d } }
