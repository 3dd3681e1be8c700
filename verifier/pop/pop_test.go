package pop_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// fixture is a holder with an Ed25519 identity and its token for
// orders-db, on a test clock.
type fixture struct {
	key   ed25519.PrivateKey
	tok   protocol.Token
	clock *verifiertest.Clock
	nonce uint64
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	p := &fixture{key: verifiertest.Key(1), clock: verifiertest.NewClock()}
	holder := verifier.HolderID(p.key.Public().(ed25519.PublicKey))
	p.tok = verifiertest.NewDealer("palisade-test", 1).Token(tb, "orders-db", 5, holder)
	return p
}

// prove signs req for tok with key at the clock's time plus skew, with a
// fresh counter nonce.
func (p *fixture) prove(tok protocol.Token, req pop.Request, key ed25519.PrivateKey, skew time.Duration) pop.Proof {
	p.nonce++
	return verifiertest.Prove(tok, req, key, p.clock.Now().Add(skew), p.nonce)
}

func TestVerify(t *testing.T) {
	p := newFixture(t)
	req := pop.NewRequest(http.MethodPut, "/orders-db/rows/1", []byte("v1"))
	pr := p.prove(p.tok, req, p.key, 0)
	pub := p.key.Public().(ed25519.PublicKey)
	require.NoError(t, pop.Verify(pub, p.tok, req, pr))

	other := p.tok
	other.Epoch++
	for name, err := range map[string]error{
		"another key":    pop.Verify(verifiertest.Key(2).Public().(ed25519.PublicKey), p.tok, req, pr),
		"another body":   pop.Verify(pub, p.tok, pop.NewRequest(http.MethodPut, "/orders-db/rows/1", []byte("v2")), pr),
		"another target": pop.Verify(pub, p.tok, pop.NewRequest(http.MethodPut, "/orders-db/rows/2", []byte("v1")), pr),
		"another method": pop.Verify(pub, p.tok, pop.NewRequest(http.MethodDelete, "/orders-db/rows/1", []byte("v1")), pr),
		"another token":  pop.Verify(pub, other, req, pr),
	} {
		require.ErrorIs(t, err, pop.ErrBadProof, name)
	}
}

// TestReplayQuota covers the replay record's bounds: a holder's quota
// (MaxNoncesPerHolder) leaves room for the others, the whole record
// (MaxNonces) refuses rather than forgets, entries leave with the window,
// and a clock stepping back never lets a forgotten nonce in again.
func TestReplayQuota(t *testing.T) {
	clock := verifiertest.NewClock()
	r := pop.NewReplay(pop.Config{MaxNonces: 4, MaxNoncesPerHolder: 2, Window: 10 * time.Second, Now: clock.Now})
	proof := func(n byte) pop.Proof {
		return pop.Proof{UnixMilli: clock.Now().UnixMilli(), Nonce: [pop.NonceSize]byte{n}}
	}
	a1, a2 := proof(1), proof(2)
	require.NoError(t, r.Record("a", a1))
	require.NoError(t, r.Record("a", a2))
	require.ErrorIs(t, r.Record("a", proof(3)), pop.ErrTooManyProofs, "a's quota")
	require.ErrorIs(t, r.Record("a", a1), pop.ErrReplayed)
	require.NoError(t, r.Record("b", proof(1)), "b keeps its room")
	require.NoError(t, r.Record("c", proof(1)))
	require.ErrorIs(t, r.Record("d", proof(1)), pop.ErrTooManyProofs, "the whole record")
	total, most := r.Len()
	require.Equal(t, 4, total)
	require.Equal(t, 2, most)

	clock.Advance(11 * time.Second)
	require.ErrorIs(t, r.CheckTime(a1), pop.ErrExpired)
	require.NoError(t, r.Record("d", proof(1)), "expired entries free their room")
	total, _ = r.Len()
	require.Equal(t, 1, total)
	clock.Advance(-5 * time.Second)
	require.NoError(t, r.CheckTime(a1), "a1 is within the window of the stepped-back clock")
	require.ErrorIs(t, r.Record("a", a1), pop.ErrExpired, "but its nonce was forgotten")

	// The quota is capped at half the record and is at least 1.
	r = pop.NewReplay(pop.Config{MaxNonces: 3, MaxNoncesPerHolder: 100})
	require.NoError(t, r.Record("a", pop.Proof{UnixMilli: time.Now().UnixMilli(), Nonce: [pop.NonceSize]byte{1}}))
	require.ErrorIs(t, r.Record("a", pop.Proof{UnixMilli: time.Now().UnixMilli(), Nonce: [pop.NonceSize]byte{2}}), pop.ErrTooManyProofs)
	require.Equal(t, pop.DefaultWindow, pop.NewReplay(pop.Config{}).Window())
}

