package dkg

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

func freePorts(t *testing.T, n int) []int {
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return out
}

type testMembers struct {
	list *MemberList
	ids  []lcrypto.PrivKey
}

func newTestMembers(t *testing.T, n int) testMembers {
	rnd := mrand.New(mrand.NewSource(int64(len(t.Name()))))
	ports := freePorts(t, n)
	tm := testMembers{list: &MemberList{Name: "test"}}
	for i := range n {
		k, err := transport.GenerateIdentity(rnd)
		require.NoError(t, err)
		pid, _ := peer.IDFromPrivateKey(k)
		tm.ids = append(tm.ids, k)
		tm.list.Members = append(tm.list.Members, Member{PeerID: pid.String(), Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])}})
	}
	return tm
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	on func(string)
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	on := s.on
	s.mu.Unlock()
	if on != nil {
		on(string(p))
	}
	return n, err
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clientID is a fresh client identity's peer ID.
func (tm *testMembers) clientID(t *testing.T) string {
	t.Helper()
	k, _, err := lcrypto.GenerateEd25519Key(crand.Reader)
	require.NoError(t, err)
	id, err := peer.IDFromPrivateKey(k)
	require.NoError(t, err)
	return id.String()
}

func TestParseMemberList(t *testing.T) {
	tm := newTestMembers(t, 4)
	good := tm.list
	b, err := jsonOf(good)
	require.NoError(t, err)
	_, err = ParseMemberList(b)
	require.NoError(t, err)
	for name, mutate := range map[string]func(l *MemberList){
		"empty name":  func(l *MemberList) { l.Name = "" },
		"too few":     func(l *MemberList) { l.Members = l.Members[:3] },
		"threshold":   func(l *MemberList) { l.Threshold = 2 },
		"duplicate":   func(l *MemberList) { l.Members[1] = l.Members[0] },
		"bad peer ID": func(l *MemberList) { l.Members[2].PeerID = "nope" },
		"no address":  func(l *MemberList) { l.Members[3].Addrs = nil },
		// A step of 2^60 would void the era argument (docs/design-notes.md).
		"max_epoch_step above the limit": func(l *MemberList) { l.MaxEpochStep = 1 << 60 },
		"client pattern with a format character": func(l *MemberList) {
			l.Clients = []protocol.ClientInfo{{Name: "c", PeerID: tm.clientID(t), Resources: []string{"orders-\u202e*"}}}
		},
	} {
		l := *good
		l.Members = append([]Member(nil), good.Members...)
		mutate(&l)
		b, err := jsonOf(&l)
		require.NoError(t, err)
		_, err = ParseMemberList(b)
		require.ErrorIs(t, err, ErrBadMemberList, name)
	}
	_, err = ParseMemberList([]byte(`{"name":"x","members":[],"extra":1}`))
	require.ErrorIs(t, err, ErrBadMemberList)
	_, err = ParseMemberList(append(b, []byte(" {}")...))
	require.ErrorIs(t, err, ErrBadMemberList)
}

// TestResumeAfterCrash interrupts one member in the middle of the ceremony
// and runs it again: it resumes from its state file (same ceremony key and
// deals) and every member ends with the same cluster.json.
func TestResumeAfterCrash(t *testing.T) {
	tm := newTestMembers(t, 4)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := make([]*Result, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	cfgOf := func(i int, out *syncBuf) Config {
		return Config{Members: tm.list, Identity: tm.ids[i], OutDir: filepath.Join(dir, fmt.Sprint(i+1)),
			Progress: out, PhaseTimeout: 15 * time.Second, PollInterval: 50 * time.Millisecond}
	}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Run(ctx, cfgOf(i, &syncBuf{}))
		}()
	}
	// Member 4 crashes once it has sent its responses.
	crashCtx, crash := context.WithCancel(ctx)
	first := &syncBuf{}
	first.on = func(line string) {
		if strings.Contains(line, "phase justifications: waiting") {
			crash()
		}
	}
	_, err := Run(crashCtx, cfgOf(3, first))
	require.ErrorIs(t, err, context.Canceled, first.String())
	_, err = os.Stat(filepath.Join(dir, "4", StateFileName))
	require.NoError(t, err, "crash state kept")
	again := &syncBuf{}
	res, err := Run(ctx, cfgOf(3, again))
	require.NoError(t, err, again.String())
	require.True(t, res.Resumed)
	require.Contains(t, again.String(), "resuming ceremony")
	wg.Wait()
	for i := range 3 {
		require.NoError(t, errs[i])
		require.Equal(t, res.ClusterHash, results[i].ClusterHash)
	}
	for i := 1; i <= 4; i++ {
		_, err := node.LoadDir(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(dir, fmt.Sprint(i), StateFileName))
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	// A finished directory refuses a second ceremony.
	_, err = Run(ctx, cfgOf(0, &syncBuf{}))
	require.ErrorIs(t, err, ErrState)
}

// TestOtherMemberListRefused: a member that runs another member list is in
// another ceremony; the others say so and fail instead of mixing keys.
// otherListPhaseTimeout bounds each phase of TestOtherMemberListRefused.
// The three members that agree wait that long for the fourth once, so it
// sets the test's length, but it must also leave them time to hear each
// other under load: this package once failed with "phase hash: timed out;
// no answer from: node3" at a load of 10 on two cores, when this test's
// 2 s was the only phase timeout here below 10 s.
const otherListPhaseTimeout = 6 * time.Second

func TestOtherMemberListRefused(t *testing.T) {
	tm := newTestMembers(t, 4)
	other := *tm.list
	other.Name = "other"
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	outs := make([]*syncBuf, 4)
	for i := range 4 {
		l := tm.list
		if i == 3 {
			l = &other
		}
		outs[i] = &syncBuf{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Run(ctx, Config{Members: l, Identity: tm.ids[i], OutDir: filepath.Join(dir, fmt.Sprint(i+1)),
				Progress: outs[i], PhaseTimeout: otherListPhaseTimeout, PollInterval: 50 * time.Millisecond})
		}()
	}
	wg.Wait()
	require.ErrorIs(t, errs[3], ErrTooFewMembers)
	// Not a timing failure: the others answered, from their ceremony.
	var qe *QuorumError
	require.ErrorAs(t, errs[3], &qe)
	require.False(t, qe.TimedOut(), "%v", errs[3])
	require.Len(t, qe.Other, 3, "%v", errs[3])
	require.Contains(t, errs[3].Error(), "in another ceremony or key set: ")
	require.Contains(t, outs[0].String(), "another ceremony")
	// The three that agree still complete (f = 1 misbehaving member).
	for i := range 3 {
		require.NoError(t, errs[i], outs[i].String())
	}
}

func TestWireRoundTrip(t *testing.T) {
	req := request{Kind: kindResponses}
	req.Ceremony[0], req.KeySet[31] = 1, 2
	got, err := parseRequest(req.marshal())
	require.NoError(t, err)
	require.Equal(t, req, got)
	_, err = parseRequest(append(req.marshal(), 0))
	require.ErrorIs(t, err, errMalformed)
	items := [][]byte{{1, 2}, {}, []byte("abc")}
	back, err := decodeList(encodeList(items))
	require.NoError(t, err)
	require.Equal(t, items, back)
	for _, bad := range [][]byte{nil, {0, 0, 0, 1}, append(encodeList(items), 9)} {
		_, err := decodeList(bad)
		require.ErrorIs(t, err, errMalformed)
	}
	_, err = parseKeyRecord([]byte{1, 2, 3})
	require.ErrorIs(t, err, errMalformed)
}

func jsonOf(l *MemberList) ([]byte, error) { return json.Marshal(l) }
