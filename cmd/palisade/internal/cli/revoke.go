package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

const revokeUsage = `Usage:
    palisade revoke --admin ADDR (--dir DIR/nodeI | --secret-file FILE) [--epoch E] RESOURCE

Ends the live lease on RESOURCE at ONE node: the node whose admin API
listens on ADDR (its "palisade node --admin"). The node records the
revocation in its append-only audit log (kind=revoke, with the address
that asked; see "palisade audit").

Revoking at one node frees nothing for other clients: a token needs the
votes of t = 2f+1 members, and every member that still holds the lease
answers busy. The lease ends for clients only once the operators of t
nodes have each revoked it at their own node, so no organisation alone
(nor f of them) can take a lock away from its holder. Use it for a dead
holder whose lease has a long --ttl. Safety is unchanged: the next
holder's token carries a higher epoch, and the resource fences the old
token.

Only the node's operator may revoke: the admin API asks for the node's
admin secret, which the node writes to DIR/nodeI/admin.secret (mode
0600) when it first starts. Give the node directory (--dir) or the file
(--secret-file).

--epoch E revokes only if the live lease is at epoch E (as "palisade
locks" or "palisade status RESOURCE" showed it), so a lock that changed
hands meanwhile is left alone.

Exit status: 0 if the node revoked a lease, 1 if it had no live lease on
RESOURCE (or another epoch), refused the secret, or could not be reached.

Flags (environment variable in brackets):
    --admin ADDR         the node's admin address, HOST:PORT or URL [PALISADE_ADMIN]
    --dir DIR            the node directory, for its admin.secret [PALISADE_DIR]
    --secret-file FILE   the admin secret file instead [PALISADE_SECRET_FILE]
    --epoch E            revoke only the lease at this epoch [PALISADE_EPOCH]

Example (three operators of a 4-node cluster, each at their own node):
    $ palisade locks
    resource=orders-db holder=client1 session=#3f1c9a0b7d2e4f61 epoch=4 left=58m12s reported=4/4
    [...]
    op1$ palisade revoke --admin 127.0.0.1:9101 --dir /srv/pal/node1 --epoch 4 orders-db
    node 1 revoked the lease on "orders-db" at epoch 4 (holder client1, session #3f1c9a0b7d2e4f61, 58m11s left)
    op2$ palisade revoke --admin 127.0.0.1:9102 --dir /srv/pal/node2 --epoch 4 orders-db
    [...]
    op3$ palisade revoke --admin 127.0.0.1:9103 --dir /srv/pal/node3 --epoch 4 orders-db
    [...]
    $ palisade acquire orders-db      # now another client can take it, at epoch 5
`

func revokeFlags(fs *flag.FlagSet, c *Config) {
	adminFlag(fs, c)
	dirFlag(fs, c)
	fs.StringVar(&c.SecretFile, "secret-file", c.SecretFile, "")
	fs.Uint64Var(&c.Leases.Epoch, "epoch", c.Leases.Epoch, "")
}

// runRevoke is "palisade revoke": one node's operator ends a lease at
// their node (node.RevokeAt, POST /revoke on its admin API).
func runRevoke(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("revoke", "revoke: want exactly one RESOURCE, got %d arguments", len(args))
	}
	resource := args[0]
	if err := protocol.ValidateResource(resource); err != nil {
		return usageErrorf("revoke", "revoke: %v", err)
	}
	if err := requireFlag("revoke", "admin", cfg.Ops.Admin); err != nil {
		return err
	}
	secret, err := adminSecret("revoke", cfg)
	if err != nil {
		return err
	}
	rv, err := node.RevokeAt(ctx, cfg.Ops.Admin, secret, resource, cfg.Leases.Epoch)
	switch {
	case errors.Is(err, node.ErrNoLease):
		return fmt.Errorf("revoke: the node at %s has no live lease on %q (it ran out, was released or was revoked already): %w", cfg.Ops.Admin, resource, err)
	case errors.Is(err, node.ErrAdminAuth):
		return fmt.Errorf("revoke: the node at %s refused the admin secret (is --dir that node's directory?): %w", cfg.Ops.Admin, err)
	case err != nil:
		return fmt.Errorf("revoke: %w", err)
	}
	what := "lease"
	if !rv.Committed {
		what = "uncommitted vote"
	}
	fmt.Fprintf(e.stdout, "node %d revoked the %s on %q at epoch %d (holder %s, session #%s, %s left)\n",
		rv.Node, what, rv.Resource, rv.Epoch, rv.HolderID, rv.SessionHash, (time.Duration(rv.LeftMS) * time.Millisecond).Round(time.Second))
	fmt.Fprintf(e.stdout, "other clients can take %q once the operators of t nodes have revoked it; \"palisade locks\" shows how many members still report it\n", rv.Resource)
	return nil
}

// adminSecret reads the admin secret of cmd: --secret-file, else the
// node directory's admin.secret.
func adminSecret(cmd string, cfg Config) (string, error) {
	path := cfg.SecretFile
	if path == "" {
		if cfg.Dir == "" {
			return "", usageErrorf(cmd, "%s: give --dir (the node directory) or --secret-file: the admin API needs the node's admin secret", cmd)
		}
		path = filepath.Join(cfg.Dir, node.AdminSecretFileName)
	}
	s, err := node.ReadAdminSecret(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return s, nil
}
