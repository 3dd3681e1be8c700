package protocol

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/fuzzseed"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// fuzzTargets lists every fuzz target; each has a committed seed corpus.
var fuzzTargets = []string{
	"FuzzParseToken", "FuzzParseTokenText", "FuzzStatusRequest", "FuzzStatusReply",
	"FuzzAcquireRequest", "FuzzAcquireReply", "FuzzCommitRequest", "FuzzRenewRequest",
	"FuzzReleaseRequest", "FuzzAbandonRequest", "FuzzAck", "FuzzReadFrame",
	"FuzzSignedVote", "FuzzEvidence", "FuzzWaitRequest", "FuzzWaitReply",
}

// stringTargets take a string, not []byte.
var stringTargets = map[string]bool{"FuzzParseTokenText": true, "FuzzParseForkText": true}

type seed struct {
	name string // file name: "valid-…" or "invalid-…"
	data []byte
}

func (s seed) valid() bool { return strings.HasPrefix(s.name, "valid-") }

// corpusSeeds returns, for every fuzz target, valid encodings and a few
// interesting invalid ones. It is deterministic: the key is dealt from a
// fixed seed and BLS signatures are unique.
func corpusSeeds(tb testing.TB) map[string][]seed {
	tb.Helper()
	fx := testFixture(tb)
	out := map[string][]seed{}
	add := func(target, name string, data []byte) {
		out[target] = append(out[target], seed{name: name, data: data})
	}
	// addValid adds a valid encoding and, derived from it, its encoding
	// without the last byte and with one byte too many.
	addValid := func(target, name string, data []byte) {
		add(target, "valid-"+name, data)
		add(target, "invalid-truncated-"+name, data[:len(data)-1])
		add(target, "invalid-trailing-"+name, append(append([]byte(nil), data...), 0))
	}

	// Tokens.
	tokBin, err := fx.tok.MarshalBinary()
	require.NoError(tb, err)
	big := fx.tok
	big.Resource = strings.Repeat("r", MaxResourceLen)
	big.Holder.ID = strings.Repeat("h", MaxHolderLen)
	big.Epoch = ^uint64(0)
	bigBin, err := big.MarshalBinary()
	require.NoError(tb, err)
	uni := fx.tok
	uni.Resource = "bücher/日本"
	uniBin, err := uni.MarshalBinary()
	require.NoError(tb, err)
	st := fx.stmt
	// Signatures that break the byte-level encoding rules, which parsing
	// checks, and ones that pass them but never verify (no point of G1, or
	// the negated signature), which only verification refuses: the latter
	// parse, so they are valid seeds, named "unchecked".
	var badSigs, unverifiedSigs []badSignature
	for _, b := range badSignatures(tb) {
		if b.parses {
			unverifiedSigs = append(unverifiedSigs, b)
		} else {
			badSigs = append(badSigs, b)
		}
	}
	sigTok := func(sig []byte) []byte { return tokenWithSignature(tb, sig) }
	identityTok := sigTok(badSigByName(tb, badSigs, "identity"))
	plusPTok := sigTok(badSigByName(tb, badSigs, "x-plus-p"))
	oldBin, oldText := oldToken(tb, 1)
	v2Bin, v2Text := oldToken(tb, 2)
	sameID := fx.tok
	sameID.Holder = sameIDHolder
	sameIDBin, err := sameID.MarshalBinary()
	require.NoError(tb, err)
	noSession := Holder{ID: st.Holder.ID}
	sess := wsess(testSession)
	noRef := wref(HolderRef{})
	key, zk := wkey(testKey), wkey(SessionKey{})
	rlo := "orders-\u202egpj.exe"

	addValid("FuzzParseToken", "token", tokBin)
	addValid("FuzzParseToken", "token-max-fields", bigBin)
	addValid("FuzzParseToken", "token-unicode", uniBin)
	add("FuzzParseToken", "invalid-empty", []byte{})
	addValid("FuzzParseToken", "token-other-session", sameIDBin)
	add("FuzzParseToken", "invalid-version-4", append([]byte{4}, tokBin[1:]...))
	add("FuzzParseToken", "invalid-version-1", oldBin)
	add("FuzzParseToken", "invalid-version-1-new-layout", append([]byte{1}, tokBin[1:]...))
	add("FuzzParseToken", "invalid-version-2", v2Bin)
	add("FuzzParseToken", "invalid-version-2-new-layout", append([]byte{2}, tokBin[1:]...))
	add("FuzzParseToken", "invalid-version-3-old-signature", append([]byte{Version}, v2Bin[1:]...))
	add("FuzzParseToken", "invalid-zero-session", encodeToken(Version, st.Cluster, st.Resource, st.Epoch, noSession, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-session-without-holder", encodeToken(Version, st.Cluster, st.Resource, st.Epoch, Holder{Session: testSession}, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-resource-rlo", encodeToken(Version, st.Cluster, rlo, st.Epoch, st.Holder, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-holder-zero-width-space", encodeToken(Version, st.Cluster, st.Resource, st.Epoch, Holder{ID: "12D3\u200bKoo", Session: testSession}, fx.tok.Signature[:]))
	for _, b := range badSigs {
		add("FuzzParseToken", "invalid-signature-"+b.name, sigTok(b.sig))
	}
	for _, b := range unverifiedSigs {
		add("FuzzParseToken", "valid-unchecked-sig-"+b.name, sigTok(b.sig))
	}
	add("FuzzParseToken", "invalid-resource-space", encodeToken(Version, st.Cluster, "a b", st.Epoch, st.Holder, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-resource-not-utf8", encodeToken(Version, st.Cluster, "a\xff", st.Epoch, st.Holder, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-resource-257", encodeToken(Version, st.Cluster, strings.Repeat("r", 257), st.Epoch, st.Holder, fx.tok.Signature[:]))
	add("FuzzParseToken", "invalid-empty-holder", encodeToken(Version, st.Cluster, st.Resource, st.Epoch, Holder{}, fx.tok.Signature[:]))

	// Token text.
	text := fx.tok.String()
	add("FuzzParseTokenText", "valid-token", []byte(text))
	add("FuzzParseTokenText", "valid-token-spaces", []byte(" \t"+text+"\r\n"))
	add("FuzzParseTokenText", "valid-token-max-fields", []byte(big.String()))
	add("FuzzParseTokenText", "invalid-empty", []byte{})
	add("FuzzParseTokenText", "invalid-prefix-only", []byte(TokenTextPrefix))
	add("FuzzParseTokenText", "valid-token-other-session", []byte(sameID.String()))
	add("FuzzParseTokenText", "invalid-wrong-prefix", []byte("pt4."+text[len(TokenTextPrefix):]))
	add("FuzzParseTokenText", "invalid-version-1", []byte(oldText))
	add("FuzzParseTokenText", "invalid-version-1-prefix-new-body", []byte("pt1."+text[len(TokenTextPrefix):]))
	add("FuzzParseTokenText", "invalid-version-2", []byte(v2Text))
	add("FuzzParseTokenText", "invalid-version-2-prefix-new-body", []byte("pt2."+text[len(TokenTextPrefix):]))
	add("FuzzParseTokenText", "invalid-version-3-prefix-version-1-body", []byte(TokenTextPrefix+oldText[len("pt1."):]))
	add("FuzzParseTokenText", "invalid-version-3-prefix-version-2-body", []byte(TokenTextPrefix+v2Text[len("pt2."):]))
	for _, b := range badSigs {
		add("FuzzParseTokenText", "invalid-signature-"+b.name, []byte(TokenTextPrefix+base64.RawURLEncoding.EncodeToString(sigTok(b.sig))))
	}
	add("FuzzParseTokenText", "invalid-carriage-return-inside-text", []byte(text[:30]+"\r"+text[30:]))
	add("FuzzParseTokenText", "invalid-padded", []byte(text+"=="))
	add("FuzzParseTokenText", "invalid-truncated", []byte(text[:len(text)-1]))
	add("FuzzParseTokenText", "invalid-inner-space", []byte(text[:20]+" "+text[20:]))
	add("FuzzParseTokenText", "invalid-over-long", []byte(TokenTextPrefix+strings.Repeat("A", MaxTokenTextLen)))
	add("FuzzParseTokenText", "invalid-not-a-token", []byte(TokenTextPrefix+"invalid"))

	// Messages.
	targets := map[string]string{
		"StatusRequest": "FuzzStatusRequest", "StatusReply": "FuzzStatusReply",
		"AcquireRequest": "FuzzAcquireRequest", "AcquireReply": "FuzzAcquireReply",
		"CommitRequest": "FuzzCommitRequest", "RenewRequest": "FuzzRenewRequest",
		"ReleaseRequest": "FuzzReleaseRequest", "AbandonRequest": "FuzzAbandonRequest",
		"Ack": "FuzzAck", "SignedVote": "FuzzSignedVote", "Evidence": "FuzzEvidence",
		"WaitRequest": "FuzzWaitRequest", "WaitReply": "FuzzWaitReply",
	}
	for _, m := range validMessages(tb) {
		typ, variant, _ := strings.Cut(m.name, "/")
		name := "message"
		if variant != "" {
			name = variant
		}
		addValid(targets[typ], name, m.enc)
	}
	tooLongMS := uint64(maxWireDuration/time.Millisecond) + 1
	add("FuzzStatusRequest", "invalid-empty-resource", wire(wstr("")))
	add("FuzzStatusRequest", "invalid-version-0", []byte{0, 1, 'r'})
	add("FuzzStatusRequest", "invalid-non-minimal-length", wire([]byte{0x81, 0x00, 'r'}))
	add("FuzzStatusRequest", "invalid-resource-rlo", wire(wstr(rlo)))
	add("FuzzStatusRequest", "invalid-resource-bom", wire(wstr("\ufefforders-db")))
	add("FuzzStatusReply", "invalid-reserved-no-time", wire(wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu8(0), wref(otherRef), wu64(0)))
	add("FuzzStatusReply", "invalid-time-no-reserved", wire(wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu8(0), noRef, wu64(5)))
	add("FuzzStatusReply", "invalid-token-flag-2", wire(wu64(1), noRef, wu64(1), wu64(0), wu8(2), wu8(0)))
	add("FuzzStatusReply", "invalid-lease-left-out-of-range", wire(wu64(1), noRef, wu64(1), wu64(tooLongMS), wu8(0), wu8(0)))
	add("FuzzStatusReply", "invalid-holder-control", wire(wu64(1), wref(HolderRef{ID: "h\x00", Session: testRef.Session}), wu64(1), wu64(0), wu8(0), wu8(0)))
	add("FuzzStatusReply", "invalid-session-id-layout-1", wire(wu64(1), whld(testHolder), wu64(1), wu64(0), wu8(0), wu8(0)))
	add("FuzzStatusReply", "invalid-version-1-token", wire(wu64(1), noRef, wu64(1), wu64(0), wu8(1), oldBin, wu8(0)))
	add("FuzzStatusReply", "invalid-version-2-token", wire(wu64(1), noRef, wu64(1), wu64(0), wu8(1), v2Bin, wu8(0)))
	add("FuzzStatusReply", "invalid-signature-x-plus-p", wire(wu64(1), noRef, wu64(1), wu64(0), wu8(1), plusPTok, wu8(0)))
	add("FuzzAcquireRequest", "invalid-proof-identity-signature", wire(st.Cluster[:], wstr("r"), wu64(1), key, wu64(1), wu8(1), identityTok, wu8(0)))
	add("FuzzAcquireRequest", "invalid-ttl-out-of-range", wire(st.Cluster[:], wstr("r"), wu64(1), key, wu64(tooLongMS), wu8(0), wu8(0)))
	add("FuzzAcquireRequest", "invalid-zero-key", wire(st.Cluster[:], wstr("r"), wu64(1), zk, wu64(1), wu8(0), wu8(0)))
	add("FuzzAcquireRequest", "invalid-no-key", wire(st.Cluster[:], wstr("r"), wu64(1), wu64(1), wu8(0), wu8(0)))
	add("FuzzAcquireRequest", "invalid-version-1-proof", wire(st.Cluster[:], wstr("r"), wu64(1), key, wu64(1), wu8(1), oldBin, wu8(0)))
	add("FuzzAcquireRequest", "invalid-version-2-proof", wire(st.Cluster[:], wstr("r"), wu64(1), key, wu64(1), wu8(1), v2Bin, wu8(0)))
	add("FuzzAcquireRequest", "invalid-proof-signature-x-plus-p", wire(st.Cluster[:], wstr("r"), wu64(1), key, wu64(1), wu8(1), plusPTok, wu8(0)))
	add("FuzzAcquireRequest", "invalid-resource-rlo", wire(st.Cluster[:], wstr(rlo), wu64(1), key, wu64(1), wu8(0), wu8(0)))
	add("FuzzAcquireReply", "invalid-kind-5", wire(wu8(5)))
	add("FuzzAcquireReply", "invalid-queued-zero-holder", wire(wu8(uint8(KindQueued)), noRef, wu64(1)))
	add("FuzzAcquireReply", "invalid-busy-zero-holder", wire(wu8(uint8(KindBusy)), noRef, wu64(1), wu64(1), wu8(0)))
	add("FuzzAcquireReply", "invalid-busy-session-id-layout-1", wire(wu8(uint8(KindBusy)), whld(testHolder), wu64(1), wu64(1), wu8(0)))
	add("FuzzAcquireReply", "invalid-vote-without-identity-sig", wire(wu8(uint8(KindVote)), fx.partial.Marshal(), wu8(0)))
	add("FuzzAcquireReply", "invalid-vote-index-0", wire(wu8(uint8(KindVote)), append([]byte{0, 0}, fx.partial.Marshal()[2:]...), wstr("s")))
	add("FuzzAcquireReply", "invalid-vote-bn256-partial", wire(wu8(uint8(KindVote)), fx.partial.Marshal()[:2], v2Bin[len(v2Bin)-64:], wstr("s")))
	for _, b := range badSigs {
		add("FuzzAcquireReply", "invalid-vote-partial-"+b.name, wire(wu8(uint8(KindVote)), fx.partial.Marshal()[:2], b.sig, wstr("s")))
	}
	for _, b := range unverifiedSigs {
		add("FuzzAcquireReply", "valid-vote-unchecked-partial-"+b.name, wire(wu8(uint8(KindVote)), fx.partial.Marshal()[:2], b.sig, wstr("s")))
	}
	add("FuzzAcquireReply", fmt.Sprintf("invalid-refuse-code-%d", codeMax+1), wire(wu8(uint8(KindRefuse)), wu8(uint8(codeMax)+1), wu64(1), wstr("")))
	add("FuzzCommitRequest", "invalid-ttl-out-of-range", wire(tokBin, wu64(tooLongMS), wu8(0), wu8(0)))
	add("FuzzCommitRequest", "invalid-signature-x-plus-p", wire(plusPTok, wu64(1), wu8(0), wu8(0)))
	add("FuzzCommitRequest", "invalid-identity-signature", wire(identityTok, wu64(1), wu8(0), wu8(0)))
	add("FuzzCommitRequest", "invalid-version-1-token", wire(oldBin, wu64(1), wu8(0), wu8(0)))
	add("FuzzCommitRequest", "invalid-version-2-token", wire(v2Bin, wu64(1), wu8(0), wu8(0)))
	add("FuzzCommitRequest", "invalid-zero-session", wire(encodeToken(Version, st.Cluster, st.Resource, st.Epoch, noSession, fx.tok.Signature[:]), wu64(1), wu8(0), wu8(0)))
	add("FuzzRenewRequest", "invalid-resource-space", wire(st.Cluster[:], wstr("a b"), wu64(1), key, wu64(1)))
	add("FuzzRenewRequest", "invalid-zero-key", wire(st.Cluster[:], wstr("r"), wu64(1), zk, wu64(1)))
	add("FuzzRenewRequest", "invalid-no-key", wire(st.Cluster[:], wstr("r"), wu64(1), wu64(1)))
	add("FuzzReleaseRequest", "invalid-signature-x-plus-p", wire(plusPTok, wu8(0)))
	add("FuzzReleaseRequest", "invalid-identity-signature", wire(identityTok, wu8(0)))
	add("FuzzReleaseRequest", "invalid-version-1-token", wire(oldBin, wu8(0)))
	add("FuzzReleaseRequest", "invalid-version-2-token", wire(v2Bin, wu8(0)))
	add("FuzzCommitRequest", "invalid-no-key-flag", wire(tokBin, wu64(1)))
	add("FuzzCommitRequest", "invalid-zero-key", wire(tokBin, wu64(1), wu8(1), zk, wu8(0)))
	add("FuzzCommitRequest", "invalid-token-release-flag-2", wire(tokBin, wu64(1), wu8(1), key, wu8(2)))
	add("FuzzReleaseRequest", "invalid-no-key-flag", wire(tokBin))
	add("FuzzReleaseRequest", "invalid-zero-key", wire(tokBin, wu8(1), zk))
	add("FuzzReleaseRequest", "invalid-key-flag-2", wire(tokBin, wu8(2), key))
	add("FuzzAbandonRequest", "invalid-resource-257", wire(st.Cluster[:], wstr(strings.Repeat("r", 257)), wu64(1), key))
	add("FuzzAbandonRequest", "invalid-resource-space", wire(st.Cluster[:], wstr("a b"), wu64(1), key))
	add("FuzzAbandonRequest", "invalid-zero-key", wire(st.Cluster[:], wstr("r"), wu64(1), zk))
	add("FuzzAbandonRequest", "invalid-no-key", wire(st.Cluster[:], wstr("r"), wu64(1)))
	vote := func(h Holder) []byte {
		return bytes.Join([][]byte{wu64(2), st.Cluster[:], wstr(st.Resource), wu64(st.Epoch), whld(h), wstr("sig")}, nil)
	}
	add("FuzzSignedVote", "invalid-zero-session", wire(vote(noSession)))
	add("FuzzSignedVote", "invalid-zero-holder", wire(vote(Holder{})))
	add("FuzzEvidence", "invalid-same-session", wire(vote(testHolder), vote(testHolder)))
	add("FuzzEvidence", "invalid-zero-session", wire(vote(testHolder), vote(noSession)))
	key = waitKey[:] // the Wait seeds name keyHolder
	var zeroKey SessionKey
	claim := testClaim(fx, 41, 1, 2)
	otherPlace := claim[1]
	otherPlace.Holder = keyHolder2.Ref()
	elsewhere := claim[1]
	elsewhere.Resource = "other"
	longSig := claim[1]
	longSig.Sig = append(append([]byte(nil), fx.identitySig...), 0)
	noVote := append(wu64(0), wu64(0)...) // a WaitRequest's epoch and TTL, absent
	add("FuzzWaitRequest", "invalid-zero-key", wire(st.Cluster[:], wstr("r"), zeroKey[:], wu64(1), wu8(0), noVote))
	add("FuzzWaitRequest", "invalid-session-id-not-key", wire(st.Cluster[:], wstr("r"), sess, wu64(1), wu8(0), noVote))
	add("FuzzWaitRequest", "invalid-resource-rlo", wire(st.Cluster[:], wstr(rlo), key, wu64(1), wu8(0), noVote))
	add("FuzzWaitRequest", "invalid-max-wait-out-of-range", wire(st.Cluster[:], wstr("r"), key, wu64(tooLongMS), wu8(0), noVote))
	add("FuzzWaitRequest", "invalid-no-claim", wire(st.Cluster[:], wstr("r"), key, wu64(1)))
	add("FuzzWaitRequest", "invalid-version-1-cohort", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu64(41), noVote))
	add("FuzzWaitRequest", "invalid-claim-too-many", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(MaxClaimPlaces+1), noVote))
	add("FuzzWaitRequest", "invalid-claim-count-short", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(3), wplace(claim[0]), wplace(claim[1]), noVote))
	add("FuzzWaitRequest", "invalid-claim-member-twice", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(2), wplace(claim[0]), wplace(claim[0]), noVote))
	add("FuzzWaitRequest", "invalid-claim-two-holders", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(2), wplace(claim[0]), wplace(otherPlace), noVote))
	add("FuzzWaitRequest", "invalid-claim-other-resource", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(2), wplace(claim[0]), wplace(elsewhere), noVote))
	add("FuzzWaitRequest", "invalid-claim-signature-too-long", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(2), wplace(claim[0]), wplace(longSig), noVote))
	add("FuzzWaitRequest", "invalid-ttl-without-epoch", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(0), wu64(0), wu64(1000)))
	add("FuzzWaitRequest", "invalid-ttl-out-of-range", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(0), wu64(43), wu64(tooLongMS)))
	add("FuzzWaitRequest", "invalid-version-2-no-epoch", wire(st.Cluster[:], wstr(st.Resource), key, wu64(1), wu8(0)))
	wvote := func(epoch uint64) []byte {
		return bytes.Join([][]byte{wu8(1), wu64(epoch), fx.partial.Marshal(), wstr("s")}, nil)
	}
	freeHead := func(last uint64) []byte {
		return bytes.Join([][]byte{wu8(0), wu8(1), wu64(last), noRef, wu64(0), wu64(0), wu8(0), wu64(0), wu8(0)}, nil)
	}
	add("FuzzWaitReply", "invalid-vote-not-free", wire(wu8(0), wu8(0), wu64(43), wref(otherRef), wu64(43), wu64(1000), wu8(1), wu64(0), wu8(0), wvote(43), wstr("")))
	add("FuzzWaitReply", "invalid-vote-refused", wire(wu8(uint8(CodeUnauthorised)), wu8(1), wu64(43), noRef, wu64(0), wu64(0), wu8(0), wu64(0), wu8(0), wvote(43), wstr("")))
	add("FuzzWaitReply", "invalid-vote-above-last-epoch", wire(freeHead(42), wvote(43), wstr("")))
	add("FuzzWaitReply", "invalid-vote-epoch-0", wire(freeHead(42), wvote(0), wstr("")))
	add("FuzzWaitReply", "invalid-vote-flag-2", wire(freeHead(43), wu8(2), wu64(43), fx.partial.Marshal(), wstr("s"), wstr("")))
	add("FuzzWaitReply", "invalid-vote-without-identity-sig", wire(freeHead(43), wu8(1), wu64(43), fx.partial.Marshal(), wstr(""), wstr("")))
	add("FuzzWaitReply", "invalid-vote-identity-sig-too-long", wire(freeHead(43), wu8(1), wu64(43), fx.partial.Marshal(), wstr(strings.Repeat("s", MaxIdentitySigLen+1)), wstr("")))
	add("FuzzWaitReply", "invalid-vote-index-0", wire(freeHead(43), wu8(1), wu64(43), append([]byte{0, 0}, fx.partial.Marshal()[2:]...), wstr("s"), wstr("")))
	for _, b := range badSigs {
		add("FuzzWaitReply", "invalid-vote-partial-"+b.name, wire(freeHead(43), wu8(1), wu64(43), fx.partial.Marshal()[:2], b.sig, wstr("s"), wstr("")))
	}
	add("FuzzWaitReply", "invalid-version-2-no-vote-flag", wire(freeHead(42), wstr("")))
	add("FuzzWaitReply", "invalid-free-with-holder", wire(wu8(0), wu8(1), wu64(1), wref(testHolder.Ref()), wu64(0), wu64(0), wu8(0), wu64(3), wu8(0), wu8(0), wstr("")))
	add("FuzzWaitReply", "invalid-free-flag-2", wire(wu8(0), wu8(2), wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu64(3), wu8(0), wu8(0), wstr("")))
	add("FuzzWaitReply", fmt.Sprintf("invalid-code-%d", codeMax+1), wire(wu8(uint8(codeMax)+1), wu8(0), wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu64(0), wu8(0), wu8(0), wstr("")))
	add("FuzzWaitReply", "invalid-holder-session-id", wire(wu8(0), wu8(0), wu64(1), whld(otherHolder), wu64(1), wu64(0), wu8(0), wu64(3), wu8(0), wu8(0), wstr("")))
	add("FuzzWaitReply", "invalid-place-other-cohort", wire(wu8(0), wu8(1), wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu64(3), wu8(1), wplace(claim[0]), wu8(0), wstr("")))
	add("FuzzWaitReply", "invalid-place-flag-2", wire(wu8(0), wu8(1), wu64(1), noRef, wu64(0), wu64(0), wu8(0), wu64(41), wu8(2), wplace(claim[0]), wu8(0), wstr("")))
	add("FuzzAck", fmt.Sprintf("invalid-code-%d", codeMax+1), wire(wu8(uint8(codeMax)+1), wu64(1), wu64(0), wstr("")))
	add("FuzzAck", "invalid-message-not-utf8", wire(wu8(1), wu64(1), wu64(0), wstr("\xc3")))

	// Frames.
	frame := func(body []byte) []byte {
		var buf bytes.Buffer
		require.NoError(tb, WriteFrame(&buf, body))
		return buf.Bytes()
	}
	add("FuzzReadFrame", "valid-empty", frame(nil))
	add("FuzzReadFrame", "valid-hello", frame([]byte("hello")))
	add("FuzzReadFrame", "valid-two-byte-length", frame(bytes.Repeat([]byte{'a'}, 200)))
	add("FuzzReadFrame", "valid-max", frame(bytes.Repeat([]byte{'m'}, MaxFrameSize)))
	add("FuzzReadFrame", "valid-ack-then-more", append(frame(Ack{LastEpoch: 42}.Marshal()), 0x03, 'x'))
	add("FuzzReadFrame", "invalid-empty", []byte{})
	add("FuzzReadFrame", "invalid-too-large", []byte{0x81, 0x20})
	add("FuzzReadFrame", "invalid-max-uint64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	add("FuzzReadFrame", "invalid-non-minimal", []byte{0x85, 0x00, 1, 2, 3, 4, 5})
	add("FuzzReadFrame", "invalid-varint-too-long", bytes.Repeat([]byte{0x80}, 11))
	add("FuzzReadFrame", "invalid-truncated-body", []byte{5, 'a', 'b'})
	add("FuzzReadFrame", "invalid-truncated-header", []byte{0x80})
	return out
}

