// Package dkg runs Palisade's distributed key generation and resharing
// ceremonies over libp2p. The cryptography (kyber's Pedersen DKG over
// BLS12-381 G2) lives in package crypto/dkg; this package moves its
// messages between members, enforces phase timeouts, reports who is
// missing, keeps crash state and writes each member's node directory.
//
// The ceremony is pull-based: each member serves, on ProtoFetch, what it
// has for each phase (its signed ceremony key and the keys it relays, the
// deal for the asking member, its responses and justifications, and finally
// the hash of cluster.json), and polls every other member until it has what
// it needs or the phase times out. Senders therefore never need to know
// whether a receiver is up; a member that starts late or restarts simply
// asks again. Only listed members can connect (connection gater), the
// channel is authenticated by Noise, and nothing on the protocol accepts
// commands.
//
// Phases: keys (each member's fresh per-ceremony DKG key, signed by its
// libp2p identity), deals (point to point, encrypted by kyber), responses
// (broadcast by relay), complaints (about deals a member never got),
// justifications (broadcast by relay), hash (every member compares the
// SHA-256 of the cluster.json it built).
//
// Layout: state.go holds the rules as pure transitions (when a phase
// polls, waits, completes or times out; who is present enough; which
// complaints are owed; whether the hashes agree; what to do with crash
// state), table-tested on a fake clock. dkg.go is the driver: one method
// per phase, polling and waiting on Config.Clock and persisting. relay.go
// keeps and checks relayed items; serve.go is the fetch protocol's two
// ends; wire.go its encodings. Faulty dealers for tests plug in through
// Decorator (package dkgtest).
package dkg

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	lproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/palisade-dev/palisade/crypto"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// Errors callers can branch on.
var (
	// ErrBadMemberList reports a member list that is malformed or
	// inconsistent.
	ErrBadMemberList = errors.New("dkg: bad member list")
	// ErrTooFewMembers reports a ceremony that cannot complete because too
	// many members stayed silent or misbehaved; the message names them,
	// and the error is a *QuorumError that tells the two apart.
	ErrTooFewMembers = errors.New("dkg: too few members took part")
	// ErrDiverged reports members that ended with different views of the
	// ceremony (another member list, key set or cluster.json).
	ErrDiverged = errors.New("dkg: members disagree")
	// ErrState reports a crash-state file that belongs to another ceremony
	// or was written by a release of another state version or ciphersuite,
	// or an output directory that already holds a key.
	ErrState = errors.New("dkg: ceremony state")
)

// StateFileName is the crash-state file kept (mode 0600) in the output
// directory while a ceremony runs. It holds the member's ceremony key and
// dealer seed, so a restarted member deals exactly the same shares again,
// with its version and ciphersuite, so that no other release's key
// resumes.
const StateFileName = "dkg-state.json"

// Config configures one member's side of a ceremony.
type Config struct {
	// Members is the new member list (identical at every member).
	Members *MemberList
	// Identity is this member's libp2p identity.
	Identity lcrypto.PrivKey
	// OutDir is the node directory to write (cluster.json, share.key,
	// identity.key, node.json), also where the crash state lives. A member
	// that leaves in a resharing writes nothing there but the state.
	OutDir string
	// Listen overrides the addresses this member listens on during the
	// ceremony (default: its ceremony or node addresses from the lists).
	Listen []string
	// NodeListen overrides the listen addresses written to node.json
	// (default: the member's addresses in the member list).
	NodeListen []string
	// Progress receives one line per phase event (default: discarded).
	Progress io.Writer
	// PhaseTimeout bounds each phase (default 60 s).
	PhaseTimeout time.Duration
	// PollInterval is how often a member asks its peers again (default
	// 200 ms).
	PollInterval time.Duration
	// Restart discards a crash state of this ceremony and starts over
	// with a new ceremony key (the other members must restart too).
	Restart bool

	// OldCluster is, for a resharing, the current cluster file (trusted).
	OldCluster *protocol.Cluster
	// OldShare is, for a resharing, this member's current share (old
	// members only).
	OldShare *crypto.Share

	// Rand supplies the ceremony key and dealer seed (default
	// crypto/rand).
	Rand io.Reader
	// Clock times the phases and the polling (default the real clock).
	Clock clockwork.Clock
}

