package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/palisade-dev/palisade/protocol"
)

// The cluster pin: --cluster-id ID (PALISADE_CLUSTER_ID) makes a command
// refuse a cluster file whose cluster ID is not ID.
//
// The pin is the cluster ID, not the SHA-256 of cluster.json that the
// ceremony also prints. The cluster ID is the hash of the cluster's name
// and group public key: a resharing keeps both, and adding or removing a
// client, changing a node's address or raising epoch_floor changes
// neither, so a pin written into a unit file or a container's environment
// once stays right for the cluster's life. The file's hash changes with
// each of those edits. What the pin proves is what safety rests on: a
// file with the pinned ID carries the group key the ceremony made (the
// loader recomputes the ID from the key), so no token minted outside the
// cluster verifies against it, and a resource that loaded it fences with
// the real key. A file with the right ID and edited addresses or client
// lists can still deny service, never forge a token.
//
// Every command with --cluster takes --cluster-id (the flag is added to
// them below, so a new command gets it too), and bootstrap takes it for
// the cluster file in its shared directory.

// clusterIDFlag is the pin's flag name.
const clusterIDFlag = "cluster-id"

// errClusterPin reports a cluster file whose cluster ID is not the
// pinned one.
var errClusterPin = errors.New("cluster file does not have the pinned cluster ID")

// clusterIDFlagVar registers --cluster-id on fs.
func clusterIDFlagVar(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ClusterID, clusterIDFlag, c.ClusterID, "")
}

func init() {
	// Every command that reads a cluster file (it has --cluster) also
	// takes the pin, and checks it before it runs.
	for name, cmd := range commands {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cfg := DefaultConfig()
		cmd.flags(fs, &cfg)
		if fs.Lookup("cluster") == nil || fs.Lookup(clusterIDFlag) != nil {
			continue
		}
		flags, run := cmd.flags, cmd.run
		cmd.flags = func(fs *flag.FlagSet, c *Config) {
			flags(fs, c)
			clusterIDFlagVar(fs, c)
		}
		cmd.run = func(ctx context.Context, e *env, cfg Config, args []string) error {
			if err := precheckPin(name, cfg); err != nil {
				return err
			}
			return run(ctx, e, cfg, args)
		}
		commands[name] = cmd
	}
}

// precheckPin checks --cluster against --cluster-id, if both are given,
// before cmd runs (cmd reports a missing --cluster itself).
func precheckPin(cmd string, cfg Config) error {
	if cfg.ClusterID == "" || cfg.Cluster == "" {
		return nil
	}
	_, err := loadPinnedCluster(cmd, cfg.Cluster, cfg.ClusterID)
	return err
}

// parseClusterPin decodes a --cluster-id value: the 64 hex digits of a
// cluster ID.
func parseClusterPin(cmd, pin string) (protocol.ClusterID, error) {
	id, err := protocol.ParseClusterID(strings.TrimSpace(pin))
	if err != nil {
		return id, usageErrorf(cmd, "%s: --%s %q: want the cluster's ID, 64 hex digits (the id= that \"palisade dkg\" printed, also cluster_id in cluster.json)", cmd, clusterIDFlag, pin)
	}
	return id, nil
}

// loadPinnedCluster loads the cluster file at path (see loadCluster) and,
// if pin is not empty, refuses it unless its cluster ID is pin.
func loadPinnedCluster(cmd, path, pin string) (*protocol.Cluster, error) {
	var want protocol.ClusterID
	if pin != "" {
		var err error
		if want, err = parseClusterPin(cmd, pin); err != nil {
			return nil, err
		}
	}
	c, err := loadCluster(cmd, path)
	if err != nil {
		return nil, err
	}
	if pin == "" {
		return c, nil
	}
	if err := checkClusterPin(c, want, path); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return c, nil
}

// checkClusterPin refuses cluster c, read from path, unless its ID is
// want. The error names both IDs, and says so if want is the file's
// SHA-256 rather than its cluster ID (the ceremony prints both).
func checkClusterPin(c *protocol.Cluster, want protocol.ClusterID, path string) error {
	if c.ID == want {
		return nil
	}
	hint := "it was not made by the ceremony whose ID you pinned: do not use it, and get cluster.json from a node operator of your cluster"
	if raw, err := os.ReadFile(path); err == nil {
		if sum := sha256.Sum256(raw); bytes.Equal(sum[:], want[:]) {
			hint = "the pin is this file's SHA-256, which changes with every client, address or era change: pin its cluster_id instead"
		}
	}
	return fmt.Errorf("%w: %s holds cluster %q with ID %s, pinned %s (--%s or %s): %s",
		errClusterPin, path, c.File.Name, c.ID, hex.EncodeToString(want[:]), clusterIDFlag, EnvVar(clusterIDFlag), hint)
}

// checkLoadedPin refuses cluster c, loaded from cfg.Cluster by cmd,
// unless --cluster-id is unset or names c's cluster ID. Commands that load
// the file themselves call it on the very value they go on to use, so no
// file swapped in after precheckPin's look is taken.
func checkLoadedPin(cmd string, cfg Config, c *protocol.Cluster) error {
	if cfg.ClusterID == "" {
		return nil
	}
	want, err := parseClusterPin(cmd, cfg.ClusterID)
	if err != nil {
		return err
	}
	if err := checkClusterPin(c, want, cfg.Cluster); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}