// badSigByName returns the signature of the named attack.
func badSigByName(tb testing.TB, sigs []badSignature, name string) []byte {
	tb.Helper()
	for _, b := range sigs {
		if b.name == name {
			return b.sig
		}
	}
	tb.Fatalf("no bad signature %q", name)
	return nil
}

func corpusFile(target string, data []byte) string {
	if stringTargets[target] {
		return fuzzseed.String(string(data))
	}
	return fuzzseed.Bytes(data)
}

// TestWriteSeedCorpus checks that testdata/fuzz holds the current seed
// corpus; with -write-corpus it writes it:
//
//	go test ./protocol -run TestWriteSeedCorpus -write-corpus
//
// Other files there (inputs found by fuzzing) are left alone.
func TestWriteSeedCorpus(t *testing.T) {
	all := corpusSeeds(t)
	require.Len(t, all, len(fuzzTargets))
	for _, target := range fuzzTargets {
		seeds := all[target]
		var valid, invalid int
		names := map[string]bool{}
		for _, s := range seeds {
			require.False(t, names[s.name], "%s: duplicate seed %s", target, s.name)
			names[s.name] = true
			if s.valid() {
				valid++
			} else {
				invalid++
			}
		}
		require.Positive(t, valid, target)
		require.Positive(t, invalid, target)

		files := map[string]string{}
		for _, s := range seeds {
			files[s.name] = corpusFile(target, s.data)
		}
		err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", target), files, *writeCorpus)
		require.NoError(t, err, "run: go test ./protocol -run TestWriteSeedCorpus -write-corpus")
	}
}