// Decorator makes one member a faulty dealer, for tests: testnet's
// DKGOptions.Corrupt and Withhold and this package's Byzantine tests
// (package dkgtest has the two behaviours). A production ceremony (Run)
// has none.
type Decorator interface {
	// Deal returns what this member serves as its deal to the new member
	// with share index to, given its honest deal; nil serves none. victim
	// is the member a faulty dealer cheats: the first other new member.
	Deal(cd *cdkg.DKG, to, victim int, deal []byte) ([]byte, error)
	// Justify reports whether this member publishes the justification that
	// a complaint of the new member with share index from calls for.
	Justify(from, victim int) bool
}

// testHooks let this package's tests play a Byzantine member or an
// adversarial network (see runWith); always nil outside tests.
type testHooks struct {
	// answer rewrites this member's reply to a fetch from peer to.
	answer func(r *runner, to peer.ID, kind uint8, reply []byte) []byte
	// step wraps each phase step of this member (message scheduling).
	step func(phase string, p peer.ID, next func() bool) bool
}

// Result is what a member's ceremony produced.
type Result struct {
	// Cluster is the new cluster file; ClusterHash the SHA-256 of its
	// canonical bytes (identical at every member).
	Cluster     protocol.ClusterFile
	ClusterHash [32]byte
	// Index is this member's share index (0 for a member that left).
	Index int
	// Silent lists participants that never published a ceremony key;
	// Excluded lists dealers whose deals were not qualified (bad, missing
	// or unjustified), as "index peerID" strings.
	Silent, Excluded []string
	// Diverged lists members that reported another cluster.json hash
	// (faulty or Byzantine; at least t members agreed with this one).
	Diverged []string
	// TimedOut names the phases that ended at their deadline here with
	// members still missing, and whom.
	TimedOut []string
	// Resumed reports that the ceremony resumed from crash state.
	Resumed bool
}

// participant is one member of the ceremony (old, new or both).
type participant struct {
	id     peer.ID
	oldIdx int // 1-based, 0 if not an old member
	newIdx int // 1-based, 0 if not a new member
	addrs  []string
}

func (p *participant) String() string {
	switch {
	case p.newIdx > 0:
		return fmt.Sprintf("node%d (%s)", p.newIdx, p.id)
	default:
		return fmt.Sprintf("old node%d (%s)", p.oldIdx, p.id)
	}
}

// slot is where a response, complaint or justification belongs: the
// dealer's deal and the member that responded or complained (0-based).
type slot struct{ dealer, member uint32 }

// maxJustPerSlot bounds the justifications kept per (dealer, complainer):
// an honest dealer signs one; a second signed one is evidence enough.
const maxJustPerSlot = 2

// runner is one member's ceremony.
type runner struct {
	cfg      Config
	self     peer.ID
	me       *participant
	parts    []*participant // every participant, old then new-only
	byID     map[peer.ID]*participant
	ceremony [32]byte
	h        host.Host
	out      io.Writer
	key      *cdkg.Key
	seed     [cdkg.SeedSize]byte

	mu         sync.Mutex
	keys       map[peer.ID]keyRecord
	keySet     [32]byte
	keySetDone bool
	deals      map[peer.ID][]byte // deals this member made, by recipient
	dealsDone  bool
	// responses and justifs hold only items that passed the checks of
	// cdkg.DKG.CheckResponse / CheckJustification (or that this member
	// made), by slot, at most maxPerSlot / maxJustPerSlot each: a forged
	// copy never takes a slot, so it cannot block the genuine one.
	responses map[slot][][]byte
	respDone  bool
	justifs   map[slot][][]byte
	justDone  bool
	// stored holds the SHA-256 of every item in responses and justifs, so
	// a copy of one is skipped before any decoding.
	stored map[[32]byte]bool
	// refused counts the forged items each peer relayed (reported once per
	// peer; within one reply, past maxRefused refused items the rest of
	// the reply is skipped).
	refused    map[peer.ID]int
	wrong      map[peer.ID]bool // answered from another ceremony or key set
	complaints [][]byte         // this member's complaints about missing deals
	complDone  bool
	hash       *[32]byte
	hashFetch  map[peer.ID]bool
	justFetch  map[peer.ID]bool

	// timedOut names the phases that ended at their deadline with members
	// still missing, and whom ("deals (missing node3 …)"): this member's
	// view of the ceremony rests on a timeout there (see DivergedError).
	timedOut []string

	dec   Decorator  // a faulty dealer (tests), or nil
	hooks *testHooks // tests only, or nil
}

// Run runs the ceremony for one member until it completes, fails or ctx
// ends. It prints progress to cfg.Progress.
func Run(ctx context.Context, cfg Config) (*Result, error) { return runWith(ctx, cfg, nil, nil) }

