// Package pop is Palisade's proof of possession: the holder of a token signs
// each request with its identity key, so a leaked token cannot be used by
// anyone without that key.
//
// The token names its holder, a libp2p peer ID of an Ed25519 key
// (verifier.HolderKey decodes it). In proof mode (verifier.RequireProof) a
// resource admits a request only with the holder's [Proof]: an Ed25519
// signature over [SignedBytes] (the request's method, target and body
// digest, the token's digest, a timestamp and a random nonce). This package
// holds the proof's format, the client side ([SignRequest]) and the
// verifier's bounded [Replay] record of recent nonces; package verifier
// checks the token and calls it.
//
// It imports only the standard library and package protocol.
package pop

import (
	"bytes"
	"container/heap"
	"crypto/ed25519"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// HTTP header names.
const (
	// HeaderProof carries the holder's request proof (Proof.String).
	HeaderProof = "Palisade-Proof"
	// HeaderToken carries the token's text form (protocol.Token.String);
	// verifier.HeaderToken is the same header.
	HeaderToken = "Palisade-Token"
)

const (
	// Domain tags the bytes a holder signs for a request; it ends in a
	// zero byte like protocol's tags.
	Domain = "palisade-pop-v1\x00"
	// Version is the version byte of the proof's signed bytes and of its
	// header encoding.
	Version = 1
	// NonceSize is the size of a proof's random nonce.
	NonceSize = 16
	// Size is the size of a proof's binary form: version, timestamp
	// (big-endian unix milliseconds), nonce, Ed25519 signature.
	Size = 1 + 8 + NonceSize + ed25519.SignatureSize
	// DefaultWindow is how far a proof's timestamp may be from the
	// verifier's clock, either way, by default.
	DefaultWindow = 30 * time.Second
	// DefaultMaxNonces bounds the replay record by default.
	DefaultMaxNonces = 1 << 16
	// DefaultMaxNoncesPerHolder is the default quota of one holder in the
	// replay record: 8,192 unexpired nonces, an eighth of DefaultMaxNonces,
	// which is about 270 proved requests a second per holder sustained over
	// a 30 s window. With a configured MaxNonces the default quota is an
	// eighth of it.
	DefaultMaxNoncesPerHolder = DefaultMaxNonces / 8
)

// Errors callers can branch on. The HTTP middleware (verifier.Fence)
// answers 401 for the first four and 503 for ErrTooManyProofs.
var (
	// ErrNoProof reports a request without a holder's proof in proof mode
	// (also every token given to verifier.Verifier.VerifyFor or
	// verifier.Fence.Admit there).
	ErrNoProof = errors.New("pop: no proof of possession")
	// ErrBadProof reports a proof that is malformed or does not verify
	// under the holder's key for this request and token, or a token whose
	// holder names no Ed25519 key (then it also wraps
	// verifier.ErrHolderKey).
	ErrBadProof = errors.New("pop: bad proof of possession")
	// ErrExpired reports a proof whose timestamp is outside the replay
	// window around the verifier's clock.
	ErrExpired = errors.New("pop: proof of possession outside the time window")
	// ErrReplayed reports a proof whose (holder, nonce) was already used
	// within the window.
	ErrReplayed = errors.New("pop: replayed proof of possession")
	// ErrTooManyProofs reports a full replay record, or a holder that has
	// used its quota in it (Config.MaxNoncesPerHolder): the request is
	// refused rather than an unexpired nonce forgotten. Retry after the
	// window.
	ErrTooManyProofs = errors.New("pop: too many recent proofs of possession")
)

// textLen is the length of Proof.String: unpadded base64url.
var textLen = base64.RawURLEncoding.EncodedLen(Size)

// Config configures proof mode (verifier.RequireProof) and its replay
// record. Zero fields take their defaults.
type Config struct {
	// Window is how far a proof's timestamp may be from Now, either way,
	// and how long its nonce is remembered (default DefaultWindow).
	Window time.Duration
	// Now is the verifier's clock (default time.Now).
	Now func() time.Time
	// MaxNonces bounds the replay record (default DefaultMaxNonces). Each
	// entry takes about 150 bytes plus the holder. When it is full of
	// unexpired nonces, new proofs are refused with ErrTooManyProofs:
	// forgetting an unexpired nonce would let its request be replayed.
	// Only proofs that verify, from holders of valid tokens, are recorded,
	// so garbage cannot fill it, and verifier.Fence.AdmitRequest and
	// verifier.Fence.Middleware refuse a stale token (verifier.ErrStale)
	// before recording its nonce, so an ex-holder cannot fill it either;
	// size it above the number of proved requests the resource serves in
	// two windows.
	MaxNonces int
	// MaxNoncesPerHolder is one holder's quota of unexpired nonces in the
	// replay record (default MaxNonces/8, which is
	// DefaultMaxNoncesPerHolder for the default MaxNonces). It is capped at
	// half of MaxNonces (and is at least 1), so that no single holder can
	// take all the room: one that sends more proved requests than its quota
	// within a window is refused with ErrTooManyProofs, and the other
	// holders keep their room. Size it above the number of proved requests
	// one lock session sends in two windows.
	MaxNoncesPerHolder int
}

// Request is what a holder's proof covers of a request, besides the token.
type Request struct {
	// Method is the HTTP method (or any verb of another transport),
	// compared exactly.
	Method string
	// Target is the request target: the path including the raw query, as
	// sent on the wire (url.URL.RequestURI on the client).
	Target string
	// BodyDigest is the SHA-256 of the request body (of no bytes for no
	// body).
	BodyDigest [sha256.Size]byte
}

// NewRequest returns the Request for a method, target and body.
func NewRequest(method, target string, body []byte) Request {
	return Request{Method: method, Target: target, BodyDigest: sha256.Sum256(body)}
}

// Proof is a holder's proof of possession for one request: a timestamp, a
// random nonce and the holder's Ed25519 signature over SignedBytes.
type Proof struct {
	// UnixMilli is when the holder signed, in unix milliseconds.
	UnixMilli int64
	// Nonce is random, fresh for each request.
	Nonce [NonceSize]byte
	// Signature is the holder's signature over SignedBytes.
	Signature [ed25519.SignatureSize]byte
}

// SignedBytes returns the canonical bytes a holder signs for req with tok
// at unixMilli with nonce: Domain, Version, then the token's cluster ID,
// the method and the target (each uvarint-length-prefixed), the body
// digest, the token's digest (protocol.Token.Digest: a hash of its
// canonical signed fields and signature), the big-endian timestamp and the
// nonce. Clients and verifiers both build it here.
//
// The proof does not cover the host name (proxies rewrite it). A resource
// served by several replicas, each with its own verifier and so its own
// replay record, could see one captured request replayed once on each
// replica within the window; give such replicas distinct path prefixes.
func SignedBytes(tok protocol.Token, req Request, unixMilli int64, nonce [NonceSize]byte) []byte {
	b := make([]byte, 0, len(Domain)+1+protocol.ClusterIDSize+2*binary.MaxVarintLen64+len(req.Method)+len(req.Target)+2*sha256.Size+8+NonceSize)
	b = append(b, Domain...)
	b = append(b, Version)
	b = append(b, tok.Cluster[:]...)
	b = binary.AppendUvarint(b, uint64(len(req.Method)))
	b = append(b, req.Method...)
	b = binary.AppendUvarint(b, uint64(len(req.Target)))
	b = append(b, req.Target...)
	b = append(b, req.BodyDigest[:]...)
	d := tok.Digest()
	b = append(b, d[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(unixMilli))
	return append(b, nonce[:]...)
}

// MarshalBinary returns the Size-byte binary form.
func (p Proof) MarshalBinary() ([]byte, error) {
	if p.UnixMilli < 0 {
		return nil, fmt.Errorf("%w: negative timestamp", ErrBadProof)
	}
	b := make([]byte, 0, Size)
	b = append(b, Version)
	b = binary.BigEndian.AppendUint64(b, uint64(p.UnixMilli))
	b = append(b, p.Nonce[:]...)
	return append(b, p.Signature[:]...), nil
}

// String returns the header form: unpadded base64url of the binary form.
// A proof with a negative timestamp yields "invalid".
func (p Proof) String() string {
	b, err := p.MarshalBinary()
	if err != nil {
		return "invalid"
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Parse decodes the binary form strictly: exact size, version Version, a
// timestamp that fits an int64. The error wraps ErrBadProof.
func Parse(b []byte) (Proof, error) {
	if len(b) != Size {
		return Proof{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadProof, len(b), Size)
	}
	if b[0] != Version {
		return Proof{}, fmt.Errorf("%w: version %d, want %d", ErrBadProof, b[0], Version)
	}
	ms := binary.BigEndian.Uint64(b[1:9])
	if ms > math.MaxInt64 {
		return Proof{}, fmt.Errorf("%w: timestamp out of range", ErrBadProof)
	}
	p := Proof{UnixMilli: int64(ms)}
	copy(p.Nonce[:], b[9:9+NonceSize])
	copy(p.Signature[:], b[9+NonceSize:])
	return p, nil
}

// ParseText decodes the header form strictly: exactly the length of an
// encoded proof, unpadded base64url with no other characters (surrounding
// spaces are trimmed, as HTTP does), then Parse. The error wraps
// ErrBadProof.
func ParseText(s string) (Proof, error) {
	s = strings.TrimSpace(s)
	if len(s) != textLen {
		return Proof{}, fmt.Errorf("%w: header is %d characters, want %d", ErrBadProof, len(s), textLen)
	}
	// Go's base64 decoder skips CR and LF even in strict mode.
	if strings.ContainsAny(s, "\r\n") {
		return Proof{}, fmt.Errorf("%w: line break in header", ErrBadProof)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return Proof{}, fmt.Errorf("%w: %w", ErrBadProof, err)
	}
	return Parse(b)
}

// SignRequest attaches tok and a fresh proof of possession to req: it reads
// and restores the body (setting GetBody and ContentLength), draws a random
// nonce, signs SignedBytes for req.Method and req.URL.RequestURI() at now
// with sign (the holder's Ed25519 identity key: ed25519.Sign, or a libp2p
// key's Sign; see client.SignRequest), and sets HeaderToken and
// HeaderProof. Sign each request just before sending it; a retried request
// needs a new proof.
func SignRequest(req *http.Request, tok protocol.Token, sign func(msg []byte) ([]byte, error), now time.Time) error {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return fmt.Errorf("pop: sign request: read body: %w", err)
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	text, err := tok.MarshalText()
	if err != nil {
		return fmt.Errorf("pop: sign request: %w", err)
	}
	p := Proof{UnixMilli: now.UnixMilli()}
	if _, err := crand.Read(p.Nonce[:]); err != nil {
		return fmt.Errorf("pop: sign request: nonce: %w", err)
	}
	sig, err := sign(SignedBytes(tok, NewRequest(req.Method, req.URL.RequestURI(), body), p.UnixMilli, p.Nonce))
	if err != nil {
		return fmt.Errorf("pop: sign request: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("pop: sign request: signature of %d bytes, want an Ed25519 signature", len(sig))
	}
	copy(p.Signature[:], sig)
	req.Header.Set(HeaderToken, string(text))
	req.Header.Set(HeaderProof, p.String())
	return nil
}

// Verify checks that proof is key's signature over SignedBytes for req
// with tok (else ErrBadProof). It checks neither the time nor the nonce:
// see Replay.
func Verify(key ed25519.PublicKey, tok protocol.Token, req Request, proof Proof) error {
	if !ed25519.Verify(key, SignedBytes(tok, req, proof.UnixMilli, proof.Nonce), proof.Signature[:]) {
		return fmt.Errorf("%w: signature does not verify under holder %s for %s %q", ErrBadProof, tok.Holder.ID, req.Method, req.Target)
	}
	return nil
}

// Replay is a verifier's record of the (holder, nonce) of every proof
// admitted within the window, kept until its timestamp leaves the window,
// with its clock. It holds at most Config.MaxNonces keys, and at most
// Config.MaxNoncesPerHolder of one holder (S6: what an admitted holder can
// make a verifier store is bounded per holder). It is safe for concurrent
// use.
type Replay struct {
	window time.Duration
	now    func() time.Time

	mu        sync.Mutex
	max       int
	perHolder int
	// seen maps each recorded key to its expiry (unix ms): timestamp +
	// window.
	seen map[replayKey]int64
	// held counts the keys in seen per holder; holders with none are
	// absent, so it has at most max entries.
	held   map[string]int
	expiry expiryHeap
	// horizon is the latest clock reading seen. Entries expire against
	// it, and a proof whose expiry lies before it is refused as expired
	// even if the clock stepped back, so a forgotten nonce can never be
	// replayed.
	horizon int64
}

type replayKey struct {
	holder string
	nonce  [NonceSize]byte
}

// NewReplay returns an empty replay record configured by cfg, whose zero
// fields take their defaults.
func NewReplay(cfg Config) *Replay {
	r := &Replay{window: DefaultWindow, now: time.Now, max: DefaultMaxNonces, seen: make(map[replayKey]int64), held: make(map[string]int)}
	if cfg.Window > 0 {
		r.window = cfg.Window
	}
	if cfg.Now != nil {
		r.now = cfg.Now
	}
	if cfg.MaxNonces > 0 {
		r.max = cfg.MaxNonces
	}
	r.perHolder = r.max / 8
	if cfg.MaxNoncesPerHolder > 0 {
		r.perHolder = cfg.MaxNoncesPerHolder
	}
	r.perHolder = max(1, min(r.perHolder, r.max/2))
	return r
}

// Window is how far a proof's timestamp may be from the clock, and how
// long its nonce is remembered.
func (r *Replay) Window() time.Duration { return r.window }

// CheckTime refuses a proof whose timestamp is more than the window away
// from the clock, either way, with ErrExpired.
func (r *Replay) CheckTime(proof Proof) error {
	now := r.now().UnixMilli()
	w := r.window.Milliseconds()
	if proof.UnixMilli < now-w || proof.UnixMilli > now+w {
		return fmt.Errorf("%w: signed at %s, clock %s, window %s", ErrExpired,
			time.UnixMilli(proof.UnixMilli).UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), r.window)
	}
	return nil
}

// Record records the proof's (holder, nonce) until its timestamp leaves
// the window. It refuses a key already recorded (ErrReplayed), a proof
// that expired against the latest clock reading (ErrExpired), and any new
// key when the holder's quota or the record is full (ErrTooManyProofs).
// Record only proofs that verified.
func (r *Replay) Record(holder string, proof Proof) error {
	k := replayKey{holder: holder, nonce: proof.Nonce}
	expiry := proof.UnixMilli + r.window.Milliseconds()
	now := r.now().UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.horizon = max(r.horizon, now)
	for len(r.expiry) > 0 && r.expiry[0].at < r.horizon {
		e := heap.Pop(&r.expiry).(expiryEntry)
		if r.seen[e.key] == e.at {
			delete(r.seen, e.key)
			if r.held[e.key.holder]--; r.held[e.key.holder] <= 0 {
				delete(r.held, e.key.holder)
			}
		}
	}
	if expiry < r.horizon {
		return fmt.Errorf("%w: signed before the window of the latest clock reading", ErrExpired)
	}
	if _, dup := r.seen[k]; dup {
		return fmt.Errorf("%w: holder %s nonce %x", ErrReplayed, k.holder, k.nonce)
	}
	if n := r.held[k.holder]; n >= r.perHolder {
		return fmt.Errorf("%w: holder %s has %d unexpired nonces recorded, its quota", ErrTooManyProofs, k.holder, n)
	}
	if len(r.seen) >= r.max {
		return fmt.Errorf("%w: %d unexpired nonces recorded", ErrTooManyProofs, len(r.seen))
	}
	r.seen[k] = expiry
	r.held[k.holder]++
	heap.Push(&r.expiry, expiryEntry{at: expiry, key: k})
	return nil
}

// Len returns how many nonces the record holds, and the most any one
// holder holds.
func (r *Replay) Len() (total, perHolderMax int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.held {
		perHolderMax = max(perHolderMax, n)
	}
	return len(r.seen), perHolderMax
}

type expiryEntry struct {
	at  int64
	key replayKey
}

// expiryHeap is a min-heap of entries by expiry.
type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
