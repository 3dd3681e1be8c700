package verifier

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// Errors callers can branch on. Every error this package returns for a
// refused token wraps exactly one of the first six or, in proof mode, of
// pop.ErrNoProof, pop.ErrBadProof, pop.ErrExpired, pop.ErrReplayed and
// pop.ErrTooManyProofs.
var (
	// ErrMalformedToken reports a token that does not parse or whose fields
	// are outside protocol's limits, including a signature that breaks the
	// byte-level rules of its encoding (length, flag bits, x below p, the
	// identity). It wraps protocol's error.
	ErrMalformedToken = errors.New("verifier: malformed token")
	// ErrInvalidToken reports a token whose signature does not verify under
	// the group public key: tampered, forged, or a signature that is not a
	// point of G1 (not on the curve, outside the prime-order subgroup, or
	// any encoding the strict decoding refuses). It wraps crypto's error,
	// crypto.ErrMalformedPoint for the last kind.
	ErrInvalidToken = errors.New("verifier: invalid token signature")
	// ErrWrongCluster reports a token issued by another cluster.
	ErrWrongCluster = errors.New("verifier: token for another cluster")
	// ErrWrongResource reports a valid token for another resource.
	ErrWrongResource = errors.New("verifier: token for another resource")
	// ErrStale reports a token whose epoch is below the resource's barrier: a
	// newer holder has already been admitted. The concrete error is a
	// *StaleError.
	ErrStale = errors.New("verifier: stale token")
	// ErrFork reports a token at the resource's barrier epoch whose holder
	// is not the holder admitted at that epoch: two valid tokens for one
	// (resource, epoch), which S1 rules out while at most f nodes
	// misbehave. The write does not run. The concrete error is a
	// *ForkError, which holds the proof (a protocol.Fork).
	ErrFork = errors.New("verifier: fork: another holder's token at the barrier epoch")
	// ErrClosed reports use of a barrier store after Close.
	ErrClosed = errors.New("verifier: barrier store closed")
	// ErrOutcomeUnknown reports a guarded write whose commit was sent to
	// the store but not confirmed: the connection was lost during the
	// commit, the commit ran past the store's commit timeout, or it failed
	// in a way the store cannot classify. The write and its barrier raise
	// may or may not have committed; read the resource before retrying a
	// write that is not idempotent. Every other error from a guarded write
	// means that nothing changed.
	ErrOutcomeUnknown = errors.New("verifier: outcome of the guarded write unknown")
	// ErrHolderKey reports a token holder that is not the peer ID of an
	// Ed25519 key (see HolderKey), so no proof of possession can be checked
	// for it. The HTTP middleware answers 401.
	ErrHolderKey = errors.New("verifier: holder is not an Ed25519 peer ID")
)

// StaleError is the error a barrier store returns when an epoch is below the
// barrier. errors.Is(err, ErrStale) holds for it.
type StaleError struct {
	// Resource is the resource the request was for.
	Resource string
	// Epoch is the refused token's epoch.
	Epoch uint64
	// Barrier is the resource's barrier, above Epoch.
	Barrier uint64
}

