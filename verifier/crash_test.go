package verifier_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// The crash test re-executes the test binary as a child process that writes
// through a Fence until the parent kills it with SIGKILL. The child is
// configured through these environment variables.
const (
	crashEnvChild    = "PALISADE_CRASH_CHILD"    // "1" in the child
	crashEnvDB       = "PALISADE_CRASH_DB"       // bolt store path
	crashEnvCluster  = "PALISADE_CRASH_CLUSTER"  // cluster file path
	crashEnvTokens   = "PALISADE_CRASH_TOKENS"   // token per line, line i is epoch i+1
	crashEnvProgress = "PALISADE_CRASH_PROGRESS" // progress log the child appends to
	crashEnvStale    = "PALISADE_CRASH_STALE"    // "true": interleave stale attempts
	crashEnvSeed     = "PALISADE_CRASH_SEED"     // seeds the child's choice of stale epochs

	crashResource = "r"
	crashSeed     = 20260401
	crashCycles   = 6  // kill/restart cycles; the odd ones interleave stale attempts
	crashTokens   = 90 // epochs 1..crashTokens; more than the cycles can use
	crashBlobSize = 64 << 10
	crashBudget   = 60 * time.Second // a ceiling for the whole parent test, children included (about 7 s here; the work is fixed by crashCycles, the budget only bounds a hang)
)

// crashBlob is a multi-page value derived from epoch, so a torn commit would
// show as a blob that disagrees with the other keys.
func crashBlob(epoch uint64) []byte {
	return bytes.Repeat(binary.BigEndian.AppendUint64(nil, epoch), crashBlobSize/8)
}

// crashToken issues the token of epoch, off the test goroutine.
func crashToken(fx *verifiertest.Dealer, epoch uint64) (protocol.Token, error) {
	return fx.Issue(crashResource, epoch, holder(epoch))
}

// crashWrite is the guarded write for epoch: three keys in one transaction.
// onRun, if not nil, runs first.
func crashWrite(epoch uint64, onRun func()) func(verifier.Tx) error {
	return func(tx verifier.Tx) error {
		if onRun != nil {
			onRun()
		}
		if err := tx.Put("value", []byte(fmt.Sprint(epoch))); err != nil {
			return err
		}
		if err := tx.Put("blob", crashBlob(epoch)); err != nil {
			return err
		}
		return tx.Put("epoch", binary.BigEndian.AppendUint64(nil, epoch))
	}
}

// crashData is what the resource's data says, read straight from bolt.
type crashData struct {
	present bool // the resource's data bucket exists
	epoch   uint64
	value   string
	blobOK  bool
	keys    int
}

func readCrashData(db *bbolt.DB) (crashData, error) {
	var d crashData
	err := db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket([]byte(verifier.BoltDataBucket))
		if root == nil {
			return errors.New("data bucket missing")
		}
		b := root.Bucket([]byte(crashResource))
		if b == nil {
			return nil
		}
		d.present = true
		d.keys = b.Stats().KeyN
		ev := b.Get([]byte("epoch"))
		if len(ev) != 8 {
			return fmt.Errorf("epoch key is %d bytes", len(ev))
		}
		d.epoch = binary.BigEndian.Uint64(ev)
		d.value = string(b.Get([]byte("value")))
		d.blobOK = bytes.Equal(b.Get([]byte("blob")), crashBlob(d.epoch))
		return nil
	})
	return d, err
}

