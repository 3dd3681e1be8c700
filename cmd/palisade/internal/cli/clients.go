package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

func clientsFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Ops.Patterns, "patterns", c.Ops.Patterns, "")
}

// runClients lists or edits the client list of a cluster file: list, add,
// set-patterns and remove. Edits are checked as a whole cluster file and
// written atomically; running nodes take them on SIGHUP.
func runClients(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) == 0 {
		return usageErrorf("clients", "clients: want a subcommand: list, add, set-patterns or remove")
	}
	if err := requireFlag("clients", "cluster", cfg.Cluster); err != nil {
		return err
	}
	sub, args := args[0], args[1:]
	want := map[string]int{"list": 0, "add": 2, "set-patterns": 1, "remove": 1}
	n, ok := want[sub]
	if !ok {
		return usageErrorf("clients", "clients: unknown subcommand %q (list, add, set-patterns, remove)", sub)
	}
	if len(args) != n {
		return usageErrorf("clients", "clients %s: want %d arguments, got %d", sub, n, len(args))
	}
	cluster, err := protocol.LoadCluster(cfg.Cluster)
	if err != nil {
		return clusterLoadError("clients", cfg.Cluster, err)
	}
	if err := checkLoadedPin("clients", cfg, cluster); err != nil {
		return err
	}
	f := cluster.File
	f.Clients = slices.Clone(f.Clients)
	find := func(name string) (int, error) {
		i := slices.IndexFunc(f.Clients, func(c protocol.ClientInfo) bool { return c.Name == name })
		if i < 0 {
			return 0, fmt.Errorf("clients %s: no client named %q in %s", sub, name, cfg.Cluster)
		}
		return i, nil
	}
	switch sub {
	case "list":
		for _, c := range f.Clients {
			printClient(e.stdout, c)
		}
		if len(f.Clients) == 0 {
			fmt.Fprintln(e.stdout, "no clients")
		}
		return nil
	case "add":
		name, id := args[0], args[1]
		if name == "" || strings.ContainsFunc(name, func(r rune) bool { return !protocol.NameRune(r) }) {
			return fmt.Errorf("clients add: name %q: want printable characters without spaces", name)
		}
		if _, err := find(name); err == nil {
			return fmt.Errorf("clients add: %s already has a client named %q (use set-patterns or remove)", cfg.Cluster, name)
		}
		if _, err := peer.Decode(id); err != nil {
			return fmt.Errorf("clients add: peer ID %q: %w", id, err)
		}
		patterns, err := parsePatterns(cfg.Ops.Patterns)
		if err != nil {
			return fmt.Errorf("clients add: %w", err)
		}
		f.Clients = append(f.Clients, protocol.ClientInfo{Name: name, PeerID: id, Resources: patterns})
	case "set-patterns":
		if !e.set["patterns"] {
			return usageErrorf("clients", "clients set-patterns: --patterns (or %s) is required", EnvVar("patterns"))
		}
		i, err := find(args[0])
		if err != nil {
			return err
		}
		if f.Clients[i].Resources, err = parsePatterns(cfg.Ops.Patterns); err != nil {
			return fmt.Errorf("clients set-patterns: %w", err)
		}
	case "remove":
		i, err := find(args[0])
		if err != nil {
			return err
		}
		f.Clients = slices.Delete(f.Clients, i, i+1)
	}
	if _, err := protocol.NewCluster(f); err != nil {
		return fmt.Errorf("clients %s: %w", sub, err)
	}
	if err := writeFileAtomic(cfg.Cluster, f); err != nil {
		return fmt.Errorf("clients %s: %w", sub, err)
	}
	if sub != "remove" {
		i, _ := find(args[0])
		printClient(e.stdout, f.Clients[i])
	}
	fmt.Fprintf(e.stderr, "palisade: wrote %s (%d clients). Running nodes take it when it is their DIR/cluster.json and they get SIGHUP (kill -HUP PID).\n", cfg.Cluster, len(f.Clients))
	return nil
}

func printClient(w io.Writer, c protocol.ClientInfo) {
	fmt.Fprintf(w, "name=%s peer=%s patterns=%s\n", c.Name, c.PeerID, strings.Join(c.Resources, ","))
}

// parsePatterns splits a comma-separated list of resource patterns and
// checks each.
func parsePatterns(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := protocol.ValidatePattern(p); err != nil {
			return nil, fmt.Errorf("--patterns: %w", err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("--patterns: no pattern given")
	}
	return out, nil
}

// writeFileAtomic writes the cluster file through a temporary file in the
// same directory, fsynced and renamed over path, keeping path's mode, so a
// reader (a node reloading on SIGHUP) sees the old file or the new one,
// never a part.
func writeFileAtomic(path string, f protocol.ClusterFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".cluster-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(append(b, '\n'))
	err = errors.Join(err, tmp.Chmod(mode), tmp.Sync())
	if err = errors.Join(err, tmp.Close()); err != nil {
		return err
	}
	// An operator editing as root must not leave a root-owned file in
	// the node's directory: the new file keeps the old one's owner.
	if _, err := os.Stat(path); err == nil {
		if err := chownLike(tmp.Name(), path); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
