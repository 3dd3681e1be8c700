package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/palisade-dev/palisade/protocol"
)

func forkFlags(fs *flag.FlagSet, c *Config) { clusterFlag(fs, c) }

// runFork checks a fork proof (protocol.Fork) against the cluster file and
// prints it: exit 0 if it proves a fork of this cluster, ExitBadProof if
// it does not.
func runFork(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("fork", "fork: want exactly one FILE (or - for stdin), got %d arguments", len(args))
	}
	if err := requireFlag("fork", "cluster", cfg.Cluster); err != nil {
		return err
	}
	c, err := loadPinnedCluster("fork", cfg.Cluster, cfg.ClusterID)
	if err != nil {
		return err
	}
	raw, err := readForkFile(args[0])
	if err != nil {
		return err
	}
	f, err := parseForkFile(raw)
	if err != nil {
		return &exitError{code: ExitBadProof, err: fmt.Errorf("fork: %s is not a fork proof: %w", args[0], err)}
	}
	if err := protocol.VerifyFork(c, f); err != nil {
		return &exitError{code: ExitBadProof, err: fmt.Errorf("fork: %s does not prove a fork of cluster %q: %w", args[0], c.File.Name, err)}
	}
	fmt.Fprintf(e.stdout, "fork resource=%s epoch=%d cluster=%s id=%s\n", f.Resource(), f.Epoch(), f.A.Cluster, f.ID())
	for _, t := range []protocol.Token{f.A, f.B} {
		fmt.Fprintf(e.stdout, "holder=%s session=%s token=%s\n", t.Holder.ID, t.Holder.Session, t.String())
	}
	fmt.Fprintf(e.stdout, "valid: both tokens verify under the group key of %q: more than f=%d of its nodes signed twice at this epoch or were restored from old vote stores\n", c.File.Name, c.F)
	return nil
}

// readForkFile reads a fork file, or stdin for "-", at most a little more
// than the longest text form.
func readForkFile(path string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(protocol.MaxForkTextLen)+64))
	if err != nil {
		return nil, fmt.Errorf("fork: read %s: %w", path, err)
	}
	return b, nil
}

// parseForkFile decodes a fork's binary form (as a store's fork record
// holds it) or its text form (as logs print it).
func parseForkFile(b []byte) (protocol.Fork, error) {
	if bytes.HasPrefix(b, []byte(protocol.DomainFork)) {
		return protocol.ParseFork(b)
	}
	return protocol.ParseForkText(string(b))
}
