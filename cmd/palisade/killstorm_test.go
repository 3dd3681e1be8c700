package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/testnet"
)

var killStormSeed = flag.Uint64("killstorm.seed", 0, "seed of TestKillStorm (0: from the clock)")

// Parameters of TestKillStorm.
const (
	stormNodes    = 4
	stormClients  = 3
	stormFor      = 9 * time.Second  // the storm runs at least this long…
	stormMinKills = 6                // …and until this many kills,
	stormHardCap  = 40 * time.Second // but never longer than this.
)

var stormResources = []string{"orders-db", "jobs-queue"}

// stormToken is a token a client obtained during the storm.
type stormToken struct {
	tok    protocol.Token
	worker int
	at     time.Duration
}

// stormCollector gathers the tokens every client obtained.
type stormCollector struct {
	mu     sync.Mutex
	tokens []stormToken
	errs   map[string]int // acquisition errors by kind
}

func (c *stormCollector) add(t stormToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = append(c.tokens, t)
}

func (c *stormCollector) fail(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs == nil {
		c.errs = map[string]int{}
	}
	c.errs[kind]++
}

// stormProcs tracks every node process the storm started, so cleanup can
// kill them all whatever state the test is in.
type stormProcs struct {
	mu      sync.Mutex
	current []*nodeProc
	all     []*nodeProc
}

func (s *stormProcs) set(i int, p *nodeProc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current[i] = p
	s.all = append(s.all, p)
}

func (s *stormProcs) get(i int) *nodeProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current[i]
}

