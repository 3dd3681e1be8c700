package cli

import (
	"fmt"
	"net"
	"net/http"
)

// startAdminHandler listens on addr and serves h there until the returned
// server's Close: the --admin endpoint of agent and resource (/metrics,
// /healthz), with the node admin endpoint's timeouts. what names the
// server in errors and logs.
func startAdminHandler(what, addr string, h http.Handler) (*adminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: admin: %w", what, err)
	}
	a := &adminServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: adminServerTimeout,
			ReadTimeout:       adminServerTimeout,
			WriteTimeout:      adminServerTimeout,
		},
		addr: ln.Addr().String(),
		done: make(chan error, 1),
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	log.Infow("admin listening", "server", what, "url", "http://"+a.addr)
	return a, nil
}
