package verifier_test

import (
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func ExampleFence_Middleware() {
	key, shares, _ := crypto.Deal(rand.New(rand.NewSource(1)), 4, 3)
	cluster, _ := protocol.NewCluster(protocol.NewClusterFile("example", key, nil, nil))
	issue := func(epoch uint64, holder string) string {
		st := cluster.Statement("orders-db", epoch, protocol.Holder{ID: holder, Session: protocol.SessionID{1}})
		var partials []crypto.PartialSig
		for _, s := range shares[:3] {
			p, _ := s.Sign(st.SignedBytes())
			partials = append(partials, p)
		}
		sig, _, _ := key.Combine(st.SignedBytes(), partials)
		return protocol.Token{Statement: st, Signature: sig}.String()
	}

	// The resource: a key-value store whose writes go through the guarded
	// transaction. Use verifier.OpenBoltStore in production.
	store := verifier.NewMemoryStore()
	defer store.Close()
	fence := verifier.NewFence(verifier.New(cluster), store)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := verifier.TxFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		if err := tx.Put("value", body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "stored")
	})
	srv := fence.Middleware(func(*http.Request) string { return "orders-db" }, handler)

	put := func(token, body string) {
		req := httptest.NewRequest(http.MethodPut, "/orders-db", strings.NewReader(body))
		if token != "" {
			req.Header.Set(verifier.HeaderToken, token)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	old, current := issue(6, "client-a"), issue(7, "client-b")
	put(old, "a")     // client-a holds epoch 6
	put(current, "b") // client-b acquires epoch 7: the barrier rises
	put(old, "late")  // client-a wakes up from a GC pause: fenced
	put("", "x")
	// Output:
	// 200 stored
	// 200 stored
	// 409 stale token: epoch 6 below barrier 7 for resource "orders-db"
	// 401 missing Palisade-Token header
}
