package dkg

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"encoding/binary"
	"errors"
	"fmt"

	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/sign/schnorr"
	"go.dedis.ch/kyber/v3/util/random"
	"go.dedis.ch/protobuf"

	"github.com/palisade-dev/palisade/crypto"
)

// Wire forms of the DKG messages. Each starts with WireVersion and a
// kind byte; integers are big-endian; points and scalars have fixed sizes.
// A point is a compressed BLS12-381 G2 point of crypto.PublicKeySize (96)
// bytes, decoded strictly as crypto.ParsePublicKey does: flag bits, x
// below p, on the curve, in the prime-order subgroup, not the identity. A
// scalar is crypto.ScalarSize (32) bytes, big-endian and below the group
// order. Nothing may follow the message.
const (
	// WireVersion is the version byte of every DKG message. The messages
	// of the bn256 release had version 1 and 128-byte points; they do not
	// decode here.
	WireVersion = 2
	// SchnorrSignatureSize is the size of a kyber Schnorr signature over
	// G2: a point and a scalar, 96 + 32 = 128 bytes.
	SchnorrSignatureSize = crypto.PublicKeySize + crypto.ScalarSize
	// SessionIDSize is the size of a VSS session ID (SHA-256).
	SessionIDSize = 32
	// NonceSize is the AES-GCM nonce size of an encrypted deal.
	NonceSize = 12
	// MaxCipherSize caps an encrypted deal's ciphertext. The plaintext is
	// kyber's protobuf encoding of the deal: a session ID, a share scalar,
	// t, and t commitments of crypto.PublicKeySize bytes with 2 bytes of
	// framing each, t at most crypto.MaxNodes; AES-GCM adds 16 bytes. The
	// largest deal an honest dealer makes is thus about 98 KiB (a test
	// checks it fits); the cap leaves room for a different framing but
	// still bounds what a dealer can make a member decrypt and decode.
	MaxCipherSize = 256 << 10

	dkgKindDeal          = 1
	dkgKindResponse      = 2
	dkgKindJustification = 3
)

// ErrMalformed reports bytes that are not a canonical DKG
// message.
var ErrMalformed = errors.New("crypto/dkg: malformed DKG message")

type dkgEncoder struct{ b []byte }

func (e *dkgEncoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *dkgEncoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *dkgEncoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *dkgEncoder) raw(v []byte) { e.b = append(e.b, v...) }

func (e *dkgEncoder) fixed(v []byte, n int, what string) error {
	if len(v) != n {
		return fmt.Errorf("%w: %s is %d bytes, want %d", ErrMalformed, what, len(v), n)
	}
	e.raw(v)
	return nil
}

func (e *dkgEncoder) point(p kyber.Point) error {
	b, err := p.MarshalBinary()
	if err != nil {
		return err
	}
	return e.fixed(b, crypto.PublicKeySize, "point")
}

type dkgDecoder struct {
	b   []byte
	err error
}

func (d *dkgDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

// failErr records a point error, keeping crypto.ErrNotInSubgroup visible to
// errors.Is next to ErrMalformed.
func (d *dkgDecoder) failErr(what string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
	}
}

