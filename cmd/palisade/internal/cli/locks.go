package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
)

// LeasesConfig holds the settings of locks and revoke; it is
// Config.Leases.
type LeasesConfig struct {
	// After starts the listing of locks after this resource (--after).
	// Default: from the first.
	After string
	// Limit bounds the leases locks prints (--limit). Default 1000 (0
	// takes it).
	Limit int
	// Epoch, if not 0, is the epoch revoke expects the live lease to have
	// (--epoch). Default 0: whatever it is.
	Epoch uint64
}

const locksUsage = `Usage:
    palisade locks --cluster FILE [--cluster-id ID] --identity FILE [--timeout D] [--after RESOURCE] [--limit N]

Lists the live leases of the cluster, as its members report them: one
line per lease with its resource, holder (client name where the cluster
file has one, else its identity, and a hash of the lock session: the
session ID itself is a secret of the process that acquired and is never
shown), epoch, time left, and how many members reported it. A lease is
listed only when at least t = 2f+1 members report the same holder,
session and epoch: fewer could be f liars, members that lag, or members
whose operators revoked it ("palisade revoke"). A last line counts the
leases, the members that answered, and the resources some members
reported a lease on without t of them agreeing (not listed).

"left" is the t-th longest time left among the reports: at least t
members hold the lease that long by their own clocks.

Who may list: a client identity of the cluster file sees the resources
its patterns allow, as for status; a member's identity (a node
directory's identity.key, run by that node's operator) sees every
resource. Members admit no other identity.

At most --limit leases are printed. When more follow, locks says so and
names the --after value that lists the next ones: nothing is dropped
silently. Each member sends at most 64 leases per page and reads at most
1024 of its records per page.

Exit status: 0 when at least t members answered, 4 if fewer did, 5 if
the identity is neither a client nor a member, 1 on other errors.

Flags (environment variable in brackets):
    --cluster FILE      the cluster file [PALISADE_CLUSTER]
    --cluster-id ID     refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE     a client's key file, or a member's identity.key [PALISADE_IDENTITY]
    --timeout D         how long to wait for each member's page (5s) [PALISADE_TIMEOUT]
    --after RESOURCE    list the leases of resources after RESOURCE [PALISADE_AFTER]
    --limit N           print at most N leases (1000) [PALISADE_LIMIT]

Example:
    $ export PALISADE_CLUSTER=/tmp/pal/cluster.json PALISADE_IDENTITY=/tmp/pal/client.key
    $ palisade locks
    resource=orders-db holder=client1 session=#3f1c9a0b7d2e4f61 epoch=4 left=8.2s reported=4/4
    resource=jobs/nightly holder=client2 session=#9a02be77c1d05e3a epoch=12 left=41.9s reported=3/4
    2 live leases (t=3 of 4 members agree); 4 of 4 members answered
`

func locksFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
	timeoutFlag(fs, c)
	fs.StringVar(&c.Leases.After, "after", c.Leases.After, "")
	fs.IntVar(&c.Leases.Limit, "limit", c.Leases.Limit, "")
}

// runLocks is "palisade locks": one listing of the live leases that t
// members agree on (client.Client.Locks).
func runLocks(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("locks", "locks: unexpected argument %q", args[0])
	}
	if cfg.Ops.Timeout <= 0 {
		return usageErrorf("locks", "locks: --timeout %v must be above 0", cfg.Ops.Timeout)
	}
	if cfg.Leases.Limit < 0 {
		return usageErrorf("locks", "locks: --limit %d must not be negative", cfg.Leases.Limit)
	}
	if cfg.Leases.After != "" {
		if err := protocol.ValidateResource(cfg.Leases.After); err != nil {
			return usageErrorf("locks", "locks: --after: %v", err)
		}
	}
	quietClientLogs()
	if err := requireFlag("locks", "cluster", cfg.Cluster); err != nil {
		return err
	}
	if err := requireFlag("locks", "identity", cfg.Identity); err != nil {
		return err
	}
	cluster, err := loadPinnedCluster("locks", cfg.Cluster, cfg.ClusterID)
	if err != nil {
		return err
	}
	id, err := loadIdentity("locks", cfg.Identity, cfg.Cluster)
	if err != nil {
		return err
	}
	self, err := client.HolderID(id)
	if err != nil {
		return fmt.Errorf("locks: --identity %s: %w", cfg.Identity, err)
	}
	// S6: members admit only the cluster file's members and clients.
	if _, ok := cluster.Client(self); !ok && cluster.NodeIndex(self) == 0 {
		return refusedf("locks: identity %s is neither a client nor a member in %s: the nodes refuse its connections", self, cfg.Cluster)
	}
	c, err := client.New(client.Config{Cluster: cluster, Identity: id, RequestTimeout: cfg.Ops.Timeout})
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	defer c.Close()
	page, err := c.Locks(ctx, cfg.Leases.After, cfg.Leases.Limit)
	if err != nil {
		if client.NotAdmitted(err) {
			return refusedf("locks: the nodes do not admit identity %s (more than f dropped its connections): %v", self, err)
		}
		return fmt.Errorf("locks: %w", err)
	}
	n := cluster.File.N
	for _, l := range page.Leases {
		fmt.Fprintf(e.stdout, "resource=%s holder=%s session=#%s epoch=%d left=%s reported=%d/%d\n",
			l.Resource, holderIDName(cluster, l.HolderID), l.Session, l.Epoch, l.Left.Round(100*time.Millisecond), l.Reports, n)
	}
	noun := "leases"
	if len(page.Leases) == 1 {
		noun = "lease"
	}
	fmt.Fprintf(e.stdout, "%d live %s (t=%d of %d members agree); %d of %d members answered\n", len(page.Leases), noun, cluster.File.T, n, page.Answered, n)
	if page.Unconfirmed > 0 {
		fmt.Fprintf(e.stdout, "%d more resources have a lease that fewer than t=%d members report alike (not listed; see \"palisade status RESOURCE\")\n", page.Unconfirmed, cluster.File.T)
	}
	if page.Next != "" {
		fmt.Fprintf(e.stdout, "more leases may follow: list them with --after %s\n", page.Next)
	}
	return nil
}

// holderIDName names a client identity by its name in the cluster file,
// else by the identity itself.
func holderIDName(c *protocol.Cluster, id string) string {
	if cl, ok := c.Client(id); ok && cl.Name != "" {
		return cl.Name
	}
	return id
}
