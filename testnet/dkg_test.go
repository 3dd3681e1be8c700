package testnet

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	mrand "math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3/share"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

func runDKG(t *testing.T, o DKGOptions) (*Keys, string) {
	t.Helper()
	keys, dir, _ := runDKGLog(t, o)
	return keys, dir
}

func runDKGLog(t *testing.T, o DKGOptions) (*Keys, string, string) {
	t.Helper()
	dir := t.TempDir()
	o.Rand = mrand.New(mrand.NewSource(seedFor(t)))
	if o.PhaseTimeout == 0 {
		o.PhaseTimeout = 20 * time.Second // only waited out when a member is silent
	}
	var log lockedBuffer
	o.Progress = &log
	ctx, cancel := context.WithTimeout(context.Background(), dkgBudget())
	defer cancel()
	keys, err := DKG(ctx, dir, o)
	if err != nil || testing.Verbose() {
		t.Logf("progress:\n%s", log.String())
	}
	require.NoError(t, err)
	return keys, dir, log.String()
}

// dkgBudget bounds a test's ceremonies: a guard against a hang, not a
// measure of speed. The race detector slows a ceremony's curve arithmetic
// several times (a 7-member DKG takes about 20 s under -race on two
// shared cores), and a loaded machine more.
func dkgBudget() time.Duration {
	if raceEnabled() {
		return 3 * time.Minute
	}
	return time.Minute
}

// acquireVerify starts a network from keys, acquires one token and checks
// it against the cluster file at clusterPath.
func acquireVerify(t *testing.T, keys *Keys, clusterPath, resource string) protocol.Token {
	t.Helper()
	nw, err := StartKeys(keys, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, nw.Close()) }()
	c, err := nw.NewClient(0, client.Config{Seed: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := acquireWait(ctx, c, 15*time.Second, resource)
	require.NoError(t, err)
	tok := l.Token()
	require.NoError(t, l.Release(ctx))
	cl, err := protocol.LoadCluster(clusterPath)
	require.NoError(t, err)
	require.NoError(t, cl.Key.Verify(tok.SignedBytes(), tok.Signature))
	require.Equal(t, cl.ID, tok.Cluster)
	return tok
}

// checkNoSecret computes the group secret from t share files (allowed in a
// test only), checks that t-1 shares do not give it, and that no file under
// dir contains it.
func checkNoSecret(t *testing.T, keys *Keys, dir string) {
	t.Helper()
	su := bls12381.NewSuiteG2()
	var shares []*share.PriShare
	for _, d := range keys.NodeDirs {
		if d == "" {
			continue
		}
		nd, err := node.LoadDir(d)
		require.NoError(t, err)
		raw, err := nd.Share.MarshalBinary() // index, then the scalar
		require.NoError(t, err)
		require.Len(t, raw, crypto.ShareSize)
		v := su.Scalar()
		require.NoError(t, v.UnmarshalBinary(raw[2:]))
		shares = append(shares, &share.PriShare{I: nd.Share.Index() - 1, V: v})
	}
	n, th := keys.Cluster.File.N, keys.Cluster.File.T
	require.GreaterOrEqual(t, len(shares), th)
	pub := keys.Cluster.Key.PublicKey()
	secret, err := share.RecoverSecret(su, shares[:th], th, n)
	require.NoError(t, err)
	got, _ := su.Point().Mul(secret, nil).MarshalBinary()
	require.Equal(t, pub[:], got, "t shares give the group secret")
	fewer, err := share.RecoverSecret(su, shares[:th-1], th-1, n)
	require.NoError(t, err)
	got, _ = su.Point().Mul(fewer, nil).MarshalBinary()
	require.NotEqual(t, pub[:], got, "t-1 shares must not give the group secret")
	sb, _ := secret.MarshalBinary()
	needles := [][]byte{sb, []byte(hex.EncodeToString(sb))}
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, nd := range needles {
			require.False(t, bytes.Contains(bytes.ToLower(b), bytes.ToLower(nd)), "%s contains the group secret", p)
		}
		return nil
	}))
	require.Greater(t, files, len(shares)*3)
}

