package verifier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Data versions: fencing plus compare-and-set.
//
// A token proves that its holder is the newest one, not that the holder has
// seen the newest data: a holder that read a key, lost its lock, and
// acquired it again writes with a fresh token but stale data. A versioned
// key refuses such a write. Each versioned key carries a version that
// changes on every write; PutIfVersion and DeleteIfVersion apply only if
// the key still has the version the caller read (GetVersioned), and
// otherwise return a *VersionError. They run on any store through Tx, inside
// the guarded transaction: return their error from the write function, and
// Guard rolls back, so neither the data nor the barrier changes.
//
// Versions are drawn from a per-resource counter that never decreases, so a
// version is never reused within a resource, even after a delete (no ABA).
// A versioned key's value is stored under the key itself, prefixed with its
// version; read and write such keys only through these functions.

// NoVersion is the version of an absent key: PutIfVersion(tx, key, v,
// NoVersion) creates key only if it does not exist.
const NoVersion uint64 = 0

// AnyVersion as the expected version makes PutIfVersion and DeleteIfVersion
// unconditional; they still assign or consume a version.
const AnyVersion uint64 = math.MaxUint64

// VersionCounterKey is the reserved key of a resource's version counter.
// Keys that start with ReservedKeyPrefix are reserved for Palisade: the
// versioned functions refuse them, and applications must not write them
// through Tx.
const (
	ReservedKeyPrefix = "\x00palisade."
	VersionCounterKey = ReservedKeyPrefix + "version"
)

// versionTag starts every stored versioned value.
const versionTag = 0x01

// versionHeader is the tag and the 8-byte big-endian version.
const versionHeader = 1 + 8

var (
	// ErrVersionMismatch reports that a versioned key no longer has the
	// version the caller expected. The error is a *VersionError.
	ErrVersionMismatch = errors.New("verifier: data version mismatch")
	// ErrNotVersioned reports a key whose stored value was not written by
	// the versioned functions.
	ErrNotVersioned = errors.New("verifier: value is not versioned")

	errReservedKey = errors.New("verifier: key is reserved")
)

// VersionError is the error of a failed compare-and-set. errors.Is(err,
// ErrVersionMismatch) holds for it.
type VersionError struct {
	// Key is the versioned key.
	Key string
	// Expected is the version the caller expected.
	Expected uint64
	// Current is the key's version, NoVersion if it is absent.
	Current uint64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("verifier: data version mismatch for key %q: expected %d, current %d", e.Key, e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrVersionMismatch) true.
func (e *VersionError) Is(target error) bool { return target == ErrVersionMismatch }

func checkVersionedKey(key string) error {
	if key == "" {
		return errEmptyKey
	}
	if strings.HasPrefix(key, ReservedKeyPrefix) {
		return fmt.Errorf("%w: %q", errReservedKey, key)
	}
	return nil
}

// GetVersioned returns a versioned key's value and version, or (nil,
// NoVersion, nil) if the key is absent. It fails with ErrNotVersioned if
// the key holds a value that the versioned functions did not write.
func GetVersioned(tx Tx, key string) (value []byte, version uint64, err error) {
	if err := checkVersionedKey(key); err != nil {
		return nil, NoVersion, err
	}
	raw, ok, err := tx.Get(key)
	if err != nil || !ok {
		return nil, NoVersion, err
	}
	if len(raw) < versionHeader || raw[0] != versionTag {
		return nil, NoVersion, fmt.Errorf("%w: key %q", ErrNotVersioned, key)
	}
	version = binary.BigEndian.Uint64(raw[1:versionHeader])
	if version == NoVersion || version == AnyVersion {
		return nil, NoVersion, fmt.Errorf("%w: key %q has invalid version %d", ErrNotVersioned, key, version)
	}
	return raw[versionHeader:], version, nil
}

// PutIfVersion sets key to value if the key's version is expected
// (NoVersion: the key must be absent; AnyVersion: whatever it is) and
// returns the key's new version, which is above every version the resource
// has used. Otherwise it changes nothing and returns a *VersionError:
// return it from the write function so that the guarded transaction rolls
// back.
func PutIfVersion(tx Tx, key string, value []byte, expected uint64) (version uint64, err error) {
	current, err := compareVersion(tx, key, expected)
	if err != nil {
		return NoVersion, err
	}
	version, err = nextVersion(tx, current)
	if err != nil {
		return NoVersion, err
	}
	raw := make([]byte, versionHeader, versionHeader+len(value))
	raw[0] = versionTag
	binary.BigEndian.PutUint64(raw[1:], version)
	if err := tx.Put(key, append(raw, value...)); err != nil {
		return NoVersion, err
	}
	return version, nil
}

// DeleteIfVersion deletes key if its version is expected (AnyVersion:
// whatever it is; NoVersion: the key must already be absent, and nothing
// happens). Otherwise it changes nothing and returns a *VersionError.
func DeleteIfVersion(tx Tx, key string, expected uint64) error {
	if _, err := compareVersion(tx, key, expected); err != nil {
		return err
	}
	if expected == NoVersion {
		return nil
	}
	return tx.Delete(key)
}

// compareVersion checks key's current version against expected and
// returns it.
func compareVersion(tx Tx, key string, expected uint64) (uint64, error) {
	_, current, err := GetVersioned(tx, key)
	if err != nil {
		return NoVersion, err
	}
	if expected != AnyVersion && expected != current {
		return NoVersion, &VersionError{Key: key, Expected: expected, Current: current}
	}
	return current, nil
}

// nextVersion advances the resource's version counter past its value and
// past current (the key's version, which the counter covers unless the
// data was altered behind the store's back) and returns the new value.
func nextVersion(tx Tx, current uint64) (uint64, error) {
	raw, ok, err := tx.Get(VersionCounterKey)
	if err != nil {
		return NoVersion, err
	}
	var n uint64
	if ok {
		if len(raw) != 8 {
			return NoVersion, fmt.Errorf("verifier: corrupt version counter: %d bytes", len(raw))
		}
		n = binary.BigEndian.Uint64(raw)
	}
	n = max(n, current)
	if n+1 >= AnyVersion {
		return NoVersion, errors.New("verifier: version counter exhausted")
	}
	n++
	if err := tx.Put(VersionCounterKey, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return NoVersion, err
	}
	return n, nil
}