// TestSeedsClassified checks each seed decodes exactly when it is named
// valid, so the corpus exercises both paths of every target.
func TestSeedsClassified(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"FuzzParseToken":     func(b []byte) error { _, err := ParseToken(b); return err },
		"FuzzParseTokenText": func(b []byte) error { _, err := ParseTokenText(string(b)); return err },
		"FuzzStatusRequest":  func(b []byte) error { _, err := UnmarshalStatusRequest(b); return err },
		"FuzzStatusReply":    func(b []byte) error { _, err := UnmarshalStatusReply(b); return err },
		"FuzzAcquireRequest": func(b []byte) error { _, err := UnmarshalAcquireRequest(b); return err },
		"FuzzAcquireReply":   func(b []byte) error { _, err := UnmarshalAcquireReply(b); return err },
		"FuzzCommitRequest":  func(b []byte) error { _, err := UnmarshalCommitRequest(b); return err },
		"FuzzRenewRequest":   func(b []byte) error { _, err := UnmarshalRenewRequest(b); return err },
		"FuzzReleaseRequest": func(b []byte) error { _, err := UnmarshalReleaseRequest(b); return err },
		"FuzzAbandonRequest": func(b []byte) error { _, err := UnmarshalAbandonRequest(b); return err },
		"FuzzAck":            func(b []byte) error { _, err := UnmarshalAck(b); return err },
		"FuzzSignedVote":     func(b []byte) error { _, err := UnmarshalSignedVote(b); return err },
		"FuzzEvidence":       func(b []byte) error { _, err := UnmarshalEvidence(b); return err },
		"FuzzWaitRequest":    func(b []byte) error { _, err := UnmarshalWaitRequest(b); return err },
		"FuzzWaitReply":      func(b []byte) error { _, err := UnmarshalWaitReply(b); return err },
		"FuzzReadFrame":      func(b []byte) error { _, err := ReadFrame(bytes.NewReader(b), MaxFrameSize); return err },
	}
	require.Len(t, decoders, len(fuzzTargets))
	for target, seeds := range corpusSeeds(t) {
		for _, s := range seeds {
			err := decoders[target](s.data)
			if s.valid() {
				require.NoError(t, err, "%s/%s", target, s.name)
			} else {
				require.Error(t, err, "%s/%s", target, s.name)
			}
		}
	}
}