func TestProofEncoding(t *testing.T) {
	p := newFixture(t)
	pr := p.prove(p.tok, pop.NewRequest("GET", "/", nil), p.key, 0)
	text := pr.String()
	back, err := pop.ParseText(" " + text + " ")
	require.NoError(t, err)
	require.Equal(t, pr, back)
	bin, err := pr.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, bin, pop.Size)
	back, err = pop.Parse(bin)
	require.NoError(t, err)
	require.Equal(t, pr, back)

	_, err = pop.Proof{UnixMilli: -1}.MarshalBinary()
	require.ErrorIs(t, err, pop.ErrBadProof)
	require.Equal(t, "invalid", pop.Proof{UnixMilli: -1}.String())

	// SignRequest refuses a signer that does not give an Ed25519 signature.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	err = pop.SignRequest(r, p.tok, func([]byte) ([]byte, error) { return []byte{1}, nil }, p.clock.Now())
	require.Error(t, err)
	require.Empty(t, r.Header.Get(pop.HeaderProof))
}

// ---- fuzzing and the seed corpus ----

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the FuzzParseText seed corpus under testdata/fuzz")

// TestTextSeedCorpus checks the FuzzParseText seeds and that testdata/fuzz
// holds them; with -write-corpus it writes them:
//
//	go test ./verifier/pop -run TestTextSeedCorpus -write-corpus
func TestTextSeedCorpus(t *testing.T) {
	verifiertest.CheckCorpus(t, "FuzzParseText", textSeeds(t), func(s string) error {
		_, err := pop.ParseText(s)
		return err
	}, *writeCorpus)
}

// textSeeds is the FuzzParseText corpus, deterministic.
func textSeeds(tb testing.TB) []verifiertest.Seed {
	tb.Helper()
	p := newFixture(tb)
	pr := p.prove(p.tok, pop.NewRequest(http.MethodPut, "/orders-db?x=1", []byte("a")), p.key, 0)
	text := pr.String()
	bin, err := pr.MarshalBinary()
	require.NoError(tb, err)
	withBin := func(f func(b []byte)) []byte {
		b := bytes.Clone(bin)
		f(b)
		return []byte(base64.RawURLEncoding.EncodeToString(b))
	}
	maxTS := withBin(func(b []byte) { binary.BigEndian.PutUint64(b[1:9], 1<<63-1) })
	// The last character carries 2 padding bits that must be zero.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", text[len(text)-1])
	dirty := text[:len(text)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])
	return []verifiertest.Seed{
		{Name: "valid-proof", Data: []byte(text)},
		{Name: "valid-proof-spaces", Data: []byte(" " + text + "\t")},
		{Name: "valid-max-timestamp", Data: maxTS},
		{Name: "valid-zero", Data: withBin(func(b []byte) { clear(b[1:]) })},
		{Name: "invalid-empty", Data: nil},
		{Name: "invalid-truncated", Data: []byte(text[:len(text)-1])},
		{Name: "invalid-trailing", Data: []byte(text + "A")},
		{Name: "invalid-padded", Data: []byte(text[:len(text)-1] + "=")},
		{Name: "invalid-std-alphabet", Data: []byte(strings.NewReplacer("-", "+", "_", "/").Replace(text[:len(text)-2]) + "+/")},
		{Name: "invalid-inner-line-break", Data: []byte(text[:50] + "\n" + text[51:])},
		{Name: "invalid-padding-bits", Data: []byte(dirty)},
		{Name: "invalid-version-2", Data: withBin(func(b []byte) { b[0] = 2 })},
		{Name: "invalid-version-0", Data: withBin(func(b []byte) { b[0] = 0 })},
		{Name: "invalid-timestamp-over-int64", Data: withBin(func(b []byte) { binary.BigEndian.PutUint64(b[1:9], 1<<63) })},
		{Name: "invalid-binary-not-text", Data: bin},
	}
}

// FuzzParseText checks the header decoder: a successful decode
// re-encodes to the trimmed input; a failed one returns the zero Proof and
// an error wrapping ErrBadProof; nothing panics.
func FuzzParseText(f *testing.F) {
	verifiertest.AddSeeds(f, textSeeds(f))
	f.Fuzz(func(t *testing.T, in string) {
		pr, err := pop.ParseText(in)
		if err != nil {
			if pr != (pop.Proof{}) {
				t.Fatalf("failed parse returned %+v", pr)
			}
			if !errors.Is(err, pop.ErrBadProof) {
				t.Fatalf("error %v does not wrap ErrBadProof", err)
			}
			return
		}
		if out := pr.String(); out != strings.TrimSpace(in) {
			t.Fatalf("parse then String changed the text:\n in: %q\nout: %q", in, out)
		}
		bin, err := pr.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if again, err := pop.Parse(bin); err != nil || again != pr {
			t.Fatalf("binary round trip: %+v, %v", again, err)
		}
	})
}
