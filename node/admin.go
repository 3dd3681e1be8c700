package node

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Admin endpoint paths (AdminHandler).
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	// PathRevoke (POST, admin secret) ends a lease at this node
	// (Node.Revoke); PathAudit (GET, admin secret) serves its audit log
	// (admin_ops.go).
	PathRevoke = "/revoke"
	PathAudit  = "/audit"
)

// readyTimeout bounds the store read of a /readyz request.
const readyTimeout = 2 * time.Second

// AdminHandler returns the node's admin HTTP API, for operators and
// orchestrators on an address apart from the libp2p one:
//
//	GET /metrics  Prometheus metrics of this node (its own registry)
//	GET /healthz  200 "ok" while the node runs, 503 once it is closed
//	GET /readyz   200 "ready: …" while Ready holds, else 503 with the reason
//	POST /revoke  end a lease at this node (operator revocation, audited)
//	GET /audit    the node's audit log, one JSON entry per line
//
// The first three change nothing and serve nothing secret: a monitoring
// system may scrape them. /revoke and /audit need the node's admin secret
// (Config.AdminSecret, the node directory's AdminSecretFileName) as a
// bearer token: only the node's operator ends a lease or reads the log.
// Without a configured secret they answer 403.
func (n *Node) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathRevoke, n.adminAuth(n.serveRevoke))
	mux.HandleFunc("GET "+PathAudit, n.adminAuth(n.serveAudit))
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(n.ops.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		n.closeMu.RLock()
		closed := n.closed
		n.closeMu.RUnlock()
		if closed {
			http.Error(w, "closed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := n.Ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		rc := n.Reachability()
		fmt.Fprintf(w, "ready: %d of %d members reachable (t=%d), store open\n", rc.Reachable, len(rc.Members), rc.Threshold)
	})
	return mux
}
