package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

func TestKeyURL(t *testing.T) {
	tests := []struct {
		base, name, want, err string
	}{
		{base: "http://10.77.0.20:7070", name: "orders-db", want: "http://10.77.0.20:7070/kv/orders-db"},
		{base: "http://127.0.0.1:7070/", name: "bucket/photos", want: "http://127.0.0.1:7070/kv/bucket%2Fphotos"},
		{base: "10.77.0.20:7070", name: "x", err: "want http://HOST:PORT"},
		{base: "ftp://h/", name: "x", err: "want http://HOST:PORT"},
		{base: "http://", name: "x", err: "want http://HOST:PORT"},
	}
	for _, tt := range tests {
		got, err := keyURL(tt.base, tt.name)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.base)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
}

// TestPutLoop: put writes with its token, once or every interval, prints
// one line per write, and stops at the first write the resource refuses
// (as after a pause past its lease), however long --for still runs.
func TestPutLoop(t *testing.T) {
	var mu sync.Mutex
	var got []string
	refuseAfter := 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, http.MethodPut, r.Method)
		require.Equal(t, "/kv/orders-db", r.URL.Path)
		got = append(got, r.Header.Get(verifier.HeaderToken)+" "+string(body))
		if len(got) > refuseAfter {
			w.Header().Set("Palisade-Barrier", "8")
			http.Error(w, "stale token: epoch 7 below barrier 8 for resource \"orders-db\"\nmore", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	target, err := keyURL(srv.URL, "orders-db")
	require.NoError(t, err)
	tok := protocol.Token{Statement: protocol.Statement{Resource: "orders-db", Epoch: 7}}
	ctx := context.Background()

	var out bytes.Buffer
	require.NoError(t, putLoop(ctx, &out, target, tok, "paid", 0, time.Now().Add(time.Minute)))
	require.Equal(t, "put orders-db epoch=7 status=204\n", out.String())
	require.Equal(t, []string{tok.String() + " paid"}, got)

	out.Reset()
	err = putLoop(ctx, &out, target, tok, "again", time.Millisecond, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, errRefusedWrite)
	require.EqualError(t, err, `the resource refused the write: 409 Conflict: stale token: epoch 7 below barrier 8 for resource "orders-db"`)
	require.Equal(t, "put orders-db epoch=7 status=204\nput orders-db epoch=7 status=204\nput orders-db epoch=7 status=409\n", out.String())
	require.Len(t, got, 4)

	// --for bounds the writes: the next one would fall after it.
	mu.Lock()
	got, refuseAfter = nil, 100
	mu.Unlock()
	out.Reset()
	require.NoError(t, putLoop(ctx, &out, target, tok, "x", time.Hour, time.Now().Add(time.Minute)))
	require.Equal(t, "put orders-db epoch=7 status=204\n", out.String())

	// The context's end ends the wait between writes.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	out.Reset()
	require.ErrorIs(t, putLoop(cctx, &out, target, tok, "x", time.Hour, time.Now().Add(2*time.Hour)), context.DeadlineExceeded)
	require.Equal(t, "put orders-db epoch=7 status=204\n", out.String())
}
