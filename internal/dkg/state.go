package dkg

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/palisade-dev/palisade/crypto"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
)

// This file holds the ceremony's rules as pure transitions: each takes the
// state and an event (a poll round ended, the timer fired, a phase ended)
// with the time as an argument, and returns the next state and what the
// driver (dkg.go) must do. None does I/O or reads a clock, so they are
// table-tested on a fake clock (state_test.go).

// phaseState is one phase's progress: the members it waits for, those
// that answered, and when it times out.
type phaseState struct {
	name     string
	peers    []*participant
	done     map[peer.ID]bool
	deadline time.Time
	poll     time.Duration
	// asked is when the current round of questions started: rounds start
	// every poll (a fixed rate, as a ticker gives), or at once when a
	// round took longer than poll.
	asked time.Time
	last  string // the missing list last reported
}

// phaseStep is what a phase transition asks of the driver.
type phaseStep struct {
	// log are progress lines to print, in order.
	log []string
	// poll are the members to ask now; the driver then reports the round
	// with polled.
	poll []*participant
	// wait is how long to wait before the driver reports tick (0: do not
	// wait).
	wait time.Duration
	// over reports that the phase ended (complete or timed out).
	over bool
	// missing names the members a phase that timed out still waited for.
	missing []string
}

// startPhase begins a phase that waits for peers until now+timeout, asking
// again every poll: its first round asks every peer.
func startPhase(name string, peers []*participant, now time.Time, timeout, poll time.Duration) (phaseState, phaseStep) {
	s := phaseState{name: name, peers: peers, done: map[peer.ID]bool{}, deadline: now.Add(timeout), poll: poll, asked: now}
	return s, phaseStep{log: []string{fmt.Sprintf("dkg: phase %s: waiting for %d members", name, len(peers))}, poll: slices.Clone(peers)}
}

// polled takes the end of a poll round: answered are the members whose
// fetch is done; have, if not nil, counts a member as done too (a key
// another member relayed). The phase is over when nobody is missing, or
// at its deadline.
func (s phaseState) polled(answered map[peer.ID]bool, have func(*participant) bool, now time.Time) (phaseState, phaseStep) {
	s.done = cloneSet(s.done)
	for id, ok := range answered {
		if ok {
			s.done[id] = true
		}
	}
	var step phaseStep
	m := s.missing(have)
	if len(m) == 0 {
		step.log = append(step.log, fmt.Sprintf("dkg: phase %s: complete", s.name))
		step.over = true
		return s, step
	}
	if j := strings.Join(m, ", "); j != s.last {
		step.log = append(step.log, fmt.Sprintf("dkg: phase %s: %d/%d answered; still missing: %s", s.name, len(s.peers)-len(m), len(s.peers), j))
		s.last = j
	}
	if !now.Before(s.deadline) {
		step.log = append(step.log, s.timedOut(m))
		step.over, step.missing = true, m
		return s, step
	}
	step.wait = max(0, min(s.asked.Add(s.poll).Sub(now), s.deadline.Sub(now)))
	return s, step
}

// tick takes the timer: at the deadline the phase is over; before it,
// every member that has not answered is asked again.
func (s phaseState) tick(have func(*participant) bool, now time.Time) (phaseState, phaseStep) {
	if !now.Before(s.deadline) {
		m := s.missing(have)
		return s, phaseStep{log: []string{s.timedOut(m)}, over: true, missing: m}
	}
	var step phaseStep
	for _, p := range s.peers {
		if !s.done[p.id] {
			step.poll = append(step.poll, p)
		}
	}
	s.asked = now
	return s, step
}

func (s phaseState) timedOut(missing []string) string {
	return fmt.Sprintf("dkg: phase %s: timed out; no answer from: %s", s.name, strings.Join(missing, ", "))
}

// missing names the members the phase still waits for.
func (s phaseState) missing(have func(*participant) bool) []string {
	var out []string
	for _, p := range s.peers {
		if !s.done[p.id] && (have == nil || !have(p)) {
			out = append(out, p.String())
		}
	}
	return out
}

