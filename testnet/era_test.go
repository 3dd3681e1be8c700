package testnet

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// s1Tokens collects tokens and checks S1 over all of them: one holder per
// (resource, epoch), whichever group issued the token.
type s1Tokens struct {
	t  *testing.T
	mu sync.Mutex
	by map[resEpoch]protocol.Holder
}

func (s *s1Tokens) add(cl *protocol.Cluster, tok protocol.Token) {
	s.t.Helper()
	require.NoError(s.t, cl.Key.Verify(tok.SignedBytes(), tok.Signature), "token verifies under the original group key")
	require.Equal(s.t, cl.ID, tok.Cluster)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := resEpoch{tok.Resource, tok.Epoch}
	if h, ok := s.by[k]; ok && h != tok.Holder {
		s.t.Errorf("S1: %q epoch %d has two valid tokens: %s and %s", tok.Resource, tok.Epoch, h, tok.Holder)
	}
	s.by[k] = tok.Holder
}

// acquireOnce acquires resource with c, releases it and returns the token.
func acquireOnce(t *testing.T, c *client.Client, resource string) protocol.Token {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := acquireWait(ctx, c, 25*time.Second, resource, client.WithTTL(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	return l.Token()
}

// TestOldGroupCannotEnterNewEra is issue 10's era attack: reshare 4 -> 4
// (two members keep their identities) while the old group keeps running;
// the new group issues tokens above the new floor; a Byzantine old member
// (node 1) relays them to the other old nodes in Commits, as the proof of
// Acquire requests, and as f+1 signed new-era votes (its own and a kept
// member's, which check against the old cluster file), and lies about
// them in Status. Every honest old node refuses each item with
// CodeOtherEra, none votes or learns anything at or above the new floor,
// an old-cluster client still gets old-era tokens only, and no two valid
// tokens exist for one (resource, epoch). On e7342e7 the old nodes caught
// up into the new era and the old group issued floor+2 a second time.
func TestOldGroupCannotEnterNewEra(t *testing.T) {
	const res = "orders-db"
	nw, err := Start(t.TempDir(), Options{Keygen: KeygenOptions{N: 4, Clients: 3, Rand: mrand.New(mrand.NewSource(seedFor(t)))}})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw.Close()) }()
	original := nw.Keys.Cluster
	toks := &s1Tokens{t: t, by: map[resEpoch]protocol.Holder{}}

	// Client 0 stays on the old cluster file; client 1 moves to the new
	// one; client 2 is the key the Byzantine member colludes with.
	oldC := newClient(t, nw, 0, client.Config{RequestTimeout: 2 * time.Second})
	for range 2 {
		toks.add(original, acquireOnce(t, oldC, res))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys2, err := Reshare(ctx, t.TempDir(), nw.Keys, DKGOptions{N: 4, Keep: 2, PhaseTimeout: 20 * time.Second,
		Rand: mrand.New(mrand.NewSource(seedFor(t) + 1))})
	require.NoError(t, err)
	floor := keys2.Cluster.File.EpochFloor
	require.Equal(t, mustNextFloor(t, original.File.EpochFloor), floor)
	require.Equal(t, original.ID, keys2.Cluster.ID)
	nw2, err := StartKeys(keys2, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw2.Close()) }()
	newC, err := nw2.NewClient(1, client.Config{Seed: 2, RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, newC.Close()) }()

	feed := NewEraFeed()
	for range 2 {
		tok := acquireOnce(t, newC, res)
		require.Greater(t, tok.Epoch, floor)
		toks.add(original, tok)
		feed.AddToken(tok)
	}
	// The kept members' (1 and 2) last signed votes, as their Status
	// shows them: with the relay's own, f+1 = 2 distinct voters.
	for i := 1; i <= 2; i++ {
		rec, err := nw2.Node(i).Record(ctx, res)
		require.NoError(t, err)
		require.NotEmpty(t, rec.VoteIDSig)
		require.GreaterOrEqual(t, rec.VoteEpoch, floor)
		feed.AddVote(protocol.SignedVote{Node: i, Statement: keys2.Cluster.Statement(res, rec.VoteEpoch, rec.VoteHolder), IdentitySig: rec.VoteIDSig})
	}
	require.Len(t, feed.votesFor(res, 1), 1, "node 2's vote; node 1 is the relay itself")

	relay := EraRelay(feed, nw.Keys.Clients[2])
	defer func() { require.NoError(t, relay.Close()) }()
	nw.SetBehaviour(1, relay)
	honest := []int{2, 3, 4}
	for range 3 { // 3 rounds x 3 targets: each Acquire variant thrice
		relay.RelayOnce(ctx, nw, nw.Member(1), honest, 5*time.Second)
	}
	st := relay.Stats()
	t.Logf("relay: sent %d, other-era %d, other refusals %d (%v), failed %d, accepted %v", st.Sent, st.OtherEra, st.Refused, st.Codes, st.Failed, st.Accepted)
	require.Empty(t, st.Accepted, "an honest old node accepted a new-era item")
	require.Equal(t, 2*3*len(honest), st.Sent, "a Commit and an Acquire per target and round")
	require.Equal(t, st.Sent, st.OtherEra, "every Commit, proof and f+1 votes of the new era is refused with CodeOtherEra")

	// The old-cluster client still acquires, from the three honest old
	// nodes (node 1's Status names a later era and is set aside), and
	// only below the new floor.
	for range 2 {
		tok := acquireOnce(t, oldC, res)
		require.Less(t, tok.Epoch, floor, "the old group issued a token in the new era")
		toks.add(original, tok)
	}
	tok := acquireOnce(t, newC, res)
	require.Greater(t, tok.Epoch, floor)
	toks.add(original, tok)

	// No honest old node voted, caught up, saw votes or committed at or
	// above the new floor.
	for _, i := range honest {
		r := nw.Node(i)
		rec, err := r.Record(ctx, res)
		require.NoError(t, err)
		require.Less(t, rec.LastEpoch, floor, "old node %d", i)
		require.Less(t, rec.Seen, floor, "old node %d", i)
		if rec.Certified != nil {
			require.Less(t, rec.Certified.Epoch, floor, "old node %d", i)
		}
		entries, err := readAudit(ctx, r)
		require.NoError(t, err)
		require.NotEmpty(t, entries)
		for _, e := range entries {
			require.Less(t, e.Epoch, floor, "old node %d logged %s at epoch %d", i, e.Kind, e.Epoch)
		}
	}
}

