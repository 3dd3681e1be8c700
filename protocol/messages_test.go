package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range validMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			require.Equal(t, byte(Version), m.enc[0])
			require.LessOrEqual(t, len(m.enc), MaxFrameSize)
			got, err := m.decode(m.enc)
			require.NoError(t, err)
			require.Equal(t, m.value, got)
			require.Equal(t, m.enc, got.(interface{ Marshal() []byte }).Marshal())

			// Every strict prefix and any trailing byte are refused, with
			// the zero value; except, for a Commit with a certificate,
			// the prefix that is the same Commit without it (the 2.0.0
			// encoding, which stays valid).
			zero := reflect.Zero(reflect.TypeOf(m.value)).Interface()
			optional := -1
			if c, ok := m.value.(CommitRequest); ok && len(c.Certificate) > 0 {
				c.Certificate = nil
				optional = len(c.Marshal())
			}
			for i := range m.enc {
				if i == optional {
					got, err := m.decode(m.enc[:i])
					require.NoError(t, err)
					require.Empty(t, got.(CommitRequest).Certificate)
					continue
				}
				got, err := m.decode(m.enc[:i])
				require.ErrorIs(t, err, ErrMalformed, "prefix of %d bytes", i)
				require.Equal(t, zero, got)
			}
			got, err = m.decode(append(append([]byte(nil), m.enc...), 0))
			require.ErrorIs(t, err, ErrMalformed)
			require.Equal(t, zero, got)

			// So is another version byte.
			other := append([]byte{Version + 1}, m.enc[1:]...)
			got, err = m.decode(other)
			require.ErrorIs(t, err, ErrMalformed)
			require.Equal(t, zero, got)
		})
	}
}

// TestAcquireReplyVoteVerifies checks the vote survives the wire intact: the
// partial still verifies against the group key after decoding.
func TestAcquireReplyVoteVerifies(t *testing.T) {
	fx := testFixture(t)
	enc := AcquireReply{Kind: KindVote, Partial: fx.partial, IdentitySig: fx.identitySig}.Marshal()
	got, err := UnmarshalAcquireReply(enc)
	require.NoError(t, err)
	require.NoError(t, fx.gk.VerifyPartial(fx.stmt.SignedBytes(), got.Partial))
}

// TestDurationEncoding: durations travel as whole milliseconds; negative
// ones as zero.
func TestDurationEncoding(t *testing.T) {
	for _, c := range []struct {
		in, want time.Duration
	}{
		{0, 0},
		{-time.Second, 0},
		{999 * time.Microsecond, 0},
		{1500*time.Millisecond + 700*time.Microsecond, 1500 * time.Millisecond},
		{MaxTTL, MaxTTL},
		{maxWireDuration, maxWireDuration},
	} {
		got, err := UnmarshalAck(Ack{Left: c.in}.Marshal())
		require.NoError(t, err, "%v", c.in)
		require.Equal(t, c.want, got.Left, "%v", c.in)
	}
	// Beyond maxWireDuration, Marshal clamps so its output always decodes
	// (raw over-long values are refused: see TestMessagesRefuse).
	got, err := UnmarshalAck(Ack{Left: maxWireDuration + time.Hour}.Marshal())
	require.NoError(t, err)
	require.Equal(t, maxWireDuration, got.Left)
}