func cloneSet(m map[peer.ID]bool) map[peer.ID]bool {
	out := make(map[peer.ID]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// quorum is the member counts a ceremony needs once the keys phase ends.
type quorum struct {
	newN, newT int // new members, and t of the new sharing
	oldN, oldT int // old members and their t (resharing), else 0
}

// enough fails the ceremony early when too few members published keys.
func (q quorum) enough(present, silent []*participant) error {
	var newN, oldN int
	for _, p := range present {
		if p.newIdx > 0 {
			newN++
		}
		if p.oldIdx > 0 {
			oldN++
		}
	}
	names := make([]string, len(silent))
	for i, p := range silent {
		names[i] = p.String()
	}
	if newN < q.newT {
		return &QuorumError{Msg: fmt.Sprintf("%d of %d new members answered, need t=%d; silent: %s", newN, q.newN, q.newT, orNone(names)), Silent: names}
	}
	if q.oldT > 0 && oldN < q.oldT {
		return &QuorumError{Msg: fmt.Sprintf("%d of %d old members answered, need their old t=%d; silent: %s", oldN, q.oldN, q.oldT, orNone(names)), Silent: names}
	}
	return nil
}

// complaint is one complaint a member owes: about dealer (1-based dealer
// index) for one session the checked responses report.
type complaint struct {
	dealer int
	sid    []byte
}

// complaintsDue lists the complaints a receiving member owes once the
// responses phase ends: one per session that the checked responses
// report for each dealer whose deal it never got (got, by 1-based dealer
// index). The members holding the deal accept only the complaint with its
// session, so a relabelled response cannot misdirect it. A dealer nobody
// got a deal from is excluded everywhere and needs none.
func complaintsDue(dealers []int, got map[int]bool, responses map[slot][][]byte, perSlot int) []complaint {
	var out []complaint
	for _, d := range dealers {
		if got[d] {
			continue
		}
		for _, sid := range sessionsOf(responses, uint32(d-1), perSlot) {
			out = append(out, complaint{dealer: d, sid: sid})
		}
	}
	return out
}

// sessionsOf returns the session IDs that checked responses report for
// dealer d's deal (0-based), the most reported first, at most perSlot, or
// nil if no response concerns it. Responses do not sign their dealer
// index, so a relay can relabel one dealer's responses as another's;
// CheckResponse drops those whose session this member knows to be another
// dealer's, and the rest are all returned, at most one per dealer.
func sessionsOf(responses map[slot][][]byte, d uint32, perSlot int) [][]byte {
	count := map[string]int{}
	for k, vs := range responses {
		if k.dealer != d {
			continue
		}
		for _, v := range vs {
			if s, err := cdkg.ResponseSlot(v); err == nil {
				count[string(s.SessionID)]++
			}
		}
	}
	sids := make([]string, 0, len(count))
	for sid := range count {
		sids = append(sids, sid)
	}
	slices.SortFunc(sids, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	var out [][]byte
	for _, sid := range sids[:min(len(sids), perSlot)] {
		out = append(out, []byte(sid))
	}
	return out
}

// agreement decides the hash phase: the ceremony succeeds when t members
// (this one included) report this member's cluster.json hash. differ
// names the members that reported another hash; a ceremony that fails
// with any of them diverged, otherwise too few members answered.
func agreement(own [32]byte, others []*participant, hashes map[peer.ID][32]byte, t int) (agree int, differ []string, err error) {
	agree = 1
	var silent []string
	for _, p := range others {
		if h, ok := hashes[p.id]; ok {
			if h == own {
				agree++
			} else {
				differ = append(differ, p.String())
			}
		} else {
			silent = append(silent, p.String())
		}
	}
	if agree >= t {
		return agree, differ, nil
	}
	if len(differ) > 0 {
		return agree, differ, &DivergedError{Msg: fmt.Sprintf("only %d members confirmed cluster.json hash %x, need %d; a different hash at %s", agree, own[:8], t, strings.Join(differ, ", "))}
	}
	return agree, differ, &QuorumError{Msg: fmt.Sprintf("only %d members confirmed cluster.json hash %x, need %d; silent: %s", agree, own[:8], t, orNone(silent)), Silent: silent}
}

// QuorumError is the error of a ceremony that ended with too few members
// (errors.Is ErrTooFewMembers). It tells why they were too few: Silent
// names the members not heard from before a phase's deadline (no
// ceremony key, no deal or justification, no hash); Refused those that
// sent this member something it refused during the ceremony (a bad
// signature, a deal that did not open, a forged or malformed item);
// Other those that answered from another ceremony or another key set. A
// ceremony that failed with neither Refused nor Other ran out of time:
// run it again and it may succeed. Otherwise it met a faulty member, a
// member with another view of the ceremony, or a bug.
type QuorumError struct {
	// Msg says which quorum was missed, and by how much.
	Msg string
	// Silent lists the members that were not heard from in time.
	Silent []string
	// Refused lists the members that sent something refused.
	Refused []string
	// Other lists the members that answered from another ceremony or
	// another key set.
	Other []string
}

// Error names the missed quorum, the silent members and the refused ones.
func (e *QuorumError) Error() string {
	s := ErrTooFewMembers.Error() + ": " + e.Msg
	if len(e.Refused) > 0 {
		s += "; refused items from: " + strings.Join(e.Refused, ", ")
	}
	if len(e.Other) > 0 {
		s += "; in another ceremony or key set: " + strings.Join(e.Other, ", ")
	}
	return s
}

// Is makes errors.Is(err, ErrTooFewMembers) true.
func (e *QuorumError) Is(target error) bool { return target == ErrTooFewMembers }

// DivergedError is the error of a member whose cluster.json too few
// members confirmed while others built another (errors.Is ErrDiverged).
// With honest members on a network that delivers within the phase
// timeouts, that does not happen. TimedOut names the phases that ended at
// their deadline at this member with members still missing: a member
// that timed out where another heard everyone may qualify other dealers,
// so the ceremony's synchrony assumption failed there; it is empty when
// every phase here completed.
type DivergedError struct {
	// Msg says how many members confirmed this member's hash and which
	// members had another.
	Msg string
	// TimedOut names the phases that timed out here, and whom they
	// missed; empty if every phase completed.
	TimedOut []string
}

func (e *DivergedError) Error() string {
	s := ErrDiverged.Error() + ": " + e.Msg
	if len(e.TimedOut) > 0 {
		s += "; phases that timed out here: " + strings.Join(e.TimedOut, "; ")
	}
	return s
}

// Is makes errors.Is(err, ErrDiverged) true.
func (e *DivergedError) Is(target error) bool { return target == ErrDiverged }

// TimedOut reports whether the ceremony failed only for lack of time:
// too few members were heard from before a deadline, none of those heard
// sent anything refused, and none answered from another ceremony.
func (e *QuorumError) TimedOut() bool { return len(e.Refused) == 0 && len(e.Other) == 0 }

// stateVersion is the version of the crash-state file this release
// writes and reads. The bn256 release wrote no version (read as 1); its
// ceremony key is a scalar of another curve, which must never resume here.
const stateVersion = 2

// ceremonyState is the crash-state file.
type ceremonyState struct {
	// Version is stateVersion.
	Version int `json:"version"`
	// Ciphersuite is crypto.Ciphersuite, naming the curve of the key.
	Ciphersuite string `json:"ciphersuite"`
	Ceremony    string `json:"ceremony"`
	Key         string `json:"dkg_key"`
	Seed        string `json:"seed"`
}

// checkVersion refuses a crash state of another version or ciphersuite,
// naming it and what to do.
func (st ceremonyState) checkVersion(path string) error {
	const restart = "run with --restart to discard it and start the ceremony again (every other member must restart too)"
	switch {
	case st.Version == 0 || st.Version == 1:
		return fmt.Errorf("%w: %s is crash-state version 1, written by the bn256 release; this release reads only version %d (%s, ciphersuite %s): %s",
			ErrState, path, stateVersion, crypto.CurveName, crypto.Ciphersuite, restart)
	case st.Version != stateVersion:
		return fmt.Errorf("%w: %s is crash-state version %d; this release reads only version %d: %s", ErrState, path, st.Version, stateVersion, restart)
	case st.Ciphersuite != crypto.Ciphersuite:
		return fmt.Errorf("%w: %s holds a key for ciphersuite %q; this release uses %q: %s", ErrState, path, st.Ciphersuite, crypto.Ciphersuite, restart)
	}
	return nil
}

// resumeStep is what the crash-state decision asks of the driver.
type resumeStep int

const (
	// stateFresh: there is no state; make a ceremony key and seed, and
	// persist them before anything leaves.
	stateFresh resumeStep = iota + 1
	// stateErase: the operator restarts the ceremony; erase the state,
	// then start fresh.
	stateErase
	// stateResume: resume with the stored key and seed.
	stateResume
)

// resume decides what a member does with its crash state at start: b and
// readErr are the contents and read error of the state file at path, cid
// the ceremony ID (hex), restart the operator's --restart. On stateResume
// it returns the stored key and seed.
func resume(path string, b []byte, readErr error, cid string, restart bool) (resumeStep, *cdkg.Key, [cdkg.SeedSize]byte, error) {
	var seed [cdkg.SeedSize]byte
	switch {
	case errors.Is(readErr, os.ErrNotExist):
		return stateFresh, nil, seed, nil
	case readErr != nil:
		return 0, nil, seed, fmt.Errorf("dkg: %w", readErr)
	case restart:
		return stateErase, nil, seed, nil
	}
	var st ceremonyState
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, nil, seed, fmt.Errorf("%w: %s: %w", ErrState, path, err)
	}
	if err := st.checkVersion(path); err != nil {
		return 0, nil, seed, err
	}
	if st.Ceremony != cid {
		return 0, nil, seed, fmt.Errorf("%w: %s belongs to another ceremony (another member list or old cluster); run with --restart to discard it", ErrState, path)
	}
	kb, err1 := hex.DecodeString(st.Key)
	sb, err2 := hex.DecodeString(st.Seed)
	if err := errors.Join(err1, err2); err != nil || len(sb) != cdkg.SeedSize {
		return 0, nil, seed, fmt.Errorf("%w: %s is corrupt", ErrState, path)
	}
	key, err := cdkg.ParseKey(kb)
	if err != nil {
		return 0, nil, seed, fmt.Errorf("%w: %s: %w", ErrState, path, err)
	}
	copy(seed[:], sb)
	return stateResume, key, seed, nil
}

// marshalState is the crash-state file for a fresh ceremony key and seed.
func marshalState(cid string, key *cdkg.Key, seed [cdkg.SeedSize]byte) []byte {
	kb, _ := key.MarshalBinary()
	b, _ := json.Marshal(ceremonyState{Version: stateVersion, Ciphersuite: crypto.Ciphersuite, Ceremony: cid, Key: hex.EncodeToString(kb), Seed: hex.EncodeToString(seed[:])})
	return b
}