// Error implements error.
func (e *StaleError) Error() string {
	return fmt.Sprintf("verifier: stale token for resource %q: epoch %d below barrier %d", e.Resource, e.Epoch, e.Barrier)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Verifier checks tokens against one cluster's group public key. It holds no
// secret. It is safe for concurrent use, and checking a token needs no
// network.
//
// Its only mutable state is two bounded caches: the verified-token cache
// (see WithCacheSize), which lets a token presented again skip the pairing
// check, and, in proof mode (see RequireProof), the replay record of the
// holders' request proofs.
type Verifier struct {
	cluster       protocol.ClusterID
	key           *crypto.GroupKey // decoded once, with precomputed lines
	cache         *tokenCache      // nil when disabled
	proofRequired bool
	replay        *pop.Replay
	checked       atomic.Uint64 // SignatureChecks
	group         *checkGroup   // concurrent checks share batches (group.go)
}

// Option configures a Verifier.
type Option func(*options)

type options struct {
	cacheSize int
	proof     *pop.Config
}

// DefaultCacheSize is the default number of verified tokens a Verifier
// remembers.
const DefaultCacheSize = 8192

// WithCacheSize bounds the verified-token cache to about n tokens (at least
// 2 when enabled); n <= 0 disables it, so every check runs the pairing. The
// cache is on by default with DefaultCacheSize entries, about 200 bytes
// each plus the token's resource and holder.
//
// The cache only remembers that a token's exact statement and canonical
// signature verified under this verifier's group key. Every other check
// (cluster, field limits, resource, barrier, holder proof) still runs on
// every request, so a cached token is never admitted where a fresh check
// would refuse it.
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// New returns a verifier for the cluster. It keeps only the cluster ID and
// the group public key, which resharing never changes. The key stays
// decoded (with its precomputed pairing lines), so a check decodes only
// the token's signature.
func New(c *protocol.Cluster, opts ...Option) *Verifier {
	o := options{cacheSize: DefaultCacheSize}
	for _, opt := range opts {
		opt(&o)
	}
	v := &Verifier{cluster: c.ID, key: c.Key, group: newCheckGroup()}
	if o.cacheSize > 0 {
		v.cache = newTokenCache(o.cacheSize)
	}
	v.proofRequired = o.proof != nil
	var pc pop.Config
	if o.proof != nil {
		pc = *o.proof
	}
	v.replay = pop.NewReplay(pc) // also for VerifyRequest outside proof mode
	return v
}

// Load reads and checks a cluster file (see protocol.LoadCluster) and returns
// a verifier for it. The file's group key is trusted as read: load it only
// from a trusted source.
func Load(clusterFile string, opts ...Option) (*Verifier, error) {
	c, err := protocol.LoadCluster(clusterFile)
	if err != nil {
		return nil, fmt.Errorf("verifier: load cluster: %w", err)
	}
	return New(c, opts...), nil
}

// ClusterID is the ID of the cluster whose tokens v accepts.
func (v *Verifier) ClusterID() protocol.ClusterID { return v.cluster }

// PublicKey is the group public key that v checks signatures under: the
// 96-byte compressed G2 point an outside implementation of the
// ciphersuite (crypto.Ciphersuite) needs, with a token's signed bytes and
// signature, to check the token itself.
func (v *Verifier) PublicKey() crypto.PublicKey { return v.key.PublicKey() }

// Verify checks that tok was issued by v's cluster: the cluster ID matches
// (else ErrWrongCluster), the fields are within limits (else
// ErrMalformedToken), and the signature over tok.Statement.SignedBytes()
// verifies under the group public key (else ErrInvalidToken). Cheap checks
// run first, then the verified-token cache, which answers a token seen
// before without decoding its signature (about 0.1 µs). Only a miss pays
// the signature check, about 0.55 ms of CPU: the strict decoding of the
// signature (a point not on the curve or outside G1 is refused here), its
// hash to G1 and one multi-pairing. Verify does not look at the resource,
// the barrier or a holder's proof: see VerifyFor, VerifyRequest and Fence.
func (v *Verifier) Verify(tok protocol.Token) error {
	cached, err := v.precheck(&tok)
	if err != nil {
		return err
	}
	return v.checkSignature(&tok, cached)
}

// VerifyFor is Verify for a request to resource: it also refuses a token for
// another resource with ErrWrongResource, before the pairing check.
//
// In proof mode (RequireProof) a token alone admits nothing: VerifyFor, and
// so Fence.Admit, refuse every token that passes the cheap checks with
// pop.ErrNoProof, before the pairing check. Use VerifyRequest,
// Fence.AdmitRequest or Fence.Middleware there.
func (v *Verifier) VerifyFor(tok protocol.Token, resource string) error {
	cached, err := v.precheckFor(&tok, resource)
	if err != nil {
		return err
	}
	if v.proofRequired {
		return fmt.Errorf("%w: resource %q requires a proof of possession from the holder", pop.ErrNoProof, resource)
	}
	return v.checkSignature(&tok, cached)
}

// precheckFor is precheck plus the resource (S4: a token is valid only for
// its own resource).
func (v *Verifier) precheckFor(tok *protocol.Token, resource string) (cached bool, err error) {
	cached, err = v.precheck(tok)
	if err != nil {
		return false, err
	}
	if tok.Resource != resource {
		return false, fmt.Errorf("%w: token is for %q, request is for %q", ErrWrongResource, tok.Resource, resource)
	}
	return cached, nil
}

// ParseAndVerify parses the text form of a token (protocol.ParseTokenText)
// and verifies it. Text that does not parse yields ErrMalformedToken wrapping
// protocol's error.
func (v *Verifier) ParseAndVerify(text string) (protocol.Token, error) {
	tok, err := parse(text)
	if err != nil {
		return protocol.Token{}, err
	}
	if err := v.Verify(tok); err != nil {
		return protocol.Token{}, err
	}
	return tok, nil
}

func parse(text string) (protocol.Token, error) {
	tok, err := protocol.ParseTokenText(text)
	if err != nil {
		return protocol.Token{}, fmt.Errorf("%w: %w", ErrMalformedToken, err)
	}
	return tok, nil
}

// precheck runs the checks that cost no pairing, and reports whether the
// token's signature is in the verified-token cache. A hit skips the field
// validation: the cache holds only statements that passed it, and a hit is
// the same statement field for field.
func (v *Verifier) precheck(tok *protocol.Token) (cached bool, err error) {
	if tok.Cluster != v.cluster {
		return false, fmt.Errorf("%w: token names cluster %s, this is %s", ErrWrongCluster, tok.Cluster, v.cluster)
	}
	if v.cache != nil && v.cache.contains(tok) {
		return true, nil
	}
	if err := tok.Validate(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrMalformedToken, err)
	}
	return false, nil
}

// checkSignature checks the token's signature with the pairing check,
// unless precheck found it in the cache, and remembers a success; checks
// of concurrent callers share batches (group.go). S2 unforgeability: this
// is where a resource refuses a token that f nodes (with any clients)
// signed without a quorum.
func (v *Verifier) checkSignature(tok *protocol.Token, cached bool) error {
	if cached {
		return nil
	}
	return v.group.check(v, tok)
}

// checkOne is one token's pairing check.
func (v *Verifier) checkOne(tok *protocol.Token) error {
	v.checked.Add(1)
	if err := v.key.Verify(tok.Statement.SignedBytes(), tok.Signature); err != nil {
		return invalid(*tok, err)
	}
	if v.cache != nil {
		v.cache.add(tok)
	}
	return nil
}

// SignatureChecks returns how many token signatures v has checked with
// pairings so far, valid or not: tokens answered from the verified-token
// cache or refused by a cheap check are not counted, and each token of a
// VerifyBatch is. Operators watch it as the verifier's costly work (about
// 0.55 ms of CPU per single check).
func (v *Verifier) SignatureChecks() uint64 { return v.checked.Load() }

func invalid(tok protocol.Token, err error) error {
	return fmt.Errorf("%w: resource %q epoch %d: %w", ErrInvalidToken, tok.Resource, tok.Epoch, err)
}
