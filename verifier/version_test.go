package verifier_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
)

// The behaviour of versioned keys on every store is in the conformance
// suite (verifier/barriertest); these are the encoding's edge cases.

// guardRaw runs fn on a memory store's resource "r" whose key "k" holds raw.
func guardRaw(t testing.TB, raw []byte, fn func(tx verifier.Tx) error) error {
	s := verifier.NewMemoryStore()
	defer s.Close()
	ctx := context.Background()
	if raw != nil {
		require.NoError(t, s.Guard(ctx, admit("r", 1), func(tx verifier.Tx) error { return tx.Put("k", raw) }))
	}
	return s.Guard(ctx, admit("r", 1), fn)
}

func TestGetVersionedRefusesForeignValues(t *testing.T) {
	for name, raw := range map[string][]byte{
		"empty":         {},
		"short":         {1, 0, 0, 0, 0, 0, 0, 0},
		"wrong tag":     {2, 0, 0, 0, 0, 0, 0, 0, 1},
		"version 0":     {1, 0, 0, 0, 0, 0, 0, 0, 0, 'x'},
		"version max":   append([]byte{1}, bytes.Repeat([]byte{0xff}, 8)...),
		"plain text v1": []byte("hello world"),
	} {
		t.Run(name, func(t *testing.T) {
			err := guardRaw(t, raw, func(tx verifier.Tx) error {
				v, ver, err := verifier.GetVersioned(tx, "k")
				require.Nil(t, v)
				require.Equal(t, verifier.NoVersion, ver)
				return err
			})
			require.ErrorIs(t, err, verifier.ErrNotVersioned)
		})
	}
}

func TestVersionCounterEdges(t *testing.T) {
	// A corrupt counter fails the write instead of reusing versions.
	err := guardRaw(t, nil, func(tx verifier.Tx) error {
		require.NoError(t, tx.Put(verifier.VersionCounterKey, []byte{1, 2, 3}))
		_, err := verifier.PutIfVersion(tx, "k", []byte("v"), verifier.AnyVersion)
		return err
	})
	require.ErrorContains(t, err, "corrupt version counter")

	// The counter stops before AnyVersion, which is never a version.
	err = guardRaw(t, nil, func(tx verifier.Tx) error {
		require.NoError(t, tx.Put(verifier.VersionCounterKey, binary.BigEndian.AppendUint64(nil, math.MaxUint64-2)))
		v, err := verifier.PutIfVersion(tx, "k", []byte("v"), verifier.AnyVersion)
		require.NoError(t, err)
		require.EqualValues(t, uint64(math.MaxUint64-1), v)
		_, err = verifier.PutIfVersion(tx, "k", []byte("w"), v)
		return err
	})
	require.ErrorContains(t, err, "version counter exhausted")
}

func TestVersionErrorMessage(t *testing.T) {
	err := error(&verifier.VersionError{Key: "k", Expected: 3, Current: 5})
	require.EqualError(t, err, `verifier: data version mismatch for key "k": expected 3, current 5`)
	require.True(t, errors.Is(err, verifier.ErrVersionMismatch))
	require.False(t, errors.Is(err, verifier.ErrStale))
}

// FuzzGetVersioned feeds arbitrary stored bytes to GetVersioned: it never
// panics, fails with ErrNotVersioned or returns a value and version that
// encode back to the same bytes, and a write over any stored value either
// fails cleanly or yields a newer version.
func FuzzGetVersioned(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 7, 'h', 'i'})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = guardRaw(t, raw, func(tx verifier.Tx) error {
			v, ver, err := verifier.GetVersioned(tx, "k")
			if err != nil {
				require.ErrorIs(t, err, verifier.ErrNotVersioned)
				require.Nil(t, v)
				require.Equal(t, verifier.NoVersion, ver)
				_, err := verifier.PutIfVersion(tx, "k", []byte("x"), verifier.AnyVersion)
				require.ErrorIs(t, err, verifier.ErrNotVersioned)
				return nil
			}
			enc := append([]byte{1}, binary.BigEndian.AppendUint64(nil, ver)...)
			require.Equal(t, raw, append(enc, v...))
			next, err := verifier.PutIfVersion(tx, "k", []byte("x"), ver)
			if ver == math.MaxUint64-1 {
				require.ErrorContains(t, err, "version counter exhausted")
				return nil
			}
			require.NoError(t, err)
			require.Greater(t, next, ver)
			return nil
		})
	})
}