// RunDecorated is Run for a member that dec makes faulty (tests only).
func RunDecorated(ctx context.Context, cfg Config, dec Decorator) (*Result, error) {
	return runWith(ctx, cfg, dec, nil)
}

// runWith is Run with an optional faulty dealer and test hooks.
func runWith(ctx context.Context, cfg Config, dec Decorator, hooks *testHooks) (*Result, error) {
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	r.dec, r.hooks = dec, hooks
	resumed, err := r.loadState()
	if err != nil {
		return nil, err
	}
	gater := transport.NewGater()
	for _, p := range r.parts {
		gater.Allow(p.id)
	}
	listen := cfg.Listen
	if len(listen) == 0 {
		listen = r.me.addrs
	}
	h, err := transport.NewHost(cfg.Identity, listen, gater)
	if err != nil {
		return nil, fmt.Errorf("dkg: %w", err)
	}
	defer h.Close()
	r.h = h
	for _, p := range r.parts {
		if p.id != r.self {
			if err := transport.AddPeer(h, p.id, p.addrs); err != nil {
				return nil, fmt.Errorf("dkg: %w", err)
			}
		}
	}
	h.SetStreamHandler(lproto.ID(ProtoFetch), r.serve)
	defer h.RemoveStreamHandler(lproto.ID(ProtoFetch))
	res, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Resumed = resumed
	return res, nil
}