func (s *stormProcs) killAll() {
	s.mu.Lock()
	all := append([]*nodeProc(nil), s.all...)
	s.mu.Unlock()
	for _, p := range all {
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// launchNode starts "palisade node --dir dir" and waits until it listens on
// addr. It never fails the test (it may run on a goroutine of its own): a
// node that exits early (its port or store still busy) or does not listen in
// time is killed and reported as an error. track is called with the process
// as soon as it started.
func launchNode(ctx context.Context, bin, dir, addr string, limit time.Duration, track func(*nodeProc)) (*nodeProc, error) {
	parts := strings.Split(addr, "/")
	if len(parts) != 5 {
		return nil, fmt.Errorf("address %q is not /ip4/HOST/tcp/PORT", addr)
	}
	hostport := net.JoinHostPort(parts[2], parts[4])
	p := &nodeProc{stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, "node", "--dir", dir)
	p.cmd.Env = testEnv()
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	track(p)
	deadline := time.Now().Add(limit)
	for {
		if strings.Contains(p.stderr.String(), "listening on") {
			if c, err := net.DialTimeout("tcp", hostport, time.Second); err == nil {
				_ = c.Close()
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("node exited early (%v):\n%s", p.cmd.ProcessState, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			return nil, fmt.Errorf("node did not listen on %s within %v:\n%s", hostport, limit, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// seedReader is a deterministic randomness source for keygen.
func seedReader(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	copy(s[8:], "palisade killstorm keygen")
	return rand.NewChaCha8(s)
}

// TestKillStorm runs 4 nodes as processes of the built binary and 3
// in-process clients that keep acquiring two resources (releasing some
// locks, abandoning others to their TTL), while a killer SIGKILLs one node
// at a time and restarts it from its directory. Afterwards it checks S1 on
// the tokens and S3 on every node's durable audit log: each token's epoch
// was voted for that holder by at least t nodes, and no node's log holds two
// votes for one (resource, epoch).
func TestKillStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and SIGKILLs node processes")
	}
	seed := *killStormSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -killstorm.seed=%d)", seed, seed)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	dir := t.TempDir()

	keys, err := testnet.Keygen(dir, testnet.KeygenOptions{N: stormNodes, Clients: stormClients, Rand: seedReader(seed)})
	require.NoError(t, err)
	cluster, err := protocol.LoadCluster(keys.ClusterPath)
	require.NoError(t, err)
	require.Len(t, keys.Clients, stormClients)
	f, tq := cluster.F, 2*cluster.F+1
	require.Equal(t, 1, f)
	addrs := make([]string, stormNodes)
	for i, n := range cluster.File.Nodes {
		require.Equal(t, i+1, n.Index)
		addrs[i] = n.Addrs[0]
		require.True(t, strings.HasPrefix(addrs[i], "/ip4/127.0.0.1/tcp/"), "not loopback: %s", addrs[i])
	}

	procs := &stormProcs{current: make([]*nodeProc, stormNodes)}
	t.Cleanup(procs.killAll)
	for i := range stormNodes {
		_, err := launchNode(ctx, bin, keys.NodeDirs[i], addrs[i], 30*time.Second, func(p *nodeProc) { procs.set(i, p) })
		require.NoError(t, err, "start node %d", i+1)
	}

	// The storm: clients acquire while the killer kills, until the killer
	// is done.
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(time.Millisecond) }
	stormCtx, stopStorm := context.WithCancel(ctx)
	defer stopStorm()
	col := &stormCollector{}

	newClient := func(w int, gen uint64) (*client.Client, error) {
		return client.New(client.Config{
			Cluster:        cluster,
			Identity:       keys.Clients[w],
			RequestTimeout: 2 * time.Second,
			Seed:           seed ^ uint64(w+1)<<32 ^ gen,
		})
	}
	var workers sync.WaitGroup
	var released, abandoned, got [stormClients]int
	var slowest [stormClients]time.Duration // longest successful Acquire
	workerErr := make([]error, stormClients)
	for w := range stormClients {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)+100))
			gen := uint64(0)
			cl, err := newClient(w, gen)
			if err != nil {
				workerErr[w] = err
				return
			}
			defer func() { _ = cl.Close() }()
			for stormCtx.Err() == nil {
				res := stormResources[rng.IntN(len(stormResources))]
				ttl := 400*time.Millisecond + time.Duration(rng.IntN(600))*time.Millisecond
				// Wait up to 3 s for the resource (Acquire waits until
				// its context ends).
				actx, acancel := context.WithTimeout(stormCtx, 3*time.Second)
				t0 := time.Now()
				lock, err := cl.Acquire(actx, res, client.WithTTL(ttl))
				took := time.Since(t0)
				acancel()
				if err != nil {
					var kind string
					switch {
					case stormCtx.Err() != nil:
						return
					case errors.Is(err, client.ErrBusy):
						kind = "busy"
					case errors.Is(err, client.ErrNotEnoughNodes):
						kind = "not enough nodes"
					case errors.Is(err, context.DeadlineExceeded):
						kind = "wait exceeded"
					default:
						kind = "other"
						t.Logf("worker %d: acquire %s at %v: %v", w, res, since(), err)
					}
					col.fail(kind)
					sleepCtx(stormCtx, 20*time.Millisecond)
					continue
				}
				col.add(stormToken{tok: lock.Token(), worker: w, at: since()})
				got[w]++
				slowest[w] = max(slowest[w], took.Round(time.Millisecond))
				sleepCtx(stormCtx, time.Duration(rng.IntN(150))*time.Millisecond)
				if rng.IntN(10) < 6 {
					rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
					if err := lock.Release(rctx); err != nil {
						col.fail("release")
					}
					rcancel()
					released[w]++
					continue
				}
				// Abandon: stop renewing without releasing, so the nodes'
				// lease runs out after its TTL; go on as a new client with
				// the same identity.
				abandoned[w]++
				_ = cl.Close()
				gen++
				if cl, err = newClient(w, gen); err != nil {
					workerErr[w] = err
					return
				}
			}
		}()
	}

	// The killer: at most one node down at a time (f = 1).
	type killRec struct {
		node         int
		at, down, up time.Duration
	}
	var kills []killRec
	killerDone := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 7))
		for (time.Since(start) < stormFor || len(kills) < stormMinKills) && time.Since(start) < stormHardCap {
			if !sleepCtx(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond) {
				killerDone <- ctx.Err()
				return
			}
			i := rng.IntN(stormNodes)
			p := procs.get(i)
			at := since()
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				killerDone <- fmt.Errorf("kill node %d: %w", i+1, err)
				return
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				killerDone <- fmt.Errorf("node %d did not exit after SIGKILL", i+1)
				return
			}
			if p.cmd.ProcessState.ExitCode() != -1 {
				killerDone <- fmt.Errorf("node %d was not running when killed (exit %d):\n%s", i+1, p.cmd.ProcessState.ExitCode(), p.stderr.String())
				return
			}
			down := time.Duration(100+rng.IntN(400)) * time.Millisecond
			if !sleepCtx(ctx, down) {
				killerDone <- ctx.Err()
				return
			}
			// Restart from the same directory and port; the node retries
			// for a few seconds itself, and we retry the process.
			var lastErr error
			for try := 0; try < 5; try++ {
				if _, lastErr = launchNode(ctx, bin, keys.NodeDirs[i], addrs[i], 20*time.Second, func(p *nodeProc) { procs.set(i, p) }); lastErr == nil {
					break
				}
				sleepCtx(ctx, 200*time.Millisecond)
			}
			if lastErr != nil {
				killerDone <- fmt.Errorf("restart node %d: %w", i+1, lastErr)
				return
			}
			kills = append(kills, killRec{node: i + 1, at: at, down: down, up: since()})
		}
		killerDone <- nil
	}()
	var killerErr error
	select {
	case killerErr = <-killerDone:
	case <-ctx.Done():
		t.Fatalf("killer did not finish: %v", ctx.Err())
	}
	stopStorm()
	workersDone := make(chan struct{})
	go func() { workers.Wait(); close(workersDone) }()
	select {
	case <-workersDone:
	case <-time.After(30 * time.Second):
		t.Fatal("clients did not stop within 30s of the storm's end")
	}
	stormTook := since()
	require.NoError(t, killerErr)
	for w, err := range workerErr {
		require.NoError(t, err, "worker %d", w)
	}

	// Stop every node cleanly, so the stores are closed and free to open.
	for i := range stormNodes {
		require.NoError(t, procs.get(i).cmd.Process.Signal(syscall.SIGTERM))
	}
	for i := range stormNodes {
		p := procs.get(i)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("node %d did not stop on SIGTERM", i+1)
		}
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "node %d:\n%s", i+1, p.stderr.String())
	}

	col.mu.Lock()
	tokens := append([]stormToken(nil), col.tokens...)
	errs := col.errs
	col.mu.Unlock()
	var killLog []string
	for _, k := range kills {
		killLog = append(killLog, fmt.Sprintf("node%d@%v(down %v, up @%v)", k.node, k.at, k.down, k.up))
	}
	t.Logf("storm took %v: %d kills [%s]", stormTook, len(kills), strings.Join(killLog, " "))
	t.Logf("%d tokens (per client %v, slowest acquire %v); released %v, abandoned %v; acquire failures %v", len(tokens), got, slowest, released, abandoned, errs)

	require.GreaterOrEqual(t, len(kills), stormMinKills, "too few kills")
	require.GreaterOrEqual(t, len(tokens), stormNodes, "too few tokens: the storm acquired (almost) nothing")

	// S1: every token verifies; one holder per (resource, epoch).
	type re struct {
		resource string
		epoch    uint64
	}
	issued := map[re]protocol.Holder{}
	for _, st := range tokens {
		tok := st.tok
		require.Equal(t, cluster.ID, tok.Cluster)
		require.NoError(t, cluster.Key.Verify(tok.SignedBytes(), tok.Signature), "token %s epoch %d", tok.Resource, tok.Epoch)
		k := re{tok.Resource, tok.Epoch}
		if h, ok := issued[k]; ok && h != tok.Holder {
			t.Errorf("S1 violated (seed %d): %s epoch %d issued to %s and to %s", seed, tok.Resource, tok.Epoch, h, tok.Holder)
		}
		issued[k] = tok.Holder
	}

	// S3, from each node's durable store.
	votes := make([]map[re]string, stormNodes) // per node: (resource, epoch) -> holder voted for
	for i := range stormNodes {
		votes[i] = map[re]string{}
		s, err := node.OpenBoltStore(filepath.Join(keys.NodeDirs[i], node.StoreFileName), node.WithBoltOpenTimeout(5*time.Second))
		require.NoError(t, err, "node %d store", i+1)
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		entries, err := s.Audit(lctx, 1, 1<<30)
		require.NoError(t, err)
		maxVote := map[string]uint64{}
		nVotes := 0
		for j, e := range entries {
			require.Equal(t, uint64(j+1), e.Seq, "node %d audit log has a gap", i+1)
			if e.Kind != node.AuditVote {
				continue
			}
			nVotes++
			k := re{e.Resource, e.Epoch}
			if h, ok := votes[i][k]; ok && h != e.Holder {
				t.Errorf("S3 violated (seed %d): node %d voted for %s and for %s at %s epoch %d", seed, i+1, h, e.Holder, e.Resource, e.Epoch)
			}
			votes[i][k] = e.Holder
			maxVote[e.Resource] = max(maxVote[e.Resource], e.Epoch)
		}
		for _, res := range stormResources {
			rec, ok, err := s.Load(lctx, res)
			require.NoError(t, err)
			if maxVote[res] > 0 {
				require.True(t, ok, "node %d has votes for %s but no record", i+1, res)
			}
			require.GreaterOrEqual(t, rec.LastEpoch, maxVote[res], "node %d: record of %s is below an epoch it voted for", i+1, res)
		}
		lcancel()
		require.NoError(t, s.Close())
		t.Logf("node %d: %d audit entries, %d votes, last epochs %v", i+1, len(entries), nVotes, maxVote)
	}

	// Every token was voted for by t nodes, durably (a partial leaves a node
	// only after its vote is fsynced). So at most N-t nodes can hold a
	// vote for another holder at a token's epoch: split votes for a losing
	// holder are legal, but never more than that.
	keysSorted := make([]re, 0, len(issued))
	for k := range issued {
		keysSorted = append(keysSorted, k)
	}
	sort.Slice(keysSorted, func(a, b int) bool {
		if keysSorted[a].resource != keysSorted[b].resource {
			return keysSorted[a].resource < keysSorted[b].resource
		}
		return keysSorted[a].epoch < keysSorted[b].epoch
	})
	minority := 0
	for _, k := range keysSorted {
		holder := issued[k]
		var voted, other []int
		for i := range stormNodes {
			switch h, ok := votes[i][k]; {
			case !ok:
			case h == holder.String():
				voted = append(voted, i+1)
			default:
				other = append(other, i+1)
			}
		}
		if len(voted) < tq {
			t.Errorf("S3 violated (seed %d): token %s epoch %d for %s, but only nodes %v have its vote in their audit logs (need %d)", seed, k.resource, k.epoch, holder, voted, tq)
		}
		if len(other) > stormNodes-tq {
			t.Errorf("S1/S3 violated (seed %d): token %s epoch %d for %s, but nodes %v voted for another holder there", seed, k.resource, k.epoch, holder, other)
		}
		minority += len(other)
	}
	t.Logf("%d distinct (resource, epoch) tokens; %d minority votes for a losing holder at a token's epoch", len(issued), minority)
}
