package testnet

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// NewRateClock returns a real clock that runs rate times as fast as the
// machine's (rate > 0): a duration d on it passes in d/rate of real time,
// and Now advances by rate seconds per real second from the moment it was
// made. It models a node or client whose clock drifts, for tests of what
// leases do and do not promise when clocks disagree (Options.NodeClock).
// Timer and ticker channels deliver the real time they fired at, as
// clockwork's real clock does; nothing in Palisade reads those values.
func NewRateClock(rate float64) clockwork.Clock {
	if rate <= 0 {
		panic("testnet: NewRateClock: rate must be positive")
	}
	return &rateClock{rate: rate, start: time.Now()}
}

type rateClock struct {
	rate  float64
	start time.Time
}

// real is how long d on this clock takes in real time.
func (c *rateClock) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.rate)
}

func (c *rateClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.rate))
}

func (c *rateClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *rateClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *rateClock) Sleep(d time.Duration)           { time.Sleep(c.real(d)) }

func (c *rateClock) After(d time.Duration) <-chan time.Time { return time.After(c.real(d)) }

func (c *rateClock) NewTimer(d time.Duration) clockwork.Timer {
	return &rateTimer{c: c, t: time.NewTimer(c.real(d))}
}

func (c *rateClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return &rateTimer{c: c, t: time.AfterFunc(c.real(d), f)}
}

func (c *rateClock) NewTicker(d time.Duration) clockwork.Ticker {
	return &rateTicker{c: c, t: time.NewTicker(c.real(d))}
}

type rateTimer struct {
	c *rateClock
	t *time.Timer
}

func (t *rateTimer) Chan() <-chan time.Time     { return t.t.C }
func (t *rateTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }
func (t *rateTimer) Stop() bool                 { return t.t.Stop() }

type rateTicker struct {
	c *rateClock
	t *time.Ticker
}

func (t *rateTicker) Chan() <-chan time.Time { return t.t.C }
func (t *rateTicker) Reset(d time.Duration)  { t.t.Reset(t.c.real(d)) }
func (t *rateTicker) Stop()                  { t.t.Stop() }