func newRunner(cfg Config) (*runner, error) {
	if cfg.Members == nil || cfg.Identity == nil || cfg.OutDir == "" {
		return nil, errors.New("dkg: member list, identity and output directory are required")
	}
	if err := cfg.Members.check(); err != nil {
		return nil, err
	}
	if cfg.PhaseTimeout <= 0 {
		cfg.PhaseTimeout = 60 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Rand == nil {
		cfg.Rand = crand.Reader
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	self, err := peer.IDFromPrivateKey(cfg.Identity)
	if err != nil {
		return nil, fmt.Errorf("dkg: identity: %w", err)
	}
	r := &runner{cfg: cfg, self: self, out: cfg.Progress, byID: map[peer.ID]*participant{},
		keys: map[peer.ID]keyRecord{}, deals: map[peer.ID][]byte{}, responses: map[slot][][]byte{},
		justifs: map[slot][][]byte{}, stored: map[[32]byte]bool{}, refused: map[peer.ID]int{}, wrong: map[peer.ID]bool{}, hashFetch: map[peer.ID]bool{}, justFetch: map[peer.ID]bool{}}
	add := func(id string, oldIdx, newIdx int, addrs []string) error {
		pid, err := peer.Decode(id)
		if err != nil {
			return fmt.Errorf("%w: peer ID %q: %v", ErrBadMemberList, id, err)
		}
		if a, ok := cfg.Members.CeremonyAddrs[id]; ok {
			addrs = a
		}
		if p := r.byID[pid]; p != nil {
			p.newIdx = newIdx
			if _, ok := cfg.Members.CeremonyAddrs[id]; !ok {
				p.addrs = addrs
			}
			return nil
		}
		p := &participant{id: pid, oldIdx: oldIdx, newIdx: newIdx, addrs: addrs}
		r.parts = append(r.parts, p)
		r.byID[pid] = p
		return nil
	}
	h := sha256.New()
	// The ciphersuite keeps members of releases on different curves in
	// different ceremonies: they refuse each other's requests as another
	// ceremony's instead of misreading each other's points.
	h.Write([]byte("palisade/dkg/ceremony/v2\x00" + crypto.Ciphersuite + "\x00"))
	h.Write(cfg.Members.canonical())
	if oc := cfg.OldCluster; oc != nil {
		if oc.File.Name != cfg.Members.Name {
			return nil, fmt.Errorf("%w: resharing keeps the cluster name %q, member list says %q", ErrBadMemberList, oc.File.Name, cfg.Members.Name)
		}
		if _, err := protocol.NextEpochFloor(oc.File.EpochFloor); err != nil {
			return nil, fmt.Errorf("dkg: cannot reshare: %w", err)
		}
		oh, _, err := ClusterHash(oc.File)
		if err != nil {
			return nil, err
		}
		h.Write(oh[:])
		for _, n := range oc.File.Nodes {
			if err := add(n.PeerID, n.Index, 0, n.Addrs); err != nil {
				return nil, err
			}
		}
	}
	for i, m := range cfg.Members.Members {
		if err := add(m.PeerID, 0, i+1, m.Addrs); err != nil {
			return nil, err
		}
	}
	copy(r.ceremony[:], h.Sum(nil))
	r.me = r.byID[self]
	if r.me == nil {
		return nil, fmt.Errorf("%w: this identity (%s) is not a member", ErrBadMemberList, self)
	}
	if cfg.OldCluster != nil && r.me.oldIdx > 0 && cfg.OldShare == nil {
		return nil, fmt.Errorf("dkg: old member %s must give its old share", r.me)
	}
	if cfg.OldCluster == nil && cfg.OldShare != nil {
		return nil, errors.New("dkg: an old share needs the old cluster file")
	}
	return r, nil
}

// loadState resumes from crash state, or creates it (see resume).
func (r *runner) loadState() (resumed bool, err error) {
	if err := os.MkdirAll(r.cfg.OutDir, 0o700); err != nil {
		return false, fmt.Errorf("dkg: %w", err)
	}
	if _, err := os.Stat(filepath.Join(r.cfg.OutDir, node.ShareFileName)); err == nil {
		return false, fmt.Errorf("%w: %s already holds a share: the ceremony is complete (use an empty directory for a new one)", ErrState, r.cfg.OutDir)
	}
	for _, name := range []string{node.IdentityFileName, node.ClusterFileName, node.NodeFileName} {
		if _, err := os.Stat(filepath.Join(r.cfg.OutDir, name)); err == nil {
			return false, fmt.Errorf("%w: %s already holds %s: the ceremony writes a whole node directory, give it an empty one (keep the identity file elsewhere)", ErrState, r.cfg.OutDir, name)
		}
	}
	path := filepath.Join(r.cfg.OutDir, StateFileName)
	cid := hex.EncodeToString(r.ceremony[:])
	b, err := transport.ReadSecret(path)
	step, key, seed, err := resume(path, b, err, cid, r.cfg.Restart)
	if err != nil {
		return false, err
	}
	switch step {
	case stateResume:
		r.key, r.seed = key, seed
		r.printf("dkg: resuming ceremony %s from %s: same ceremony key, same deals; the other members need do nothing if they are still running", cid[:16], path)
		return true, nil
	case stateErase:
		if err := eraseFile(path); err != nil {
			return false, err
		}
		r.printf("dkg: restarting cleanly: discarded the state of the interrupted ceremony; every other member must restart too (with --restart if it also kept state)")
	}
	if r.key, err = cdkg.GenerateKey(r.cfg.Rand); err != nil {
		return false, err
	}
	if _, err := io.ReadFull(r.cfg.Rand, r.seed[:]); err != nil {
		return false, fmt.Errorf("dkg: seed: %w", err)
	}
	if err := transport.WriteSecret(path, marshalState(cid, r.key, r.seed)); err != nil {
		return false, err
	}
	r.printf("dkg: ceremony %s: %d participants, this member is %s", cid[:16], len(r.parts), r.me)
	return false, nil
}

// eraseFile overwrites a secret file with zeros, syncs and removes it.
func eraseFile(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dkg: erase %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("dkg: erase %s: %w", path, err)
	}
	_, werr := f.Write(make([]byte, st.Size()))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("dkg: erase %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("dkg: erase %s: %w", path, err)
	}
	return nil
}

// EraseShare overwrites and removes a node directory's share file, for an
// old member after a resharing: its old share still signs for the same
// group key, so it must not survive.
func EraseShare(dir string) error { return eraseFile(filepath.Join(dir, node.ShareFileName)) }

func (r *runner) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

// run drives the ceremony, one phase after the other; state.go decides
// when a phase ends and what follows from what it gathered.
func (r *runner) run(ctx context.Context) (*Result, error) {
	present, res, err := r.keysPhase(ctx)
	if err != nil {
		return nil, err
	}
	cd, err := r.newDKG()
	if err != nil {
		return nil, err
	}
	dealers, got, err := r.dealsPhase(ctx, cd, present)
	if err != nil {
		return nil, err
	}
	others := r.others(present)
	if err := r.phase(ctx, "responses", others, r.pullResponses(cd, kindResponses, "responses"), nil); err != nil {
		return nil, err
	}
	// Our own responses and the ones relayed before we finished may
	// concern our deal: process everything we hold once more (duplicates
	// are refused by kyber and ignored here).
	r.mu.Lock()
	all := r.allResponses()
	r.mu.Unlock()
	for _, it := range all {
		r.processResponse(cd, it)
	}
	if err := r.complaintsPhase(ctx, cd, dealers, got, others); err != nil {
		return nil, err
	}
	if err := r.phase(ctx, "justifications", others, r.pullJustifications(cd), nil); err != nil {
		return nil, err
	}
	r.qualify(cd, res)
	if r.me.newIdx == 0 {
		return r.leave(ctx, others, res)
	}
	return r.hashPhase(ctx, cd, present, res)
}

// keysPhase publishes this member's signed ceremony key, gathers the
// others' and fixes the key set: who is present and who is silent.
func (r *runner) keysPhase(ctx context.Context) ([]*participant, *Result, error) {
	own := keyRecord{Ceremony: r.ceremony, PeerID: r.self.String(), Key: r.key.Public()}
	sig, err := r.cfg.Identity.Sign(own.signedBytes())
	if err != nil {
		return nil, nil, fmt.Errorf("dkg: sign ceremony key: %w", err)
	}
	own.Sig = sig
	r.mu.Lock()
	r.keys[r.self] = own
	r.mu.Unlock()
	if err := r.phase(ctx, "keys", r.others(r.parts), r.fetchKeys, func(p *participant) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.keys[p.id]
		return ok
	}); err != nil {
		return nil, nil, err
	}
	present, silent := r.present()
	res := &Result{Index: r.me.newIdx}
	for _, p := range silent {
		res.Silent = append(res.Silent, p.String())
	}
	q := quorum{newN: len(r.cfg.Members.Members), newT: r.cfg.Members.T()}
	if oc := r.cfg.OldCluster; oc != nil {
		q.oldN, q.oldT = oc.Key.N(), oc.Key.Threshold()
	}
	if err := q.enough(present, silent); err != nil {
		return nil, nil, r.withRefused(err)
	}
	return present, res, nil
}

