package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/palisade-dev/palisade/node"
)

// runEvidence lists the verified evidence of a node directory: evidence of
// equivocation (evidence.jsonl), then forks (forks.jsonl).
func runEvidence(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("evidence", "evidence: unexpected argument %q", args[0])
	}
	if cfg.Dir == "" {
		return usageErrorf("evidence", "evidence: --dir is required")
	}
	if err := checkNodeDir("evidence", cfg.Dir); err != nil {
		return err
	}
	evs, err := node.ReadEvidence(cfg.Dir)
	if err != nil {
		return err
	}
	forks, err := node.ReadForks(cfg.Dir)
	if err != nil {
		return err
	}
	if len(evs) == 0 && len(forks) == 0 {
		fmt.Fprintln(e.stdout, "no evidence")
		return nil
	}
	for _, ev := range evs {
		fmt.Fprintf(e.stdout, "node=%d resource=%s epoch=%d holders=%s,%s a=%s b=%s\n",
			ev.A.Node, ev.A.Statement.Resource, ev.A.Statement.Epoch, ev.A.Statement.Holder, ev.B.Statement.Holder,
			hex.EncodeToString(ev.A.Marshal()), hex.EncodeToString(ev.B.Marshal()))
	}
	for _, f := range forks {
		fmt.Fprintf(e.stdout, "fork id=%s resource=%s epoch=%d holders=%s,%s fork=%s\n",
			f.ID(), f.Resource(), f.Epoch(), f.A.Holder, f.B.Holder, f)
	}
	return nil
}

// nodeDirFiles are the files every node directory has, whoever wrote it
// (keygen's DIR/nodeI, dkg, reshare); the share file is not among them,
// as reshare erases an old member's.
var nodeDirFiles = []string{node.ClusterFileName, node.NodeFileName, node.IdentityFileName}

// checkNodeDir fails, as a usage error (exit status 2), unless dir is one
// node's directory. evidence and audit read what a node wrote there; on
// any other directory (keygen's or testnet's top directory, an empty one,
// a typo) they would find nothing and report "no evidence" or "no audit
// entries": an all-clear for a node they never looked at.
func checkNodeDir(cmd, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErrorf(cmd, "%s: --dir %s does not exist: give a node's directory (keygen's DIR/nodeI, or the one dkg wrote)", cmd, dir)
	case err != nil:
		return fmt.Errorf("%s: --dir %s: %w", cmd, dir, err)
	case !st.IsDir():
		return usageErrorf(cmd, "%s: --dir %s is a file, not a node's directory: give a node's directory (keygen's DIR/nodeI, or the one dkg wrote)", cmd, dir)
	}
	var missing []string
	for _, name := range nodeDirFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, name)
		} else if err != nil {
			return fmt.Errorf("%s: --dir %s: %w", cmd, dir, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "node1", node.NodeFileName)); err == nil {
		return usageErrorf(cmd, "%s: --dir %s is a keygen or testnet directory, not a node's: give one node's directory, such as --dir %s", cmd, dir, filepath.Join(dir, "node1"))
	}
	return usageErrorf(cmd, "%s: --dir %s is not a node's directory (it has no %s): give a node's directory (keygen's DIR/nodeI, or the one dkg wrote)", cmd, dir, joinNames(missing))
}

// joinNames lists file names: "a", "a and b", "a, b and c".
func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := names[0]
	for _, n := range names[1 : len(names)-1] {
		out += ", " + n
	}
	return out + " and " + names[len(names)-1]
}
