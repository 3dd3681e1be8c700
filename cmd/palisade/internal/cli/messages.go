package cli

// The failure messages of the commands that talk to a cluster: one line
// each, naming the cause and what to do, nodes in index order, each
// node's failure folded to a short reason (libp2p's multi-line dial
// reports never reach the user), holders named by their client name in
// cluster.json. The rewritten errors still unwrap to the client's, so
// ExitCode picks the status from them.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/sec"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// explained is an error whose message was rewritten for the user. It
// unwraps to the original, so errors.Is and errors.As still see the
// client's errors.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// explainf gives err the message format makes of args.
func explainf(err error, format string, args ...any) error {
	return &explained{msg: fmt.Sprintf(format, args...), err: err}
}

// target is what a failed request was about, for explainRequest.
type target struct {
	// op names the request for the message: `acquire "orders-db"`.
	op string
	// resource is the resource the request was about.
	resource string
	// clusterPath is --cluster, for hints; cluster is its content.
	clusterPath string
	cluster     *protocol.Cluster
	// self is this client's peer ID.
	self string
	// wait is --wait (0: tried once); waits says the command has --wait.
	wait  time.Duration
	waits bool
}

// explainRequest rewrites a failed acquire, release or renewal into one
// line: who holds the resource, which nodes refused and why, or which
// nodes failed and how, then what to do.
func explainRequest(t target, err error) error {
	var re *client.RefusedError
	var be *client.BusyError
	var qe *client.QuorumError
	gaveUp := ""
	if t.wait > 0 && errors.Is(err, context.DeadlineExceeded) {
		gaveUp = fmt.Sprintf("gave up after --wait %v: ", t.wait)
	}
	switch {
	case errors.As(err, &re):
		return explainf(err, "%s: %s%s", t.op, gaveUp, refusal(t, re))
	case errors.As(err, &be):
		return explainf(err, "%s: %s", t.op, busy(t, be))
	case errors.Is(err, client.ErrHeldLocally):
		return explainf(err, "%s: this process already holds or is acquiring it", t.op)
	case client.NotAdmitted(err):
		return explainf(err, "%s: %s", t.op, notAdmitted(t, err))
	case errors.As(err, &qe):
		return explainf(err, "%s: %s%s", t.op, gaveUp, notEnoughNodes(t, qe))
	case errors.Is(err, context.DeadlineExceeded):
		return explainf(err, "%s: gave up after --wait %v (%s): try again with a longer --wait", t.op, t.wait, reason(err))
	case errors.Is(err, context.Canceled):
		return explainf(err, "%s: interrupted", t.op)
	}
	return explainf(err, "%s: %s", t.op, reason(err))
}

// busy says who holds the resource and for how long, and what to do.
func busy(t target, be *client.BusyError) string {
	left := be.Left.Round(100 * time.Millisecond)
	msg := fmt.Sprintf("%q is held by %s at epoch %d, %v left", be.Resource, holderName(t.cluster, be.Holder), be.Epoch, left)
	if be.Holder.ID == t.self {
		msg += " (another lock session of this identity)"
	}
	if t.wait > 0 {
		return fmt.Sprintf("%s after --wait %v: wait longer, or have its holder run \"palisade release\"", msg, t.wait)
	}
	suggest := (be.Left + time.Second).Truncate(time.Second)
	return fmt.Sprintf("%s: wait for it with --wait %v, or have its holder run \"palisade release\"", msg, suggest)
}

