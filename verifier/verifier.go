package verifier

import (
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
)

// Errors callers can branch on. Every error this package returns for a
// refused token wraps exactly one of the first five.
var (
	// ErrMalformedToken reports a token that does not parse or whose fields
	// are outside protocol's limits. It wraps protocol's error.
	ErrMalformedToken = errors.New("verifier: malformed token")
	// ErrInvalidToken reports a token whose signature does not verify under
	// the group public key (tampered, forged, or a non-canonical signature).
	// It wraps crypto's error.
	ErrInvalidToken = errors.New("verifier: invalid token signature")
	// ErrWrongCluster reports a token issued by another cluster.
	ErrWrongCluster = errors.New("verifier: token for another cluster")
	// ErrWrongResource reports a valid token for another resource.
	ErrWrongResource = errors.New("verifier: token for another resource")
	// ErrStale reports a token whose epoch is below the resource's barrier: a
	// newer holder has already been admitted. The concrete error is a
	// *StaleError.
	ErrStale = errors.New("verifier: stale token")
	// ErrClosed reports use of a barrier store after Close.
	ErrClosed = errors.New("verifier: barrier store closed")
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
// secret and no mutable state: it is safe for concurrent use, and checking a
// token needs no network.
type Verifier struct {
	cluster protocol.ClusterID
	key     crypto.PublicKey
}

// New returns a verifier for the cluster. It keeps only the cluster ID and
// the group public key, which resharing never changes.
func New(c *protocol.Cluster) *Verifier {
	return &Verifier{cluster: c.ID, key: c.Key.PublicKey()}
}

// Load reads and checks a cluster file (see protocol.LoadCluster) and returns
// a verifier for it. The file's group key is trusted as read: load it only
// from a trusted source.
func Load(clusterFile string) (*Verifier, error) {
	c, err := protocol.LoadCluster(clusterFile)
	if err != nil {
		return nil, fmt.Errorf("verifier: load cluster: %w", err)
	}
	return New(c), nil
}

// ClusterID is the ID of the cluster whose tokens v accepts.
func (v *Verifier) ClusterID() protocol.ClusterID { return v.cluster }

// Verify checks that tok was issued by v's cluster: the cluster ID matches
// (else ErrWrongCluster), the fields are within limits (else
// ErrMalformedToken), and the signature over tok.Statement.SignedBytes()
// verifies under the group public key (else ErrInvalidToken). Cheap checks
// run first; the pairing check, about 3 ms, runs last. Verify does not look
// at the resource or the barrier: see VerifyFor and Fence.
func (v *Verifier) Verify(tok protocol.Token) error {
	if err := v.precheck(tok); err != nil {
		return err
	}
	return v.checkSignature(tok)
}

// VerifyFor is Verify for a request to resource: it also refuses a token for
// another resource with ErrWrongResource, before the pairing check.
func (v *Verifier) VerifyFor(tok protocol.Token, resource string) error {
	if err := v.precheck(tok); err != nil {
		return err
	}
	if tok.Resource != resource {
		return fmt.Errorf("%w: token is for %q, request is for %q", ErrWrongResource, tok.Resource, resource)
	}
	return v.checkSignature(tok)
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

// precheck runs the checks that cost no pairing.
func (v *Verifier) precheck(tok protocol.Token) error {
	if tok.Cluster != v.cluster {
		return fmt.Errorf("%w: token names cluster %s, this is %s", ErrWrongCluster, tok.Cluster, v.cluster)
	}
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedToken, err)
	}
	return nil
}

func (v *Verifier) checkSignature(tok protocol.Token) error {
	if err := v.key.Verify(tok.Statement.SignedBytes(), tok.Signature); err != nil {
		return fmt.Errorf("%w: resource %q epoch %d: %w", ErrInvalidToken, tok.Resource, tok.Epoch, err)
	}
	return nil
}
