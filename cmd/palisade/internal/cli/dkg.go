package cli

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

func identityFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
}

func ceremonyFlags(fs *flag.FlagSet, c *Config) {
	dirFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	fs.StringVar(&c.Members, "members", c.Members, "")
	fs.DurationVar(&c.PhaseTimeout, "phase-timeout", c.PhaseTimeout, "")
	fs.StringVar(&c.CeremonyListen, "ceremony-listen", c.CeremonyListen, "")
	fs.BoolVar(&c.Restart, "restart", c.Restart, "")
	// --listen: the node's libp2p listen addresses (node.json), when
	// they differ from the addresses it announces in the member list.
	fs.StringVar(&c.Listen, "listen", c.Listen, "")
}

func reshareFlags(fs *flag.FlagSet, c *Config) {
	ceremonyFlags(fs, c)
	fs.StringVar(&c.OldDir, "old-dir", c.OldDir, "")
	clusterFlag(fs, c)
}

func testnetFlags(fs *flag.FlagSet, c *Config) {
	keygenFlags(fs, c)
	fs.BoolVar(&c.DKG, "dkg", c.DKG, "")
	adminFlag(fs, c)
}

// runIdentity creates an identity key file (0600) if it does not exist and
// prints its peer ID, which operators put in the member list.
func runIdentity(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("identity", "identity: unexpected argument %q", args[0])
	}
	if err := requireFlag("identity", "identity", cfg.Identity); err != nil {
		return err
	}
	k, err := transport.LoadIdentity(cfg.Identity)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if k, err = transport.GenerateIdentity(crand.Reader); err != nil {
			return err
		}
		// A fresh machine has no directory for it yet (docs/deploy.md
		// starts with this command): make it, private to this user.
		if err := os.MkdirAll(filepath.Dir(cfg.Identity), 0o700); err != nil {
			return fmt.Errorf("identity: %w", err)
		}
		if err := transport.SaveIdentity(cfg.Identity, k); err != nil {
			return fmt.Errorf("identity: %w", err)
		}
		fmt.Fprintf(e.stderr, "palisade: created %s (mode 0600); keep it: it is this member's identity\n", cfg.Identity)
	case err != nil:
		return fmt.Errorf("identity: %w", err)
	}
	pid, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	fmt.Fprintln(e.stdout, pid)
	return nil
}

func runDKG(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("dkg", "dkg: unexpected argument %q", args[0])
	}
	dc, err := ceremonyConfig("dkg", e, cfg)
	if err != nil {
		return err
	}
	return runCeremony(ctx, e, "dkg", dc, "")
}

func runReshare(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("reshare", "reshare: unexpected argument %q", args[0])
	}
	dc, err := ceremonyConfig("reshare", e, cfg)
	if err != nil {
		return err
	}
	switch {
	case cfg.OldDir != "" && cfg.Cluster != "":
		return usageErrorf("reshare", "reshare: give --old-dir (old members) or --cluster (new members), not both")
	case cfg.OldDir != "":
		d, err := node.LoadDir(cfg.OldDir)
		if file, detail, ok := earlierRelease(err); ok {
			return explainf(err, "reshare: --old-dir %s was made by another release (its %s: %s); a cluster of an earlier release cannot be reshared onto this one's curve: run a new DKG (palisade dkg) instead, with the same identity files if you like", cfg.OldDir, file, detail)
		}
		if err != nil {
			return fmt.Errorf("reshare: old node directory: %w", err)
		}
		pid, _ := peer.IDFromPrivateKey(dc.Identity)
		if oid, _ := peer.IDFromPrivateKey(d.Identity); oid != pid {
			return fmt.Errorf("reshare: --identity %s is not the identity of %s", cfg.Identity, cfg.OldDir)
		}
		if sameDir(cfg.OldDir, cfg.Dir) {
			return usageErrorf("reshare", "reshare: --dir must be a new directory, not the old node directory")
		}
		dc.OldCluster, dc.OldShare = d.Cluster, d.Share
	case cfg.Cluster != "":
		c, err := protocol.LoadCluster(cfg.Cluster)
		if errors.Is(err, protocol.ErrClusterFileVersion) {
			return explainf(err, "reshare: --cluster %s was written by an earlier release (%s); a cluster of an earlier release cannot be reshared onto this one's curve: run a new DKG (palisade dkg) instead", cfg.Cluster, afterSentinel(err, protocol.ErrClusterFileVersion))
		}
		if err != nil {
			return fmt.Errorf("reshare: %w", err)
		}
		dc.OldCluster = c
	default:
		return usageErrorf("reshare", "reshare: --old-dir (old members) or --cluster with the current cluster.json (new members) is required")
	}
	return runCeremony(ctx, e, "reshare", dc, cfg.OldDir)
}

func sameDir(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}