func addValidSeeds(f *testing.F, target string) {
	for _, s := range corpusSeeds(f)[target] {
		if !s.valid() {
			continue
		}
		if stringTargets[target] {
			f.Add(string(s.data))
		} else {
			f.Add(s.data)
		}
	}
}

// fuzzDecoder checks a decoder: a successful decode re-encodes to exactly
// the input; a failed one returns the zero value and an error callers can
// branch on; nothing panics.
func fuzzDecoder[M any](f *testing.F, target string, decode func([]byte) (M, error), encode func(M) []byte) {
	addValidSeeds(f, target)
	fuzzRoundTrip(f, decode, encode)
}

// fuzzRoundTrip runs fuzzDecoder's checks over the seeds already added.
func fuzzRoundTrip[M any](f *testing.F, decode func([]byte) (M, error), encode func(M) []byte) {
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := decode(in)
		if err != nil {
			if !reflect.ValueOf(&m).Elem().IsZero() {
				t.Fatalf("failed decode returned %+v, want the zero value", m)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalidField) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrInvalidField", err)
			}
			return
		}
		if out := encode(m); !bytes.Equal(in, out) {
			t.Fatalf("decode then encode changed the bytes:\n in: %x\nout: %x\nmsg: %+v", in, out, m)
		}
	})
}

