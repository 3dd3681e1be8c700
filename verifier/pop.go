package verifier

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/palisade-dev/palisade/protocol"
)

// Proof of possession: in proof mode a token alone admits nothing. The token
// names its holder (a libp2p peer ID of an Ed25519 key, see HolderKey), and
// every request must also carry the holder's signature over the request,
// so a leaked token cannot be used by anyone without the holder's key.

// HeaderProof carries the holder's request proof (Proof.String) in proof
// mode.
const HeaderProof = "Palisade-Proof"

const (
	// DomainProof tags the bytes a holder signs for a request; it ends in a
	// zero byte like protocol's tags.
	DomainProof = "palisade-pop-v1\x00"
	// ProofVersion is the version byte of the proof's signed bytes and of
	// its header encoding.
	ProofVersion = 1
	// NonceSize is the size of a proof's random nonce.
	NonceSize = 16
	// ProofSize is the size of a proof's binary form: version, timestamp
	// (big-endian unix milliseconds), nonce, Ed25519 signature.
	ProofSize = 1 + 8 + NonceSize + ed25519.SignatureSize
	// DefaultProofWindow is how far a proof's timestamp may be from the
	// verifier's clock, either way, by default.
	DefaultProofWindow = 30 * time.Second
	// DefaultMaxNonces bounds the replay record by default.
	DefaultMaxNonces = 1 << 16
	// DefaultMaxNoncesPerHolder is the default quota of one holder in the
	// replay record: 8,192 unexpired nonces, an eighth of DefaultMaxNonces,
	// which is about 270 proved requests a second per holder sustained over
	// a 30 s window. With a configured MaxNonces the default quota is an
	// eighth of it.
	DefaultMaxNoncesPerHolder = DefaultMaxNonces / 8
)

// proofTextLen is the length of Proof.String: unpadded base64url.
var proofTextLen = base64.RawURLEncoding.EncodedLen(ProofSize)

