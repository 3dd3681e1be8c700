package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// TestDemoRefusals: the demo tells a fork from a stale refusal by the
// resource's Palisade-Conflict header, so a step that expects a stale
// token fails on a fork instead of passing.
func TestDemoRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		conflict string
		want     error
		not      error
	}{
		{"stale", verifier.ConflictStale, verifier.ErrStale, verifier.ErrFork},
		{"fork", verifier.ConflictFork, verifier.ErrFork, verifier.ErrStale},
		{"no header", "", verifier.ErrStale, verifier.ErrFork},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.conflict != "" {
				w.Header().Set(verifier.HeaderConflict, tc.conflict)
			}
			if tc.conflict == verifier.ConflictFork {
				w.Header().Set(verifier.HeaderForkID, "20f3a655")
			}
			http.Error(w, "refused", http.StatusConflict)
		}))
		s := &demoServer{addr: strings.TrimPrefix(srv.URL, "http://")}
		_, err := s.do(context.Background(), http.MethodPut, protocol.Token{Statement: protocol.Statement{Resource: "orders-db", Epoch: 1}}, "paid")
		srv.Close()
		require.ErrorIs(t, err, tc.want, tc.name)
		require.NotErrorIs(t, err, tc.not, tc.name)
		if tc.conflict == verifier.ConflictFork {
			require.ErrorContains(t, err, "fork 20f3a655", tc.name)
		}
	}
}
