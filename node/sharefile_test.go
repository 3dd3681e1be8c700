package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/fuzzseed"
	"github.com/palisade-dev/palisade/internal/transport"
	"github.com/palisade-dev/palisade/protocol"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// testShare is share 2 of a 4-node key dealt from a fixed seed.
func testShare(tb testing.TB) *crypto.Share {
	tb.Helper()
	_, shares, err := crypto.Deal(rand.New(rand.NewSource(3)), 4, 3)
	require.NoError(tb, err)
	return shares[1]
}

// shareFileSeed is one input of ParseShareFile, named "valid-…" when it
// decodes.
type shareFileSeed struct {
	name string
	data []byte
	// want is the sentinel a refusal wraps (ErrShareFileVersion for a
	// file of another version, else ErrBadShareFile).
	want error
}

// shareFileSeeds are the share file corpus: the current format, the bare
// share of version 1 (bn256, the same 34 bytes as a bare BLS12-381 share,
// which is why the header exists), other versions and curves, truncations
// and bad scalars.
func shareFileSeeds(tb testing.TB) []shareFileSeed {
	tb.Helper()
	share := testShare(tb)
	good, err := MarshalShareFile(share)
	require.NoError(tb, err)
	bare, err := share.MarshalBinary()
	require.NoError(tb, err)
	hdr := len(good) - crypto.ShareSize
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	header := func(version byte, curve string) []byte {
		b := append([]byte(shareFileMagic), version, byte(len(curve)))
		return append(append(b, curve...), bare...)
	}
	// r, the order of BLS12-381's groups: a scalar not below it.
	order := []byte{0x73, 0xed, 0xa7, 0x53, 0x29, 0x9d, 0x7d, 0x48, 0x33, 0x39, 0xd8, 0x08, 0x09, 0xa1, 0xd8, 0x05, 0x53, 0xbd, 0xa4, 0x02, 0xff, 0xfe, 0x5b, 0xfe, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01}
	return []shareFileSeed{
		{name: "valid-share", data: good},
		{name: "invalid-version-1-bare-share", data: bare, want: ErrShareFileVersion},
		{name: "invalid-version-1-bn256-share", data: append([]byte{0, 3}, bytes.Repeat([]byte{0x5a}, crypto.ScalarSize)...), want: ErrShareFileVersion},
		{name: "invalid-version-3", data: header(3, crypto.CurveName), want: ErrShareFileVersion},
		{name: "invalid-version-0", data: header(0, crypto.CurveName), want: ErrShareFileVersion},
		{name: "invalid-curve-bn256", data: header(ShareFileVersion, "bn256"), want: ErrBadShareFile},
		{name: "invalid-curve-lower-case", data: header(ShareFileVersion, "bls12-381"), want: ErrBadShareFile},
		{name: "invalid-curve-name-too-long", data: with(func(b []byte) []byte { b[len(shareFileMagic)+1] = 255; return b }), want: ErrBadShareFile},
		{name: "invalid-empty", data: []byte{}, want: ErrBadShareFile},
		{name: "invalid-magic-only", data: []byte(shareFileMagic), want: ErrBadShareFile},
		{name: "invalid-magic-changed", data: with(func(b []byte) []byte { b[0] ^= 0x20; return b }), want: ErrBadShareFile},
		{name: "invalid-truncated", data: good[:len(good)-1], want: ErrBadShareFile},
		{name: "invalid-header-only", data: good[:hdr], want: ErrBadShareFile},
		{name: "invalid-trailing-byte", data: append(append([]byte(nil), good...), 0), want: ErrBadShareFile},
		{name: "invalid-trailing-newline", data: append(append([]byte(nil), good...), '\n'), want: ErrBadShareFile},
		{name: "invalid-index-0", data: with(func(b []byte) []byte { b[hdr], b[hdr+1] = 0, 0; return b }), want: ErrBadShareFile},
		{name: "invalid-scalar-zero", data: with(func(b []byte) []byte { clear(b[hdr+2:]); return b }), want: ErrBadShareFile},
		{name: "invalid-scalar-order", data: with(func(b []byte) []byte { copy(b[hdr+2:], order); return b }), want: ErrBadShareFile},
		{name: "invalid-scalar-all-ones", data: with(func(b []byte) []byte { copy(b[hdr+2:], bytes.Repeat([]byte{0xff}, crypto.ScalarSize)); return b }), want: ErrBadShareFile},
	}
}

func TestShareFileRoundTrip(t *testing.T) {
	share := testShare(t)
	b, err := MarshalShareFile(share)
	require.NoError(t, err)
	require.Len(t, b, shareFileSize)
	require.True(t, bytes.HasPrefix(b, []byte(shareFileMagic+"\x02\x09BLS12-381")), "%q", b)
	back, err := ParseShareFile(b)
	require.NoError(t, err)
	require.Equal(t, share.Index(), back.Index())
	raw, err := share.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, raw, b[len(b)-crypto.ShareSize:])
	again, err := MarshalShareFile(back)
	require.NoError(t, err)
	require.Equal(t, b, again)

	path := filepath.Join(t.TempDir(), ShareFileName)
	require.NoError(t, WriteShareFile(path, share))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	got, err := ReadShareFile(path)
	require.NoError(t, err)
	require.Equal(t, share.Index(), got.Index())
	require.Error(t, WriteShareFile(path, share), "an existing share is never overwritten")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = ReadShareFile(path)
	require.ErrorIs(t, err, transport.ErrInsecureKeyFile)
}