// refusal says which nodes refused and why, and what to do.
func refusal(t target, re *client.RefusedError) string {
	codes := map[protocol.Code]bool{}
	var code protocol.Code
	var detail string
	for _, n := range re.Nodes {
		var pe *protocol.RefusedError
		if errors.As(n.Err, &pe) {
			if !codes[pe.Code] {
				codes[pe.Code] = true
				code = pe.Code
				detail = pe.Message
			}
		}
	}
	head := fmt.Sprintf("refused by %s", nodeNames(re.Nodes))
	if len(codes) != 1 {
		return fmt.Sprintf("%s (%s): check that the nodes and --cluster %s describe the same cluster", head, nodeReasons(re.Nodes), t.clusterPath)
	}
	switch code {
	case protocol.CodeUnauthorised:
		return fmt.Sprintf("%s (unauthorised): the nodes' cluster.json does not let this client acquire %q, though --cluster %s does: give every node the same cluster.json and send them SIGHUP", head, t.resource, t.clusterPath)
	case protocol.CodeWrongCluster:
		return fmt.Sprintf("%s (wrong cluster): these nodes run another cluster than --cluster %s: check the file", head, t.clusterPath)
	case protocol.CodeOtherEra:
		return fmt.Sprintf("%s (node of an earlier era): the cluster was reshared; stop these old nodes and use the new cluster.json", head)
	case protocol.CodeNotHolder, protocol.CodeNoLease:
		return fmt.Sprintf("%s (%s): the lease already ended (it ran out, or a newer holder took the resource); nothing to release", head, code)
	}
	if detail != "" {
		return fmt.Sprintf("%s (%s: %s): check that the nodes and this client run the same palisade version", head, code, shorten(firstLine(detail), 100))
	}
	return fmt.Sprintf("%s (%s): check that the nodes and this client run the same palisade version", head, code)
}

// notAdmitted says which nodes turned the identity away
// (client.NotAdmitted) and what to do: the nodes' cluster.json, not
// --cluster, decides who is a client.
func notAdmitted(t target, err error) string {
	var qe *client.QuorumError
	errors.As(err, &qe)
	var dropped []*client.NodeError
	for _, n := range qe.Nodes {
		if client.Dropped(n.Err) {
			dropped = append(dropped, n)
		}
	}
	listed := "though --cluster " + t.clusterPath + " lists it"
	if _, ok := t.cluster.Client(t.self); !ok {
		listed = "nor does --cluster " + t.clusterPath
	}
	return fmt.Sprintf("refused: %s dropped the connection: their cluster.json does not admit identity %s as a client (%s): have every node's operator add it (\"palisade clients add\") and send the node SIGHUP",
		nodeNames(dropped), t.self, listed)
}

// notEnoughNodes says how many nodes were needed, each failed node's
// reason, and the likeliest fix.
func notEnoughNodes(t target, qe *client.QuorumError) string {
	n := t.cluster.File.N
	var dropped, down, busy int
	for _, ne := range qe.Nodes {
		switch nodeReason(ne.Err) {
		case reasonDropped:
			dropped++
		case reasonRefused, reasonTimeout, reasonUnreachable, reasonNetUnreachable, reasonBackoff:
			down++
		case reasonBusy:
			busy++
		}
	}
	var hint string
	switch {
	case dropped > 0:
		hint = fmt.Sprintf("the nodes that dropped the connection do not admit this identity (%s): give them a cluster.json that lists it among \"clients\" (\"palisade clients add\") and send them SIGHUP", t.self)
	case down > 0:
		hint = fmt.Sprintf("start the nodes, or check their addresses in %s", t.clusterPath)
		if t.waits && t.wait == 0 {
			hint += "; --wait D waits for them"
		}
	case busy > 0:
		hint = "other clients are acquiring it at the same time"
		if t.waits {
			hint += "; --wait D retries"
		}
	default:
		hint = "try again"
		if t.waits {
			hint += "; --wait D retries"
		}
	}
	return fmt.Sprintf("not enough nodes: %d of %d needed, %s (%s): %s", qe.Need, n, plural(qe.Got, "usable answer", "usable answers"), nodeReasons(qe.Nodes), hint)
}

// nodeNames lists nodes by index, in index order: "nodes 2, 3".
func nodeNames(ns []*client.NodeError) string {
	idx := make([]int, 0, len(ns))
	for _, n := range ns {
		idx = append(idx, n.Index)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	if len(idx) == 1 {
		return fmt.Sprintf("node %d", idx[0])
	}
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = strconv.Itoa(x)
	}
	return "nodes " + strings.Join(out, ", ")
}

