// Package testwait holds the bounded waits that tests use to keep their
// assertions on the test goroutine: goroutines a test starts send their
// results (values and errors) back over buffered channels, and the test
// goroutine receives them here, with a hang ceiling, and asserts.
package testwait

import (
	"testing"
	"time"
)

// HangCeiling bounds how long a test waits for a goroutine's result or
// for a state to be reached: a guard against hanging until the global
// test timeout, never a speed assertion.
const HangCeiling = 30 * time.Second

// Recv receives one value from ch, failing the test if none comes within
// d (what names the awaited value). Call it from the test goroutine.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing received within %v", what, d)
	}
	var zero T
	return zero
}

// RecvAll receives n values from ch, failing the test if they have not
// all come within d. Call it from the test goroutine.
func RecvAll[T any](t testing.TB, ch <-chan T, n int, d time.Duration, what string) []T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	out := make([]T, 0, n)
	for len(out) < n {
		select {
		case v := <-ch:
			out = append(out, v)
		case <-timer.C:
			t.Fatalf("%s: %d of %d received within %v", what, len(out), n, d)
		}
	}
	return out
}
