package node

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/internal/transport"
)

// ShareFileVersion is the version of the share.key format. Version 1, the
// bare 34-byte share of earlier releases (big-endian index, then a bn256
// scalar), had no header; it has the same length as a BLS12-381 share, so
// without one a bn256 share would load as a scalar of the new curve. It
// is refused with ErrShareFileVersion.
//
// Version 2 is, in order:
//
//	shareFileMagic             15 bytes, "palisade/share" and a zero byte
//	version                    1 byte, ShareFileVersion
//	curve name length          1 byte
//	curve name                 crypto.CurveName ("BLS12-381")
//	share                      crypto.ShareSize bytes (crypto.Share.MarshalBinary)
const ShareFileVersion = 2

// shareFileMagic starts every versioned share file.
const shareFileMagic = "palisade/share\x00"

// shareFileSize is the size of a version 2 share file.
const shareFileSize = len(shareFileMagic) + 1 + 1 + len(crypto.CurveName) + crypto.ShareSize

// Errors of ParseShareFile, for callers to branch on.
var (
	// ErrBadShareFile reports a share.key that is not a share this
	// release can load.
	ErrBadShareFile = errors.New("node: bad share file")
	// ErrShareFileVersion reports a share.key of another format version,
	// such as the bn256 shares of earlier releases: the error names the
	// version and what to do. It wraps ErrBadShareFile.
	ErrShareFileVersion = fmt.Errorf("%w: unsupported version", ErrBadShareFile)
)

// MarshalShareFile returns the content of share.key for share: the
// versioned header, then the share's index and scalar.
func MarshalShareFile(share *crypto.Share) ([]byte, error) {
	raw, err := share.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("node: encode share: %w", err)
	}
	out := make([]byte, 0, shareFileSize)
	out = append(out, shareFileMagic...)
	out = append(out, ShareFileVersion, byte(len(crypto.CurveName)))
	out = append(out, crypto.CurveName...)
	return append(out, raw...), nil
}

// ParseShareFile decodes the content of share.key strictly: the header of
// version ShareFileVersion for crypto.CurveName, then exactly one share.
// The bare 34-byte shares of version 1 (bn256) are refused with
// ErrShareFileVersion, telling the operator to run a new DKG.
func ParseShareFile(b []byte) (*crypto.Share, error) {
	rest, ok := bytes.CutPrefix(b, []byte(shareFileMagic))
	switch {
	case !ok && len(b) == crypto.ShareSize:
		return nil, fmt.Errorf("%w: a version 1 (bn256) share, written by an earlier release (%d bytes, no header); this release signs on BLS12-381 and cannot use it: run a new DKG (palisade dkg) into an empty node directory", ErrShareFileVersion, len(b))
	case !ok:
		return nil, fmt.Errorf("%w: no share file header (%d bytes)", ErrBadShareFile, len(b))
	case len(rest) < 2:
		return nil, fmt.Errorf("%w: truncated in its header", ErrBadShareFile)
	case rest[0] != ShareFileVersion:
		return nil, fmt.Errorf("%w: version %d, this release reads version %d", ErrShareFileVersion, rest[0], ShareFileVersion)
	}
	n := int(rest[1])
	rest = rest[2:]
	if len(rest) < n {
		return nil, fmt.Errorf("%w: truncated in its curve name", ErrBadShareFile)
	}
	if curve := string(rest[:n]); curve != crypto.CurveName {
		return nil, fmt.Errorf("%w: a share on curve %q, this release uses %s", ErrBadShareFile, curve, crypto.CurveName)
	}
	rest = rest[n:]
	if len(rest) != crypto.ShareSize {
		return nil, fmt.Errorf("%w: %d bytes of share, want %d", ErrBadShareFile, len(rest), crypto.ShareSize)
	}
	share, err := crypto.ParseShare(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadShareFile, err)
	}
	return share, nil
}

// WriteShareFile writes share to path in the share.key format, with mode
// 0600, refusing to overwrite a file.
func WriteShareFile(path string, share *crypto.Share) error {
	b, err := MarshalShareFile(share)
	if err != nil {
		return err
	}
	return transport.WriteSecret(path, b)
}

// ReadShareFile reads a share.key written by WriteShareFile, refusing one
// others can read (transport.ErrInsecureKeyFile) and every other format
// (see ParseShareFile).
func ReadShareFile(path string) (*crypto.Share, error) {
	b, err := transport.ReadSecret(path)
	if err != nil {
		return nil, err
	}
	share, err := ParseShareFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return share, nil
}
