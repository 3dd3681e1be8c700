package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	if err := protocol.ValidateResource(resource); err != nil {
		return usageErrorf("acquire", "acquire: %v", stripPrefixes(err.Error()))
	}
	s, err := openSession("acquire", cfg, resource)
	if err != nil {
		return err
	}
	// Close, never Release: this process exits, so the lease runs out by
	// its TTL (or palisade release ends it) while the printed token is in
	// use. The session's key leaves with this process, so the lease is
	// acquired for release by token: palisade release has only the token.
	defer s.c.Close()
	lock, err := s.acquire(ctx, resource, client.WithTokenRelease())
	if err != nil {
		return err
	}
	// The lease starts at the vote; the token is printed only once t
	// members acknowledged its Commit, so that it outlives this process
	// by its TTL and can be released by token.
	select {
	case <-lock.Committed():
	case <-lock.Lost():
		return fmt.Errorf("acquire %q: %w", resource, lock.Err())
	case <-ctx.Done():
		return fmt.Errorf("acquire %q: waiting for the commit: %w", resource, ctx.Err())
	}
	fmt.Fprintln(e.stdout, lock.Token().String())
	return nil
}

// diagnoseTimeout bounds the status round diagnose runs.
const diagnoseTimeout = 3 * time.Second

// diagnose explains an acquisition that ran out of --wait. The client then
// reports only the deadline, or a last round that tells nothing (the
// deadline cut it short, so every node "timed out", or it met only busy
// answers before it gave up), so one more
// status round tells which nodes do not answer (a *client.QuorumError) or
// who holds the resource (a *client.BusyError), each wrapped with
// context.DeadlineExceeded.
func diagnose(ctx context.Context, c *client.Client, resource string, err error) error {
	var qe *client.QuorumError
	var be *client.BusyError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &be) || ctx.Err() != nil {
		return err
	}
	if errors.As(err, &qe) && !inconclusive(qe) {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	sts, serr := c.Status(sctx, resource)
	if serr != nil {
		return fmt.Errorf("%w; then %w", context.DeadlineExceeded, serr)
	}
	for _, s := range sts {
		if !s.Holder.IsZero() && s.LeaseLeft > 0 {
			be := &client.BusyError{Resource: resource, Holder: s.Holder, Epoch: s.LeaseEpoch, Left: s.LeaseLeft, Nodes: []int{s.Index}}
			return fmt.Errorf("%w; then %w", context.DeadlineExceeded, be)
		}
	}
	return err
}

// inconclusive reports whether a failed round says nothing about the
// nodes: each one that failed was cut short by the caller's deadline or
// answered busy (held, or another contender's pending vote).
func inconclusive(qe *client.QuorumError) bool {
	for _, n := range qe.Nodes {
		switch nodeReason(n.Err) {
		case reasonBusy, reasonTimeout, reasonCancelled:
		default:
			return false
		}
	}
	return true
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
		return clusterLoadError("verify", cfg.Cluster, err)
	}
	if cfg.JSON {
		return verifyJSON(e.stdout, v, text)
	}
	tok, err := v.ParseAndVerify(text)
	if err != nil {
		return tokenRejected(cfg.Cluster, err)
	}
	fmt.Fprintf(e.stdout, "resource=%s epoch=%d holder=%s session=%s\n", tok.Resource, tok.Epoch, tok.Holder.ID, tok.Holder.Session)
	return nil
}