// TestCrashChild is the child process of TestCrashKillRestart. Run directly
// it skips.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashEnvChild) != "1" {
		t.Skip("helper process for TestCrashKillRestart")
	}
	// A child the parent failed to kill still goes away.
	ctx, cancel := context.WithTimeout(context.Background(), 2*crashBudget)
	defer cancel()

	v, err := verifier.Load(os.Getenv(crashEnvCluster))
	require.NoError(t, err)
	raw, err := os.ReadFile(os.Getenv(crashEnvTokens))
	require.NoError(t, err)
	var toks []protocol.Token
	for _, line := range strings.Fields(string(raw)) {
		tok, err := protocol.ParseTokenText(line)
		require.NoError(t, err)
		toks = append(toks, tok)
	}
	seed, err := strconv.ParseInt(os.Getenv(crashEnvSeed), 10, 64)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(seed))
	stale := os.Getenv(crashEnvStale) == "true"

	prog, err := os.OpenFile(os.Getenv(crashEnvProgress), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer prog.Close()
	logf := func(sync bool, format string, args ...any) {
		_, err := fmt.Fprintf(prog, format+"\n", args...)
		require.NoError(t, err)
		if sync {
			require.NoError(t, prog.Sync())
		}
	}

	store, err := verifier.OpenBoltStore(os.Getenv(crashEnvDB))
	require.NoError(t, err)
	defer store.Close()
	fence := verifier.NewFence(v, store)
	dataEpoch := func() uint64 {
		d, err := readCrashData(store.DB())
		require.NoError(t, err)
		return d.epoch
	}

	barrier, _, err := store.Barrier(ctx, crashResource)
	require.NoError(t, err)
	logf(true, "start %d %d", barrier, dataEpoch())

	for e := barrier + 1; e <= uint64(len(toks)); e++ {
		if stale && e >= 3 {
			// The barrier is e-1: any epoch in [1, e-2] is stale.
			s := 1 + uint64(rng.Int63n(int64(e-2)))
			ran := false
			err := fence.Admit(ctx, toks[s-1], crashResource, crashWrite(s, func() { ran = true }))
			if errors.Is(err, verifier.ErrStale) && !ran {
				logf(false, "stale %d %d", s, dataEpoch())
			} else {
				logf(true, "landed %d %d ran=%v err=%v", s, dataEpoch(), ran, err)
			}
		}
		logf(false, "try %d", e)
		// "write" is logged inside the transaction, after verification and
		// the barrier check and before the commit.
		onRun := func() { logf(false, "write %d", e) }
		require.NoError(t, fence.Admit(ctx, toks[e-1], crashResource, crashWrite(e, onRun)))
		logf(true, "ack %d %d", e, dataEpoch())
	}
	// Out of tokens: wait to be killed.
	logf(true, "exhausted")
	<-ctx.Done()
}

// crashProgress is what the parent reads from a child's progress log.
type crashProgress struct {
	acks      int
	lastAck   uint64 // 0: none
	maxTry    uint64
	lastTry   uint64
	lastWrite uint64 // the last write function that ran
	stale     int
	data      []uint64 // the data epoch after each operation, in order
	problems  []string
}

func parseCrashProgress(raw []byte) crashProgress {
	var p crashProgress
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		num := func(i int) uint64 {
			if i >= len(f) {
				return 0 // a line cut short by the kill
			}
			n, _ := strconv.ParseUint(f[i], 10, 64)
			return n
		}
		switch f[0] {
		case "start":
			if len(f) == 3 {
				p.data = append(p.data, num(2))
			}
		case "try":
			p.lastTry = num(1)
			p.maxTry = max(p.maxTry, p.lastTry)
		case "write":
			if len(f) == 2 {
				p.lastWrite = num(1)
			}
		case "ack":
			if len(f) < 3 {
				continue // torn line; the write is not counted as acknowledged
			}
			p.acks++
			p.lastAck = num(1)
			p.data = append(p.data, num(2))
			if num(2) != num(1) {
				p.problems = append(p.problems, "data disagrees with acknowledged write: "+sc.Text())
			}
		case "stale":
			if len(f) == 3 {
				p.stale++
				p.data = append(p.data, num(2))
			}
		case "landed":
			p.problems = append(p.problems, "stale write not refused: "+sc.Text())
		}
	}
	return p
}