// TestShareFileRefused: every seed not named valid is refused with its
// sentinel and a nil share; a bare 34-byte share (the version 1, bn256
// form) names its version and says to run a new DKG.
func TestShareFileRefused(t *testing.T) {
	for _, s := range shareFileSeeds(t) {
		t.Run(s.name, func(t *testing.T) {
			share, err := ParseShareFile(s.data)
			if s.want == nil {
				require.NoError(t, err)
				require.NotNil(t, share)
				return
			}
			require.ErrorIs(t, err, s.want)
			require.ErrorIs(t, err, ErrBadShareFile)
			require.Nil(t, share)
			if s.want != ErrShareFileVersion {
				require.NotErrorIs(t, err, ErrShareFileVersion)
			}
		})
	}
	bare, err := testShare(t).MarshalBinary()
	require.NoError(t, err)
	_, err = ParseShareFile(bare)
	require.ErrorContains(t, err, "version 1 (bn256) share")
	require.ErrorContains(t, err, "run a new DKG")
	_, err = ParseShareFile(shareFileSeeds(t)[3].data)
	require.ErrorContains(t, err, "version 3, this release reads version 2")
}

// TestLoadDirRefusesEarlierRelease: a node directory of an earlier
// release, or one whose share.key alone is of one, is refused at load with
// the sentinel of the file at fault, naming the version and what to do.
func TestLoadDirRefusesEarlierRelease(t *testing.T) {
	lc := newLimitsCluster(t)
	write := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "node1")
		require.NoError(t, WriteDir(dir, lc.cluster.File, lc.shares[0], lc.ids[0], []string{"/ip4/127.0.0.1/tcp/0"}))
		return dir
	}
	replace := func(t *testing.T, path string, b []byte, mode os.FileMode) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.WriteFile(path, b, mode))
	}

	t.Run("bare share", func(t *testing.T) {
		dir := write(t)
		raw, err := lc.shares[0].MarshalBinary()
		require.NoError(t, err)
		replace(t, filepath.Join(dir, ShareFileName), raw, 0o600)
		d, err := LoadDir(dir)
		require.Nil(t, d)
		require.ErrorIs(t, err, ErrShareFileVersion)
		require.ErrorContains(t, err, filepath.Join(dir, ShareFileName))
		require.ErrorContains(t, err, "version 1 (bn256) share")
		require.ErrorContains(t, err, "run a new DKG")
	})

	t.Run("version 1 cluster file", func(t *testing.T) {
		dir := write(t)
		path := filepath.Join(dir, ClusterFileName)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		m["version"] = 1
		delete(m, "ciphersuite")
		b, err = json.Marshal(m)
		require.NoError(t, err)
		replace(t, path, b, 0o644)
		d, err := LoadDir(dir)
		require.Nil(t, d)
		require.ErrorIs(t, err, protocol.ErrClusterFileVersion)
		require.ErrorContains(t, err, "run a new DKG")
	})

	t.Run("share of another key", func(t *testing.T) {
		dir := write(t)
		replace(t, filepath.Join(dir, ShareFileName), mustShareFile(t, testShare(t)), 0o600)
		d, err := LoadDir(dir)
		require.Nil(t, d)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrBadShareFile)
	})
}

func mustShareFile(t *testing.T, s *crypto.Share) []byte {
	t.Helper()
	b, err := MarshalShareFile(s)
	require.NoError(t, err)
	return b
}

// TestWriteShareFileCorpus checks that testdata/fuzz/FuzzParseShareFile
// holds the seeds; with -write-corpus it writes them:
//
//	go test ./node -run TestWriteShareFileCorpus -write-corpus
func TestWriteShareFileCorpus(t *testing.T) {
	files := map[string]string{}
	for _, s := range shareFileSeeds(t) {
		files[s.name] = fuzzseed.Bytes(s.data)
	}
	err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzParseShareFile"), files, *writeCorpus)
	require.NoError(t, err, "run: go test ./node -run TestWriteShareFileCorpus -write-corpus")
}

// FuzzParseShareFile: a share file that decodes re-encodes to exactly
// its bytes; one that does not gives a nil share and an error wrapping
// ErrBadShareFile; nothing panics.
func FuzzParseShareFile(f *testing.F) {
	for _, s := range shareFileSeeds(f) {
		if s.want == nil {
			f.Add(s.data)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		share, err := ParseShareFile(in)
		if err != nil {
			if share != nil {
				t.Fatalf("failed parse returned a share")
			}
			if !errors.Is(err, ErrBadShareFile) {
				t.Fatalf("error %v does not wrap ErrBadShareFile", err)
			}
			return
		}
		out, err := MarshalShareFile(share)
		if err != nil {
			t.Fatalf("parsed share does not marshal: %v", err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("parse then marshal changed the bytes:\n in: %x\nout: %x", in, out)
		}
	})
}
