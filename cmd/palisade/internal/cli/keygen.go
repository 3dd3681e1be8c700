package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/testnet"
)

func runKeygen(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("keygen", "keygen: unexpected argument %q", args[0])
	}
	if err := requireFlag("keygen", "dir", cfg.Dir); err != nil {
		return err
	}
	keys, err := keygen(e.stderr, cfg, testnet.KeygenOptions{})
	if err != nil {
		return err
	}
	printKeys(e.stdout, cfg.Dir, keys)
	fmt.Fprintln(e.stdout, faultTolerance(cfg.Nodes))
	return nil
}

// keygen checks that cfg.Dir holds no keys yet, prints the dealer warning,
// deals the keys and fixes the nodes' listen addresses for DNS hosts.
func keygen(stderr io.Writer, cfg Config, o testnet.KeygenOptions) (*testnet.Keys, error) {
	if err := checkFreshDir(cfg.Dir, cfg.Nodes); err != nil {
		return nil, err
	}
	addrs, listen, err := nodeAddrs(cfg.Host, cfg.BasePort, cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	dealerWarning(stderr, testnet.DealerWarning)
	o.N, o.Name, o.Addrs = cfg.Nodes, cfg.Name, addrs
	keys, err := testnet.Keygen(cfg.Dir, o)
	if err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	for i, d := range keys.NodeDirs {
		if listen[i] != addrs[i] {
			if err := setListen(d, i+1, listen[i]); err != nil {
				return nil, fmt.Errorf("keygen: %w", err)
			}
		}
	}
	return keys, nil
}

// checkFreshDir refuses a directory that already holds keys, so keygen
// never overwrites a cluster.
func checkFreshDir(dir string, n int) error {
	names := []string{node.ClusterFileName, testnet.ClientKeyFileName}
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("node%d", i))
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("keygen: %s already exists: refusing to overwrite keys (use an empty directory)", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keygen: %w", err)
		}
	}
	return nil
}

// nodeAddrs turns --host and --base-port into each node's advertised
// multiaddr and the address it listens on. An IP host is both; a DNS host
// is advertised as /dns4/HOST/tcp/PORT and listened on at 0.0.0.0.
func nodeAddrs(hostList string, basePort, n int) (addrs, listen []string, err error) {
	hosts := strings.Split(hostList, ",")
	for i := range hosts {
		hosts[i] = strings.TrimSpace(hosts[i])
		if hosts[i] == "" {
			return nil, nil, fmt.Errorf("--host %q has an empty entry", hostList)
		}
	}
	switch len(hosts) {
	case n:
	case 1:
		for len(hosts) < n {
			hosts = append(hosts, hosts[0])
		}
	default:
		return nil, nil, fmt.Errorf("--host lists %d hosts for %d nodes: give one, or one per node", len(hosts), n)
	}
	ports := make([]int, n)
	if basePort == 0 {
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
				return nil, nil, fmt.Errorf("--host %s is not a loopback address: give --base-port", h)
			}
		}
		if ports, err = testnet.FreePorts(n); err != nil {
			return nil, nil, err
		}
	} else {
		for i := range ports {
			ports[i] = basePort + i + 1
		}
	}
	for i, h := range hosts {
		port := strconv.Itoa(ports[i])
		ip := net.ParseIP(h)
		switch {
		case ip != nil && ip.To4() != nil:
			a := "/ip4/" + ip.String() + "/tcp/" + port
			addrs, listen = append(addrs, a), append(listen, a)
		case ip != nil:
			a := "/ip6/" + ip.String() + "/tcp/" + port
			addrs, listen = append(addrs, a), append(listen, a)
		case validDNSName(h):
			addrs = append(addrs, "/dns4/"+h+"/tcp/"+port)
			listen = append(listen, "/ip4/0.0.0.0/tcp/"+port)
		default:
			return nil, nil, fmt.Errorf("--host %q is neither an IP address nor a DNS name", h)
		}
	}
	return addrs, listen, nil
}

func validDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// setListen rewrites a node directory's node.json to listen on addr.
func setListen(dir string, index int, addr string) error {
	b, err := json.MarshalIndent(node.NodeFile{Index: index, Listen: []string{addr}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, node.NodeFileName), append(b, '\n'), 0o644)
}

// printKeys summarises what keygen wrote.
func printKeys(w io.Writer, dir string, keys *testnet.Keys) {
	f := keys.Cluster.File
	fmt.Fprintf(w, "cluster %s n=%d t=%d id=%s\n", f.Name, f.N, f.T, keys.Cluster.ID)
	for i, n := range f.Nodes {
		fmt.Fprintf(w, "node%d %s %s dir=%s\n", n.Index, strings.Join(n.Addrs, ","), n.PeerID, keys.NodeDirs[i])
	}
	if len(f.Clients) > 0 {
		c := f.Clients[0]
		fmt.Fprintf(w, "%s %s key=%s\n", c.Name, c.PeerID, filepath.Join(dir, testnet.ClientKeyFileName))
	}
	fmt.Fprintf(w, "cluster file %s\n", keys.ClusterPath)
}
