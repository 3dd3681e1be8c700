package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/palisade-dev/palisade/cmd/palisade/internal/resource"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// resourceDBName is the bolt file of "palisade resource" in --data.
const resourceDBName = "resource.db"

func resourceFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Data, "data", c.Data, "")
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
	adminFlag(fs, c)
}

func runResource(ctx context.Context, e *env, cfg Config, args []string) (err error) {
	if len(args) != 0 {
		return usageErrorf("resource", "resource: unexpected argument %q", args[0])
	}
	if err := requireFlag("resource", "cluster", cfg.Cluster); err != nil {
		return err
	}
	if err := requireFlag("resource", "data", cfg.Data); err != nil {
		return err
	}
	if err := requireFlag("resource", "listen", cfg.Listen); err != nil {
		return err
	}
	c, err := loadPinnedCluster("resource", cfg.Cluster, cfg.ClusterID)
	if err != nil {
		return err
	}
	v := verifier.New(c)
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	store, err := verifier.OpenBoltStore(filepath.Join(cfg.Data, resourceDBName))
	if err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	metrics := resource.NewMetrics()
	metered := metrics.Store(store)
	srv := resource.New(verifier.NewFence(v, metered), resource.WithMetrics(metrics))
	if cfg.Ops.Admin != "" {
		admin, err := startAdminHandler("resource", cfg.Ops.Admin, resource.AdminHandler(metrics, metered))
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer func() { err = errors.Join(err, admin.Close()) }()
		fmt.Fprintf(e.stdout, "admin on http://%s\n", admin.addr)
	}
	// SIGHUP: cluster.json is checked again, and nothing else changes.
	reloads := newReloadCounter(metrics.Registry())
	defer handleHangups(func() { reloads.WithLabelValues(reloadResourceCluster(cfg.Cluster, v)).Inc() })()
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Infow("resource listening", "addr", ln.Addr().String(), "data", cfg.Data)
	return srv.Serve(ctx, ln)
}

// reloadResourceCluster is the resource's answer to SIGHUP: it reads
// --cluster again and logs the outcome. Only the cluster ID and the group
// public key decide which tokens verify, and resharing or editing clients
// keeps both, so a file of the same cluster changes nothing; a file of
// another cluster is refused (the barriers belong to this one), and the
// resource keeps accepting the tokens it accepted. It returns the result
// for the reload counter.
func reloadResourceCluster(path string, v *verifier.Verifier) string {
	c, err := protocol.LoadCluster(path)
	switch {
	case err != nil:
		log.Warnw("SIGHUP: cluster file unreadable; still accepting the tokens of the cluster it started with", "cluster", path, "cluster_id", v.ClusterID().String(), "error", err)
		return reloadRefused
	case c.ID != v.ClusterID():
		log.Warnw("SIGHUP: cluster file refused: it names another cluster; still accepting the tokens of the cluster it started with (restart to serve another cluster, with a new --data)",
			"cluster", path, "cluster_id", v.ClusterID().String(), "file_cluster_id", c.ID.String())
		return reloadRefused
	}
	log.Infow("SIGHUP: cluster file checked: same cluster, nothing to reload", "cluster", path, "cluster_id", v.ClusterID().String())
	return reloadApplied
}