func (d *dkgDecoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("%s: truncated", what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dkgDecoder) u8(what string) uint8 {
	v := d.take(1, what)
	if v == nil {
		return 0
	}
	return v[0]
}

func (d *dkgDecoder) u16(what string) uint16 {
	v := d.take(2, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

func (d *dkgDecoder) u32(what string) uint32 {
	v := d.take(4, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// index reads a 0-based member index below crypto.MaxNodes.
func (d *dkgDecoder) index(what string) uint32 {
	v := d.u32(what)
	if d.err == nil && v >= crypto.MaxNodes {
		d.fail("%s %d out of range", what, v)
	}
	return v
}

func (d *dkgDecoder) bytes(n int, what string) []byte {
	v := d.take(n, what)
	if v == nil {
		return nil
	}
	return bytes.Clone(v)
}

func (d *dkgDecoder) point(what string) kyber.Point {
	v := d.take(crypto.PublicKeySize, what)
	if v == nil {
		return nil
	}
	p, err := decodeG2Subgroup(v)
	if err != nil {
		d.failErr(what, err)
		return nil
	}
	return p
}

func (d *dkgDecoder) scalar(what string) kyber.Scalar {
	v := d.take(crypto.ScalarSize, what)
	if v == nil {
		return nil
	}
	s, err := decodeScalar(v)
	if err != nil {
		d.fail("%s: %v", what, err)
		return nil
	}
	return s
}

// schnorrSig reads a Schnorr signature and checks that its point and scalar
// are canonical, so one signature has one encoding.
func (d *dkgDecoder) schnorrSig(what string) []byte {
	v := d.take(SchnorrSignatureSize, what)
	if v == nil {
		return nil
	}
	if _, err := decodeG2Subgroup(v[:crypto.PublicKeySize]); err != nil {
		d.failErr(what, err)
		return nil
	}
	if _, err := decodeScalar(v[crypto.PublicKeySize:]); err != nil {
		d.fail("%s: %v", what, err)
		return nil
	}
	return bytes.Clone(v)
}

func (d *dkgDecoder) header(kind uint8) {
	if v := d.u8("version"); d.err == nil && v != WireVersion {
		d.fail("version %d, want %d", v, WireVersion)
	}
	if k := d.u8("kind"); d.err == nil && k != kind {
		d.fail("kind %d, want %d", k, kind)
	}
}

func (d *dkgDecoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// decodeScalar decodes a canonical scalar (below the group order).
func decodeScalar(b []byte) (kyber.Scalar, error) {
	if len(b) != crypto.ScalarSize {
		return nil, fmt.Errorf("%w: scalar is %d bytes, want %d", ErrMalformed, len(b), crypto.ScalarSize)
	}
	s := g2suite.Scalar()
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: scalar: %v", ErrMalformed, err)
	}
	again, err := s.MarshalBinary()
	if err != nil || !bytes.Equal(again, b) {
		return nil, fmt.Errorf("%w: non-canonical scalar", ErrMalformed)
	}
	return s, nil
}

// encodeDeal encodes a kyber DKG deal:
// version, kind, dealer index (u32), DH key (G2), DH key signature,
// nonce (12 bytes), ciphertext length (u32) and bytes, deal signature.
func encodeDeal(dd *pedersen.Deal) ([]byte, error) {
	if dd == nil || dd.Deal == nil {
		return nil, fmt.Errorf("%w: nil deal", ErrMalformed)
	}
	e := &dkgEncoder{}
	e.u8(WireVersion)
	e.u8(dkgKindDeal)
	e.u32(dd.Index)
	err := errors.Join(
		e.fixed(dd.Deal.DHKey, crypto.PublicKeySize, "DH key"),
		e.fixed(dd.Deal.Signature, SchnorrSignatureSize, "DH key signature"),
		e.fixed(dd.Deal.Nonce, NonceSize, "nonce"),
	)
	if err != nil {
		return nil, err
	}
	if len(dd.Deal.Cipher) > MaxCipherSize {
		return nil, fmt.Errorf("%w: ciphertext of %d bytes", ErrMalformed, len(dd.Deal.Cipher))
	}
	e.u32(uint32(len(dd.Deal.Cipher)))
	e.raw(dd.Deal.Cipher)
	if err := e.fixed(dd.Signature, SchnorrSignatureSize, "deal signature"); err != nil {
		return nil, err
	}
	return e.b, nil
}

// decodeDeal decodes encodeDeal's output strictly.
func decodeDeal(b []byte) (*pedersen.Deal, error) {
	d := &dkgDecoder{b: b}
	d.header(dkgKindDeal)
	idx := d.index("dealer index")
	dh := d.take(crypto.PublicKeySize, "DH key")
	if d.err == nil {
		if _, err := decodeG2Subgroup(dh); err != nil {
			d.failErr("DH key", err)
		}
	}
	dhSig := d.schnorrSig("DH key signature")
	nonce := d.bytes(NonceSize, "nonce")
	n := d.u32("ciphertext length")
	if d.err == nil && n > MaxCipherSize {
		d.fail("ciphertext of %d bytes, cap %d", n, MaxCipherSize)
	}
	ct := d.bytes(int(n), "ciphertext")
	sig := d.schnorrSig("deal signature")
	if err := d.finish(); err != nil {
		return nil, err
	}
	return &pedersen.Deal{
		Index:     idx,
		Deal:      &vss.EncryptedDeal{DHKey: bytes.Clone(dh), Signature: dhSig, Nonce: nonce, Cipher: ct},
		Signature: sig,
	}, nil
}

// encodeResponse encodes a kyber DKG response: version, kind, dealer
// index (u32), session ID (32), responder index (u32), status (1 approval,
// 0 complaint), signature.
func encodeResponse(r *pedersen.Response) ([]byte, error) {
	if r == nil || r.Response == nil {
		return nil, fmt.Errorf("%w: nil response", ErrMalformed)
	}
	e := &dkgEncoder{}
	e.u8(WireVersion)
	e.u8(dkgKindResponse)
	e.u32(r.Index)
	if err := e.fixed(r.Response.SessionID, SessionIDSize, "session ID"); err != nil {
		return nil, err
	}
	e.u32(r.Response.Index)
	if r.Response.Status {
		e.u8(1)
	} else {
		e.u8(0)
	}
	if err := e.fixed(r.Response.Signature, SchnorrSignatureSize, "response signature"); err != nil {
		return nil, err
	}
	return e.b, nil
}

// decodeResponse decodes encodeResponse's output strictly.
func decodeResponse(b []byte) (*pedersen.Response, error) {
	d := &dkgDecoder{b: b}
	d.header(dkgKindResponse)
	idx := d.index("dealer index")
	sid := d.bytes(SessionIDSize, "session ID")
	from := d.index("responder index")
	st := d.u8("status")
	if d.err == nil && st > 1 {
		d.fail("status %d", st)
	}
	sig := d.schnorrSig("response signature")
	if err := d.finish(); err != nil {
		return nil, err
	}
	return &pedersen.Response{Index: idx, Response: &vss.Response{SessionID: sid, Index: from, Status: st == 1, Signature: sig}}, nil
}

// encodeJustification encodes a kyber DKG justification: version, kind,
// dealer index (u32), session ID, complainer index (u32), the revealed deal
// (session ID, share index u32, share scalar, T u32, commitment count u16,
// commitments), signature.
func encodeJustification(j *pedersen.Justification) ([]byte, error) {
	if j == nil || j.Justification == nil || j.Justification.Deal == nil || j.Justification.Deal.SecShare == nil {
		return nil, fmt.Errorf("%w: nil justification", ErrMalformed)
	}
	jj, deal := j.Justification, j.Justification.Deal
	if len(deal.Commitments) > crypto.MaxNodes || deal.SecShare.I < 0 || deal.SecShare.I >= crypto.MaxNodes {
		return nil, fmt.Errorf("%w: justification deal out of range", ErrMalformed)
	}
	e := &dkgEncoder{}
	e.u8(WireVersion)
	e.u8(dkgKindJustification)
	e.u32(j.Index)
	if err := e.fixed(jj.SessionID, SessionIDSize, "session ID"); err != nil {
		return nil, err
	}
	e.u32(jj.Index)
	if err := e.fixed(deal.SessionID, SessionIDSize, "deal session ID"); err != nil {
		return nil, err
	}
	e.u32(uint32(deal.SecShare.I))
	sv, err := deal.SecShare.V.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if err := e.fixed(sv, crypto.ScalarSize, "share"); err != nil {
		return nil, err
	}
	e.u32(deal.T)
	e.u16(uint16(len(deal.Commitments)))
	for _, c := range deal.Commitments {
		if err := e.point(c); err != nil {
			return nil, err
		}
	}
	if err := e.fixed(jj.Signature, SchnorrSignatureSize, "justification signature"); err != nil {
		return nil, err
	}
	return e.b, nil
}

// decodeJustification decodes encodeJustification's output strictly.
func decodeJustification(b []byte) (*pedersen.Justification, error) {
	d := &dkgDecoder{b: b}
	d.header(dkgKindJustification)
	idx := d.index("dealer index")
	sid := d.bytes(SessionIDSize, "session ID")
	from := d.index("complainer index")
	dsid := d.bytes(SessionIDSize, "deal session ID")
	si := d.index("share index")
	sv := d.scalar("share")
	t := d.u32("threshold")
	n := d.u16("commitment count")
	if d.err == nil && (n == 0 || n > crypto.MaxNodes || uint32(n) != t) {
		d.fail("%d commitments for threshold %d", n, t)
	}
	var commits []kyber.Point
	for i := 0; d.err == nil && i < int(n); i++ {
		commits = append(commits, d.point("commitment"))
	}
	sig := d.schnorrSig("justification signature")
	if err := d.finish(); err != nil {
		return nil, err
	}
	return &pedersen.Justification{Index: idx, Justification: &vss.Justification{
		SessionID: sid,
		Index:     from,
		Deal:      &vss.Deal{SessionID: dsid, SecShare: &share.PriShare{I: int(si), V: sv}, T: t, Commitments: commits},
		Signature: sig,
	}}, nil
}

// encryptDeal encrypts a plaintext VSS deal to verifier i exactly as
// kyber's vss.Dealer does (signed ephemeral DH key, HKDF, AES-GCM). It is
// used only to forge bad deals for fault-injection tests (DKG.CorruptDeal).
func encryptDeal(long *Key, verifiers []kyber.Point, i int, deal *vss.Deal) (*vss.EncryptedDeal, error) {
	plain, err := protobuf.Encode(deal)
	if err != nil {
		return nil, err
	}
	return sealDeal(long, verifiers, i, plain)
}

// sealDeal encrypts an encoded VSS deal to verifier i as encryptDeal does.
// Tests use it to seal plaintexts that kyber would not encode (points
// that are not in G2).
func sealDeal(long *Key, verifiers []kyber.Point, i int, plain []byte) (*vss.EncryptedDeal, error) {
	dhSecret := g2suite.Scalar().Pick(random.New())
	dhPublic := g2suite.Point().Mul(dhSecret, nil)
	dhBytes, _ := dhPublic.MarshalBinary()
	sig, err := schnorr.Sign(g2suite, long.s, dhBytes)
	if err != nil {
		return nil, err
	}
	h := g2suite.Hash()
	_, _ = h.Write([]byte("vss-dealer"))
	_, _ = long.pub.MarshalTo(h)
	_, _ = h.Write([]byte("vss-verifiers"))
	for _, v := range verifiers {
		_, _ = v.MarshalTo(h)
	}
	hctx := h.Sum(nil)
	pre, _ := g2suite.Point().Mul(dhSecret, verifiers[i]).MarshalBinary()
	key, err := hkdf.Key(g2suite.Hash, pre, nil, string(hctx), 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	return &vss.EncryptedDeal{DHKey: dhBytes, Signature: sig, Nonce: nonce, Cipher: gcm.Seal(nil, nonce, plain, hctx)}, nil
}

// signDeal signs a DKG deal with the dealer's long-term key, as kyber does.
func signDeal(long *Key, dd *pedersen.Deal) error {
	buf, err := dd.MarshalBinary()
	if err != nil {
		return err
	}
	dd.Signature, err = schnorr.Sign(g2suite, long.s, buf)
	return err
}
