package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
    palisade agent --cluster FILE [--cluster-id ID] --identity FILE [--listen ADDR]
                   [--secret-file FILE] [--max-locks N] [--admin ADDR]

Serves an HTTP/JSON lock API for applications in any language, over one
client with the identity in --identity. The agent renews every lease it
holds; SIGINT or SIGTERM releases them all, then stops it. SIGHUP keeps
every lock: it re-reads --secret-file (the new secret applies at once; a
bad file keeps the old one) and checks --cluster, logging whether it
changed (the agent keeps the file it started with until it restarts).
Full reference: docs/agent.md; a Python client:
clients/python/palisade_agent.py.

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

With --admin it serves HTTP on ADDR, apart from the lock API and as
"palisade node --admin" does: /healthz (200 while the agent serves, 503
once it is stopping) and /metrics (Prometheus: palisade_agent_locks_held,
palisade_agent_acquires_total by result, palisade_agent_releases_total by
cause and result, palisade_agent_locks_lost_total,
palisade_agent_requests_denied_total by code, palisade_agent_acquire_seconds,
palisade_config_reloads_total by result for SIGHUP).
It serves nothing secret (no lock IDs, tokens or resource names) and needs
no bearer secret; keep it off networks that should not see the counts.

Flags (environment variable in brackets):
    --cluster FILE      the cluster file [PALISADE_CLUSTER]
    --cluster-id ID     refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE     the client key file; its peer ID holds every lock
                        [PALISADE_IDENTITY]
    --listen ADDR       HTTP listen address (127.0.0.1:7071) [PALISADE_LISTEN]
    --secret-file FILE  bearer secret file, required off loopback
                        [PALISADE_SECRET_FILE]
    --max-locks N       most locks held at once (1024) [PALISADE_MAX_LOCKS]
    --admin ADDR        serve /healthz and /metrics on ADDR (none)
                        [PALISADE_ADMIN]

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
    $ kill -HUP %1     # keeps its locks; re-reads --secret-file
    $ palisade agent --cluster /tmp/pal/cluster.json --identity /tmp/pal/client.key \
        --listen 127.0.0.1:7072 --admin 127.0.0.1:9190 &
    $ palisade probe http://127.0.0.1:9190/healthz
    http://127.0.0.1:9190/healthz: 200 OK: ok: 0 locks held
`

func agentFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
	fs.StringVar(&c.SecretFile, "secret-file", c.SecretFile, "")
	fs.IntVar(&c.MaxLocks, "max-locks", c.MaxLocks, "")
	adminFlag(fs, c)
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
	if err := checkLoadedPin("agent", cfg, cluster); err != nil {
		return err
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
	if cfg.Ops.Admin != "" {
		admin, err := startAdminHandler("agent", cfg.Ops.Admin, a.AdminHandler())
		if err != nil {
			_ = ln.Close()
			return errors.Join(err, a.Close())
		}
		defer func() { err = errors.Join(err, admin.Close()) }()
		fmt.Fprintf(e.stdout, "admin on http://%s\n", admin.addr)
	}
	// SIGHUP reloads what can change under held locks; it stays handled
	// until Serve has released them.
	reloads := newReloadCounter(a.MetricsRegistry())
	defer handleHangups(func() { reloads.WithLabelValues(reloadAgent(cfg, cluster, a)).Inc() })()
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Infow("agent listening", "addr", ln.Addr().String(), "holder", c.ID(), "secret", secret != nil)
	if err := a.Serve(ctx, ln); err != nil {
		return err
	}
	log.Infow("agent stopped")
	return nil
}

// reloadAgent is the agent's answer to SIGHUP; it keeps every held lock.
// It reads --secret-file again and takes the new secret (requests with
// the old one are refused from then on); a file it cannot use leaves the
// current secret in place. It reads --cluster again and compares it with
// the file the agent started with: the agent's client keeps the members
// and addresses it started with, so a changed file is logged with what to
// do (restart the agent at a quiet moment: stopping releases its locks).
// It returns the result for the reload counter: refused if either file
// could not be taken.
func reloadAgent(cfg Config, started *protocol.Cluster, a *agent.Agent) string {
	result := reloadApplied
	if cfg.SecretFile != "" {
		secret, err := agent.LoadSecret(cfg.SecretFile)
		if err == nil {
			err = a.SetSecret(secret)
		}
		if err != nil {
			result = reloadRefused
			log.Warnw("SIGHUP: secret file refused; keeping the current secret", "secret_file", cfg.SecretFile, "error", err)
		} else {
			log.Infow("SIGHUP: secret reloaded", "secret_file", cfg.SecretFile)
		}
	}
	c, err := protocol.LoadCluster(cfg.Cluster)
	switch {
	case err != nil:
		result = reloadRefused
		log.Warnw("SIGHUP: cluster file unreadable; the agent keeps the cluster it started with", "cluster", cfg.Cluster, "error", err)
	case c.ID != started.ID:
		result = reloadRefused
		log.Warnw("SIGHUP: cluster file names another cluster; the agent keeps the cluster it started with", "cluster", cfg.Cluster, "cluster_id", started.ID.String(), "file_cluster_id", c.ID.String())
	case !sameClusterFile(c.File, started.File):
		result = reloadRefused
		log.Warnw("SIGHUP: cluster file changed (members, addresses or clients); the agent keeps the file it started with and its held locks: restart it to use the new file (stopping releases its locks)", "cluster", cfg.Cluster)
	default:
		log.Infow("SIGHUP: cluster file unchanged", "cluster", cfg.Cluster)
	}
	return result
}

// sameClusterFile reports whether two cluster files say the same.
func sameClusterFile(a, b protocol.ClusterFile) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}
