package node

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/palisade-dev/palisade/internal/version"
	"github.com/palisade-dev/palisade/protocol"
)

// Metric names a node exports on its own Prometheus registry (see
// Node.MetricsRegistry). Each node has its own registry, so many nodes in
// one process (a testnet) each report their own counts.
const (
	MetricVotes        = "palisade_votes_total"
	MetricCommits      = "palisade_commits_total"
	MetricRenewals     = "palisade_renewals_total"
	MetricReleases     = "palisade_releases_total"
	MetricAuditEntries = "palisade_audit_entries_total"
	MetricBusy         = "palisade_busy_total"
	MetricQueued       = "palisade_queued_total"
	// MetricWaitVotes counts the votes this node gave in its answer to a
	// waiter's long poll (the waiter the free resource was reserved for),
	// instead of in an Acquire reply; MetricVotes counts them too.
	MetricWaitVotes = "palisade_wait_votes_total"
	MetricWaiters   = "palisade_waiters"
	// MetricReservationsExpired counts reservations of a free resource
	// for its first waiter that ran out unused (push handoff): the waiter
	// neither acquired nor left in time. Each marks the waiter's identity
	// lapsed in that queue.
	MetricReservationsExpired = "palisade_reservations_expired_total"
	MetricRefusals            = "palisade_refusals_total"
	MetricLeasesLive          = "palisade_leases_live"
	MetricStoreCommit         = "palisade_store_commit_seconds"
	MetricStoreBatch          = "palisade_store_commit_batch_size"
	MetricSignatureChecks     = "palisade_signature_checks_total"
	MetricBadTokens           = "palisade_bad_tokens_total"
	MetricThrottledTokens     = "palisade_throttled_tokens_total"
	MetricMembers             = "palisade_members"
	MetricThreshold           = "palisade_threshold"
	MetricMembersReachable    = "palisade_members_reachable"
	MetricMemberUp            = "palisade_member_up"
	MetricMemberRTT           = "palisade_member_rtt_seconds"
	MetricClients             = "palisade_clients"
	MetricReloads             = "palisade_config_reloads_total"
	MetricBuildInfo           = "palisade_build_info"
	// MetricEvidence counts, by accused member, the pieces of evidence of
	// equivocation this node verified and recorded since it started;
	// MetricEvidenceRecorded is, by accused member, what it holds on
	// record (its evidence file included). The member label is a member
	// index (1..N), or "other" for a file entry naming none: at most N+1
	// series each.
	MetricEvidence         = "palisade_evidence_total"
	MetricEvidenceRecorded = "palisade_evidence_recorded"
	// MetricForks counts the forks (two valid tokens for one resource
	// and epoch with different holders, issue 21) this node verified and
	// recorded since it started, by where it saw them (ForkSource*
	// constants: commit, relay, proof, gossip): a fixed set of series,
	// as the members who signed twice are not known to the node.
	// MetricForksRecorded is what it holds on record (its fork file
	// included), capped by Limits.Forks.
	MetricForks         = "palisade_forks_total"
	MetricForksRecorded = "palisade_forks_recorded"
	// MetricTurnedAway counts requests the node turned away before any
	// rule ran, by cause (TurnedAway* constants).
	MetricTurnedAway = "palisade_requests_turned_away_total"
	// MetricReady is 1 while Ready holds (what /readyz answers), else 0.
	MetricReady = "palisade_ready"
)

// Causes of MetricTurnedAway: a fixed set, so the metric's cardinality is
// bounded. (Refusals by the voting rules are MetricRefusals, by request
// and refusal code.)
const (
	// TurnedAwayStreams: the peer had Config.MaxStreamsPerPeer streams
	// open; the new one was reset.
	TurnedAwayStreams = "too_many_streams"
	// TurnedAwayInFlight: the peer had its in-flight requests (or long
	// polls) at their bound; the request was reset unanswered.
	TurnedAwayInFlight = "too_many_in_flight"
	// TurnedAwayBadFrame: the request frame was too large or malformed.
	TurnedAwayBadFrame = "bad_frame"
	// TurnedAwayUnauthorised: the ACL refused the peer for the resource
	// (Status, Locks, Wait and the per-resource requests).
	TurnedAwayUnauthorised = "unauthorised"
)

