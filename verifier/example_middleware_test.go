package verifier_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/verifiertest"
)

func ExampleFence_Middleware() {
	// A test cluster from a trusted dealer (tests and examples only); a
	// resource loads a real cluster's file with verifier.Load.
	dealer := verifiertest.NewDealer("example", 1)
	cluster := dealer.Cluster
	issue := func(epoch uint64, holder string) string {
		tok, _ := dealer.Issue("orders-db", epoch, holder)
		return tok.String()
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