func TestMessagesRefuse(t *testing.T) {
	fx := testFixture(t)
	st := fx.stmt
	tokBin, err := fx.tok.MarshalBinary()
	require.NoError(t, err)

	build, str, u64, u8 := wire, wstr, wu64, wu8
	tooLongMS := uint64(maxWireDuration/time.Millisecond) + 1
	badTok := tokenWithSignature(t, bls12381test.Identity(crypto.SignatureSize)[:])
	badHolderTok := encodeToken(Version, st.Cluster, st.Resource, st.Epoch, Holder{ID: "a b", Session: testSession}, fx.tok.Signature[:])
	noSessionTok := encodeToken(Version, st.Cluster, st.Resource, st.Epoch, Holder{ID: st.Holder.ID}, fx.tok.Signature[:])
	rloTok := encodeToken(Version, st.Cluster, "orders-\u202egpj.exe", st.Epoch, st.Holder, fx.tok.Signature[:])
	oldTok, _ := oldToken(t, 1)
	v2Tok, _ := oldToken(t, 2)
	none := whld(Holder{})
	noRef := wref(HolderRef{})
	key, zk := wkey(testKey), wkey(SessionKey{})
	hash := testRef.Session[:]
	// vote builds a signed vote's fields for holder h.
	vote := func(h []byte) []byte {
		return bytes.Join([][]byte{u64(2), st.Cluster[:], str(st.Resource), u64(st.Epoch), h, str("sig")}, nil)
	}
	raw := fx.partial.Marshal()
	zeroIndex := append([]byte{0, 0}, raw[2:]...)
	// withSig is the partial's index with another signature.
	withSig := func(sig []byte) []byte { return append(append([]byte(nil), raw[:2]...), sig...) }
	plusP := badSigByName(t, badSignatures(t), "x-plus-p")

	cases := []struct {
		name   string
		decode func([]byte) (any, error)
		in     []byte
		want   error
	}{
		{"StatusRequest/empty", decodeAs(UnmarshalStatusRequest), nil, ErrMalformed},
		{"StatusRequest/empty resource", decodeAs(UnmarshalStatusRequest), build(str("")), ErrInvalidField},
		{"StatusRequest/space in resource", decodeAs(UnmarshalStatusRequest), build(str("a b")), ErrInvalidField},
		{"StatusRequest/RLO in resource", decodeAs(UnmarshalStatusRequest), build(str("orders-\u202egpj.exe")), ErrInvalidField},
		{"StatusRequest/zero width space in resource", decodeAs(UnmarshalStatusRequest), build(str("orders\u200bdb")), ErrInvalidField},
		{"StatusRequest/invalid UTF-8", decodeAs(UnmarshalStatusRequest), build(str("a\xff")), ErrMalformed},
		{"StatusRequest/257 bytes", decodeAs(UnmarshalStatusRequest), build(str(strings.Repeat("r", 257))), ErrMalformed},
		{"StatusRequest/non-minimal length", decodeAs(UnmarshalStatusRequest), build([]byte{0x81, 0x00, 'a'}), ErrMalformed},
		{"StatusRequest/length overflow", decodeAs(UnmarshalStatusRequest), build(bytes.Repeat([]byte{0xff}, 10), []byte{1}), ErrMalformed},
		{"StatusReply/bad holder", decodeAs(UnmarshalStatusReply), build(u64(1), wref(HolderRef{ID: "a\tb", Session: testRef.Session}), u64(1), u64(0), u8(0), u8(0)), ErrInvalidField},
		{"StatusReply/holder with RLO", decodeAs(UnmarshalStatusReply), build(u64(1), wref(HolderRef{ID: "a\u202eb", Session: testRef.Session}), u64(1), u64(0), u8(0), u8(0)), ErrInvalidField},
		{"StatusReply/session without holder ID", decodeAs(UnmarshalStatusReply), build(u64(1), str(""), hash, u64(1), u64(0), u8(0), u8(0)), ErrInvalidField},
		{"StatusReply/truncated in session hash", decodeAs(UnmarshalStatusReply), build(u64(1), str("h"), hash[:5]), ErrMalformed},
		{"StatusReply/holder with session ID (version 1 layout)", decodeAs(UnmarshalStatusReply), build(u64(1), whld(testHolder), u64(1), u64(0), u8(0), u8(0)), ErrMalformed},
		{"StatusReply/vote flag 2", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(0), u8(2)), ErrMalformed},
		{"StatusReply/vote with zero session", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(0), u8(1), vote(whld(Holder{ID: testHolder.ID}))), ErrInvalidField},
		{"StatusReply/vote without holder", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(0), u8(1), vote(none)), ErrMalformed},
		{"StatusReply/version 1 token", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(1), oldTok, u8(0)), ErrTokenVersion},
		{"StatusReply/version 2 token", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(1), v2Tok, u8(0)), ErrTokenVersion},
		{"StatusReply/lease left out of range", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(tooLongMS), u8(0)), ErrMalformed},
		{"StatusReply/token flag 2", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(2)), ErrMalformed},
		{"StatusReply/flag 1 without token", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(1)), ErrMalformed},
		{"StatusReply/identity signature", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(1), badTok), ErrMalformed},
		{"StatusReply/token with bad holder", decodeAs(UnmarshalStatusReply), build(u64(1), noRef, u64(1), u64(0), u8(1), badHolderTok), ErrInvalidField},
		{"AcquireRequest/short cluster", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:31]), ErrMalformed},
		{"AcquireRequest/ttl out of range", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(tooLongMS), u8(0), u8(0)), ErrMalformed},
		{"AcquireRequest/bad resource", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str(""), u64(1), key, u64(1), u8(0), u8(0)), ErrInvalidField},
		{"AcquireRequest/RLO in resource", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("a\u202eb"), u64(1), key, u64(1), u8(0), u8(0)), ErrInvalidField},
		{"AcquireRequest/zero session", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), zk, u64(1), u8(0), u8(0)), ErrMalformed},
		{"AcquireRequest/no session", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1)), ErrMalformed},
		{"AcquireRequest/bad proof", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(1), badTok, u8(0)), ErrMalformed},
		{"AcquireRequest/proof without session", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(1), noSessionTok, u8(0)), ErrInvalidField},
		{"AcquireRequest/proof with RLO resource", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(1), rloTok, u8(0)), ErrInvalidField},
		{"AcquireRequest/version 1 proof", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(1), oldTok, u8(0)), ErrTokenVersion},
		{"AcquireRequest/version 2 proof", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(1), v2Tok, u8(0)), ErrTokenVersion},
		{"AcquireRequest/vote with zero session", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(0), u8(1), vote(whld(Holder{ID: testHolder.ID}))), ErrInvalidField},
		{"AcquireRequest/too many votes", decodeAs(UnmarshalAcquireRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(1), u8(0), u8(MaxProofVotes+1)), ErrMalformed},
		{"AcquireReply/kind 0", decodeAs(UnmarshalAcquireReply), build(u8(0)), ErrMalformed},
		{"AcquireReply/kind 4", decodeAs(UnmarshalAcquireReply), build(u8(4)), ErrMalformed},
		{"AcquireReply/no kind", decodeAs(UnmarshalAcquireReply), build(), ErrMalformed},
		{"AcquireReply/vote without identity sig", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindVote)), raw, []byte{0}), ErrMalformed},
		{"AcquireReply/vote index 0", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindVote)), zeroIndex, str("sig")), ErrMalformed},
		{"AcquireReply/vote identity partial", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindVote)), withSig(bls12381test.Identity(crypto.SignatureSize)), str("sig")), crypto.ErrMalformedPoint},
		{"AcquireReply/vote partial x+p", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindVote)), withSig(plusP), str("sig")), crypto.ErrMalformedPoint},
		{"AcquireReply/vote identity sig too long", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindVote)), raw, str(strings.Repeat("s", MaxIdentitySigLen+1))), ErrMalformed},
		{"AcquireReply/busy bad holder", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), wref(HolderRef{ID: "a\x00", Session: testRef.Session}), u64(1), u64(1), u8(0)), ErrInvalidField},
		{"AcquireReply/busy zero holder", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), noRef, u64(1), u64(1), u8(0)), ErrMalformed},
		{"AcquireReply/busy holder with session ID (version 1 layout)", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), whld(testHolder), u64(1), u64(1), u8(0)), ErrMalformed},
		{"AcquireReply/busy session without holder ID", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), str(""), hash, u64(1), u64(1), u8(0)), ErrInvalidField},
		{"AcquireReply/busy left out of range", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), wref(HolderRef{ID: "h", Session: testRef.Session}), u64(1), u64(tooLongMS), u8(0)), ErrMalformed},
		{"AcquireReply/busy pending flag not 0 or 1", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindBusy)), wref(HolderRef{ID: "h", Session: testRef.Session}), u64(1), u64(1), u8(2)), ErrMalformed},
		{"AcquireReply/refuse unknown code", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindRefuse)), u8(uint8(codeMax)+1), u64(1), str("")), ErrMalformed},
		{"AcquireReply/refuse long message", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindRefuse)), u8(1), u64(1), str(strings.Repeat("m", MaxMessageLen+1))), ErrMalformed},
		{"AcquireReply/refuse message not UTF-8", decodeAs(UnmarshalAcquireReply), build(u8(uint8(KindRefuse)), u8(1), u64(1), str("\xff")), ErrMalformed},
		{"CommitRequest/no token", decodeAs(UnmarshalCommitRequest), build(u64(1)), ErrMalformed},
		{"CommitRequest/bad token", decodeAs(UnmarshalCommitRequest), build(badTok, u64(1)), ErrMalformed},
		{"CommitRequest/bad holder", decodeAs(UnmarshalCommitRequest), build(badHolderTok, u64(1)), ErrInvalidField},
		{"CommitRequest/token without session", decodeAs(UnmarshalCommitRequest), build(noSessionTok, u64(1)), ErrInvalidField},
		{"CommitRequest/token with RLO resource", decodeAs(UnmarshalCommitRequest), build(rloTok, u64(1)), ErrInvalidField},
		{"CommitRequest/version 1 token", decodeAs(UnmarshalCommitRequest), build(oldTok, u64(1)), ErrTokenVersion},
		{"CommitRequest/version 2 token", decodeAs(UnmarshalCommitRequest), build(v2Tok, u64(1)), ErrTokenVersion},
		{"CommitRequest/ttl out of range", decodeAs(UnmarshalCommitRequest), build(tokBin, u64(tooLongMS), u8(0), u8(0)), ErrMalformed},
		{"CommitRequest/no key flag (version 1 layout)", decodeAs(UnmarshalCommitRequest), build(tokBin, u64(1)), ErrMalformed},
		{"CommitRequest/key flag 2", decodeAs(UnmarshalCommitRequest), build(tokBin, u64(1), u8(2), key, u8(0)), ErrMalformed},
		{"CommitRequest/zero key", decodeAs(UnmarshalCommitRequest), build(tokBin, u64(1), u8(1), zk, u8(0)), ErrMalformed},
		{"CommitRequest/token release flag 2", decodeAs(UnmarshalCommitRequest), build(tokBin, u64(1), u8(0), u8(2)), ErrMalformed},
		{"RenewRequest/bad resource", decodeAs(UnmarshalRenewRequest), build(st.Cluster[:], str("a\nb"), u64(1), key, u64(1)), ErrInvalidField},
		{"RenewRequest/ttl out of range", decodeAs(UnmarshalRenewRequest), build(st.Cluster[:], str("r"), u64(1), key, u64(tooLongMS)), ErrMalformed},
		{"RenewRequest/zero session", decodeAs(UnmarshalRenewRequest), build(st.Cluster[:], str("r"), u64(1), zk, u64(1)), ErrMalformed},
		{"RenewRequest/no session (version 1 layout)", decodeAs(UnmarshalRenewRequest), build(st.Cluster[:], str("r"), u64(1), u64(1)), ErrMalformed},
		{"AbandonRequest/short cluster", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:8]), ErrMalformed},
		{"AbandonRequest/bad resource", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:], str("a\x01"), u64(1), key), ErrInvalidField},
		{"AbandonRequest/no epoch", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:], str("r")), ErrMalformed},
		{"AbandonRequest/zero session", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:], str("r"), u64(1), zk), ErrMalformed},
		{"AbandonRequest/no session (version 1 layout)", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:], str("r"), u64(1)), ErrMalformed},
		{"AbandonRequest/short session", decodeAs(UnmarshalAbandonRequest), build(st.Cluster[:], str("r"), u64(1), key[:31]), ErrMalformed},
		{"ReleaseRequest/bad token", decodeAs(UnmarshalReleaseRequest), build(badTok), ErrMalformed},
		{"ReleaseRequest/no key flag (version 1 layout)", decodeAs(UnmarshalReleaseRequest), build(tokBin), ErrMalformed},
		{"ReleaseRequest/key flag 2", decodeAs(UnmarshalReleaseRequest), build(tokBin, u8(2), key), ErrMalformed},
		{"ReleaseRequest/zero key", decodeAs(UnmarshalReleaseRequest), build(tokBin, u8(1), zk), ErrMalformed},
		{"ReleaseRequest/short key", decodeAs(UnmarshalReleaseRequest), build(tokBin, u8(1), key[:31]), ErrMalformed},
		{"ReleaseRequest/bad holder", decodeAs(UnmarshalReleaseRequest), build(badHolderTok), ErrInvalidField},
		{"ReleaseRequest/token without session", decodeAs(UnmarshalReleaseRequest), build(noSessionTok), ErrInvalidField},
		{"ReleaseRequest/version 1 token", decodeAs(UnmarshalReleaseRequest), build(oldTok), ErrTokenVersion},
		{"ReleaseRequest/version 2 token", decodeAs(UnmarshalReleaseRequest), build(v2Tok), ErrTokenVersion},
		{"SignedVote/zero session", decodeAs(UnmarshalSignedVote), build(vote(whld(Holder{ID: testHolder.ID}))), ErrInvalidField},
		{"SignedVote/zero holder", decodeAs(UnmarshalSignedVote), build(vote(none)), ErrMalformed},
		{"SignedVote/RLO in resource", decodeAs(UnmarshalSignedVote), build(u64(2), st.Cluster[:], str("a\u202eb"), u64(1), whld(testHolder), str("sig")), ErrInvalidField},
		{"Evidence/same session", decodeAs(UnmarshalEvidence), build(vote(whld(testHolder)), vote(whld(testHolder))), ErrNotEvidence},
		{"Ack/unknown code", decodeAs(UnmarshalAck), build(u8(uint8(codeMax)+1), u64(1), u64(0), str("")), ErrMalformed},
		{"Ack/left out of range", decodeAs(UnmarshalAck), build(u8(0), u64(1), u64(tooLongMS), str("")), ErrMalformed},
		{"Ack/message not UTF-8", decodeAs(UnmarshalAck), build(u8(0), u64(1), u64(0), str("\xc3")), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.decode(c.in)
			require.ErrorIs(t, err, c.want)
			require.True(t, reflect.ValueOf(got).IsZero(), "want zero value, got %+v", got)
		})
	}
}