// turnedAwayCauses are the label values of MetricTurnedAway.
var turnedAwayCauses = []string{TurnedAwayStreams, TurnedAwayInFlight, TurnedAwayBadFrame, TurnedAwayUnauthorised}

// metrics are a node's Prometheus collectors, on a registry of its own.
type metrics struct {
	reg *prometheus.Registry

	votes, commits, renewals, releases prometheus.Counter
	audit                              *prometheus.CounterVec // by kind
	busy, queued, waitVotes            prometheus.Counter
	reservationsExpired                prometheus.Counter
	refusals                           *prometheus.CounterVec // by request and code
	commitSeconds, commitBatch         prometheus.Histogram
	memberUp, memberRTT                *prometheus.GaugeVec   // by member index
	reloads                            *prometheus.CounterVec // by result
	evidence, turnedAway               *prometheus.CounterVec // by member; by cause
	evidenceRecorded                   *prometheus.GaugeVec   // by member
	forks                              *prometheus.CounterVec // by source
	forksRecorded                      prometheus.Gauge
	members                            int
}

// newMetrics builds the node's collectors and registers them, with the
// gauges and counters that are read from the node when scraped.
func (n *Node) newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg:                 reg,
		votes:               prometheus.NewCounter(prometheus.CounterOpts{Name: MetricVotes, Help: "Votes this node cast: each one written and fsynced before its partial signature left (re-sent votes are not counted again)."}),
		commits:             prometheus.NewCounter(prometheus.CounterOpts{Name: MetricCommits, Help: "Certified tokens that started a lease on this node (Commit from the token's holder)."}),
		renewals:            prometheus.NewCounter(prometheus.CounterOpts{Name: MetricRenewals, Help: "Leases renewed by their holder."}),
		releases:            prometheus.NewCounter(prometheus.CounterOpts{Name: MetricReleases, Help: "Leases released by their holder."}),
		audit:               prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuditEntries, Help: "Entries appended to the node's audit log, by kind (vote, commit, renew, release, abandon, expire, catch-up, seen-votes, revoke)."}, []string{"kind"}),
		busy:                prometheus.NewCounter(prometheus.CounterOpts{Name: MetricBusy, Help: "Acquire requests answered Busy: another holder's lease or vote was live."}),
		waitVotes:           prometheus.NewCounter(prometheus.CounterOpts{Name: MetricWaitVotes, Help: "Votes this node gave in its answer to a waiter's long poll (the waiter the free resource was reserved for) rather than to an Acquire; counted in " + MetricVotes + " too."}),
		queued:              prometheus.NewCounter(prometheus.CounterOpts{Name: MetricQueued, Help: "Acquire requests answered Queued: the resource was free but held for an earlier waiter (push handoff)."}),
		reservationsExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricReservationsExpired, Help: "Reservations of a free resource for its first waiter that ran out unused (push handoff); each puts the waiter's identity behind the others of its cohort until the next lease is committed."}),
		refusals:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRefusals, Help: "Requests refused, by request (acquire, commit, renew, release, abandon) and refusal code."}, []string{"request", "code"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricStoreCommit,
			Help:    "Duration of one write transaction of the vote store, fsync included (several votes share one under load: group commit).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs .. 1.6 s
		}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricStoreBatch,
			Help:    "Saves carried by one write transaction of the vote store (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9), // 1 .. 256
		}),
		memberUp:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricMemberUp, Help: "1 if the member answered this node's last probe (a Status request over libp2p) in time, else 0; the node itself is always 1."}, []string{"member"}),
		memberRTT: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricMemberRTT, Help: "Round-trip time of the member's last answered probe."}, []string{"member"}),
		reloads:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricReloads, Help: "Reloads of cluster.json (SIGHUP), by result: applied or refused."}, []string{"result"}),
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEvidence,
			Help: "Pieces of evidence of equivocation (two conflicting signed votes) this node verified and recorded since it started, by accused member index."}, []string{"member"}),
		forks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricForks,
			Help: "Forks (two valid tokens for one resource and epoch with different holders) this node verified and recorded since it started, by where it saw them: commit, relay, proof or gossip."}, []string{"source"}),
		forksRecorded: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricForksRecorded,
			Help: "Forks this node holds on record (its fork file included); capped (Limits.Forks)."}),
		evidenceRecorded: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricEvidenceRecorded,
			Help: "Pieces of evidence of equivocation this node holds on record (its evidence file included), by accused member index; capped per member (Limits.EvidencePerMember)."}, []string{"member"}),
		turnedAway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricTurnedAway,
			Help: "Requests turned away before any voting rule ran, by cause: too_many_streams, too_many_in_flight, bad_frame, unauthorised."}, []string{"cause"}),
		members: n.cfg.Cluster.File.N,
	}
	stats := func(f func(LimitStats) uint64) func() float64 {
		return func() float64 { return float64(f(n.LimitStats())) }
	}
	c := n.cfg.Cluster
	reg.MustRegister(
		m.votes, m.commits, m.renewals, m.releases, m.audit, m.busy, m.queued, m.waitVotes, m.reservationsExpired, m.refusals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricWaiters, Help: "Clients queued waiting for a resource (Wait long polls, push handoff)."},
			func() float64 { return float64(n.waiterTotal.Load()) }),
		m.commitSeconds, m.commitBatch, m.memberUp, m.memberRTT, m.reloads,
		m.evidence, m.evidenceRecorded, m.turnedAway, m.forks, m.forksRecorded,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricReady, Help: "1 while the node is ready (what /readyz answers: store readable, member probes running, at least t members reachable), else 0."},
			func() float64 {
				ctx, cancel := context.WithTimeout(n.ctx, readyTimeout)
				defer cancel()
				if n.Ready(ctx) != nil {
					return 0
				}
				return 1
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricLeasesLive, Help: "Committed leases not yet expired by this node's clock."},
			func() float64 { return float64(n.ops.leases.live(n.clock.Now())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricSignatureChecks, Help: "Token signatures this node checked with pairings (tokens it had verified before are answered from a cache and not counted)."},
			func() float64 { return float64(n.verifier.SignatureChecks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricBadTokens, Help: "Token signature checks that failed."}, stats(func(s LimitStats) uint64 { return s.BadTokens })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricThrottledTokens, Help: "Tokens refused unchecked: their sender's budget of failed signature checks was spent."}, stats(func(s LimitStats) uint64 { return s.ThrottledTokens })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricMembers, Help: "Members of the cluster (N)."}, func() float64 { return float64(c.File.N) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricThreshold, Help: "Votes a token needs (t = 2f+1); the node is ready while at least this many members are reachable."}, func() float64 { return float64(c.File.T) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricMembersReachable, Help: "Members that answered their last probe in time, this node included."},
			func() float64 { return float64(n.Reachability().Reachable) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricClients, Help: "Client identities in the node's current client list."},
			func() float64 { return float64(len(n.Clients())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricBuildInfo, Help: "Always 1; the version label is the binary's version.", ConstLabels: prometheus.Labels{"version": version.String()}},
			func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.refusals.WithLabelValues("acquire", protocol.CodeUnauthorised.String()) // present before the first refusal
	// Every bounded series exists from the start, at 0, so alert rules
	// see an increase from the first event on.
	for i := 1; i <= m.members; i++ {
		m.evidence.WithLabelValues(strconv.Itoa(i))
		m.evidenceRecorded.WithLabelValues(strconv.Itoa(i))
	}
	for _, c := range turnedAwayCauses {
		m.turnedAway.WithLabelValues(c)
	}
	for _, s := range forkSources {
		m.forks.WithLabelValues(s)
	}
	return m
}