func marshalOf[M interface{ Marshal() []byte }](m M) []byte { return m.Marshal() }

func FuzzParseToken(f *testing.F) {
	fuzzDecoder(f, "FuzzParseToken", ParseToken, func(t Token) []byte {
		b, err := t.MarshalBinary()
		if err != nil {
			panic(fmt.Sprintf("parsed token does not marshal: %v", err))
		}
		return b
	})
}

func FuzzParseTokenText(f *testing.F) {
	addValidSeeds(f, "FuzzParseTokenText")
	f.Fuzz(func(t *testing.T, in string) {
		tok, err := ParseTokenText(in)
		if err != nil {
			if tok != (Token{}) {
				t.Fatalf("failed parse returned %+v, want the zero value", tok)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalidField) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrInvalidField", err)
			}
			return
		}
		want := strings.TrimSpace(in)
		if out := tok.String(); out != want {
			t.Fatalf("parse then String changed the text:\n in: %q\nout: %q", want, out)
		}
		if out, err := tok.MarshalText(); err != nil || string(out) != want {
			t.Fatalf("MarshalText = %q, %v; want %q", out, err, want)
		}
	})
}

func FuzzStatusRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzStatusRequest", UnmarshalStatusRequest, marshalOf[StatusRequest])
}

func FuzzStatusReply(f *testing.F) {
	fuzzDecoder(f, "FuzzStatusReply", UnmarshalStatusReply, marshalOf[StatusReply])
}

func FuzzAcquireRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzAcquireRequest", UnmarshalAcquireRequest, marshalOf[AcquireRequest])
}

func FuzzAcquireReply(f *testing.F) {
	fuzzDecoder(f, "FuzzAcquireReply", UnmarshalAcquireReply, marshalOf[AcquireReply])
}

func FuzzCommitRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzCommitRequest", UnmarshalCommitRequest, marshalOf[CommitRequest])
}

func FuzzRenewRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzRenewRequest", UnmarshalRenewRequest, marshalOf[RenewRequest])
}

func FuzzReleaseRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzReleaseRequest", UnmarshalReleaseRequest, marshalOf[ReleaseRequest])
}

func FuzzAbandonRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzAbandonRequest", UnmarshalAbandonRequest, marshalOf[AbandonRequest])
}

func FuzzSignedVote(f *testing.F) {
	fuzzDecoder(f, "FuzzSignedVote", UnmarshalSignedVote, marshalOf[SignedVote])
}

func FuzzEvidence(f *testing.F) {
	fuzzDecoder(f, "FuzzEvidence", UnmarshalEvidence, marshalOf[Evidence])
}

func FuzzWaitRequest(f *testing.F) {
	fuzzDecoder(f, "FuzzWaitRequest", UnmarshalWaitRequest, marshalOf[WaitRequest])
}

