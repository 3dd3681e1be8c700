package dkg

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
	"go.dedis.ch/kyber/v3"
	"go.dedis.ch/kyber/v3/share"
	pedersen "go.dedis.ch/kyber/v3/share/dkg/pedersen"
	vss "go.dedis.ch/kyber/v3/share/vss/pedersen"
	"go.dedis.ch/kyber/v3/util/random"
	"go.dedis.ch/protobuf"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

// signedJustification builds dealer m's signed justification revealing a
// (random) share for new member idx (0-based) under the given session.
func signedJustification(t testing.TB, m *memMember, sid []byte, commits []kyber.Point, idx int) []byte {
	t.Helper()
	jj := &vss.Justification{SessionID: sid, Index: uint32(idx), Deal: &vss.Deal{
		SessionID: sid, SecShare: &share.PriShare{I: idx, V: g2suite.Scalar().Pick(random.New())},
		T: uint32(len(commits)), Commitments: commits,
	}}
	sig, err := signWith(m.key, jj.Hash(g2suite))
	require.NoError(t, err)
	jj.Signature = sig
	b, err := encodeJustification(&pedersen.Justification{Index: uint32(m.dkg.oldIdx), Justification: jj})
	require.NoError(t, err)
	return b
}

// badPoint is a 96-byte string that looks like a G2 point but that every
// decoder of points from another party must refuse; is is the sentinel
// its refusal wraps (besides crypto.ErrMalformedPoint).
type badPoint struct {
	name string
	b    []byte
	is   error
}

// fittingG2 returns a G2 point whose first x part plus p still fits beside
// the flag bits (about one point in five), for AddModulus.
func fittingG2(t testing.TB) []byte {
	t.Helper()
	p := g2suite.Point().Base()
	for range 100 {
		b, err := p.MarshalBinary()
		require.NoError(t, err)
		if _, ok := bls12381test.AddModulus(b); ok {
			return b
		}
		p.Add(p, g2suite.Point().Base())
	}
	t.Fatal("no multiple of the generator fits x + p")
	return nil
}

// addModulusC0 returns enc with p added to the second part of x (c0),
// which has no flag bits, so the sum always fits.
func addModulusC0(enc []byte) []byte {
	pb, _ := bls12381test.AddModulus(make([]byte, 48)) // 0 + p
	c0 := new(big.Int).SetBytes(enc[48:96])
	c0.Add(c0, new(big.Int).SetBytes(pb))
	out := bytes.Clone(enc)
	c0.FillBytes(out[48:96])
	return out
}

// badG2 lists the bad encodings of a point in place of cur, the valid
// encoding found there: outside the subgroup, the identity, x with no
// point, x + p (of cur itself when it fits), bad flag bits.
func badG2(t testing.TB, tag uint64, cur []byte) []badPoint {
	t.Helper()
	nonSub := bls12381test.NonSubgroupG2(tag)
	offCurve := bls12381test.NotOnCurveG2(tag)
	plusP, ok := bls12381test.AddModulus(cur)
	if !ok {
		plusP, _ = bls12381test.AddModulus(fittingG2(t))
	}
	flag := func(set, clear byte) []byte {
		c := bytes.Clone(cur)
		c[0] = c[0]&^clear | set
		return c
	}
	signedInf := bls12381test.Identity(bls12381test.G2Size)
	signedInf[0] |= 0x20
	return []badPoint{
		{"subgroup", nonSub[:], crypto.ErrNotInSubgroup},
		{"identity", bls12381test.Identity(bls12381test.G2Size), bls12381.ErrIdentity},
		{"identity-sort-flag", signedInf, bls12381.ErrEncoding},
		{"off-curve", offCurve[:], bls12381.ErrEncoding},
		{"x1-plus-p", plusP, bls12381.ErrEncoding},
		{"x0-plus-p", addModulusC0(cur), bls12381.ErrEncoding},
		{"uncompressed-flag", flag(0, 0x80), bls12381.ErrEncoding},
		{"infinity-flag", flag(0x40, 0), bls12381.ErrEncoding},
		{"zero", make([]byte, bls12381test.G2Size), bls12381.ErrEncoding},
	}
}