func TestDKGTokensVerify(t *testing.T) {
	for _, n := range []int{4, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys, dir := runDKG(t, DKGOptions{N: n})
			require.Equal(t, n, keys.Cluster.File.N)
			_, th := 0, keys.Cluster.File.T
			require.Equal(t, 2*((n-1)/3)+1, th)
			// Every member's cluster.json is byte-identical.
			want, err := os.ReadFile(keys.ClusterPath)
			require.NoError(t, err)
			for _, d := range keys.NodeDirs {
				b, err := os.ReadFile(filepath.Join(d, node.ClusterFileName))
				require.NoError(t, err)
				require.Equal(t, want, b)
				st, err := os.Stat(filepath.Join(d, node.ShareFileName))
				require.NoError(t, err)
				require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
				_, err = os.Stat(filepath.Join(d, dkg.StateFileName))
				require.ErrorIs(t, err, os.ErrNotExist, "crash state is erased after success")
			}
			acquireVerify(t, keys, keys.ClusterPath, "orders-db")
			checkNoSecret(t, keys, dir)
		})
	}
}

func TestDKGFaultyMinority(t *testing.T) {
	t.Run("f bad dealers", func(t *testing.T) {
		keys, _, log := runDKGLog(t, DKGOptions{N: 4, Corrupt: []int{2}, PhaseTimeout: 5 * time.Second})
		require.Empty(t, keys.NodeDirs[1])
		require.Contains(t, log, "excluded: node2 (")
		acquireVerify(t, keys, keys.ClusterPath, "r")
	})
	t.Run("deal withheld from one member", func(t *testing.T) {
		// The victim complains; the dealer must justify in public, and
		// then the victim has its share too: all four complete.
		keys, _, log := runDKGLog(t, DKGOptions{N: 4, Withhold: []int{2}, PhaseTimeout: 5 * time.Second})
		for i, d := range keys.NodeDirs {
			require.NotEmpty(t, d, "member %d", i+1)
		}
		require.Contains(t, log, "complained that node2 (")
		require.Contains(t, log, "excluded: none")
		acquireVerify(t, keys, keys.ClusterPath, "r")
	})
	t.Run("f silent", func(t *testing.T) {
		keys, dir, log := runDKGLog(t, DKGOptions{N: 4, Silent: []int{3}, PhaseTimeout: 5 * time.Second})
		require.Empty(t, keys.NodeDirs[2])
		require.Contains(t, log, "no answer from: node3 (")
		acquireVerify(t, keys, keys.ClusterPath, "r")
		checkNoSecret(t, keys, dir)
	})
}

