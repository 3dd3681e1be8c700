package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func runAcquire(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("acquire", "acquire: want exactly one RESOURCE, got %d arguments", len(args))
	}
	resource := args[0]
	if err := requireFlag("acquire", "cluster", cfg.Cluster); err != nil {
		return err
	}
	if err := requireFlag("acquire", "identity", cfg.Identity); err != nil {
		return err
	}
	if err := protocol.ValidateResource(resource); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	cluster, err := protocol.LoadCluster(cfg.Cluster)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	id, err := client.LoadIdentity(cfg.Identity)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	c, err := client.New(client.Config{Cluster: cluster, Identity: id})
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// Close, never Release: this process exits, so the lease runs out by
	// its TTL while the printed token is in use.
	defer c.Close()
	// --wait D waits up to D for the resource (a context deadline on
	// Acquire); --wait 0 tries once (TryAcquire).
	var lock *client.Lock
	if cfg.Wait > 0 {
		lock, err = acquireWithin(ctx, c, cfg.Wait, resource, client.WithTTL(cfg.TTL))
	} else {
		lock, err = c.TryAcquire(ctx, resource, client.WithTTL(cfg.TTL))
	}
	if err != nil {
		return acquireError(resource, cluster, diagnose(ctx, c, resource, err))
	}
	fmt.Fprintln(e.stdout, lock.Token().String())
	return nil
}

// acquireWithin is Acquire waiting at most d: a context with timeout d.
func acquireWithin(ctx context.Context, c *client.Client, d time.Duration, resource string, opts ...client.Option) (*client.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Acquire(ctx, resource, opts...)
}

// diagnoseTimeout bounds the status round diagnose runs.
const diagnoseTimeout = 3 * time.Second

// diagnose explains an acquisition that ran out of --wait. The client then
// reports only the deadline, so one more status round tells which nodes do
// not answer or who holds the resource.
func diagnose(ctx context.Context, c *client.Client, resource string, err error) error {
	var qe *client.QuorumError
	var be *client.BusyError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &qe) || errors.As(err, &be) || ctx.Err() != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	sts, serr := c.Status(sctx, resource)
	if serr != nil {
		return fmt.Errorf("%w; then %w", err, serr)
	}
	for _, s := range sts {
		if !s.Holder.IsZero() && s.LeaseLeft > 0 {
			return fmt.Errorf("%w; node %d reports %q held by %s at epoch %d for %v more", err, s.Index, resource, s.Holder.Short(), s.LeaseEpoch, s.LeaseLeft.Round(time.Millisecond))
		}
	}
	return err
}

// acquireError adds to a failed acquisition which nodes failed, so an
// operator sees at once which ones to look at.
func acquireError(resource string, cluster *protocol.Cluster, err error) error {
	var qe *client.QuorumError
	var re *client.RefusedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("acquire %q: refused by nodes %s: %w", resource, nodeList(re.Nodes), err)
	case errors.As(err, &qe):
		return fmt.Errorf("acquire %q: %d of %d nodes are needed; nodes %s failed or did not answer: %w",
			resource, cluster.File.T, cluster.File.N, nodeList(qe.Nodes), err)
	}
	return fmt.Errorf("acquire %q: %w", resource, err)
}

func nodeList(ns []*client.NodeError) string {
	idx := make([]int, 0, len(ns))
	for _, n := range ns {
		idx = append(idx, n.Index)
	}
	// In index order: the errors keep the order nodes answered in.
	slices.Sort(idx)
	out := make([]string, 0, len(idx))
	for _, i := range slices.Compact(idx) {
		out = append(out, fmt.Sprint(i))
	}
	return strings.Join(out, ", ")
}

func runVerify(_ context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("verify", "verify: want exactly one TOKEN, got %d arguments", len(args))
	}
	if err := requireFlag("verify", "cluster", cfg.Cluster); err != nil {
		return err
	}
	text := args[0]
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, int64(protocol.MaxTokenTextLen)+64))
		if err != nil {
			return fmt.Errorf("verify: read token: %w", err)
		}
		text = string(b)
	}
	v, err := verifier.Load(cfg.Cluster)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if cfg.JSON {
		return verifyJSON(e.stdout, v, text)
	}
	tok, err := v.ParseAndVerify(text)
	if err != nil {
		return fmt.Errorf("token rejected: %w", err)
	}
	fmt.Fprintf(e.stdout, "resource=%s epoch=%d holder=%s session=%s\n", tok.Resource, tok.Epoch, tok.Holder.ID, tok.Holder.Session)
	return nil
}
