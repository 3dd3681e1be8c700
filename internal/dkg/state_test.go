package dkg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
)

// testParts are n new members named node1 … nodeN.
func testParts(n int) []*participant {
	ps := make([]*participant, n)
	for i := range ps {
		ps[i] = &participant{id: peer.ID(fmt.Sprintf("peer%d", i+1)), newIdx: i + 1}
	}
	return ps
}

// names writes each test participant's peer ID as peerN in s.
func names(s string, ps []*participant) string {
	for _, p := range ps {
		s = strings.ReplaceAll(s, p.id.String(), string(p.id))
	}
	return s
}

func answered(ps ...*participant) map[peer.ID]bool {
	out := map[peer.ID]bool{}
	for _, p := range ps {
		out[p.id] = true
	}
	return out
}

// TestPhaseTransitions walks a phase through its events on a fake clock:
// the first round asks everyone, a round reports who is still missing
// (once per change), a tick asks only the missing members again, and the
// deadline ends the phase naming who never answered.
func TestPhaseTransitions(t *testing.T) {
	const timeout, poll = 10 * time.Second, time.Second
	ps := testParts(3)
	type event struct {
		advance  time.Duration
		tick     bool             // else a poll round ends
		answered map[peer.ID]bool // for a round
		have     func(*participant) bool
		poll     []*participant // asked next
		wait     time.Duration  // waited for next
		over     bool
		log      []string // substrings of the step's lines, in order
	}
	for _, tc := range []struct {
		name   string
		events []event
	}{
		{"everyone answers at once", []event{
			{answered: answered(ps...), over: true, log: []string{"phase p: complete"}},
		}},
		{"a member answers on the second round", []event{
			{answered: answered(ps[0], ps[2]), wait: poll, log: []string{"2/3 answered; still missing: node2"}},
			{advance: poll, tick: true, poll: ps[1:2]},
			{answered: answered(ps[1]), over: true, log: []string{"complete"}},
		}},
		{"an unchanged missing list is not reported again", []event{
			{answered: answered(ps[0]), wait: poll, log: []string{"1/3 answered; still missing: node2 (peer2), node3 (peer3)"}},
			{advance: poll, tick: true, poll: ps[1:]},
			{answered: nil, wait: poll},
		}},
		{"a silent member times the phase out", []event{
			{answered: answered(ps[0], ps[1]), wait: poll, log: []string{"still missing: node3"}},
			{advance: poll, tick: true, poll: ps[2:]},
			{answered: nil, wait: poll},
			{advance: timeout, tick: true, over: true, log: []string{"phase p: timed out; no answer from: node3 (peer3)"}},
		}},
		{"a round that ends past the deadline times out", []event{
			{advance: timeout + poll, answered: answered(ps[0]), over: true, log: []string{"still missing", "timed out; no answer from: node2 (peer2), node3 (peer3)"}},
		}},
		{"rounds start every poll, so a round's time is not waited again", []event{
			{advance: poll / 4, answered: answered(ps[0]), wait: poll * 3 / 4, log: []string{"still missing"}},
			{advance: poll * 3 / 4, tick: true, poll: ps[1:]},
			{advance: poll / 2, answered: nil, wait: poll / 2},
		}},
		{"a round longer than poll is followed at once", []event{
			{advance: 2 * poll, answered: answered(ps[0]), wait: 0, log: []string{"still missing"}},
			{tick: true, poll: ps[1:]},
		}},
		{"the last wait ends at the deadline", []event{
			{advance: poll / 2, answered: answered(ps[0]), wait: poll / 2, log: []string{"still missing"}},
			{advance: poll / 2, tick: true, poll: ps[1:]},
			{advance: timeout - 2*poll, tick: true, poll: ps[1:]},
			{advance: poll / 2, answered: nil, wait: poll / 2},
			{advance: poll / 4, tick: true, poll: ps[1:]},
			{answered: nil, wait: poll / 4},
		}},
		{"a relayed key counts as an answer", []event{
			{answered: answered(ps[0]), have: func(p *participant) bool { return p == ps[1] || p == ps[2] }, over: true, log: []string{"complete"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			st, step := startPhase("p", ps, clock.Now(), timeout, poll)
			require.Equal(t, ps, step.poll, "the first round asks everyone")
			require.Equal(t, []string{"dkg: phase p: waiting for 3 members"}, step.log)
			for i, ev := range tc.events {
				clock.Advance(ev.advance)
				if ev.tick {
					st, step = st.tick(ev.have, clock.Now())
				} else {
					st, step = st.polled(ev.answered, ev.have, clock.Now())
				}
				require.Equal(t, ev.poll, step.poll, "event %d", i)
				require.Equal(t, ev.wait, step.wait, "event %d", i)
				require.Equal(t, ev.over, step.over, "event %d", i)
				logs := strings.Join(step.log, "\n")
				require.Len(t, step.log, len(ev.log), "event %d: %s", i, logs)
				for j, l := range ev.log {
					require.Contains(t, names(step.log[j], ps), l, "event %d", i)
				}
				// A phase that ends at its deadline names whom it missed.
				require.Equal(t, ev.over && strings.Contains(logs, "timed out"), len(step.missing) > 0, "event %d: missing %v", i, step.missing)
			}
		})
	}
}

// TestPhaseDriverFakeClock runs the driver on a fake clock: members that
// never answer are polled every interval, and the phase ends at its
// timeout without waiting in real time.
func TestPhaseDriverFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	out := &syncBuf{}
	r := &runner{cfg: Config{Clock: clock, PhaseTimeout: 10 * time.Second, PollInterval: time.Second}, out: out}
	ps := testParts(2)
	polls := make(chan peer.ID, 64)
	fetch := func(_ context.Context, p *participant) bool {
		polls <- p.id
		return p == ps[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.phase(ctx, "p", ps, fetch, nil) }()
	for range 10 {
		// The phase deadline's timer and the poll timer.
		require.NoError(t, clock.BlockUntilContext(ctx, 2))
		clock.Advance(time.Second)
	}
	require.NoError(t, <-done)
	close(polls)
	count := map[peer.ID]int{}
	for id := range polls {
		count[id]++
	}
	require.Equal(t, 1, count[ps[0].id], "an answered member is not asked again")
	require.Equal(t, 10, count[ps[1].id], "asked at start and at each tick before the deadline")
	require.Contains(t, out.String(), "phase p: timed out; no answer from: node2")
	require.Len(t, r.timedOut, 1, "the phase that timed out is kept for a DivergedError")
	require.Equal(t, "p (missing node2 (peer2))", names(r.timedOut[0], ps))

	// An interrupted phase says how to resume.
	cctx, ccancel := context.WithCancel(context.Background())
	never := func(context.Context, *participant) bool { return false }
	go func() { done <- r.phase(cctx, "p", ps, never, nil) }()
	require.NoError(t, clock.BlockUntilContext(ctx, 2))
	ccancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// testResponses runs the deal step of a 4-member DKG in memory and returns
// every member's response to every other dealer's deal.
func testResponses(t *testing.T) map[slot][][]byte {
	rnd := mrand.New(mrand.NewSource(1))
	keys := make([]*cdkg.Key, 4)
	pubs := make([]crypto.PublicKey, 4)
	for i := range keys {
		k, err := cdkg.GenerateKey(rnd)
		require.NoError(t, err)
		keys[i], pubs[i] = k, k.Public()
	}
	ds := make([]*cdkg.DKG, 4)
	for i := range ds {
		d, err := cdkg.New(cdkg.Config{Key: keys[i], NewNodes: pubs, Threshold: 3})
		require.NoError(t, err)
		ds[i] = d
	}
	out := map[slot][][]byte{}
	for _, dealer := range ds {
		deals, _, err := dealer.Deals()
		require.NoError(t, err)
		for to, b := range deals {
			resp, err := ds[to-1].ProcessDeal(b)
			require.NoError(t, err)
			s, err := cdkg.ResponseSlot(resp)
			require.NoError(t, err)
			out[slot{s.Dealer, s.Member}] = append(out[slot{s.Dealer, s.Member}], resp)
		}
	}
	return out
}

// TestComplaintsDue: a member owes one complaint per session reported for
// each dealer whose deal it never got, the most reported session first,
// and none for a dealer it got a deal from or that nobody got one from.
func TestComplaintsDue(t *testing.T) {
	resps := testResponses(t)
	sid := func(dealer uint32) []byte {
		s, err := cdkg.ResponseSlot(resps[slot{dealer, (dealer + 1) % 4}][0])
		require.NoError(t, err)
		return s.SessionID
	}
	// A relay labelled dealer 3's response (session of dealer 3) as one of
	// dealer 2's: dealer 2 then has two candidate sessions.
	relabelled := map[slot][][]byte{}
	for k, v := range resps {
		relabelled[k] = v
	}
	relabelled[slot{1, 3}] = append(relabelled[slot{1, 3}], resps[slot{2, 3}][0])
	onlyDealer1 := map[slot][][]byte{}
	for k, v := range resps {
		if k.dealer == 0 {
			onlyDealer1[k] = v
		}
	}
	for _, tc := range []struct {
		name      string
		got       map[int]bool
		responses map[slot][][]byte
		perSlot   int
		want      []complaint
	}{
		{"every deal arrived", map[int]bool{1: true, 2: true, 3: true}, resps, 4, nil},
		{"a missing deal", map[int]bool{1: true, 3: true}, resps, 4, []complaint{{2, sid(1)}}},
		{"two missing deals, in dealer order", map[int]bool{3: true}, resps, 4, []complaint{{1, sid(0)}, {2, sid(1)}}},
		{"nobody got the deal", map[int]bool{}, onlyDealer1, 4, []complaint{{1, sid(0)}}},
		{"relabelled sessions: the most reported first", map[int]bool{1: true, 3: true}, relabelled, 4, []complaint{{2, sid(1)}, {2, sid(2)}}},
		{"at most perSlot sessions", map[int]bool{1: true, 3: true}, relabelled, 1, []complaint{{2, sid(1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, complaintsDue([]int{1, 2, 3}, tc.got, tc.responses, tc.perSlot))
		})
	}
}

// TestAgreement: the hash phase succeeds with t confirmations (this member
// included), names members with another hash, and fails as diverged when
// some disagree, as too few members otherwise.
func TestAgreement(t *testing.T) {
	own, other := [32]byte{1}, [32]byte{2}
	ps := testParts(4)
	others := ps[1:]
	for _, tc := range []struct {
		name   string
		hashes map[peer.ID][32]byte
		agree  int
		differ []string
		err    error
	}{
		{"everyone agrees", map[peer.ID][32]byte{ps[1].id: own, ps[2].id: own, ps[3].id: own}, 4, nil, nil},
		{"t agree, one differs", map[peer.ID][32]byte{ps[1].id: own, ps[2].id: own, ps[3].id: other}, 3, []string{"node4 (peer4)"}, nil},
		{"too few answered", map[peer.ID][32]byte{ps[1].id: own}, 2, nil, ErrTooFewMembers},
		{"too few agree", map[peer.ID][32]byte{ps[1].id: own, ps[2].id: other, ps[3].id: other}, 2, []string{"node3 (peer3)", "node4 (peer4)"}, ErrDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agree, differ, err := agreement(own, others, tc.hashes, 3)
			require.Equal(t, tc.agree, agree)
			var got []string
			for _, d := range differ {
				got = append(got, names(d, ps))
			}
			require.Equal(t, tc.differ, got)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			if tc.err == ErrDiverged {
				var de *DivergedError
				require.ErrorAs(t, err, &de)
				require.Empty(t, de.TimedOut, "hashPhase adds the phases that timed out")
				de.TimedOut = []string{"deals (missing node2)"}
				require.Contains(t, de.Error(), "phases that timed out here: deals (missing node2)")
			}
		})
	}
}

// TestQuorum: the keys phase needs t new members and, when resharing, the
// old threshold of old members.
func TestQuorum(t *testing.T) {
	ps := testParts(4)
	old := []*participant{{id: "old1", oldIdx: 1}, {id: "old2", oldIdx: 2}}
	q := quorum{newN: 4, newT: 3}
	require.NoError(t, q.enough(ps[:3], ps[3:]))
	err := q.enough(ps[:2], ps[2:])
	require.ErrorIs(t, err, ErrTooFewMembers)
	require.Contains(t, names(err.Error(), ps), "2 of 4 new members answered, need t=3; silent: node3 (peer3), node4 (peer4)")
	rq := quorum{newN: 4, newT: 3, oldN: 4, oldT: 3}
	require.ErrorContains(t, rq.enough(append(ps[:3:3], old...), nil), "2 of 4 old members answered, need their old t=3")
	require.NoError(t, rq.enough(append(ps[:3:3], append(old, &participant{id: "old3", oldIdx: 3})...), nil))
}

// TestResume: what a member does with its crash state at start, including
// resuming after a crash with the same ceremony key and seed.
func TestResume(t *testing.T) {
	key, err := cdkg.GenerateKey(mrand.New(mrand.NewSource(1)))
	require.NoError(t, err)
	seed := [cdkg.SeedSize]byte{7}
	saved := marshalState("cid", key, seed)
	var st ceremonyState
	require.NoError(t, json.Unmarshal(saved, &st))
	require.Equal(t, stateVersion, st.Version)
	require.Equal(t, crypto.Ciphersuite, st.Ciphersuite)
	kb, err := key.MarshalBinary()
	require.NoError(t, err)
	// The bn256 release wrote no version; its 32-byte key would parse as
	// a scalar here, so only the version keeps it from resuming.
	bn256State := []byte(fmt.Sprintf(`{"ceremony":"cid","dkg_key":"%x","seed":"%x"}`, kb, seed))
	withVersion := func(v int, suite string) []byte {
		b, err := json.Marshal(ceremonyState{Version: v, Ciphersuite: suite, Ceremony: "cid", Key: fmt.Sprintf("%x", kb), Seed: fmt.Sprintf("%x", seed)})
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name    string
		b       []byte
		readErr error
		restart bool
		want    resumeStep
		err     string
	}{
		{"no state: a fresh key", nil, os.ErrNotExist, false, stateFresh, ""},
		{"no state, restart: a fresh key", nil, os.ErrNotExist, true, stateFresh, ""},
		{"state of this ceremony: resume", saved, nil, false, stateResume, ""},
		{"restart discards the state", saved, nil, true, stateErase, ""},
		{"unreadable state", nil, errors.New("permission denied"), false, 0, "dkg: permission denied"},
		{"another ceremony", marshalState("other", key, seed), nil, false, 0, "belongs to another ceremony"},
		{"not JSON", []byte("{"), nil, false, 0, "ceremony state: st.json"},
		{"corrupt seed", []byte(`{"version":2,"ciphersuite":"` + crypto.Ciphersuite + `","ceremony":"cid","dkg_key":"00","seed":"zz"}`), nil, false, 0, "st.json is corrupt"},
		{"zero key", withZeroKey(t, saved), nil, false, 0, "zero scalar"},
		{"bn256 release state", bn256State, nil, false, 0, "st.json is crash-state version 1, written by the bn256 release; this release reads only version 2 (BLS12-381, ciphersuite " + crypto.Ciphersuite + "): run with --restart"},
		{"version 1", withVersion(1, ""), nil, false, 0, "crash-state version 1"},
		{"restart discards a bn256 state", bn256State, nil, true, stateErase, ""},
		{"a later version", withVersion(3, crypto.Ciphersuite), nil, false, 0, "st.json is crash-state version 3; this release reads only version 2: run with --restart"},
		{"another ciphersuite", withVersion(stateVersion, "BLS_SIG_BN254G1_XMD:SHA-256_SVDW_RO_NUL_"), nil, false, 0, `ciphersuite "BLS_SIG_BN254G1_XMD:SHA-256_SVDW_RO_NUL_"; this release uses "` + crypto.Ciphersuite + `": run with --restart`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, k, s, err := resume("st.json", tc.b, tc.readErr, "cid", tc.restart)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				if tc.readErr == nil {
					require.ErrorIs(t, err, ErrState)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, step)
			if step == stateResume {
				require.Equal(t, key.Public(), k.Public(), "same ceremony key")
				require.Equal(t, seed, s, "same seed, so the same deals")
			}
		})
	}
}

// withZeroKey returns a crash state with its key replaced by zero.
func withZeroKey(t *testing.T, saved []byte) []byte {
	var st ceremonyState
	require.NoError(t, json.Unmarshal(saved, &st))
	st.Key = strings.Repeat("00", crypto.ScalarSize)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	return b
}