// memberLabel is the member label of an evidence metric: the accused
// member's index, or "other" for an index outside 1..N.
func (m *metrics) memberLabel(index int) string {
	if index < 1 || index > m.members {
		return "other"
	}
	return strconv.Itoa(index)
}

// evidenceKept counts a piece of evidence against member: new marks one
// verified and recorded now (not read from the evidence file).
func (m *metrics) evidenceKept(member int, isNew bool) {
	l := m.memberLabel(member)
	if isNew {
		m.evidence.WithLabelValues(l).Inc()
	}
	m.evidenceRecorded.WithLabelValues(l).Inc()
}

// forkKept counts a fork recorded: isNew marks one verified and recorded
// now, from source (not read from the fork file).
func (m *metrics) forkKept(source string, isNew bool) {
	if isNew {
		m.forks.WithLabelValues(source).Inc()
	}
	m.forksRecorded.Inc()
}

// observeCommit is the vote store's commit observer (BoltStore).
func (m *metrics) observeCommit(d time.Duration, batch int) {
	m.commitSeconds.Observe(d.Seconds())
	m.commitBatch.Observe(float64(batch))
}

// saved counts the decisions in audit entries the store made durable.
func (m *metrics) saved(audit []AuditEntry) {
	for _, e := range audit {
		m.audit.WithLabelValues(string(e.Kind)).Inc()
		switch e.Kind {
		case AuditVote:
			m.votes.Inc()
		case AuditCommit:
			m.commits.Inc()
		case AuditRenew:
			m.renewals.Inc()
		case AuditRelease:
			m.releases.Inc()
		}
	}
}