// TestSharedIdentityClientsExclude is issue 10's lock-session case: six
// clients built from ONE client key (replicas of one service sharing a
// credential) contend for one resource. Each acquires, writes through a
// fence, then releases or dies (its lease runs out). All six acquire in
// turn, with six distinct epochs and six distinct lock sessions, and the
// fence admits every write. While one holds with a long TTL, another with
// the same key trying once gets ErrBusy. On e7342e7 several of them were
// handed the same token, and a second acquire with the same key succeeded
// while the first lease ran.
func TestSharedIdentityClientsExclude(t *testing.T) {
	const res = "orders-db"
	nw := startNet(t, 4, 1, Options{})
	fence := verifier.NewFence(verifier.New(nw.Keys.Cluster), verifier.NewMemoryStore())
	scale := time.Duration(1)
	if raceEnabled() {
		scale = 3
	}
	cs := make([]*client.Client, 6)
	for i := range cs {
		c, err := nw.NewClient(0, client.Config{Seed: uint64(i + 1), RequestTimeout: scale * time.Second, MinBackoff: 2 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		require.NoError(t, err)
		cs[i] = c
		require.Equal(t, cs[0].ID(), c.ID(), "one key, one identity")
	}
	closed := make([]bool, len(cs))
	defer func() {
		for i, c := range cs {
			if !closed[i] {
				require.NoError(t, c.Close())
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), scale*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	toks := make([]protocol.Token, len(cs))
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := acquireWait(ctx, c, scale*40*time.Second, res, client.WithTTL(scale*600*time.Millisecond))
			if err != nil {
				errs[i] = fmt.Errorf("replica %d: acquire: %w", i, err)
				return
			}
			toks[i] = l.Token()
			if err := fence.Admit(ctx, l.Token(), res, putHolder(fmt.Sprintf("replica%d", i))); err != nil {
				errs[i] = fmt.Errorf("replica %d: write at epoch %d: %w", i, l.Epoch(), err)
			}
			if i%2 == 0 {
				errs[i] = errors.Join(errs[i], l.Release(ctx))
				return
			}
			// The replica dies holding the lock: no release, no renewal;
			// its lease runs out after the TTL.
			errs[i] = errors.Join(errs[i], c.Close())
			closed[i] = true
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	epochs := map[uint64]int{}
	sessions := map[protocol.SessionID]int{}
	for i, tok := range toks {
		require.NoError(t, nw.Keys.Cluster.Key.Verify(tok.SignedBytes(), tok.Signature))
		require.Equal(t, cs[0].ID(), tok.Holder.ID)
		if j, dup := epochs[tok.Epoch]; dup {
			t.Fatalf("replicas %d and %d both got epoch %d", j, i, tok.Epoch)
		}
		if j, dup := sessions[tok.Holder.Session]; dup {
			t.Fatalf("replicas %d and %d got one lock session", j, i)
		}
		epochs[tok.Epoch], sessions[tok.Holder.Session] = i, i
	}
	require.Len(t, epochs, 6)

	// One replica holds with a long TTL: another with the same key,
	// trying once, is Busy.
	var holder, other *client.Client
	for i, c := range cs {
		if closed[i] {
			continue
		}
		if holder == nil {
			holder = c
		} else if other == nil {
			other = c
		}
	}
	l, err := acquireWait(ctx, holder, scale*10*time.Second, res, client.WithTTL(30*time.Second))
	require.NoError(t, err)
	_, err = other.TryAcquire(ctx, res, client.WithTTL(30*time.Second))
	require.ErrorIs(t, err, client.ErrBusy)
	var busy *client.BusyError
	require.ErrorAs(t, err, &busy)
	require.NotErrorIs(t, err, client.ErrHeldLocally, "a different client (process) with the same key")
	require.Equal(t, l.Token().Holder.Ref(), busy.Holder, "busy names the holding session")
	require.NoError(t, l.Release(ctx))
	// Released: the other replica gets it at once, at a higher epoch.
	l2, err := acquireWait(ctx, other, scale*10*time.Second, res)
	require.NoError(t, err)
	require.Greater(t, l2.Epoch(), l.Epoch())
	require.NoError(t, l2.Release(ctx))
}

// scenarioKindSeeds pins, per new scenario kind (issue 10 and after), seeds whose
// plan has it, so that every `go test ./testnet` runs them (TestScenarioKinds)
// whatever PALISADE_SCENARIO_SEEDS says.
var scenarioKindSeeds = []struct {
	kind  string
	seeds []int64
	has   func(p scenarioPlan) bool
}{
	{"shared-identity", []int64{6, 16}, func(p scenarioPlan) bool { return p.sharedIdentities() }},
	{"reshare", []int64{166}, func(p scenarioPlan) bool { return p.era != nil }},
	{"reshare+era-relay", []int64{0, 30}, func(p scenarioPlan) bool { return p.era != nil && len(p.era.relays) > 0 }},
	// 5 and 64: N=4, all honest, one node restored; 69: N=7, a node lying
	// in status and one restored (f=2 used up).
	{"restore-from-backup", []int64{5, 64, 69}, func(p scenarioPlan) bool { return p.restored != 0 }},
	// Hostile clients (issue 20), one seed per mode, N=4 with one
	// Byzantine node or none, and faults: 10 pin, 156 jump, 35 two
	// grinders on the one resource of 4 clients, 52 flood, 24 borrow.
	{"liar-pin", []int64{10}, hasLiar(liarPin)},
	{"liar-jump", []int64{156}, hasLiar(liarJump)},
	{"liar-grind", []int64{35}, hasLiar(liarGrind)},
	{"liar-flood", []int64{52}, hasLiar(liarFlood)},
	{"liar-borrow", []int64{24}, hasLiar(liarBorrow)},
	// Forks (issue 21), N=4, one seed per mode: 24 two forgetful nodes
	// (a ForgePartials node among them), 41 two colluders (a LieInStatus
	// node among them).
	{"fork-forget", []int64{24}, hasFork(forkForget)},
	{"fork-collude", []int64{41}, hasFork(forkCollude)},
}

// hasFork reports whether a plan has the fork kind in mode m.
func hasFork(m forkMode) func(p scenarioPlan) bool {
	return func(p scenarioPlan) bool { return p.fork != nil && p.fork.mode == m }
}

// hasLiar reports whether a plan has a liar in mode m.
func hasLiar(m liarMode) func(p scenarioPlan) bool {
	return func(p scenarioPlan) bool {
		for _, l := range p.liars {
			if l.mode == m {
				return true
			}
		}
		return false
	}
}

// TestScenarioKinds runs the pinned seeds of each new kind and checks that
// their plans still have it (a change of the generator that moved them
// must pick new seeds here).
func TestScenarioKinds(t *testing.T) {
	scale := 1
	if raceEnabled() {
		scale = 3
	}
	for _, k := range scenarioKindSeeds {
		for _, seed := range k.seeds {
			t.Run(fmt.Sprintf("%s/%d", k.kind, seed), func(t *testing.T) {
				p := newScenarioPlan(seed, ScenarioConfig{}, len(ScenarioBehaviours()))
				require.True(t, k.has(p), "seed %d no longer draws %s: pick another", seed, k.kind)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(scale)*2*time.Minute)
				defer cancel()
				rep, err := runScenario(ctx, t, seed, ScenarioConfig{TimeScale: scale})
				require.NoError(t, err)
				if rep.ReshareExcused && strings.HasPrefix(k.kind, "reshare") {
					// The resharing ran out of time while the load took
					// at least a phase timeout from it (the oracle's rule,
					// reshareExcused): no new era exists, so there is
					// nothing to relay or issue. Said, not passed over in
					// silence; the run's other verdicts stand.
					t.Logf("%s seed %d: the era checks are not made: the resharing timed out under load (took %v, lateness %v during the DKG)", k.kind, seed, rep.ReshareTook, rep.ReshareLate)
					return
				}
				switch k.kind {
				case "shared-identity":
					require.True(t, rep.SharedIdentity)
					require.Less(t, rep.Keys, rep.Clients)
				case "reshare+era-relay":
					require.Positive(t, rep.EraSent, "the relays sent the new era to honest old nodes")
					require.Positive(t, rep.EraRefused)
					fallthrough
				case "reshare":
					require.NotEmpty(t, rep.Reshare)
					require.Positive(t, rep.EraTokens, "the new group issued tokens")
				case "restore-from-backup":
					require.True(t, rep.RestoreApplied, "node %d was restarted from its backup", rep.Restored)
				case "fork-forget", "fork-collude":
					require.Positive(t, rep.Forks, "the attack made a fork")
					require.Positive(t, rep.ForksRefused, "the fence refused the second holder")
					require.Equal(t, rep.Forks, rep.Convicted, "forensics convicted every fork")
				}
			})
		}
	}
}
