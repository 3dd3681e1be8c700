package cli

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/palisade-dev/palisade/node"
)

// runEvidence lists the verified evidence of a node directory.
func runEvidence(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("evidence", "evidence: unexpected argument %q", args[0])
	}
	if cfg.Dir == "" {
		return usageErrorf("evidence", "evidence: --dir is required")
	}
	evs, err := node.ReadEvidence(cfg.Dir)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		fmt.Fprintln(e.stdout, "no evidence")
		return nil
	}
	for _, ev := range evs {
		fmt.Fprintf(e.stdout, "node=%d resource=%s epoch=%d holders=%s,%s a=%s b=%s\n",
			ev.A.Node, ev.A.Statement.Resource, ev.A.Statement.Epoch, ev.A.Statement.Holder, ev.B.Statement.Holder,
			hex.EncodeToString(ev.A.Marshal()), hex.EncodeToString(ev.B.Marshal()))
	}
	return nil
}