func TestDKGTooManySilentFails(t *testing.T) {
	dir := t.TempDir()
	var log lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := DKG(ctx, dir, DKGOptions{N: 4, Silent: []int{3, 4}, PhaseTimeout: time.Second, Progress: &log,
		Rand: mrand.New(mrand.NewSource(seedFor(t)))})
	require.ErrorIs(t, err, dkg.ErrTooFewMembers)
	require.True(t, reshareTimedOut(err), "silence alone is a timing failure: %v", err)
	require.NoError(t, ctx.Err(), "failed within its timeout")
	require.Contains(t, err.Error(), "node3")
	require.Contains(t, err.Error(), "node4")
	require.Contains(t, log.String(), "still missing")
	for i := 1; i <= 2; i++ {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node%d", i), node.ShareFileName))
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

// TestReshareKeepsKeyAndS1 reshares 4 -> 7 while clients contend for one
// resource on the old group, then 7 -> 4. Every token, before and after,
// verifies with the original cluster.json; no two holders share an epoch;
// tokens of the new groups lie above the epoch floor; removed members' share
// files are gone.
func TestReshareKeepsKeyAndS1(t *testing.T) {
	keys4, _ := runDKG(t, DKGOptions{N: 4})
	original := keys4.ClusterPath
	origBytes, err := os.ReadFile(original)
	require.NoError(t, err)

	var mu sync.Mutex
	seen := map[uint64]protocol.Holder{}
	var maxOld uint64
	record := func(tok protocol.Token) {
		mu.Lock()
		defer mu.Unlock()
		if h, ok := seen[tok.Epoch]; ok && h != tok.Holder {
			t.Errorf("S1 violated at epoch %d: %s and %s", tok.Epoch, h, tok.Holder)
		}
		seen[tok.Epoch] = tok.Holder
	}
	contend := func(keys *Keys, stop <-chan struct{}, minTokens int) int {
		nw, err := StartKeys(keys, Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, nw.Close()) }()
		cl, err := protocol.LoadCluster(original)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var count int
		for i := range keys.Clients {
			c, err := nw.NewClient(i, client.Config{Seed: uint64(i + 1), MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for k := 0; k < 50; k++ {
					mu.Lock()
					enough := count >= minTokens
					mu.Unlock()
					select {
					case <-stop:
						if enough {
							return
						}
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					l, err := acquireWait(ctx, c, 10*time.Second, "contended", client.WithTTL(2*time.Second))
					if err != nil {
						cancel()
						t.Errorf("acquire: %v", err)
						return
					}
					tok := l.Token()
					if err := cl.Key.Verify(tok.SignedBytes(), tok.Signature); err != nil {
						t.Errorf("token does not verify with the original cluster.json: %v", err)
					}
					record(tok)
					mu.Lock()
					count++
					if keys.Cluster.File.EpochFloor == 0 {
						maxOld = max(maxOld, tok.Epoch)
					} else if tok.Epoch <= keys.Cluster.File.EpochFloor {
						t.Errorf("new-group token at epoch %d, not above floor %d", tok.Epoch, keys.Cluster.File.EpochFloor)
					}
					mu.Unlock()
					_ = l.Release(ctx)
					cancel()
				}
			}()
		}
		wg.Wait()
		return count
	}
	// The old group serves a contended resource while the reshare runs.
	stop := make(chan struct{})
	oldDone := make(chan int)
	go func() { oldDone <- contend(keys4, stop, 3) }()
	ctx, cancel := context.WithTimeout(context.Background(), dkgBudget())
	defer cancel()
	var log lockedBuffer
	keys7, err := Reshare(ctx, t.TempDir(), keys4, DKGOptions{N: 7, Keep: 3, PhaseTimeout: 20 * time.Second, Progress: &log})
	// Stop the old group's clients before any assertion can end the test:
	// they report through t.
	close(stop)
	oldCount := <-oldDone
	if err != nil {
		t.Logf("progress:\n%s", log.String())
	}
	require.NoError(t, err)
	require.Positive(t, oldCount)

	require.Equal(t, keys4.Cluster.ID, keys7.Cluster.ID)
	require.Equal(t, keys4.GroupPublicKey(), keys7.GroupPublicKey())
	require.Equal(t, 7, keys7.Cluster.File.N)
	require.Equal(t, 5, keys7.Cluster.File.T)
	require.Equal(t, mustNextFloor(t, 0), keys7.Cluster.File.EpochFloor)
	require.Greater(t, keys7.Cluster.File.EpochFloor, maxOld)
	for _, d := range keys4.NodeDirs {
		_, err := os.Stat(filepath.Join(d, node.ShareFileName))
		require.ErrorIs(t, err, os.ErrNotExist, "old share in %s erased", d)
	}
	newCount := contend(keys7, closedChan(), 3)
	require.GreaterOrEqual(t, newCount, 3)

	// 7 -> 4: members 1 and 2 stay; 3..7 leave.
	removedDir := keys7.NodeDirs[2] // index 3 exists in both groups
	// The removed member's share as it was, before the resharing erases it.
	removedNode, err := node.LoadDir(removedDir)
	require.NoError(t, err)
	keys4b, err := Reshare(ctx, t.TempDir(), keys7, DKGOptions{N: 4, Keep: 2, PhaseTimeout: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, keys4.Cluster.ID, keys4b.Cluster.ID)
	require.Equal(t, mustNextFloor(t, keys7.Cluster.File.EpochFloor), keys4b.Cluster.File.EpochFloor)
	_, err = os.Stat(filepath.Join(removedDir, node.ShareFileName))
	require.ErrorIs(t, err, os.ErrNotExist, "a removed member's share is erased")
	contend(keys4b, closedChan(), 3)
	tok := acquireVerify(t, keys4b, original, "after")
	require.Greater(t, tok.Epoch, keys4b.Cluster.File.EpochFloor)

	// A removed member's share (as it was) cannot help the new group: its
	// partial does not verify under the new group key.
	msg := []byte("statement")
	p, err := removedNode.Share.Sign(msg)
	require.NoError(t, err)
	require.Error(t, keys4b.Cluster.Key.VerifyPartial(msg, p))

	// The original cluster.json never changed.
	now, err := os.ReadFile(original)
	require.NoError(t, err)
	require.Equal(t, origBytes, now)
	require.False(t, strings.Contains(string(now), "epoch_floor"))
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// mustNextFloor is protocol.NextEpochFloor for a floor below the last era.
func mustNextFloor(t *testing.T, floor uint64) uint64 {
	t.Helper()
	next, err := protocol.NextEpochFloor(floor)
	require.NoError(t, err)
	return next
}
