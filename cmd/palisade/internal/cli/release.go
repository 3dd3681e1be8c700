package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

const releaseUsage = `Usage:
    palisade release --cluster FILE [--cluster-id ID] --identity FILE TOKEN

Ends the lease TOKEN names at once, so another client can acquire the
resource without waiting for the TTL to run out. Only the token's holder
identity may release it: --identity must be the key that acquired TOKEN
(any process of that identity may), and a client in --cluster; release
checks both before it sends anything (exit status 5). TOKEN is the text
acquire printed; "-" reads it from stdin. Nothing is printed on success,
which comes once t = 2f+1 nodes have confirmed the release.

The token stays valid at resources until a newer one is used there:
releasing decides who may acquire next, fencing is the token's job.
Releasing is idempotent: the same TOKEN released again succeeds again,
until a newer holder takes the resource. A lease that ended otherwise (it
ran out, or a newer holder took the resource) cannot be released: the
nodes refuse, exit status 5. If fewer than t nodes confirm, release exits
4 and the lease ends by its TTL.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   the key that acquired TOKEN, mode 0600 [PALISADE_IDENTITY]

Example:
    $ export PALISADE_CLUSTER=/tmp/palisade/cluster.json
    $ export PALISADE_IDENTITY=/tmp/palisade/client.key
    $ TOKEN=$(palisade acquire --ttl 5m orders-db)
    $ curl -X PUT -H "Palisade-Token: $TOKEN" --data paid [...]
    $ palisade release "$TOKEN"
    $ palisade acquire orders-db
    pt3.A[...]
`

func releaseFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
}

func runRelease(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("release", "release: want exactly one TOKEN, got %d arguments", len(args))
	}
	text, err := tokenArg(args[0])
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	s, err := checkSession("release", cfg, "")
	if err != nil {
		return err
	}
	tok, err := verifier.New(s.cluster).ParseAndVerify(text)
	if err != nil {
		return tokenRejected(cfg.Cluster, err)
	}
	if tok.Holder.ID != s.self {
		holder := holderName(s.cluster, tok.Holder.Ref())
		return refusedf("release %q: the token is held by %s, not by --identity %s (%s): release it with the key that acquired it",
			tok.Resource, holder, cfg.Identity, shortPeer(s.self))
	}
	if err := s.connect(); err != nil {
		return err
	}
	defer s.c.Close()
	if err := s.c.Release(ctx, tok); err != nil {
		op := fmt.Sprintf("release %q at epoch %d", tok.Resource, tok.Epoch)
		return explainRequest(s.target(op, tok.Resource), err)
	}
	return nil
}

// tokenArg reads a TOKEN argument: the text itself, or "-" for stdin.
func tokenArg(arg string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, int64(protocol.MaxTokenTextLen)+64))
	if err != nil {
		return "", fmt.Errorf("read token from stdin: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
