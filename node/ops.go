package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/protocol"
)

// What an operator sees of a node: metrics (metrics.go), member probes and
// readiness (probe.go), the admin HTTP endpoint (admin.go), the client list
// that a reload swaps (clients.go), and one log line per decision (here).
// None of it takes part in a vote: S1-S6 do not depend on it.

// ops is the node's operator-facing state.
type ops struct {
	clock   clockwork.Clock
	metrics *metrics
	leases  leaseBook

	// clients is the current client list; clientsMu orders swaps.
	clients   atomic.Pointer[clientTable]
	clientsMu sync.Mutex

	probe prober

	// raw is the node's store without the metrics around it, for the
	// optional capabilities it may have (recordScanner, auditSequencer).
	raw VoteStore
}

// commitObserver is a VoteStore that reports its write transactions
// (BoltStore does).
type commitObserver interface {
	SetCommitObserver(fn func(d time.Duration, batch int))
}

// initOps sets up the operator-facing state; New calls it before the
// handlers are registered. It puts the metrics between the node and its
// store.
func (n *Node) initOps() {
	n.ops.clock = n.clock
	n.ops.clients.Store(newClientTable(n.cfg.Cluster.File.Clients))
	n.ops.probe.init(n.cfg.Cluster, n.host.ID())
	n.ops.raw = n.store
	n.ops.metrics = n.newMetrics()
	if o, ok := n.store.(commitObserver); ok {
		o.SetCommitObserver(n.ops.metrics.observeCommit)
	}
	n.store = meteredStore{VoteStore: n.store, ops: &n.ops}
}

// observed wraps the handler of a per-resource request so each decision is
// counted and logged: Acquire's vote, busy or refusal, and the outcome of
// Commit, Renew, Release and Abandon, with the resource, epoch and the
// client's name from the cluster file. Status, Locks and Forensics, which
// decide nothing, are passed through.
func (n *Node) observed(proto string, fn handlerFunc) handlerFunc {
	if proto == protocol.ProtoStatus || proto == protocol.ProtoLocks || proto == protocol.ProtoForensics {
		return fn
	}
	return func(ctx context.Context, from peer.ID, b []byte) ([]byte, error) {
		reply, err := fn(ctx, from, b)
		if err == nil {
			n.note(proto, from, b, reply)
		}
		return reply, err
	}
}

// requestNames are the request label values of the refusal metric.
var requestNames = map[string]string{
	protocol.ProtoAcquire: "acquire",
	protocol.ProtoCommit:  "commit",
	protocol.ProtoRenew:   "renew",
	protocol.ProtoRelease: "release",
	protocol.ProtoAbandon: "abandon",
}

// zapInfo is zapcore.InfoLevel: the level of the decision log lines.
const zapInfo = 0

// note counts and logs one answered request. The reply is decoded again
// here, and the request too when info lines are logged, which costs
// microseconds next to the fsync and pairings of the request itself.
func (n *Node) note(proto string, from peer.ID, req, reply []byte) {
	var who, resource string
	var epoch uint64
	if log.Level() <= zapInfo {
		who = n.peerName(from)
		resource, epoch = requestSubject(proto, req)
	}
	if proto == protocol.ProtoAcquire {
		r, err := protocol.UnmarshalAcquireReply(reply)
		if err != nil {
			return
		}
		switch r.Kind {
		case protocol.KindVote:
			log.Infow("vote", "resource", resource, "epoch", epoch, "client", who)
		case protocol.KindQueued:
			n.ops.metrics.queued.Inc()
			log.Infow("queued", "resource", resource, "epoch", epoch, "client", who, "first", n.holderName(r.Holder), "left", r.Left.String())
		case protocol.KindBusy:
			n.ops.metrics.busy.Inc()
			log.Infow("busy", "resource", resource, "epoch", epoch, "client", who,
				"holder", n.holderName(r.Holder), "lease_epoch", r.LeaseEpoch, "left", r.Left.String(), "pending", r.Pending)
		default:
			n.ops.metrics.refusals.WithLabelValues("acquire", r.Code.String()).Inc()
			log.Infow("refuse", "resource", resource, "epoch", epoch, "client", who, "code", r.Code.String(), "last_epoch", r.LastEpoch, "reason", r.Message)
		}
		return
	}
	a, err := protocol.UnmarshalAck(reply)
	if err != nil {
		return
	}
	name := requestNames[proto]
	if a.Code != protocol.CodeOK {
		n.ops.metrics.refusals.WithLabelValues(name, a.Code.String()).Inc()
		log.Infow("refuse "+name, "resource", resource, "epoch", epoch, "client", who, "code", a.Code.String(), "last_epoch", a.LastEpoch, "reason", a.Message)
		return
	}
	if proto == protocol.ProtoRenew {
		log.Debugw(name, "resource", resource, "epoch", epoch, "client", who, "left", a.Left.String())
		return
	}
	log.Infow(name, "resource", resource, "epoch", epoch, "client", who, "left", a.Left.String())
}

// holderName names a lock session for logs by its client's name and the
// hash of its session, as replies name it (protocol.HolderRef).
func (n *Node) holderName(r protocol.HolderRef) string {
	if c, ok := n.client(r.ID); ok && c.Name != "" {
		return c.Name + "/" + r.Session.String()
	}
	return r.String()
}

// requestSubject decodes the resource and epoch a request is about ("" and
// 0 if it does not decode).
func requestSubject(proto string, b []byte) (resource string, epoch uint64) {
	switch proto {
	case protocol.ProtoAcquire:
		if r, err := protocol.UnmarshalAcquireRequest(b); err == nil {
			return r.Resource, r.Epoch
		}
	case protocol.ProtoCommit:
		if r, err := protocol.UnmarshalCommitRequest(b); err == nil {
			return r.Token.Resource, r.Token.Epoch
		}
	case protocol.ProtoRenew:
		if r, err := protocol.UnmarshalRenewRequest(b); err == nil {
			return r.Resource, r.Epoch
		}
	case protocol.ProtoRelease:
		if r, err := protocol.UnmarshalReleaseRequest(b); err == nil {
			return r.Token.Resource, r.Token.Epoch
		}
	case protocol.ProtoAbandon:
		if r, err := protocol.UnmarshalAbandonRequest(b); err == nil {
			return r.Resource, r.Epoch
		}
	}
	return "", 0
}
