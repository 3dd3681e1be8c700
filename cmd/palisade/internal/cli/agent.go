package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/cmd/palisade/internal/agent"
	"github.com/palisade-dev/palisade/protocol"
)

// defaultAgentListen is the agent's --listen when none is given (the
// resource's default, 127.0.0.1:7070, is one port below).
const defaultAgentListen = "127.0.0.1:7071"

const agentUsage = `Usage:
    palisade agent --cluster FILE --identity FILE [--listen ADDR]
                   [--secret-file FILE] [--max-locks N]

Serves an HTTP/JSON lock API for applications in any language, over one
client with the identity in --identity. The agent renews every lease it
holds; SIGINT or SIGTERM releases them all, then stops it. Full reference:
docs/agent.md; a Python client: clients/python/palisade_agent.py.

    POST   /v1/locks/RESOURCE   acquire; optional body {"ttl": "10s", "wait": "5s"}
                                (no wait: try once)       201 with the lock
    GET    /v1/locks/ID         the lock; waits while it is held, up to
                                ?wait=D (5m; ?wait=0s answers at once)
    DELETE /v1/locks/ID         release                   200 with the lock

A lock is JSON: {"id", "resource", "token", "epoch", "holder", "session",
"ttl", "state"} with state held, released or lost (then "reason"). Send
the token with every write to the resource. The ID (32 hex digits,
128 random bits) is what proves the lock is yours: keep it private.

Errors are JSON {"code", "message"} with one HTTP status per code: busy
409 (with "holder", "epoch", "left" and Retry-After when another holder
has it), not_enough_nodes 503, refused 403, bad_request 400, not_found
404, unauthorised 401, forbidden 403, method_not_allowed 405, too_large
413, limit 429, shutting_down 503, internal 500.

Without --secret-file the agent listens on loopback only, answers only
requests naming a loopback host, and refuses to start on another address.
With it, every request needs "Authorization: Bearer SECRET"; the file must
have mode 0600 and hold 16 to 4096 bytes. Requests from browsers (with an
Origin header) are always refused.

Flags (environment variable in brackets):
    --cluster FILE      the cluster file [PALISADE_CLUSTER]
    --identity FILE     the client key file; its peer ID holds every lock
                        [PALISADE_IDENTITY]
    --listen ADDR       HTTP listen address (127.0.0.1:7071) [PALISADE_LISTEN]
    --secret-file FILE  bearer secret file, required off loopback
                        [PALISADE_SECRET_FILE]
    --max-locks N       most locks held at once (1024) [PALISADE_MAX_LOCKS]

Example:
    $ palisade agent --cluster /tmp/pal/cluster.json --identity /tmp/pal/client.key &
    listening on http://127.0.0.1:7071
    $ curl -s -X POST -d '{"ttl": "30s"}' http://127.0.0.1:7071/v1/locks/orders-db
    {"id":"9f86d0[...]","resource":"orders-db","token":"pt3.[...]","epoch":1,[...],"state":"held"}
    $ curl -s -X POST http://127.0.0.1:7071/v1/locks/orders-db
    {"code":"busy","message":"[...]"}
    $ curl -s 'http://127.0.0.1:7071/v1/locks/9f86d0[...]?wait=0s'
    {"id":"9f86d0[...]",[...],"state":"held"}
    $ curl -s -X DELETE http://127.0.0.1:7071/v1/locks/9f86d0[...]
    {"id":"9f86d0[...]",[...],"state":"released"}
`

func agentFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
	fs.StringVar(&c.SecretFile, "secret-file", c.SecretFile, "")
	fs.IntVar(&c.MaxLocks, "max-locks", c.MaxLocks, "")
}

func runAgent(ctx context.Context, e *env, cfg Config, args []string) (err error) {
	if len(args) != 0 {
		return usageErrorf("agent", "agent: unexpected argument %q", args[0])
	}
	if err := requireFlag("agent", "cluster", cfg.Cluster); err != nil {
		return err
	}
	if err := requireFlag("agent", "identity", cfg.Identity); err != nil {
		return err
	}
	if !e.set["listen"] {
		cfg.Listen = defaultAgentListen
	}
	if cfg.MaxLocks < 1 {
		return usageErrorf("agent", "agent: --max-locks must be at least 1, got %d", cfg.MaxLocks)
	}
	var secret []byte
	if cfg.SecretFile != "" {
		if secret, err = agent.LoadSecret(cfg.SecretFile); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	cluster, err := protocol.LoadCluster(cfg.Cluster)
	if err != nil {
		return clusterLoadError("agent", cfg.Cluster, err)
	}
	id, err := client.LoadIdentity(cfg.Identity)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := agent.CheckListenAddr(cfg.Listen, secret != nil); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := agent.CheckListen(ln.Addr(), secret != nil); err != nil {
		_ = ln.Close()
		return err
	}
	c, err := client.New(client.Config{Cluster: cluster, Identity: id})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("agent: %w", err)
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	a, err := agent.New(agent.Config{Client: c, Secret: secret, MaxLocks: cfg.MaxLocks})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("agent: %w", err)
	}
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Infow("agent listening", "addr", ln.Addr().String(), "holder", c.ID(), "secret", secret != nil)
	if err := a.Serve(ctx, ln); err != nil {
		return err
	}
	log.Infow("agent stopped")
	return nil
}