func TestAckErr(t *testing.T) {
	require.NoError(t, Ack{Code: CodeOK, LastEpoch: 3, Message: "fine"}.Err())

	err := Ack{Code: CodeStale, LastEpoch: 7, Message: "epoch 5 is not above 7"}.Err()
	var re *RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, &RefusedError{Code: CodeStale, LastEpoch: 7, Message: "epoch 5 is not above 7"}, re)
	require.Equal(t, "refused: stale epoch (last epoch 7): epoch 5 is not above 7", err.Error())

	err = Ack{Code: CodeNoLease, LastEpoch: 9}.Err()
	require.ErrorAs(t, err, &re)
	require.Equal(t, CodeNoLease, re.Code)
	require.Equal(t, "refused: no lease (last epoch 9)", err.Error())
}

func TestCodeString(t *testing.T) {
	for c, want := range map[Code]string{
		CodeOK:           "ok",
		CodeStale:        "stale epoch",
		CodeTooFar:       "epoch too far ahead",
		CodeUnauthorised: "unauthorised",
		CodeWrongCluster: "wrong cluster",
		CodeBadRequest:   "bad request",
		CodeNotHolder:    "not the holder",
		CodeNoLease:      "no lease",
		CodeInternal:     "internal error",
		CodeOtherEra:     "node of an earlier era",
		CodeFork:         "fork",
		codeMax + 1:      "code(11)",
		255:              "code(255)",
	} {
		require.Equal(t, want, c.String())
	}
	// Every code up to codeMax has its own name.
	seen := map[string]bool{}
	require.Equal(t, Code(9), CodeOtherEra, "codes are on the wire: never renumber")
	require.Equal(t, Code(10), CodeFork, "codes are on the wire: never renumber")
	require.Equal(t, CodeFork, codeMax)
	for c := Code(0); c <= codeMax; c++ {
		require.False(t, seen[c.String()])
		require.False(t, strings.HasPrefix(c.String(), "code("))
		seen[c.String()] = true
	}
}