func FuzzWaitReply(f *testing.F) {
	fuzzDecoder(f, "FuzzWaitReply", UnmarshalWaitReply, marshalOf[WaitReply])
}

func FuzzAck(f *testing.F) {
	fuzzDecoder(f, "FuzzAck", UnmarshalAck, marshalOf[Ack])
}

// FuzzReadFrame reads one frame from a stream holding the input. The frame
// is a prefix of the input (the rest would be the next frame), so a
// successful read must re-encode to exactly the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	addValidSeeds(f, "FuzzReadFrame")
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		body, err := ReadFrame(r, MaxFrameSize)
		consumed := len(in) - r.Len()
		if err != nil {
			if body != nil {
				t.Fatalf("failed read returned %d bytes, want nil", len(body))
			}
			switch {
			case errors.Is(err, ErrFrameTooLarge):
				if consumed > 10 {
					t.Fatalf("frame too large, but %d bytes were read", consumed)
				}
			case errors.Is(err, ErrMalformed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(body) > MaxFrameSize {
			t.Fatalf("frame of %d bytes exceeds the cap", len(body))
		}
		var out bytes.Buffer
		if err := WriteFrame(&out, body); err != nil {
			t.Fatalf("WriteFrame of a read frame: %v", err)
		}
		if !bytes.Equal(in[:consumed], out.Bytes()) {
			t.Fatalf("read then write changed the frame:\n in: %x\nout: %x", in[:consumed], out.Bytes())
		}
	})
}