// pointSpot is where a message of a fuzz target carries a point.
type pointSpot struct {
	name string
	at   int
}

// pointSpots lists the points of an encoded message of target.
func pointSpots(target string, msg []byte) []pointSpot {
	sig := len(msg) - SchnorrSignatureSize
	switch target {
	case "FuzzDecodeDeal":
		return []pointSpot{{"dh-key", 6}, {"dh-sig", 6 + crypto.PublicKeySize}, {"deal-sig", sig}}
	case "FuzzDecodeResponse":
		return []pointSpot{{"sig", sig}}
	case "FuzzDecodeJustification":
		const first = 6 + SessionIDSize + 4 + SessionIDSize + 4 + crypto.ScalarSize + 4 + 2
		return []pointSpot{{"first-commitment", first}, {"last-commitment", sig - crypto.PublicKeySize}, {"sig", sig}}
	}
	return nil
}

// withPoint returns msg with the point at at replaced by p.
func withPoint(msg []byte, at int, p []byte) []byte {
	c := bytes.Clone(msg)
	copy(c[at:at+crypto.PublicKeySize], p)
	return c
}

// rawSessionID is DKG.sessionID over encoded commitments.
func rawSessionID(d *DKG, dealer kyber.Point, commits [][]byte, t uint32) []byte {
	h := g2suite.Hash()
	_, _ = dealer.MarshalTo(h)
	for _, k := range d.cfg.NewNodes {
		h.Write(k[:])
	}
	for _, c := range commits {
		h.Write(c)
	}
	_ = binary.Write(h, binary.LittleEndian, t)
	return h.Sum(nil)
}

func requireBadPoint(t *testing.T, err error, bp badPoint, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, crypto.ErrMalformedPoint, msgAndArgs...)
	require.ErrorIs(t, err, bp.is, msgAndArgs...)
}