func TestFrameRoundTrip(t *testing.T) {
	rnd := seeded(3)
	var stream bytes.Buffer
	var sent [][]byte
	for _, c := range []struct {
		size, hdr int
	}{{0, 1}, {1, 1}, {127, 1}, {128, 2}, {300, 2}, {MaxFrameSize, uvarintLen(MaxFrameSize)}} {
		msg := make([]byte, c.size)
		_, _ = rnd.Read(msg)
		var one bytes.Buffer
		require.NoError(t, WriteFrame(&one, msg))
		require.Equal(t, c.hdr+c.size, one.Len(), "size %d", c.size)
		got, err := ReadFrame(bytes.NewReader(one.Bytes()), MaxFrameSize)
		require.NoError(t, err)
		require.Equal(t, msg, got)
		require.NotNil(t, got)

		require.NoError(t, WriteFrame(&stream, msg))
		sent = append(sent, msg)
	}
	// Frames back to back on one stream, then a clean EOF.
	for _, want := range sent {
		got, err := ReadFrame(&stream, MaxFrameSize)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ReadFrame(&stream, MaxFrameSize)
	require.ErrorIs(t, err, io.EOF)
}

func TestWriteFrameTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := WriteFrame(&buf, make([]byte, MaxFrameSize+1))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Zero(t, buf.Len(), "nothing may be written")
}

