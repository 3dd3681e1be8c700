package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

func auditFlags(fs *flag.FlagSet, c *Config) {
	dirFlag(fs, c)
	adminFlag(fs, c)
	fs.StringVar(&c.SecretFile, "secret-file", c.SecretFile, "")
}

// runAudit prints a node's audit log, one entry per line with its
// sequence number, and fails if the sequence has a gap or a broken entry.
// A stopped node's log is read from its vote store (--dir); a running
// node's through its admin API (--admin, with the admin secret of --dir
// or --secret-file), which serves the same entries.
func runAudit(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("audit", "audit: unexpected argument %q", args[0])
	}
	if cfg.Ops.Admin == "" {
		if err := requireFlag("audit", "dir", cfg.Dir); err != nil {
			return err
		}
	}
	// Client names make the lines readable; a directory without a
	// readable cluster file still has an audit log worth reading.
	var cluster *protocol.Cluster
	if cfg.Dir != "" {
		cluster, _ = protocol.LoadCluster(filepath.Join(cfg.Dir, node.ClusterFileName))
	}
	read := func(fn func(node.AuditEntry) error) (node.AuditSummary, error) { return node.ReadAudit(cfg.Dir, fn) }
	where := cfg.Dir
	if cfg.Ops.Admin != "" {
		secret, err := adminSecret("audit", cfg)
		if err != nil {
			return err
		}
		read = func(fn func(node.AuditEntry) error) (node.AuditSummary, error) {
			return node.FetchAudit(ctx, cfg.Ops.Admin, secret, fn)
		}
		where = "the node at " + cfg.Ops.Admin
	}
	sum, err := read(func(en node.AuditEntry) error {
		line := fmt.Sprintf("seq=%d time=%s kind=%s resource=%s epoch=%d", en.Seq, en.Time.UTC().Format(time.RFC3339Nano), en.Kind, en.Resource, en.Epoch)
		if en.Holder != "" {
			line += " holder=" + auditHolder(cluster, en.Holder)
		}
		if en.Detail != "" {
			line += fmt.Sprintf(" detail=%q", en.Detail)
		}
		_, err := fmt.Fprintln(e.stdout, line)
		return err
	})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	switch {
	case sum.Entries == 0 && sum.Sequence == 0:
		fmt.Fprintln(e.stdout, "no audit entries")
	case len(sum.Problems) == 0:
		fmt.Fprintf(e.stdout, "%d entries, sequence 1..%d without gaps\n", sum.Entries, sum.Sequence)
	default:
		fmt.Fprintf(e.stdout, "%d entries; the store's counter is at %d\n", sum.Entries, sum.Sequence)
		for _, p := range sum.Problems {
			fmt.Fprintf(e.stderr, "palisade: audit: %s\n", p)
		}
	}
	if err := sum.Err(); err != nil {
		return fmt.Errorf("audit: %s: %w", where, err)
	}
	return nil
}

// auditHolder shows a holder ("ID/session") by its client's name where the
// cluster file has one.
func auditHolder(c *protocol.Cluster, holder string) string {
	id, session, ok := strings.Cut(holder, "/")
	if !ok || c == nil {
		return holder
	}
	if cl, found := c.Client(id); found && cl.Name != "" {
		return cl.Name + "/" + session
	}
	return holder
}