// MetricsRegistry returns the node's own Prometheus registry: what the
// admin endpoint serves at /metrics (see the Metric* names).
func (n *Node) MetricsRegistry() *prometheus.Registry { return n.ops.metrics.reg }

// leaseBook tracks the expiry of each resource's committed lease as the
// node saves records, so the live-lease gauge needs no store scan. A lease
// that lapses is only forgotten when counted: leases expire lazily.
//
// Its size stays within twice the live leases (plus leaseBookMin): when it
// reaches its pruning mark it forgets lapsed leases first.
type leaseBook struct {
	mu      sync.Mutex
	expires map[string]time.Time
	pruneAt int
}

// leaseBookMin is the smallest pruning mark of a leaseBook.
const leaseBookMin = 1024

// note records rec's lease after a save at now.
func (b *leaseBook) note(rec Record, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rec.Lease.Holder.IsZero() || !rec.Lease.Committed {
		delete(b.expires, rec.Resource)
		return
	}
	if b.expires == nil {
		b.expires = map[string]time.Time{}
	}
	b.expires[rec.Resource] = rec.Lease.Expires
	if len(b.expires) >= max(b.pruneAt, leaseBookMin) {
		b.prune(now)
		b.pruneAt = 2 * len(b.expires)
	}
}

// live counts the leases unexpired at now and forgets the others.
func (b *leaseBook) live(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(now)
	return len(b.expires)
}

// prune forgets the leases lapsed at now; the caller holds b.mu.
func (b *leaseBook) prune(now time.Time) {
	for r, exp := range b.expires {
		if !now.Before(exp) {
			delete(b.expires, r)
		}
	}
}

// meteredStore is the node's VoteStore seen through its metrics: every
// successful Save counts the decisions its audit entries record and
// notes the record's lease.
type meteredStore struct {
	VoteStore
	ops *ops
}

// Save implements VoteStore.
func (s meteredStore) Save(ctx context.Context, rec Record, audit ...AuditEntry) error {
	if err := s.VoteStore.Save(ctx, rec, audit...); err != nil {
		return err
	}
	s.ops.metrics.saved(audit)
	s.ops.leases.note(rec, s.ops.clock.Now())
	return nil
}

// turnedAway counts a request turned away for cause (one of
// turnedAwayCauses); the ACL's refusals also count in LimitStats.
func (n *Node) turnedAway(cause string) {
	if cause == TurnedAwayUnauthorised {
		n.limits.unauth.Add(1)
	}
	n.ops.metrics.turnedAway.WithLabelValues(cause).Inc()
}