// ProofConfig configures proof mode (RequireProof).
type ProofConfig struct {
	// Window is how far a proof's timestamp may be from Now, either way,
	// and how long its nonce is remembered (default DefaultProofWindow).
	Window time.Duration
	// Now is the verifier's clock (default time.Now).
	Now func() time.Time
	// MaxNonces bounds the replay record (default DefaultMaxNonces). Each
	// entry takes about 150 bytes plus the holder. When it is full of
	// unexpired nonces, new proofs are refused with ErrTooManyProofs:
	// forgetting an unexpired nonce would let its request be replayed.
	// Only proofs that verify, from holders of valid tokens, are recorded,
	// so garbage cannot fill it, and Fence.AdmitRequest and
	// Fence.Middleware refuse a stale token (ErrStale) before recording
	// its nonce, so an ex-holder cannot fill it either; size it above the
	// number of proved requests the resource serves in two windows.
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

// RequireProof turns on proof mode: a request is admitted only with a proof
// of possession from the token's holder (see VerifyRequest), and a token
// alone admits nothing (VerifyFor and Fence.Admit refuse it with
// ErrNoProof). Zero fields of cfg take their defaults.
func RequireProof(cfg ProofConfig) Option {
	return func(o *options) { o.proof = &cfg }
}

type proofConfig struct {
	required  bool
	window    time.Duration
	now       func() time.Time
	maxNonces int
	perHolder int
}

func newProofConfig(c *ProofConfig) proofConfig {
	pc := proofConfig{window: DefaultProofWindow, now: time.Now, maxNonces: DefaultMaxNonces, perHolder: DefaultMaxNoncesPerHolder}
	if c == nil {
		return pc
	}
	pc.required = true
	if c.Window > 0 {
		pc.window = c.Window
	}
	if c.Now != nil {
		pc.now = c.Now
	}
	if c.MaxNonces > 0 {
		pc.maxNonces = c.MaxNonces
	}
	pc.perHolder = pc.maxNonces / 8
	if c.MaxNoncesPerHolder > 0 {
		pc.perHolder = c.MaxNoncesPerHolder
	}
	pc.perHolder = max(1, min(pc.perHolder, pc.maxNonces/2))
	return pc
}

// ProofRequired reports whether v is in proof mode.
func (v *Verifier) ProofRequired() bool { return v.proof.required }

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
// random nonce and the holder's Ed25519 signature over ProofBytes.
type Proof struct {
	// UnixMilli is when the holder signed, in unix milliseconds.
	UnixMilli int64
	// Nonce is random, fresh for each request.
	Nonce [NonceSize]byte
	// Signature is the holder's signature over ProofBytes.
	Signature [ed25519.SignatureSize]byte
}

// ProofBytes returns the canonical bytes a holder signs for req with tok at
// unixMilli with nonce: DomainProof, ProofVersion, then the token's cluster
// ID, the method and the target (each uvarint-length-prefixed), the body
// digest, the token's digest (protocol.Token.Digest: a hash of its
// canonical signed fields and signature), the big-endian timestamp and the
// nonce. Clients and verifiers both build it here.
//
// The proof does not cover the host name (proxies rewrite it). A resource
// served by several replicas, each with its own Verifier and so its own
// replay record, could see one captured request replayed once on each
// replica within the window; give such replicas distinct path prefixes.
func ProofBytes(tok protocol.Token, req Request, unixMilli int64, nonce [NonceSize]byte) []byte {
	b := make([]byte, 0, len(DomainProof)+1+protocol.ClusterIDSize+2*binary.MaxVarintLen64+len(req.Method)+len(req.Target)+2*sha256.Size+8+NonceSize)
	b = append(b, DomainProof...)
	b = append(b, ProofVersion)
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

// MarshalBinary returns the ProofSize-byte binary form.
func (p Proof) MarshalBinary() ([]byte, error) {
	if p.UnixMilli < 0 {
		return nil, fmt.Errorf("%w: negative timestamp", ErrBadProof)
	}
	b := make([]byte, 0, ProofSize)
	b = append(b, ProofVersion)
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

// ParseProof decodes the binary form strictly: exact size, version
// ProofVersion, a timestamp that fits an int64. The error wraps ErrBadProof.
func ParseProof(b []byte) (Proof, error) {
	if len(b) != ProofSize {
		return Proof{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadProof, len(b), ProofSize)
	}
	if b[0] != ProofVersion {
		return Proof{}, fmt.Errorf("%w: version %d, want %d", ErrBadProof, b[0], ProofVersion)
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

// ParseProofText decodes the header form strictly: exactly the length of
// an encoded proof, unpadded base64url with no other characters (surrounding
// spaces are trimmed, as HTTP does), then ParseProof. The error wraps
// ErrBadProof.
func ParseProofText(s string) (Proof, error) {
	s = strings.TrimSpace(s)
	if len(s) != proofTextLen {
		return Proof{}, fmt.Errorf("%w: header is %d characters, want %d", ErrBadProof, len(s), proofTextLen)
	}
	// Go's base64 decoder skips CR and LF even in strict mode.
	if strings.ContainsAny(s, "\r\n") {
		return Proof{}, fmt.Errorf("%w: line break in header", ErrBadProof)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return Proof{}, fmt.Errorf("%w: %w", ErrBadProof, err)
	}
	return ParseProof(b)
}

// SignRequest attaches tok and a fresh proof of possession to req: it reads
// and restores the body (setting GetBody and ContentLength), draws a random
// nonce, signs ProofBytes for req.Method and req.URL.RequestURI() at now
// with sign (the holder's Ed25519 identity key: ed25519.Sign, or a libp2p
// key's Sign; see client.SignRequest), and sets HeaderToken and HeaderProof.
// Sign each request just before sending it; a retried request needs a new
// proof.
func SignRequest(req *http.Request, tok protocol.Token, sign func(msg []byte) ([]byte, error), now time.Time) error {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return fmt.Errorf("verifier: sign request: read body: %w", err)
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	text, err := tok.MarshalText()
	if err != nil {
		return fmt.Errorf("verifier: sign request: %w", err)
	}
	p := Proof{UnixMilli: now.UnixMilli()}
	if _, err := crand.Read(p.Nonce[:]); err != nil {
		return fmt.Errorf("verifier: sign request: nonce: %w", err)
	}
	sig, err := sign(ProofBytes(tok, NewRequest(req.Method, req.URL.RequestURI(), body), p.UnixMilli, p.Nonce))
	if err != nil {
		return fmt.Errorf("verifier: sign request: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("verifier: sign request: signature of %d bytes, want an Ed25519 signature", len(sig))
	}
	copy(p.Signature[:], sig)
	req.Header.Set(HeaderToken, string(text))
	req.Header.Set(HeaderProof, p.String())
	return nil
}

// VerifyRequest admits a request in proof mode, or checks one in any mode:
// tok must pass VerifyFor's checks for resource, and proof must be the
// holder's proof for req with tok. In order, cheap checks first:
//
//  1. cluster, field limits and resource (ErrWrongCluster,
//     ErrMalformedToken, ErrWrongResource);
//  2. the holder is an Ed25519 peer ID (ErrBadProof wrapping ErrHolderKey);
//  3. the proof's timestamp is within the window of the clock
//     (ErrProofExpired);
//  4. the token's signature, from the cache or by pairing
//     (ErrInvalidToken);
//  5. the proof's signature under the holder's key over ProofBytes
//     (ErrBadProof);
//  6. the (holder, nonce) was not used within the window (ErrReplayed), and
//     is recorded only now, so that only verified proofs take room
//     (ErrTooManyProofs when the holder's quota, MaxNoncesPerHolder, or
//     the whole record, MaxNonces, is full).
//
// It does not look at the barrier, so it records the nonce of a stale
// token too: Fence.AdmitRequest and Fence.Middleware read the barrier
// between steps 5 and 6 and refuse a stale token before its nonce is
// recorded.
//
// On success it returns the Admission for a store's native transaction
// (BoltStore.Update, SQLStore.Update), as Admit does outside proof mode.
func (v *Verifier) VerifyRequest(tok protocol.Token, resource string, req Request, proof Proof) (Admission, error) {
	if err := v.checkProofUntilRecord(tok, resource, req, proof); err != nil {
		return Admission{}, err
	}
	if err := v.recordProof(tok, proof); err != nil {
		return Admission{}, err
	}
	return admitted(&tok), nil
}

// checkProofUntilRecord runs steps 1 to 5 of VerifyRequest.
func (v *Verifier) checkProofUntilRecord(tok protocol.Token, resource string, req Request, proof Proof) error {
	key, cached, err := v.checkProofTime(&tok, resource, proof)
	if err != nil {
		return err
	}
	if err := v.checkSignature(&tok, cached); err != nil {
		return err
	}
	return v.checkProofSignature(tok, key, req, proof)
}

// checkProofTime runs steps 1 to 3 of VerifyRequest.
func (v *Verifier) checkProofTime(tok *protocol.Token, resource string, proof Proof) (key ed25519.PublicKey, cached bool, err error) {
	cached, err = v.precheckFor(tok, resource)
	if err != nil {
		return nil, false, err
	}
	key, err = HolderKey(tok.Holder.ID)
	if err != nil {
		return nil, false, fmt.Errorf("%w: token holder %q: %w", ErrBadProof, tok.Holder.ID, err)
	}
	now := v.proof.now().UnixMilli()
	w := v.proof.window.Milliseconds()
	if proof.UnixMilli < now-w || proof.UnixMilli > now+w {
		return nil, false, fmt.Errorf("%w: signed at %s, clock %s, window %s", ErrProofExpired,
			time.UnixMilli(proof.UnixMilli).UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), v.proof.window)
	}
	return key, cached, nil
}

// checkProofSignature runs step 5 of VerifyRequest.
func (v *Verifier) checkProofSignature(tok protocol.Token, key ed25519.PublicKey, req Request, proof Proof) error {
	if !ed25519.Verify(key, ProofBytes(tok, req, proof.UnixMilli, proof.Nonce), proof.Signature[:]) {
		return fmt.Errorf("%w: signature does not verify under holder %s for %s %q", ErrBadProof, tok.Holder.ID, req.Method, req.Target)
	}
	return nil
}

// recordProof runs step 6 of VerifyRequest.
func (v *Verifier) recordProof(tok protocol.Token, proof Proof) error {
	return v.replay.record(replayKey{holder: tok.Holder.ID, nonce: proof.Nonce}, proof.UnixMilli+v.proof.window.Milliseconds(), v.proof.now().UnixMilli())
}

// AdmitRequest is Fence.Admit for a request with a holder's proof: tok and
// proof must pass v.VerifyRequest for resource and req, and tok's epoch must
// not be below the barrier; then write runs in the transaction that raises
// the barrier. The barrier is read once before the proof's nonce is
// recorded, so a stale token is refused with ErrStale without taking room
// in the replay record, and checked again, authoritatively, inside the
// transaction. The errors are VerifyRequest's, ErrStale, write's error, or
// a store error (ErrOutcomeUnknown if the commit's outcome is unknown; see
// BarrierStore.Guard).
func (f *Fence) AdmitRequest(ctx context.Context, tok protocol.Token, resource string, req Request, proof Proof, write func(tx Tx) error) error {
	if err := f.v.checkProofUntilRecord(tok, resource, req, proof); err != nil {
		return err
	}
	adm := admitted(&tok)
	if err := f.refuseStale(ctx, adm); err != nil {
		return err
	}
	if err := f.v.recordProof(tok, proof); err != nil {
		return err
	}
	return f.s.Guard(ctx, adm, write)
}

// refuseStale is a cheap read of the barrier outside any transaction: it
// returns a *StaleError if adm's epoch is below it. A barrier raised just
// after the read is still caught by Guard.
func (f *Fence) refuseStale(ctx context.Context, adm Admission) error {
	barrier, ok, err := f.s.Barrier(ctx, adm.resource)
	if err != nil {
		return fmt.Errorf("verifier: read barrier of %q: %w", adm.resource, err)
	}
	if ok && adm.epoch < barrier {
		return &StaleError{Resource: adm.resource, Epoch: adm.epoch, Barrier: barrier}
	}
	return nil
}

// replayCache records the (holder, nonce) of every proof admitted within
// the window, until its timestamp leaves the window. It holds at most max
// keys, and at most perHolder of one holder.
type replayCache struct {
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

func newReplayCache(max, perHolder int) *replayCache {
	return &replayCache{max: max, perHolder: perHolder, seen: make(map[replayKey]int64), held: make(map[string]int)}
}

// record refuses a key already recorded, or any new key when its holder's
// quota or the record is full, and records key otherwise.
func (r *replayCache) record(k replayKey, expiry, now int64) error {
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
		return fmt.Errorf("%w: signed before the window of the latest clock reading", ErrProofExpired)
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
