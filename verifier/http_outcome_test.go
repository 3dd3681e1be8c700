package verifier_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
)

// unconfirmedStore commits every guarded write and then reports, as a
// store that lost its connection during the COMMIT would, that the outcome
// is unknown.
type unconfirmedStore struct{ verifier.BarrierStore }

func (s unconfirmedStore) Guard(ctx context.Context, adm verifier.Admission, write func(verifier.Tx) error) error {
	if err := s.BarrierStore.Guard(ctx, adm, write); err != nil {
		return err
	}
	return fmt.Errorf("%w: connection lost during commit", verifier.ErrOutcomeUnknown)
}

// TestMiddlewareOutcomeUnknown: a write whose commit is unconfirmed is
// neither reported as done nor as failed: 503 with Palisade-Outcome:
// unknown, and the handler's success is not sent.
func TestMiddlewareOutcomeUnknown(t *testing.T) {
	fx := mainFixture()
	mem := verifier.NewMemoryStore()
	defer mem.Close()
	h := verifier.NewFence(verifier.New(fx.Cluster), unconfirmedStore{mem}).Middleware(resourceOfPath, kvHandler(t))
	req := httptest.NewRequest(http.MethodPut, "/orders-db", strings.NewReader("v"))
	req.Header.Set(verifier.HeaderToken, fx.Token(t, "orders-db", 1, "c").String())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, verifier.OutcomeUnknown, rec.Header().Get(verifier.HeaderOutcome))
	require.Empty(t, rec.Header().Get("Retry-After"), "an unknown outcome is no invitation to retry blindly")
	require.Contains(t, rec.Body.String(), "outcome unknown")
	require.NotContains(t, rec.Body.String(), "stored")
}

// TestMiddlewareClientGoneBeforeCommit: a client that disconnects while
// the handler runs (its request context ends) stops the write before its
// commit: nothing is written, and the handler's success is not sent.
func TestMiddlewareClientGoneBeforeCommit(t *testing.T) {
	fx := mainFixture()
	store := verifier.NewMemoryStore()
	defer store.Close()
	ctx, disconnect := context.WithCancel(context.Background())
	defer disconnect()
	kv := kvHandler(t)
	h := verifier.NewFence(verifier.New(fx.Cluster), store).Middleware(resourceOfPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kv.ServeHTTP(w, r)
		disconnect()
	}))
	req := httptest.NewRequestWithContext(ctx, http.MethodPut, "/orders-db", strings.NewReader("v"))
	req.Header.Set(verifier.HeaderToken, fx.Token(t, "orders-db", 1, "c").String())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Empty(t, rec.Header().Get(verifier.HeaderOutcome))
	require.Contains(t, rec.Body.String(), "nothing was written")
	_, ok, err := store.Barrier(context.Background(), "orders-db")
	require.NoError(t, err)
	require.False(t, ok, "a cancelled write raised the barrier")
}