// dealsPhase makes and serves this member's deals and, for a member that
// receives a share, fetches each present dealer's deal to it. It returns
// the present dealers and those whose deal this member got.
func (r *runner) dealsPhase(ctx context.Context, cd *cdkg.DKG, present []*participant) ([]*participant, map[peer.ID]bool, error) {
	deals, ownResp, err := cd.Deals()
	if err != nil {
		return nil, nil, err
	}
	victim := r.victim()
	for i, d := range deals {
		if r.dec != nil {
			if d, err = r.dec.Deal(cd, i, victim, d); err != nil {
				return nil, nil, fmt.Errorf("dkg: decorated deal: %w", err)
			}
		}
		deals[i] = d
	}
	r.mu.Lock()
	for i, d := range deals {
		if d != nil {
			r.deals[r.newByIndex(i).id] = d
		}
	}
	if ownResp != nil {
		r.addOwnResponse(ownResp)
	}
	r.dealsDone = true
	r.mu.Unlock()
	var dealers []*participant
	for _, p := range present {
		if p.id != r.self && r.isDealer(p) {
			dealers = append(dealers, p)
		}
	}
	got := map[peer.ID]bool{}
	var gotMu sync.Mutex
	if r.me.newIdx > 0 {
		if err := r.phase(ctx, "deals", dealers, func(ctx context.Context, p *participant) bool {
			ok, gotIt := r.fetchDeal(ctx, cd, p)
			if gotIt {
				gotMu.Lock()
				got[p.id] = true
				gotMu.Unlock()
			}
			return ok
		}, nil); err != nil {
			return nil, nil, err
		}
	}
	r.mu.Lock()
	r.respDone = true
	r.mu.Unlock()
	return dealers, got, nil
}

// fetchDeal asks dealer p for its deal to this member and processes it.
// done reports that p needs no more asking; got that its deal arrived.
func (r *runner) fetchDeal(ctx context.Context, cd *cdkg.DKG, p *participant) (done, got bool) {
	st, payload := r.fetch(ctx, p, kindDeal)
	switch st {
	case statusNone:
		return true, false
	case statusOK:
	default:
		return false, false
	}
	if di, err := cdkg.DealDealer(payload); err != nil || int(di) != r.dealerIndex(p)-1 {
		// A dealer gives only its own deal; anything else is forged,
		// and counts as no usable deal (we complain about it).
		r.refuse(p, "deal", fmt.Errorf("deal of dealer %d served by dealer %d (%v)", di+1, r.dealerIndex(p), err), new(int))
		return true, false
	}
	resp, err := cd.ProcessDeal(payload)
	if err != nil {
		r.printf("dkg: deal from %s refused: %v", p, err)
		r.mu.Lock()
		r.refused[p.id]++
		r.mu.Unlock()
		return true, false
	}
	r.mu.Lock()
	r.addOwnResponse(resp)
	r.mu.Unlock()
	return true, true
}