// syncSeedCorpus checks that testdata/fuzz holds each target's seeds
// (all, by target); with -write-corpus it writes them. rerun names the
// test to run with -write-corpus.
func syncSeedCorpus(t *testing.T, all map[string][]seed, targets []string, rerun string) {
	t.Helper()
	require.Len(t, all, len(targets))
	for _, target := range targets {
		files := map[string]string{}
		for _, s := range all[target] {
			require.NotContains(t, files, s.name, "%s: seed named twice", target)
			files[s.name] = corpusFile(target, s.data)
		}
		err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", target), files, *writeCorpus)
		require.NoError(t, err, "run: go test ./protocol -run "+rerun+" -write-corpus")
	}
}

// requireSeedsClassified checks that each seed decodes exactly when it is
// named valid, and that every target has seeds of both kinds.
func requireSeedsClassified(t *testing.T, all map[string][]seed, decoders map[string]func([]byte) error) {
	t.Helper()
	for target, seeds := range all {
		var valid, invalid int
		for _, s := range seeds {
			err := decoders[target](s.data)
			if s.valid() {
				valid++
				require.NoError(t, err, "%s/%s", target, s.name)
			} else {
				invalid++
				require.Error(t, err, "%s/%s", target, s.name)
			}
		}
		require.Positive(t, valid, target)
		require.Positive(t, invalid, target)
	}
}