// TestDKGPointsOutsideSubgroupRefused tries every place a point from
// another party enters a ceremony with points outside the subgroup, the
// identity, x-coordinates with no point or not below p, and bad flag
// bits: a deal's commitments (inside its ciphertext) are refused before
// kyber stores anything, so the real deal still gets in; a deal's DH key
// and signatures, a response's signature and a justification's
// commitments and signature do not decode, and relayed copies are
// forgeries; a ceremony key is a configuration error.
func TestDKGPointsOutsideSubgroupRefused(t *testing.T) {
	ms := newMembers(t, 4)
	for i, m := range ms {
		cfg := Config{Key: m.key, NewNodes: pubs(ms), Threshold: 3}
		cfg.Seed[0] = byte(i)
		d, err := New(cfg)
		require.NoError(t, err)
		m.dkg = d
	}
	deals, _, err := ms[0].dkg.Deals()
	require.NoError(t, err)
	v := ms[0].dkg.gen.Verifiers()[0]

	t.Run("deal commitments", func(t *testing.T) {
		// Dealer 1 forges a deal to member 2: its own commitments with one
		// replaced by a bad encoding, under the session those bytes give,
		// correctly encrypted and signed. kyber's plaintext decoding would
		// accept the identity and hide why it refused the others.
		real, err := decodeDeal(deals[2])
		require.NoError(t, err)
		newPts, err := dkgPoints(pubs(ms))
		require.NoError(t, err)
		commits := encodePoints(v.Commits())
		for _, bp := range badG2(t, 7, commits[2]) {
			raw := append([][]byte(nil), commits...)
			raw[2] = bp.b
			plain, err := protobuf.Encode(&vss.Deal{
				SessionID:   rawSessionID(ms[0].dkg, ms[0].key.pub, raw, 3),
				SecShare:    &share.PriShare{I: 1, V: g2suite.Scalar().Pick(random.New())},
				T:           3,
				Commitments: v.Commits(),
			})
			require.NoError(t, err)
			at := bytes.Index(plain, commits[2])
			require.Positive(t, at)
			copy(plain[at:], bp.b)
			forged := *real
			forged.Deal, err = sealDeal(ms[0].key, newPts, 1, plain)
			require.NoError(t, err)
			require.NoError(t, signDeal(ms[0].key, &forged))
			fb, err := encodeDeal(&forged)
			require.NoError(t, err)
			_, err = ms[1].dkg.ProcessDeal(fb)
			require.ErrorIs(t, err, ErrMessage, bp.name)
			requireBadPoint(t, err, bp, bp.name)
			require.Nil(t, ms[1].dkg.knownSession(0), "%s: nothing stored", bp.name)
		}
		resp, err := ms[1].dkg.ProcessDeal(deals[2])
		require.NoError(t, err, "the real deal still gets in")
		r, err := decodeResponse(resp)
		require.NoError(t, err)
		require.Equal(t, vss.StatusApproval, r.Response.Status)
	})

	// Messages on the wire, with a point replaced at each place.
	resp, err := ms[2].dkg.ProcessDeal(deals[3])
	require.NoError(t, err)
	just := signedJustification(t, ms[0], v.SessionID(), v.Commits(), 2)
	checker := ms[3].dkg
	for _, tc := range []struct {
		target string
		msg    []byte
		// entry passes the bytes to the API that takes them from the
		// network, and asserts its refusal.
		entry func(*testing.T, []byte)
	}{
		{"FuzzDecodeDeal", deals[2], func(t *testing.T, b []byte) {
			_, err := ms[1].dkg.ProcessDeal(b)
			require.ErrorIs(t, err, ErrMalformed)
			_, err = DealDealer(b)
			require.ErrorIs(t, err, ErrMalformed)
		}},
		{"FuzzDecodeResponse", resp, func(t *testing.T, b []byte) {
			_, err := checker.CheckResponse(b)
			require.ErrorIs(t, err, ErrForged)
			_, err = checker.ProcessResponse(b)
			require.ErrorIs(t, err, ErrMalformed)
			_, err = ResponseSlot(b)
			require.ErrorIs(t, err, ErrMalformed)
		}},
		{"FuzzDecodeJustification", just, func(t *testing.T, b []byte) {
			_, err := checker.CheckJustification(b)
			require.ErrorIs(t, err, ErrForged)
			require.ErrorIs(t, checker.ProcessJustification(b), ErrMalformed)
			_, err = JustificationSlot(b)
			require.ErrorIs(t, err, ErrMalformed)
		}},
	} {
		decode := dkgFuzzTargets[tc.target]
		_, err := decode(tc.msg)
		require.NoError(t, err, "%s: the genuine message decodes", tc.target)
		for i, sp := range pointSpots(tc.target, tc.msg) {
			cur := tc.msg[sp.at : sp.at+crypto.PublicKeySize]
			_, err := crypto.ParsePublicKey(cur)
			require.NoError(t, err, "%s: a point at %s", tc.target, sp.name)
			for _, bp := range badG2(t, uint64(11+i), cur) {
				t.Run(tc.target+"/"+sp.name+"/"+bp.name, func(t *testing.T) {
					b := withPoint(tc.msg, sp.at, bp.b)
					_, err := decode(b)
					require.ErrorIs(t, err, ErrMalformed)
					requireBadPoint(t, err, bp)
					tc.entry(t, b)
				})
			}
		}
	}

	t.Run("ceremony keys", func(t *testing.T) {
		pk := ms[3].key.Public()
		for _, bp := range badG2(t, 17, pk[:]) {
			keys := pubs(ms)
			copy(keys[3][:], bp.b)
			_, err := New(Config{Key: ms[0].key, NewNodes: keys, Threshold: 3})
			require.ErrorIs(t, err, ErrConfig, bp.name)
			requireBadPoint(t, err, bp, bp.name)
		}
	})
}