// TestCrashKillRestart SIGKILLs a child process writing through a Fence onto
// a bolt store at seeded random points, several times, and checks after each
// kill that the store reopens cleanly, that the barrier and the data (three
// keys written in the same guarded transaction) agree, that no acknowledged
// write was lost, and that a stale token is refused. Some cycles interleave
// stale attempts with the new writes; none may land.
func TestCrashKillRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), crashBudget)
	defer cancel()
	start := time.Now()

	dir := t.TempDir()
	dbPath := filepath.Join(dir, "barriers.db")
	clusterPath := filepath.Join(dir, "cluster.json")
	tokensPath := filepath.Join(dir, "tokens.txt")

	fx := mainFixture()
	require.NoError(t, fx.Cluster.File.Save(clusterPath))
	// Sign the tokens on two goroutines: under -race this takes a while.
	toks := make([]protocol.Token, crashTokens)
	errs := make([]error, crashTokens)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < crashTokens; i += 2 {
				toks[i], errs[i] = crashToken(fx, uint64(i+1))
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	var buf strings.Builder
	for _, tok := range toks {
		buf.WriteString(tok.String() + "\n")
	}
	require.NoError(t, os.WriteFile(tokensPath, []byte(buf.String()), 0o600))
	t.Logf("seed %d, %d tokens in %v", crashSeed, crashTokens, time.Since(start).Round(time.Millisecond))

	v := verifier.New(fx.Cluster)
	rng := rand.New(rand.NewSource(crashSeed))
	var (
		lastAck   uint64   // highest acknowledged epoch over all children
		maxWrite  uint64   // highest epoch whose write function ran
		dataSeen  []uint64 // data epochs in the order observed, over all children
		inVerify  int      // kills between "try" and "write" (verification)
		inCommit  int      // kills between "write" and "ack" (commit)
		committed int      // ... of which the write had committed
		elsewhere int      // kills after an ack or in a stale attempt
		staleSeen int
	)

	for cycle := range crashCycles {
		stale := cycle%2 == 1 // cycles: plain and stale, each aiming and not
		progPath := filepath.Join(dir, fmt.Sprintf("progress-%d.txt", cycle))
		wantAcks := 2 + rng.Intn(8)
		// Half the cycles kill anywhere in the loop (mostly during the
		// pairing check, the slowest step); the others aim at the commit,
		// killing shortly after a write function ran.
		aimCommit := (cycle/2)%2 == 0
		delay := time.Duration(rng.Intn(8000)) * time.Microsecond
		if aimCommit {
			delay = time.Duration(rng.Intn(1000)) * time.Microsecond
		}

		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			crashEnvChild+"=1",
			crashEnvDB+"="+dbPath,
			crashEnvCluster+"="+clusterPath,
			crashEnvTokens+"="+tokensPath,
			crashEnvProgress+"="+progPath,
			crashEnvStale+"="+strconv.FormatBool(stale),
			fmt.Sprintf("%s=%d", crashEnvSeed, crashSeed+int64(cycle)),
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		var waitErr error
		exited := make(chan struct{})
		go func() { waitErr = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})

		// Wait, bounded, for wantAcks acknowledged writes (and, aiming at the
		// commit, for the next write function to run), then let the child run
		// on for a seeded random delay and kill it.
		ready := func(p crashProgress) bool {
			return p.acks >= wantAcks && (!aimCommit || p.lastWrite > p.lastAck)
		}
		tick := time.NewTicker(100 * time.Microsecond)
	wait:
		for {
			select {
			case <-exited:
				raw, _ := os.ReadFile(progPath)
				t.Fatalf("cycle %d: child exited before it was killed: %v\nprogress:\n%s\noutput:\n%s", cycle, waitErr, raw, out.String())
			case <-ctx.Done():
				raw, _ := os.ReadFile(progPath)
				t.Fatalf("cycle %d: child made too little progress in time\nprogress:\n%s\noutput:\n%s", cycle, raw, out.String())
			case <-tick.C:
				raw, _ := os.ReadFile(progPath)
				if ready(parseCrashProgress(raw)) {
					break wait
				}
			}
		}
		tick.Stop()
		time.Sleep(delay)
		require.NoError(t, cmd.Process.Kill()) // SIGKILL
		<-exited
		require.Equal(t, -1, cmd.ProcessState.ExitCode(), "cycle %d: child not killed by a signal: %v", cycle, cmd.ProcessState)

		raw, err := os.ReadFile(progPath)
		require.NoError(t, err)
		p := parseCrashProgress(raw)
		require.Empty(t, p.problems, "cycle %d progress:\n%s", cycle, raw)
		require.GreaterOrEqual(t, p.acks, wantAcks)
		if stale {
			require.Positive(t, p.stale, "cycle %d made no stale attempt", cycle)
		}
		staleSeen += p.stale
		lastAck = max(lastAck, p.lastAck)
		maxWrite = max(maxWrite, p.lastWrite)
		dataSeen = append(dataSeen, p.data...)

		// Reopen as the restarted resource would.
		store, err := verifier.OpenBoltStore(dbPath)
		require.NoError(t, err, "cycle %d: reopen after SIGKILL", cycle)
		require.NoError(t, store.DB().View(func(tx *bbolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}), "cycle %d: bolt consistency check", cycle)

		barrier, ok, err := store.Barrier(ctx, crashResource)
		require.NoError(t, err)
		require.True(t, ok, "cycle %d: no barrier after acknowledged writes", cycle)
		d, err := readCrashData(store.DB())
		require.NoError(t, err)
		require.True(t, d.present)
		// Data and barrier agree, and the guarded write's keys agree with
		// each other: the transaction committed whole or not at all.
		require.Equal(t, barrier, d.epoch, "cycle %d: barrier and data disagree", cycle)
		require.Equal(t, fmt.Sprint(barrier), d.value, "cycle %d: torn write", cycle)
		require.True(t, d.blobOK, "cycle %d: torn blob", cycle)
		require.Equal(t, 3, d.keys)
		// No acknowledged write lost, and nothing committed whose write
		// function never ran.
		require.GreaterOrEqual(t, barrier, lastAck, "cycle %d: acknowledged write lost", cycle)
		require.LessOrEqual(t, barrier, maxWrite, "cycle %d: barrier above any write that ran", cycle)
		switch {
		case p.lastWrite > p.lastAck:
			inCommit++
			if barrier == p.lastWrite {
				committed++
			}
		case p.lastTry > p.lastAck:
			inVerify++
			require.Equal(t, p.lastAck, barrier, "cycle %d: write committed before its function ran", cycle)
		default:
			elsewhere++
			require.Equal(t, p.lastAck, barrier, "cycle %d: barrier moved past the last acknowledged write", cycle)
		}
		dataSeen = append(dataSeen, d.epoch)

		// An old token is refused without running its write, and changes
		// nothing.
		fence := verifier.NewFence(v, store)
		old := 1 + uint64(rng.Int63n(int64(barrier-1)))
		ran := false
		err = fence.Admit(ctx, toks[old-1], crashResource, crashWrite(old, func() { ran = true }))
		require.ErrorIs(t, err, verifier.ErrStale, "cycle %d: epoch %d below barrier %d", cycle, old, barrier)
		var se *verifier.StaleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, barrier, se.Barrier)
		require.False(t, ran)
		after, err := readCrashData(store.DB())
		require.NoError(t, err)
		require.Equal(t, d, after)
		require.NoError(t, store.Close())
	}

	// Across every child and every restart, the data's epoch never went
	// down: no stale write ever landed.
	for i := 1; i < len(dataSeen); i++ {
		require.GreaterOrEqual(t, dataSeen[i], dataSeen[i-1], "data epoch went down at observation %d: %v", i, dataSeen)
	}
	require.Positive(t, staleSeen)

	// The store is still usable: the next epoch is admitted.
	store, err := verifier.OpenBoltStore(dbPath)
	require.NoError(t, err)
	defer store.Close()
	barrier, _, err := store.Barrier(ctx, crashResource)
	require.NoError(t, err)
	require.Less(t, barrier, uint64(crashTokens))
	require.NoError(t, verifier.NewFence(v, store).Admit(ctx, toks[barrier], crashResource, crashWrite(barrier+1, nil)))
	d, err := readCrashData(store.DB())
	require.NoError(t, err)
	require.Equal(t, barrier+1, d.epoch)

	t.Logf("%d kills: %d verifying, %d in the commit (%d had committed), %d elsewhere; final barrier %d; %d stale attempts refused; %v",
		crashCycles, inVerify, inCommit, committed, elsewhere, barrier, staleSeen, time.Since(start).Round(time.Millisecond))
}
