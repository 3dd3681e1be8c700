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
	"github.com/palisade-dev/palisade/verifier"
)

// resourceDBName is the bolt file of "palisade resource" in --data.
const resourceDBName = "resource.db"

func resourceFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Data, "data", c.Data, "")
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
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
	v, err := verifier.Load(cfg.Cluster)
	if err != nil {
		return fmt.Errorf("resource: %w", err)
	}
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
	srv := resource.New(verifier.NewFence(v, store))
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Infow("resource listening", "addr", ln.Addr().String(), "data", cfg.Data)
	return srv.Serve(ctx, ln)
}