// complaintsPhase complains about the deals this member never got (or
// could not open): the dealer must then justify, for everyone to see, or
// be excluded everywhere. It then gathers every member's complaints.
func (r *runner) complaintsPhase(ctx context.Context, cd *cdkg.DKG, dealers []*participant, got map[peer.ID]bool, others []*participant) error {
	if r.me.newIdx > 0 {
		byIndex := map[int]*participant{}
		idx := make([]int, len(dealers))
		gotIdx := map[int]bool{}
		for i, p := range dealers {
			idx[i] = r.dealerIndex(p)
			byIndex[idx[i]] = p
			gotIdx[idx[i]] = got[p.id]
		}
		r.mu.Lock()
		due := complaintsDue(idx, gotIdx, r.responses, r.maxPerSlot())
		r.mu.Unlock()
		for i, c := range due {
			p := byIndex[c.dealer]
			b, err := cd.ComplainMissing(c.dealer, c.sid)
			if err != nil {
				r.printf("dkg: cannot complain about %s: %v", p, err)
			} else {
				r.mu.Lock()
				r.complaints = append(r.complaints, b)
				r.addOwnResponse(b)
				r.mu.Unlock()
			}
			if i == len(due)-1 || due[i+1].dealer != c.dealer {
				r.printf("dkg: complained that %s sent no usable deal", p)
			}
		}
	}
	r.mu.Lock()
	r.complDone = true
	r.mu.Unlock()
	if err := r.phase(ctx, "complaints", others, r.pullResponses(cd, kindComplaints, "complaints"), nil); err != nil {
		return err
	}
	r.mu.Lock()
	r.justDone = true
	r.mu.Unlock()
	return nil
}

// qualify feeds everything held once more, ends the DKG's waiting and
// records the excluded dealers.
func (r *runner) qualify(cd *cdkg.DKG, res *Result) {
	r.mu.Lock()
	var held [][]byte
	for _, js := range r.justifs {
		held = append(held, js...)
	}
	// A justification may have given us a deal we never got: the other
	// members' responses to it can be processed now.
	all := r.allResponses()
	r.mu.Unlock()
	for _, it := range held {
		_ = cd.ProcessJustification(it) // checked or our own; duplicates are harmless
	}
	for _, it := range all {
		_, _ = cd.ProcessResponse(it) // duplicates are refused by kyber
	}
	cd.SetTimeout()
	qual := cd.QUAL()
	for _, p := range r.parts {
		if r.isDealer(p) && !slices.Contains(qual, r.dealerIndex(p)) {
			res.Excluded = append(res.Excluded, p.String())
		}
	}
	r.printf("dkg: qualified dealers %v; excluded: %s", qual, orNone(res.Excluded))
}

// leave ends a leaving old member's ceremony: nothing to receive. It
// keeps serving until every other present member (new ones, and leaving
// ones, which run the justifications phase too) has fetched what it
// needs.
func (r *runner) leave(ctx context.Context, others []*participant, res *Result) (*Result, error) {
	return r.finish(ctx, others, r.justFetch, res)
}

// finish keeps serving until every member of ps has fetched what it needs
// from this member (fetched, written by serve under r.mu), or one phase
// timeout passes, then erases the crash state.
func (r *runner) finish(ctx context.Context, ps []*participant, fetched map[peer.ID]bool, res *Result) (*Result, error) {
	r.linger(ctx, ps, func(p *participant) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fetched[p.id]
	})
	if err := eraseFile(filepath.Join(r.cfg.OutDir, StateFileName)); err != nil {
		return nil, err
	}
	return res, nil
}

