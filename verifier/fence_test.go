package verifier_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// TestS4StaleRejectedEqualAdmittedBarrierSurvivesRestart checks S4 end to end
// with real tokens over the durable bbolt store.
func TestS4StaleRejectedEqualAdmittedBarrierSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	path := filepath.Join(t.TempDir(), "barriers.db")
	const res = "orders-db"
	tok := map[uint64]protocol.Token{}
	for _, e := range []uint64{4, 5, 6} {
		tok[e] = fx.Token(t, res, e, holder(e))
	}

	open := func() (*verifier.Fence, *verifier.BoltStore) {
		s, err := verifier.OpenBoltStore(path)
		require.NoError(t, err)
		return verifier.NewFence(v, s), s
	}
	put := func(value string) (func(verifier.Tx) error, *bool) {
		ran := new(bool)
		return func(tx verifier.Tx) error {
			*ran = true
			return tx.Put("row", []byte(value))
		}, ran
	}
	barrier := func(s verifier.BarrierStore) uint64 {
		e, ok, err := s.Barrier(ctx, res)
		require.NoError(t, err)
		require.True(t, ok)
		return e
	}

	f, s := open()
	w, ran := put("v5")
	require.NoError(t, f.Admit(ctx, tok[5], res, w))
	require.True(t, *ran)
	require.EqualValues(t, 5, barrier(s))

	w, ran = put("v4")
	err := f.Admit(ctx, tok[4], res, w)
	require.ErrorIs(t, err, verifier.ErrStale)
	require.False(t, *ran, "stale write ran")
	var se *verifier.StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, verifier.StaleError{Resource: res, Epoch: 4, Barrier: 5}, *se)

	w, ran = put("v5-again") // the same holder writes again with its token
	require.NoError(t, f.Admit(ctx, tok[5], res, w))
	require.True(t, *ran)
	require.EqualValues(t, 5, barrier(s))

	require.NoError(t, s.Close())
	f, s = open()
	defer s.Close()
	require.EqualValues(t, 5, barrier(s))

	w, ran = put("v4")
	require.ErrorIs(t, f.Admit(ctx, tok[4], res, w), verifier.ErrStale)
	require.False(t, *ran, "stale write ran after restart")

	w, ran = put("v6")
	require.NoError(t, f.Admit(ctx, tok[6], res, w))
	require.True(t, *ran)
	require.EqualValues(t, 6, barrier(s))
	require.ErrorIs(t, f.Admit(ctx, tok[5], res, nil), verifier.ErrStale)

	var row []byte
	require.NoError(t, f.Admit(ctx, tok[6], res, func(tx verifier.Tx) error {
		var err error
		row, _, err = tx.Get("row")
		return err
	}))
	require.Equal(t, "v6", string(row))
}

// TestAdmitRefusesBadTokens: a token that does not verify for the resource
// never reaches the store, so it neither runs the write nor sets a barrier.
func TestAdmitRefusesBadTokens(t *testing.T) {
	ctx := context.Background()
	fx := mainFixture()
	const res = "orders-db"
	good := fx.Token(t, res, 5, "client-a")
	forged := good
	forged.Epoch = 9
	tests := []struct {
		name string
		tok  protocol.Token
		want error
	}{
		{"another resource", fx.Token(t, "bucket/photos", 5, "client-a"), verifier.ErrWrongResource},
		{"another cluster", otherFixture().Token(t, res, 5, "client-a"), verifier.ErrWrongCluster},
		{"forged epoch", forged, verifier.ErrInvalidToken},
		{"malformed holder", protocol.Token{Statement: fx.Cluster.Statement(res, 5, protocol.Holder{ID: "a b", Session: protocol.SessionID{1}})}, verifier.ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := verifier.NewMemoryStore()
			f := verifier.NewFence(verifier.New(fx.Cluster), s)
			ran := false
			err := f.Admit(ctx, tt.tok, res, func(verifier.Tx) error { ran = true; return nil })
			require.ErrorIs(t, err, tt.want)
			require.False(t, ran)
			_, ok, err := s.Barrier(ctx, res)
			require.NoError(t, err)
			require.False(t, ok, "a refused token set a barrier")
		})
	}
}
