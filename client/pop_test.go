package client_test

import (
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/client"
	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// TestSignRequest sends requests signed with a client's libp2p identity to a
// loopback resource whose verifier runs in proof mode.
func TestSignRequest(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	key, shares, err := crypto.Deal(rng, 4, 3)
	require.NoError(t, err)
	cluster, err := protocol.NewCluster(protocol.NewClusterFile("pop-test", key, nil, nil))
	require.NoError(t, err)
	id, _, err := lcrypto.GenerateEd25519Key(rng)
	require.NoError(t, err)
	pid, err := peer.IDFromPrivateKey(id)
	require.NoError(t, err)

	issue := func(epoch uint64, holder string) protocol.Token {
		st := cluster.Statement("orders-db", epoch, protocol.Holder{ID: holder, Session: protocol.SessionID{7}})
		var ps []crypto.PartialSig
		for _, s := range shares[1:] {
			p, err := s.Sign(st.SignedBytes())
			require.NoError(t, err)
			ps = append(ps, p)
		}
		sig, _, err := key.Combine(st.SignedBytes(), ps)
		require.NoError(t, err)
		return protocol.Token{Statement: st, Signature: sig}
	}
	tok := issue(3, pid.String())

	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	v := verifier.New(cluster, verifier.RequireProof(pop.Config{Now: func() time.Time { return now }}))
	store := verifier.NewMemoryStore()
	defer store.Close()
	var bodies []string
	srv := httptest.NewServer(verifier.NewFence(v, store).Middleware(func(*http.Request) string { return "orders-db" },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodies = append(bodies, string(b))
		})))
	defer srv.Close()
	send := func(r *http.Request) int {
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	newReq := func(body string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders-db?op=append", strings.NewReader(body))
		require.NoError(t, err)
		return r
	}

	r := newReq("first")
	require.NoError(t, client.SignRequest(r, tok, id, now))
	// The body was buffered and restored, and can be had again.
	require.EqualValues(t, len("first"), r.ContentLength)
	again, err := r.GetBody()
	require.NoError(t, err)
	b, _ := io.ReadAll(again)
	require.Equal(t, "first", string(b))
	require.Equal(t, http.StatusOK, send(r))

	// A replay of the signed request is refused.
	replay := newReq("first")
	replay.Header = r.Header.Clone()
	require.Equal(t, http.StatusUnauthorized, send(replay))

	// A leaked token: another identity cannot sign for it, and a request
	// with the token alone is refused.
	other, _, err := lcrypto.GenerateEd25519Key(rng)
	require.NoError(t, err)
	require.ErrorContains(t, client.SignRequest(newReq("evil"), tok, other, now), "not this identity")
	leaked := newReq("evil")
	leaked.Header.Set(verifier.HeaderToken, tok.String())
	require.Equal(t, http.StatusUnauthorized, send(leaked))

	// Non-Ed25519 identities cannot make proofs.
	secp, _, err := lcrypto.GenerateSecp256k1Key(rng)
	require.NoError(t, err)
	secpID, err := peer.IDFromPrivateKey(secp)
	require.NoError(t, err)
	require.ErrorContains(t, client.SignRequest(newReq("x"), issue(4, secpID.String()), secp, now), "Ed25519")
	require.Error(t, client.SignRequest(newReq("x"), tok, nil, now))

	// A second signed request with no body.
	r, err = http.NewRequest(http.MethodPost, srv.URL+"/orders-db?op=append", nil)
	require.NoError(t, err)
	require.NoError(t, client.SignRequest(r, tok, id, now))
	require.Equal(t, http.StatusOK, send(r))
	require.Equal(t, []string{"first", ""}, bodies)
}