// hashPhase builds this member's cluster.json, compares its hash with the
// other new members' and writes the node directory.
func (r *runner) hashPhase(ctx context.Context, cd *cdkg.DKG, present []*participant, res *Result) (*Result, error) {
	sh, gk, err := cd.Result()
	if err != nil {
		return nil, r.quorumError(fmt.Sprintf("%v; excluded dealers: %s; silent: %s", err, orNone(res.Excluded), orNone(res.Silent)), append(slices.Clone(res.Silent), res.Excluded...))
	}
	cf, err := r.clusterFile(gk)
	if err != nil {
		return nil, err
	}
	hash, _, err := ClusterHash(cf)
	if err != nil {
		return nil, err
	}
	res.Cluster, res.ClusterHash = cf, hash
	r.mu.Lock()
	r.hash = &hash
	r.mu.Unlock()

	newOthers := r.newOthers(present)
	hashes := map[peer.ID][32]byte{}
	var hmu sync.Mutex
	if err := r.phase(ctx, "hash", newOthers, func(ctx context.Context, p *participant) bool {
		st, payload := r.fetch(ctx, p, kindHash)
		if st != statusOK || len(payload) != 32 {
			return false
		}
		hmu.Lock()
		hashes[p.id] = [32]byte(payload)
		hmu.Unlock()
		return true
	}, nil); err != nil {
		return nil, err
	}
	agree, differ, err := agreement(hash, newOthers, hashes, r.cfg.Members.T())
	r.mu.Lock()
	res.TimedOut = slices.Clone(r.timedOut)
	r.mu.Unlock()
	if de := (*DivergedError)(nil); errors.As(err, &de) {
		de.TimedOut = res.TimedOut
	}
	if err != nil {
		return nil, r.withRefused(err)
	}
	if len(differ) > 0 {
		// t members (f+1 of them honest) agree: the others are faulty or
		// Byzantine and must not be trusted with this cluster.
		r.printf("dkg: WARNING: cluster.json hash differs at %s: treat them as faulty", strings.Join(differ, ", "))
		res.Diverged = differ
	}
	listen := r.cfg.NodeListen
	if len(listen) == 0 {
		listen = r.cfg.Members.Members[r.me.newIdx-1].Addrs
	}
	if err := node.WriteDir(r.cfg.OutDir, cf, sh, r.cfg.Identity, listen); err != nil {
		return nil, err
	}
	r.printf("dkg: done: share %d of %d, t=%d; cluster.json sha256 %x (confirmed by %d members)", sh.Index(), gk.N(), gk.Threshold(), hash, agree)
	// Keep serving until every present member fetched our hash.
	return r.finish(ctx, newOthers, r.hashFetch, res)
}

// clusterFile is the new cluster file for group key gk.
func (r *runner) clusterFile(gk *crypto.GroupKey) (protocol.ClusterFile, error) {
	cf := protocol.NewClusterFile(r.cfg.Members.Name, gk, r.cfg.Members.nodes(), r.cfg.Members.Clients)
	if r.cfg.Members.MaxEpochStep != 0 {
		cf.MaxEpochStep = r.cfg.Members.MaxEpochStep
	}
	if oc := r.cfg.OldCluster; oc != nil {
		// The new group's era starts where the old group's ends: the old
		// nodes never vote there (node.Rules), the new ones never below.
		var err error
		if cf.EpochFloor, err = protocol.NextEpochFloor(oc.File.EpochFloor); err != nil {
			return cf, fmt.Errorf("dkg: %w", err)
		}
	}
	if _, err := protocol.NewCluster(cf); err != nil {
		return cf, fmt.Errorf("dkg: new cluster file: %w", err)
	}
	return cf, nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// quorumError is the QuorumError of a missed quorum (msg) with the silent
// members named, and every member this one refused anything from or that
// answered from another ceremony during the ceremony.
func (r *runner) quorumError(msg string, silent []string) error {
	return r.withRefused(&QuorumError{Msg: msg, Silent: silent})
}

// withRefused adds to a QuorumError the members this one refused
// anything from and those that answered from another ceremony or key
// set; other errors pass unchanged.
func (r *runner) withRefused(err error) error {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.parts {
		if r.refused[p.id] > 0 {
			qe.Refused = append(qe.Refused, p.String())
		}
		if r.wrong[p.id] {
			qe.Other = append(qe.Other, p.String())
		}
	}
	return err
}

// present splits participants into those whose key we hold and the silent.
func (r *runner) present() (present, silent []*participant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := sha256.New()
	for _, p := range r.parts {
		if k, ok := r.keys[p.id]; ok {
			present = append(present, p)
			h.Write(k.Key[:])
		} else {
			silent = append(silent, p)
			h.Write(make([]byte, crypto.PublicKeySize))
		}
	}
	copy(r.keySet[:], h.Sum(nil))
	r.keySetDone = true
	return present, silent
}

func (r *runner) keyOf(p *participant) crypto.PublicKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.keys[p.id]; ok {
		return k.Key
	}
	return cdkg.PlaceholderKey(append(r.ceremony[:], p.id...))
}

func (r *runner) newDKG() (*cdkg.DKG, error) {
	c := cdkg.Config{Key: r.key, Seed: r.seed, Threshold: r.cfg.Members.T()}
	for _, m := range r.cfg.Members.Members {
		pid, _ := peer.Decode(m.PeerID)
		c.NewNodes = append(c.NewNodes, r.keyOf(r.byID[pid]))
	}
	if oc := r.cfg.OldCluster; oc != nil {
		c.OldGroup = oc.Key
		c.Share = r.cfg.OldShare
		for _, n := range oc.File.Nodes {
			pid, _ := peer.Decode(n.PeerID)
			c.OldNodes = append(c.OldNodes, r.keyOf(r.byID[pid]))
		}
	}
	d, err := cdkg.New(c)
	if err != nil {
		return nil, fmt.Errorf("dkg: %w", err)
	}
	return d, nil
}

