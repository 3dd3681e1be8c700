package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/protocol"
)

// ErrNotHolder: a token given to Release names another holder identity
// than this client's, or another cluster. Nodes would refuse it (only the
// holder may release), so Release refuses it without asking them.
var ErrNotHolder = errors.New("client: not the token's holder")

// Release ends the lease tok names, as Lock.Release does, for a token
// whose Lock this process no longer has: one that "palisade acquire"
// printed, or one an earlier process of this identity acquired. The
// client's identity must be the token's holder identity (the session in
// the token picks the lease), and the lease must have been acquired
// WithTokenRelease: this process does not know the session's key, so the
// nodes end the lease only for a genuine token of a lease that asked for
// release by token. It waits until 2f+1 nodes acknowledged the release, or
// until it is certain they cannot.
//
// A lease that already ended (ran out, released, or passed to a newer
// holder), or that was acquired without WithTokenRelease (a Lock's, which
// only that Lock can release), cannot be released: more than f nodes then
// refuse with protocol.CodeNotHolder, and Release returns a *RefusedError. With fewer
// than 2f+1 answers it returns a *QuorumError; the lease then ends by its
// TTL. To release a Lock this client holds, use Lock.Release, which also
// stops its renewal.
func (c *Client) Release(ctx context.Context, tok protocol.Token) error {
	if tok.Cluster != c.cfg.Cluster.ID {
		return fmt.Errorf("%w: token of cluster %s, this client's is %s", ErrNotHolder, tok.Cluster, c.cfg.Cluster.ID)
	}
	if tok.Holder.ID != c.ID() {
		return fmt.Errorf("%w: token held by %s, this client is %s", ErrNotHolder, tok.Holder.ID, c.ID())
	}
	op := fmt.Sprintf("release %q at epoch %d", tok.Resource, tok.Epoch)
	_, refusals, _, err := c.quorum(ctx, op, protocol.ProtoRelease, protocol.ReleaseRequest{Token: tok}.Marshal())
	var qe *QuorumError
	if refusals > c.f && errors.As(err, &qe) {
		// More than f nodes refused: at least one honest node says no,
		// and retrying will not change its mind.
		var refused []*NodeError
		for _, n := range qe.Nodes {
			var re *protocol.RefusedError
			if errors.As(n.Err, &re) {
				refused = append(refused, n)
			}
		}
		return &RefusedError{Op: op, Nodes: refused}
	}
	return err
}