// headerOnly serves hdr and fails the test if anything past it is read.
type headerOnly struct {
	t   *testing.T
	hdr []byte
}

func (r *headerOnly) Read(p []byte) (int, error) {
	if len(r.hdr) == 0 {
		r.t.Errorf("read past the frame header")
		return 0, errors.New("read past header")
	}
	n := copy(p, r.hdr)
	r.hdr = r.hdr[n:]
	return n, nil
}

func TestReadFrameTooLargeReadsNoBody(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		hdr  []byte
	}{
		{"MaxFrameSize+1", MaxFrameSize, binary.AppendUvarint(nil, MaxFrameSize+1)},
		{"1<<40", MaxFrameSize, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x20}},
		{"max uint64", MaxFrameSize, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"small cap", 10, []byte{11}},
		{"zero cap", 0, []byte{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrame(&headerOnly{t: t, hdr: c.hdr}, c.max)
			require.ErrorIs(t, err, ErrFrameTooLarge)
			require.Nil(t, got)
		})
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestReadFrameRefuses(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		r    io.Reader
		want error
	}{
		{"empty stream", bytes.NewReader(nil), io.EOF},
		{"truncated header", bytes.NewReader([]byte{0x80}), io.ErrUnexpectedEOF},
		{"truncated body", bytes.NewReader([]byte{5, 'a', 'b', 'c'}), io.ErrUnexpectedEOF},
		{"missing body", bytes.NewReader([]byte{5}), io.ErrUnexpectedEOF},
		{"non-minimal zero", bytes.NewReader([]byte{0x80, 0x00}), ErrMalformed},
		{"non-minimal five", bytes.NewReader([]byte{0x85, 0x00, 1, 2, 3, 4, 5}), ErrMalformed},
		{"non-minimal 3 bytes", bytes.NewReader([]byte{0x81, 0x80, 0x00, 1}), ErrMalformed},
		{"varint overflow", bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}), ErrMalformed},
		{"varint too long", bytes.NewReader(bytes.Repeat([]byte{0x80}, 11)), ErrMalformed},
		{"reader error", errReader{boom}, boom},
		{"reader error in body", io.MultiReader(bytes.NewReader([]byte{3, 'a'}), errReader{boom}), boom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrame(c.r, MaxFrameSize)
			require.ErrorIs(t, err, c.want)
			require.Nil(t, got)
		})
	}
}

