package cli

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-dev/palisade/node"
)

// Results of a SIGHUP reload, the result label of the reload counter.
const (
	// reloadApplied: everything re-read is in effect (or unchanged).
	reloadApplied = "applied"
	// reloadRefused: something re-read could not be taken; the process
	// keeps what it had and logged why.
	reloadRefused = "refused"
)

// newReloadCounter registers on reg the counter of SIGHUP reloads by
// result, under the name the nodes use (node.MetricReloads), so one alert
// rule covers every palisade process.
func newReloadCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: node.MetricReloads, Help: "Reloads on SIGHUP, by result: applied, or refused (the process keeps what it had; the log says why)."}, []string{"result"})
	reg.MustRegister(c)
	c.WithLabelValues(reloadApplied)
	c.WithLabelValues(reloadRefused)
	return c
}

// handleHangups makes SIGHUP call reload instead of ending the process,
// from now until the returned stop is called: "palisade agent" and
// "palisade resource" keep their state (the agent its held locks) when an
// operator sends SIGHUP to every palisade process of a machine, as
// "palisade clients" suggests for nodes. reload runs on the goroutine
// handleHangups starts, one SIGHUP at a time; signals that arrive while it
// runs are folded into one more call. stop ends the goroutine and waits
// for it; callers defer it until their command has finished shutting
// down, so a late SIGHUP never interrupts a release.
func handleHangups(reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			case <-hup:
				reload()
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		wg.Wait()
		signal.Stop(hup)
	})
}