// victim is the new index of the member a Decorator cheats: the first
// other new member.
func (r *runner) victim() int {
	for _, p := range r.parts {
		if p.newIdx > 0 && p.id != r.self {
			return p.newIdx
		}
	}
	return 0
}

func (r *runner) isDealer(p *participant) bool {
	if r.cfg.OldCluster != nil {
		return p.oldIdx > 0
	}
	return p.newIdx > 0
}

// dealerIndex is p's 1-based index among the dealers.
func (r *runner) dealerIndex(p *participant) int {
	if r.cfg.OldCluster != nil {
		return p.oldIdx
	}
	return p.newIdx
}

func (r *runner) newByIndex(i int) *participant {
	pid, _ := peer.Decode(r.cfg.Members.Members[i-1].PeerID)
	return r.byID[pid]
}

func (r *runner) others(ps []*participant) []*participant {
	var out []*participant
	for _, p := range ps {
		if p.id != r.self {
			out = append(out, p)
		}
	}
	return out
}

func (r *runner) newOthers(ps []*participant) []*participant {
	var out []*participant
	for _, p := range r.others(ps) {
		if p.newIdx > 0 {
			out = append(out, p)
		}
	}
	return out
}

// phase runs one phase (phaseState decides): it polls the members the
// state names with fetch, all at once, until fetch reports done for each,
// the phase times out, or ctx ends; it prints who is missing. haveFn, if
// not nil, also counts a peer as done (for relayed keys).
func (r *runner) phase(parent context.Context, name string, ps []*participant, fetch func(context.Context, *participant) bool, haveFn func(*participant) bool) error {
	st, step := startPhase(name, ps, r.cfg.Clock.Now(), r.cfg.PhaseTimeout, r.cfg.PollInterval)
	// The phase's deadline also cuts the fetches in flight.
	ctx, cancel := clockwork.WithDeadline(parent, r.cfg.Clock, st.deadline)
	defer cancel()
	if h := r.hooks; h != nil && h.step != nil {
		inner := fetch
		fetch = func(ctx context.Context, p *participant) bool {
			return h.step(name, p.id, func() bool { return inner(ctx, p) })
		}
	}
	for {
		for _, l := range step.log {
			r.printf("%s", l)
		}
		switch {
		case step.over:
			if len(step.missing) > 0 {
				r.mu.Lock()
				r.timedOut = append(r.timedOut, fmt.Sprintf("%s (missing %s)", name, strings.Join(step.missing, ", ")))
				r.mu.Unlock()
			}
			return nil
		case len(step.poll) > 0:
			st, step = st.polled(r.pollRound(ctx, step.poll, fetch), haveFn, r.cfg.Clock.Now())
			continue
		}
		timer := r.cfg.Clock.NewTimer(step.wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			if err := parent.Err(); err != nil {
				return fmt.Errorf("dkg: interrupted in phase %s (run the same command again to resume): %w", name, err)
			}
		case <-timer.Chan():
		}
		st, step = st.tick(haveFn, r.cfg.Clock.Now())
	}
}

// pollRound asks every member in ps at once and reports who is done.
func (r *runner) pollRound(ctx context.Context, ps []*participant, fetch func(context.Context, *participant) bool) map[peer.ID]bool {
	var wg sync.WaitGroup
	ok := make([]bool, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, ccancel := context.WithTimeout(ctx, max(r.cfg.PollInterval*5, time.Second))
			ok[i] = fetch(cctx, p)
			ccancel()
		}()
	}
	wg.Wait()
	out := make(map[peer.ID]bool, len(ps))
	for i, p := range ps {
		out[p.id] = ok[i]
	}
	return out
}

// linger keeps serving until done reports true for every peer, or one
// phase timeout passes.
func (r *runner) linger(ctx context.Context, ps []*participant, done func(*participant) bool) {
	ctx, cancel := clockwork.WithTimeout(ctx, r.cfg.Clock, r.cfg.PhaseTimeout)
	defer cancel()
	for {
		all := true
		for _, p := range ps {
			all = all && done(p)
		}
		if all {
			return
		}
		timer := r.cfg.Clock.NewTimer(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		}
	}
}