// nodeReasons lists each node's short reason in index order: "node 1:
// connection refused; node 3: timed out".
func nodeReasons(ns []*client.NodeError) string {
	sorted := slices.Clone(ns)
	slices.SortStableFunc(sorted, func(a, b *client.NodeError) int { return a.Index - b.Index })
	out := make([]string, 0, len(sorted))
	for _, n := range sorted {
		out = append(out, fmt.Sprintf("node %d: %s", n.Index, nodeReason(n.Err)))
	}
	return strings.Join(out, "; ")
}

// The short reasons nodeReason gives; hints branch on them.
const (
	reasonRefused        = "connection refused"
	reasonTimeout        = "timed out"
	reasonUnreachable    = "host unreachable"
	reasonNetUnreachable = "network unreachable"
	reasonDropped        = "dropped the connection (does it admit this client?)"
	reasonBusy           = "busy"
	reasonBackoff        = "unreachable a moment ago (dial backoff)"
	reasonCancelled      = "cancelled"
)

// nodeReason folds one node's failure to a short reason: the transport's
// cause without libp2p's dial report, or the node's refusal code.
func nodeReason(err error) string {
	var pe *protocol.RefusedError
	var dns *net.DNSError
	var mismatch sec.ErrPeerIDMismatch
	msg := err.Error()
	switch {
	case errors.As(err, &pe):
		return pe.Code.String()
	case strings.HasPrefix(msg, "busy:"):
		return reasonBusy
	case errors.Is(err, syscall.ECONNREFUSED):
		return reasonRefused
	case errors.Is(err, syscall.EHOSTUNREACH):
		return reasonUnreachable
	case errors.Is(err, syscall.ENETUNREACH):
		return reasonNetUnreachable
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name
	case errors.As(err, &mismatch):
		return "another peer answers at its address (wrong peer ID or address in cluster.json?)"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return reasonTimeout
	case errors.Is(err, context.Canceled):
		return reasonCancelled
	case strings.Contains(msg, "dial backoff"):
		return reasonBackoff
	case client.Dropped(err):
		// libp2p's NewStream after a Connect the remote's connection
		// gater closed: the node does not admit our peer ID.
		return reasonDropped
	case strings.Contains(msg, "protocols not supported"), strings.Contains(msg, "protocol not supported"):
		return "does not speak palisade's protocol (another program, or another version?)"
	case strings.Contains(msg, "invalid vote"):
		return "sent an invalid vote"
	}
	return shorten(stripPrefixes(firstLine(msg)), 80)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// reason is a short, single-line form of an error that has no better
// explanation.
func reason(err error) string { return stripPrefixes(firstLine(err.Error())) }

// packagePrefix matches the "pkg: " prefixes errors collect on their way
// up; they tell a user nothing.
var packagePrefix = regexp.MustCompile(`\b(client|protocol|verifier|transport|crypto|node|bls12381): `)

// stripPrefixes removes package prefixes from an error message.
func stripPrefixes(s string) string { return packagePrefix.ReplaceAllString(s, "") }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// holderName names a lock session as replies do (protocol.HolderRef, never
// a session ID): the client's name in cluster.json if it has one, its peer
// ID shortened and the first 8 hex digits of the session's hash:
// "billing-2 (12D3KooW…hP6kCm/63538d48)".
func holderName(cluster *protocol.Cluster, r protocol.HolderRef) string {
	id := shortPeer(r.ID) + "/" + r.Session.String()[:8]
	if cluster != nil {
		if c, ok := cluster.Client(r.ID); ok && c.Name != "" {
			return fmt.Sprintf("%s (%s)", c.Name, id)
		}
	}
	return id
}

// shortPeer shortens a peer ID to its first 8 and last 6 characters.
func shortPeer(id string) string {
	if len(id) > 20 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}

// The files and tokens of earlier releases this one refuses, each with a
// sentinel that names the version and what to do. Versions up to the
// bn256 release (token version 2, cluster file version 1, bare share
// files, vote stores without a format) cannot be read: their keys,
// signatures and votes are on another curve, and the only way forward is
// a new DKG on BLS12-381. identity.key files carry over: a libp2p Ed25519
// key, typed by libp2p's own format, with nothing of the curve.

// afterSentinel returns what err's message says after sentinel's own
// text: the version and what to do, without the packages' prefixes.
func afterSentinel(err, sentinel error) string {
	msg := firstLine(err.Error())
	if _, rest, ok := strings.Cut(msg, sentinel.Error()+": "); ok {
		return rest
	}
	return stripPrefixes(msg)
}

// earlierRelease finds a node directory's file of another release in
// err: the file's name and what the refusal says (its version and what to
// do). ok is false for any other error.
func earlierRelease(err error) (file, detail string, ok bool) {
	switch {
	case errors.Is(err, protocol.ErrClusterFileVersion):
		return node.ClusterFileName, afterSentinel(err, protocol.ErrClusterFileVersion), true
	case errors.Is(err, node.ErrShareFileVersion):
		return node.ShareFileName, afterSentinel(err, node.ErrShareFileVersion), true
	case errors.Is(err, node.ErrStoreVersion):
		return node.StoreFileName, afterSentinel(err, node.ErrStoreVersion), true
	}
	return "", "", false
}

// clusterLoadError explains why cmd could not load --cluster path: a
// cluster file of an earlier release names its version and what to do;
// other errors keep their message.
func clusterLoadError(cmd, path string, err error) error {
	if errors.Is(err, protocol.ErrClusterFileVersion) {
		return explainf(err, "%s: --cluster %s was written by an earlier release: %s", cmd, path, afterSentinel(err, protocol.ErrClusterFileVersion))
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// tokenRejected explains why verify (or release) rejected a token.
func tokenRejected(clusterPath string, err error) error {
	switch {
	case errors.Is(err, protocol.ErrTokenVersion):
		return explainf(err, "token rejected: %s", afterSentinel(err, protocol.ErrTokenVersion))
	case errors.Is(err, verifier.ErrInvalidToken) && errors.Is(err, crypto.ErrMalformedPoint):
		return explainf(err, "token rejected: invalid token signature: its signature is not a point of the signature group G1 (%s; damaged in copying?): pass the whole text acquire printed, starting with %q", pointReason(err), protocol.TokenTextPrefix)
	case errors.Is(err, verifier.ErrMalformedToken):
		detail := strings.TrimPrefix(err.Error(), verifier.ErrMalformedToken.Error()+": ")
		detail = strings.TrimPrefix(detail, protocol.ErrMalformed.Error()+": ")
		if errors.Is(err, crypto.ErrMalformedPoint) {
			detail = "its signature is not a valid point encoding: " + pointReason(err)
		}
		return explainf(err, "token rejected: malformed token (%s): pass the whole text acquire printed, starting with %q", stripPrefixes(firstLine(detail)), protocol.TokenTextPrefix)
	case errors.Is(err, verifier.ErrInvalidToken):
		return explainf(err, "token rejected: invalid token signature: its fields or signature were changed after it was issued; acquire a new token")
	case errors.Is(err, verifier.ErrWrongCluster):
		return explainf(err, "token rejected: token for another cluster than --cluster %s: verify it with its own cluster's cluster.json", clusterPath)
	}
	return explainf(err, "token rejected: %s", reason(err))
}

// pointReason says in a few words why a point's encoding was refused.
func pointReason(err error) string {
	switch msg := err.Error(); {
	case errors.Is(err, crypto.ErrNotInSubgroup):
		return "outside the prime-order subgroup"
	case strings.Contains(msg, "not on the curve"):
		return "not on the curve"
	case strings.Contains(msg, "compression flag"):
		return "compression flag not set"
	case strings.Contains(msg, "infinity"), strings.Contains(msg, "identity"):
		return "the point at infinity"
	case strings.Contains(msg, "not below p"):
		return "coordinate not below p"
	}
	return "bad encoding"
}

// explainNodeLoad explains why a node directory did not load.
func explainNodeLoad(dir string, err error) error {
	if file, detail, ok := earlierRelease(err); ok {
		return explainf(err, "node: %s was made by another release: its %s: %s", dir, file, detail)
	}
	var pe *fs.PathError
	if errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe) {
		if _, serr := os.Stat(dir); serr != nil {
			return explainf(err, "node: directory %s does not exist: give --dir the node directory keygen (DIR/node1 … DIR/nodeN) or dkg wrote", dir)
		}
		if _, serr := os.Stat(filepath.Join(dir, "node1")); serr == nil {
			return explainf(err, "node: %s is a keygen directory, not a node directory: run each node on its own, --dir %s and so on, or all of them with palisade testnet --dir %s", dir, filepath.Join(dir, "node1"), dir)
		}
		return explainf(err, "node: %s has no %s, so it is not a node directory: give the directory keygen (DIR/node1 … DIR/nodeN) or dkg wrote for this node", dir, filepath.Base(pe.Path))
	}
	if errors.Is(err, transport.ErrInsecureKeyFile) {
		return explainf(err, "node: %s: run chmod 600 on the node's share.key and identity.key", reason(err))
	}
	return explainf(err, "node: load %s: %s", dir, reason(err))
}

// explainNodeStart explains why node index did not start from dir.
func explainNodeStart(index int, dir string, err error) error {
	if errors.Is(err, bolterrors.ErrTimeout) {
		return explainf(err, "node %d: its vote store %s/votes.db is locked by another process: node %d already runs from %s (palisade node or testnet); stop it first, one directory runs one node", index, dir, index, dir)
	}
	if file, detail, ok := earlierRelease(err); ok {
		return explainf(err, "node %d: %s was made by another release: its %s: %s", index, dir, file, detail)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return explainf(err, "node %d: its listen address is in use (%s): is node %d already running, or another program on its port?", index, reason(err), index)
	}
	return explainf(err, "node %d: start: %s", index, reason(err))
}

// faultTolerance says how many faulty nodes n nodes tolerate, how many
// signatures a token takes, and, when n is not 3f+1, that the nodes
// beyond 3f+1 add no tolerance and which n would.
func faultTolerance(n int) string {
	f, t := crypto.FaultThreshold(n)
	faults := "no faulty node"
	if f > 0 {
		faults = plural(f, "faulty node", "faulty nodes")
	}
	s := fmt.Sprintf("%s tolerate %s (f = %d, %s needed)", plural(n, "node", "nodes"), faults, f, plural(t, "signature", "signatures"))
	if n == 1 {
		s = fmt.Sprintf("1 node tolerates no faulty node (f = 0, %s needed)", plural(t, "signature", "signatures"))
	}
	if base := 3*f + 1; n != base {
		extra := n - base
		what := fmt.Sprintf("the extra %s beyond %d add", plural(extra, "node", "nodes"), base)
		if extra == 1 {
			what = fmt.Sprintf("the node beyond %d adds", base)
		}
		s += fmt.Sprintf("; %s no fault tolerance, only signatures to collect: %d nodes tolerate %s", what, 3*(f+1)+1, plural(f+1, "faulty node", "faulty nodes"))
	}
	return s
}

// plural counts k things: "1 node", "2 nodes".
func plural(k int, one, many string) string {
	if k == 1 {
		return fmt.Sprintf("%d %s", k, one)
	}
	return fmt.Sprintf("%d %s", k, many)
}

// explainFlagValues makes the flags of fs that hold durations or numbers
// say what a valid value looks like when given a bad one (the flag
// package says "parse error").
func explainFlagValues(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch g.Get().(type) {
		case time.Duration:
			f.Value = durationValue{g}
		case int, uint64:
			f.Value = numberValue{g}
		}
	})
}

// durationValue is a duration flag whose errors show valid durations.
type durationValue struct{ flag.Getter }

func (v durationValue) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("a duration needs a unit: %ss, %sms or %sm", s, s, s)
		}
		return errors.New("not a duration: write it like 30s, 1m30s or 500ms")
	}
	return v.Getter.Set(s)
}

// numberValue is a number flag whose errors say a number is wanted.
type numberValue struct{ flag.Getter }

func (v numberValue) Set(s string) error {
	if err := v.Getter.Set(s); err != nil {
		// The flag package's errors are "parse error" and "value out of
		// range"; the second says enough.
		if strings.Contains(err.Error(), "range") {
			return err
		}
		return errors.New("not a whole number")
	}
	return nil
}
