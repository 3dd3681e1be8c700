package pop_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

// A resource in proof mode admits only requests its holder signed: a
// replayed request, a leaked token alone, or one signed by another key are
// refused.
func Example() {
	// A test cluster from a trusted dealer (tests and examples only); a
	// resource loads a real cluster's file with verifier.Load.
	dealer := verifiertest.NewDealer("example", 1)
	cluster := dealer.Cluster

	// The holder's identity is an Ed25519 key; its libp2p peer ID is the
	// holder named in the token. (Clients use their libp2p identity and
	// client.SignRequest.)
	holderKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	holder := verifier.HolderID(holderKey.Public().(ed25519.PublicKey))
	tok, _ := dealer.Issue("orders-db", 7, holder)

	// The resource runs its verifier in proof mode. The clock is fixed
	// here so the output is stable; leave Now unset in production.
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	v := verifier.New(cluster, verifier.RequireProof(pop.Config{
		Window: 30 * time.Second,
		Now:    func() time.Time { return now },
	}))
	store := verifier.NewMemoryStore()
	defer store.Close()
	srv := verifier.NewFence(v, store).Middleware(func(*http.Request) string { return "orders-db" },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "stored") }))

	send := func(r *http.Request) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	sign := func(key ed25519.PrivateKey) func([]byte) ([]byte, error) {
		return func(m []byte) ([]byte, error) { return ed25519.Sign(key, m), nil }
	}

	// The holder signs each request with its key.
	req := httptest.NewRequest(http.MethodPut, "/orders-db/rows/1", strings.NewReader("v1"))
	_ = pop.SignRequest(req, tok, sign(holderKey), now)
	send(req)

	// Someone who captured the request sends it again.
	replay := httptest.NewRequest(http.MethodPut, "/orders-db/rows/1", strings.NewReader("v1"))
	replay.Header = req.Header.Clone()
	send(replay)

	// A leaked token without the holder's key: alone, or with a proof
	// signed by another key.
	leaked := httptest.NewRequest(http.MethodPut, "/orders-db/rows/1", strings.NewReader("evil"))
	leaked.Header.Set(verifier.HeaderToken, tok.String())
	send(leaked)
	thief := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	forged := httptest.NewRequest(http.MethodPut, "/orders-db/rows/1", strings.NewReader("evil"))
	_ = pop.SignRequest(forged, tok, sign(thief), now)
	send(forged)
	// Output:
	// 200 stored
	// 401 replayed proof of possession
	// 401 missing Palisade-Proof header: this resource requires the holder's proof of possession
	// 401 bad proof of possession: malformed, or not the holder's signature over this request and token
}
