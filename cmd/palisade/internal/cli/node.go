package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/testnet"
)

func init() {
	// node also takes --listen: the libp2p addresses to bind, instead of
	// node.json's "listen" (the announced ones are in cluster.json).
	cmd := commands["node"]
	flags := cmd.flags
	cmd.flags = func(fs *flag.FlagSet, c *Config) {
		flags(fs, c)
		if fs.Lookup("listen") == nil {
			fs.StringVar(&c.Listen, "listen", c.Listen, "")
		}
	}
	commands["node"] = cmd
}

func runNode(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("node", "node: unexpected argument %q", args[0])
	}
	if err := requireFlag("node", "dir", cfg.Dir); err != nil {
		return err
	}
	var listen []string
	if e.set["listen"] {
		var err error
		if listen, err = listenAddrs("node", "listen", cfg.Listen); err != nil {
			return err
		}
	}
	r, err := startNodeListen(ctx, cfg.Dir, listen)
	if err != nil {
		return err
	}
	var admin *adminServer
	if cfg.Ops.Admin != "" {
		if admin, err = startAdmin(r, cfg.Ops.Admin); err != nil {
			return errors.Join(err, r.Close())
		}
	}
	serveUntilDone(ctx, []*node.Running{r})
	log.Infof("node %d stopping", r.Index())
	if admin != nil {
		err = admin.Close()
	}
	if err := errors.Join(err, r.Close()); err != nil {
		return fmt.Errorf("node %d: close: %w", r.Index(), err)
	}
	log.Infof("node %d stopped", r.Index())
	return nil
}

// startRetryFor bounds how long a node start is retried while its port or
// vote store is still held by a process that just exited.
const startRetryFor = 3 * time.Second

// startNode loads a node directory and starts the node on the real clock,
// then logs where it listens.
func startNode(ctx context.Context, dir string) (*node.Running, error) {
	return startNodeListen(ctx, dir, nil)
}

// startNodeListen is startNode listening on listen instead of node.json's
// addresses, unless listen is empty.
func startNodeListen(ctx context.Context, dir string, listen []string) (*node.Running, error) {
	d, err := node.LoadDir(dir)
	if err != nil {
		return nil, explainNodeLoad(dir, err)
	}
	if len(listen) > 0 {
		d.Listen = listen
	}
	for _, a := range d.Listen {
		if isDNSAddr(a) {
			return nil, fmt.Errorf("node: %s listens on %s, a DNS name, which can be announced (cluster.json) but not bound: give --listen (or PALISADE_LISTEN) an IP address such as /ip4/0.0.0.0/tcp/4001, or put it in %s's \"listen\"",
				dir, a, node.NodeFileName)
		}
	}
	deadline := time.Now().Add(startRetryFor)
	var r *node.Running
	for {
		r, err = d.Start(clockwork.NewRealClock())
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, explainNodeStart(d.Share.Index(), dir, err)
	}
	var addrs []string
	for _, a := range r.Host().Addrs() {
		addrs = append(addrs, a.String())
	}
	log.Infof("node %d listening on %s peer %s", r.Index(), strings.Join(addrs, ","), r.Host().ID())
	return r, nil
}

func runTestnet(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("testnet", "testnet: unexpected argument %q", args[0])
	}
	if err := requireFlag("testnet", "dir", cfg.Dir); err != nil {
		return err
	}
	clusterPath := filepath.Join(cfg.Dir, node.ClusterFileName)
	var dirs []string
	switch _, err := os.Stat(clusterPath); {
	case errors.Is(err, os.ErrNotExist):
		keys, err := keygen(e.stderr, cfg, testnet.KeygenOptions{})
		if err != nil {
			return fmt.Errorf("testnet: %w", err)
		}
		dirs = keys.NodeDirs
		fmt.Fprintf(e.stderr, "palisade: %s\n", faultTolerance(cfg.Nodes))
	case err != nil:
		return fmt.Errorf("testnet: %w", err)
	default:
		d, err := node.LoadDir(filepath.Join(cfg.Dir, "node1"))
		if err != nil {
			return fmt.Errorf("testnet: reuse %s: %w", cfg.Dir, err)
		}
		n := d.Cluster.File.N
		if e.set["nodes"] && cfg.Nodes != n {
			return fmt.Errorf("testnet: %s holds a cluster of %d nodes, not %d (use another --dir for a new testnet)", cfg.Dir, n, cfg.Nodes)
		}
		for i := 1; i <= n; i++ {
			dirs = append(dirs, filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i)))
		}
		fmt.Fprintf(e.stderr, "palisade: reusing the testnet in %s (%d nodes)\n", cfg.Dir, n)
	}
	var running []*node.Running
	var admins []*adminServer
	closeAll := func() error {
		var errs []error
		for _, a := range admins {
			errs = append(errs, a.Close())
		}
		for _, r := range running {
			errs = append(errs, r.Close())
		}
		return errors.Join(errs...)
	}
	for i, d := range dirs {
		r, err := startNode(ctx, d)
		if err != nil {
			return errors.Join(fmt.Errorf("testnet: %w", err), closeAll())
		}
		running = append(running, r)
		if cfg.Ops.Admin == "" {
			continue
		}
		addr, err := adminAddr(cfg.Ops.Admin, i+1)
		if err == nil {
			var a *adminServer
			if a, err = startAdmin(r, addr); err == nil {
				admins = append(admins, a)
				fmt.Fprintf(e.stderr, "palisade: node %d admin on http://%s\n", i+1, a.addr)
			}
		}
		if err != nil {
			return errors.Join(fmt.Errorf("testnet: %w", err), closeAll())
		}
	}
	fmt.Fprintf(e.stderr, "palisade: testnet of %d nodes running; try:\n    palisade acquire --cluster %s --identity %s orders-db\n",
		len(running), clusterPath, filepath.Join(cfg.Dir, testnet.ClientKeyFileName))
	fmt.Fprintln(e.stdout, "ready")
	serveUntilDone(ctx, running)
	log.Infof("testnet stopping")
	if err := closeAll(); err != nil {
		return fmt.Errorf("testnet: close: %w", err)
	}
	return nil
}