// ceremonyConfig reads the flags every ceremony needs.
func ceremonyConfig(cmd string, e *env, cfg Config) (dkg.Config, error) {
	for _, f := range [][2]string{{"members", cfg.Members}, {"identity", cfg.Identity}, {"dir", cfg.Dir}} {
		if err := requireFlag(cmd, f[0], f[1]); err != nil {
			return dkg.Config{}, err
		}
	}
	if cfg.PhaseTimeout < 0 {
		return dkg.Config{}, usageErrorf(cmd, "%s: --phase-timeout must not be negative", cmd)
	}
	list, _, err := dkg.LoadMemberList(cfg.Members)
	if err != nil {
		return dkg.Config{}, fmt.Errorf("%s: %w", cmd, err)
	}
	id, err := transport.LoadIdentity(cfg.Identity)
	if err != nil {
		return dkg.Config{}, fmt.Errorf("%s: %w", cmd, err)
	}
	dc := dkg.Config{Members: list, Identity: id, OutDir: cfg.Dir, Progress: e.stderr, PhaseTimeout: cfg.PhaseTimeout, Restart: cfg.Restart}
	if cfg.CeremonyListen != "" {
		if dc.Listen, err = listenAddrs(cmd, "ceremony-listen", cfg.CeremonyListen); err != nil {
			return dkg.Config{}, err
		}
	}
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		return dkg.Config{}, fmt.Errorf("%s: identity: %w", cmd, err)
	}
	_, ceremonyAddrs := list.CeremonyAddrs[pid.String()]
	if e.set["listen"] {
		// The node listens there (node.json), and so does the ceremony
		// unless it has addresses of its own (--ceremony-listen, or
		// ceremony_addrs for an old member whose node keeps running).
		if dc.NodeListen, err = listenAddrs(cmd, "listen", cfg.Listen); err != nil {
			return dkg.Config{}, err
		}
		if dc.Listen == nil && !ceremonyAddrs {
			dc.Listen = dc.NodeListen
		}
	} else if i := list.Index(pid.String()); i > 0 {
		// Without --listen the node listens on the addresses it
		// announces, which a DNS name cannot be.
		for _, a := range list.Members[i-1].Addrs {
			if isDNSAddr(a) {
				return dkg.Config{}, usageErrorf(cmd, "%s: this member announces %s in %s, a DNS name, which others dial but this host cannot listen on: give --listen (or %s) with the address to bind, e.g. /ip4/0.0.0.0/tcp/PORT",
					cmd, a, cfg.Members, EnvVar("listen"))
			}
		}
	}
	return dc, nil
}

// listenAddrs parses a comma-separated list of listen multiaddrs given
// as --name.
func listenAddrs(cmd, name, value string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(value, ",") {
		a = strings.TrimSpace(a)
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return nil, usageErrorf(cmd, "%s: --%s %q: %v (want a multiaddr such as /ip4/0.0.0.0/tcp/4001)", cmd, name, a, err)
		}
		if isDNSAddr(a) {
			return nil, usageErrorf(cmd, "%s: --%s %q: a DNS name can be announced, not listened on: give an IP address, e.g. /ip4/0.0.0.0/tcp/4001", cmd, name, a)
		}
		out = append(out, m.String())
	}
	return out, nil
}

// isDNSAddr reports whether a multiaddr names its host by DNS.
func isDNSAddr(a string) bool {
	for _, p := range []string{"/dns/", "/dns4/", "/dns6/", "/dnsaddr/"} {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

func runCeremony(ctx context.Context, e *env, cmd string, dc dkg.Config, oldDir string) error {
	res, err := dkg.Run(ctx, dc)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	if oldDir != "" {
		if err := dkg.EraseShare(oldDir); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		fmt.Fprintf(e.stderr, "palisade: erased the old share %s (overwritten, then removed); stop the old node now: its share is still in its memory\n", filepath.Join(oldDir, node.ShareFileName))
	}
	printCeremony(e.stdout, dc.OutDir, res)
	return nil
}

func printCeremony(w io.Writer, dir string, res *dkg.Result) {
	f := res.Cluster
	if res.Index == 0 {
		fmt.Fprintf(w, "left the cluster: this member holds no share any more\n")
		return
	}
	fmt.Fprintf(w, "cluster %s n=%d t=%d id=%s", f.Name, f.N, f.T, f.ClusterID)
	if f.EpochFloor != 0 {
		fmt.Fprintf(w, " epoch_floor=%d", f.EpochFloor)
	}
	fmt.Fprintf(w, "\nnode%d dir=%s\n", res.Index, dir)
	if len(res.Silent) > 0 {
		fmt.Fprintf(w, "silent: %s\n", strings.Join(res.Silent, ", "))
	}
	if len(res.Excluded) > 0 {
		fmt.Fprintf(w, "excluded dealers: %s\n", strings.Join(res.Excluded, ", "))
	}
	if len(res.Diverged) > 0 {
		fmt.Fprintf(w, "faulty (another cluster.json hash): %s\n", strings.Join(res.Diverged, ", "))
	}
	fmt.Fprintf(w, "cluster.json sha256 %x\n", res.ClusterHash)
}

// runTestnetCommand is testnet with --dkg: if DIR has no keys yet, the
// nodes' keys come from a distributed key generation among in-process
// members (no dealer) instead of keygen; then the testnet runs as usual.
func runTestnetCommand(ctx context.Context, e *env, cfg Config, args []string) error {
	if cfg.DKG && len(args) == 0 && cfg.Dir != "" {
		if _, err := os.Stat(filepath.Join(cfg.Dir, node.ClusterFileName)); errors.Is(err, os.ErrNotExist) {
			if e.set["host"] || e.set["base-port"] {
				return usageErrorf("testnet", "testnet: --dkg runs on free 127.0.0.1 ports: --host and --base-port are not supported")
			}
			if err := checkFreshDir(cfg.Dir, cfg.Nodes); err != nil {
				return fmt.Errorf("testnet: %w", err)
			}
			fmt.Fprintf(e.stderr, "palisade: distributed key generation among %d in-process members (no dealer)\n", cfg.Nodes)
			keys, err := testnet.DKG(ctx, cfg.Dir, testnet.DKGOptions{N: cfg.Nodes, Name: cfg.Name, PhaseTimeout: cfg.PhaseTimeout})
			if err != nil {
				return fmt.Errorf("testnet: dkg: %w", err)
			}
			fmt.Fprintf(e.stderr, "palisade: cluster %s id=%s made by DKG\n", keys.Cluster.File.Name, keys.Cluster.ID)
		}
	}
	return runTestnet(ctx, e, cfg, args)
}