// TestLongMessagesTruncated: a refusal whose text is longer than the cap
// (say, naming a 256-byte resource) still decodes, cut at a UTF-8 boundary.
func TestLongMessagesTruncated(t *testing.T) {
	long := strings.Repeat("é", MaxMessageLen) // 2 bytes each
	a, err := UnmarshalAck(Ack{Code: CodeUnauthorised, Message: long}.Marshal())
	require.NoError(t, err)
	require.LessOrEqual(t, len(a.Message), MaxMessageLen)
	require.True(t, utf8.ValidString(a.Message))
	r, err := UnmarshalAcquireReply(AcquireReply{Kind: KindRefuse, Code: CodeUnauthorised, Message: "x" + long}.Marshal())
	require.NoError(t, err)
	require.LessOrEqual(t, len(r.Message), MaxMessageLen)
	require.True(t, utf8.ValidString(r.Message))
}

// TestLargestAcquireFitsFrame: an Acquire carrying a proof token and
// MaxProofVotes signed votes, for a resource of the maximum length and
// holders with real libp2p peer IDs (53 bytes at most: secp256k1; Ed25519
// ones are 52) and Ed25519 identity signatures, fits one frame with the
// sessions added in version 2.
func TestLargestAcquireFitsFrame(t *testing.T) {
	fx := testFixture(t)
	st := fx.stmt
	st.Resource = strings.Repeat("r", MaxResourceLen)
	st.Holder.ID = "16Uiu2HAm" + strings.Repeat("x", 53-9)
	st.Epoch = ^uint64(0)
	tok := fx.tok
	tok.Statement = st
	votes := make([]SignedVote, MaxProofVotes)
	for i := range votes {
		votes[i] = SignedVote{Node: 1 << 16, Statement: st, IdentitySig: make([]byte, 64)}
	}
	m := AcquireRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: st.Epoch, Key: testKey, TTL: MaxTTL, Proof: &tok, Votes: votes}
	enc := m.Marshal()
	require.LessOrEqual(t, len(enc), MaxFrameSize)
	require.NoError(t, WriteFrame(io.Discard, enc))
	got, err := UnmarshalAcquireRequest(enc)
	require.NoError(t, err)
	require.Equal(t, m, got)
}
