package dkg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/palisade-dev/palisade/crypto"
	cdkg "github.com/palisade-dev/palisade/crypto/dkg"
	"github.com/palisade-dev/palisade/protocol"
)

// ProtoFetch is the ceremony's only protocol: a member asks a peer for what
// that peer has for the current phase. It is pull-based, so a member that
// starts late or restarts after a crash simply asks again; nothing on it
// accepts commands. It is distinct from the token plane's protocol IDs.
const ProtoFetch = "/palisade/dkg/fetch/1.0.0"

// MaxFrameSize caps a ceremony frame. A response is 171 bytes with
// 96-byte points, so a list of N² responses fits for N up to about 150
// members; a deal of at most crypto/dkg's MaxCipherSize fits with room to
// spare (TestWireBounds).
const MaxFrameSize = 4 << 20

// Fetch kinds: what a request asks for.
const (
	kindKeys           = 1
	kindDeal           = 2
	kindResponses      = 3
	kindJustifications = 4
	kindHash           = 5
	kindComplaints     = 6
)

// Reply status bytes.
const (
	statusOK       = 0
	statusNotReady = 1
	statusWrong    = 2 // another ceremony or another key set
	statusNone     = 3 // nothing for you (not a dealer, no deal for you)
)

const (
	wireVersion = 1
	keyDomain   = "palisade/dkg/key/v1\x00"
	maxList     = 1 << 16
	// maxItem caps one list item (a key record, response, complaint or
	// justification). The largest is a justification for t =
	// crypto.MaxNodes, about 96 KiB; the cap would hold even a deal
	// (MaxCipherSize and 374 bytes), which travels outside lists.
	maxItem = cdkg.MaxCipherSize + 1024
)

var errMalformed = errors.New("dkg: malformed ceremony message")

// request is what a member asks a peer: the ceremony, the key set it
// agreed on (zero in the keys phase) and the kind.
type request struct {
	Ceremony [32]byte
	KeySet   [32]byte
	Kind     uint8
}

func (r request) marshal() []byte {
	b := []byte{wireVersion}
	b = append(b, r.Ceremony[:]...)
	b = append(b, r.KeySet[:]...)
	return append(b, r.Kind)
}

func parseRequest(b []byte) (request, error) {
	var r request
	if len(b) != 1+32+32+1 || b[0] != wireVersion {
		return r, fmt.Errorf("%w: request of %d bytes", errMalformed, len(b))
	}
	copy(r.Ceremony[:], b[1:33])
	copy(r.KeySet[:], b[33:65])
	r.Kind = b[65]
	if r.Kind < kindKeys || r.Kind > kindComplaints {
		return r, fmt.Errorf("%w: kind %d", errMalformed, r.Kind)
	}
	return r, nil
}

// encodeList encodes a reply payload of opaque items: u32 count, then each
// item u32-length-prefixed.
func encodeList(items [][]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(items)))
	for _, it := range items {
		b = binary.BigEndian.AppendUint32(b, uint32(len(it)))
		b = append(b, it...)
	}
	return b
}

func decodeList(b []byte) ([][]byte, error) {
	r := bytes.NewReader(b)
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil || n > maxList {
		return nil, fmt.Errorf("%w: list header", errMalformed)
	}
	out := make([][]byte, 0, min(n, 1024))
	for range n {
		var l uint32
		if err := binary.Read(r, binary.BigEndian, &l); err != nil || l > maxItem || int(l) > r.Len() {
			return nil, fmt.Errorf("%w: list item", errMalformed)
		}
		it := make([]byte, l)
		if _, err := io.ReadFull(r, it); err != nil {
			return nil, fmt.Errorf("%w: list item", errMalformed)
		}
		out = append(out, it)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errMalformed)
	}
	return out, nil
}

// keyRecord is a member's signed ceremony key: which ceremony, which peer,
// its DKG public key, and the peer's libp2p identity signature over all of
// it, so any member can relay it.
type keyRecord struct {
	Ceremony [32]byte
	PeerID   string
	Key      crypto.PublicKey
	Sig      []byte
}

func (k keyRecord) signedBytes() []byte {
	b := []byte(keyDomain)
	b = append(b, k.Ceremony[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.PeerID)))
	b = append(b, k.PeerID...)
	return append(b, k.Key[:]...)
}

func (k keyRecord) marshal() []byte {
	b := []byte{wireVersion}
	b = append(b, k.Ceremony[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.PeerID)))
	b = append(b, k.PeerID...)
	b = append(b, k.Key[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Sig)))
	return append(b, k.Sig...)
}

func parseKeyRecord(b []byte) (keyRecord, error) {
	var k keyRecord
	bad := fmt.Errorf("%w: key record", errMalformed)
	if len(b) < 1+32+2 || b[0] != wireVersion {
		return k, bad
	}
	copy(k.Ceremony[:], b[1:33])
	b = b[33:]
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > 128 || len(b) < n+crypto.PublicKeySize+2 {
		return k, bad
	}
	k.PeerID = string(b[:n])
	b = b[n:]
	key, err := crypto.ParsePublicKey(b[:crypto.PublicKeySize])
	if err != nil {
		return k, fmt.Errorf("%w: key record: %w", errMalformed, err)
	}
	k.Key = key
	b = b[crypto.PublicKeySize:]
	s := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if s == 0 || s > 256 || len(b) != s {
		return k, bad
	}
	k.Sig = bytes.Clone(b)
	return k, nil
}

// writeFrame writes one uvarint-length-prefixed frame of at most
// MaxFrameSize bytes (the framing of protocol.WriteFrame, larger cap).
func writeFrame(w io.Writer, msg []byte) error {
	if len(msg) > MaxFrameSize {
		return fmt.Errorf("%w: %d bytes, cap %d", protocol.ErrFrameTooLarge, len(msg), MaxFrameSize)
	}
	buf := binary.AppendUvarint(make([]byte, 0, len(msg)+4), uint64(len(msg)))
	_, err := w.Write(append(buf, msg...))
	return err
}

// readFrame reads one frame of at most max bytes.
func readFrame(r io.Reader, max int) ([]byte, error) { return protocol.ReadFrame(r, max) }
