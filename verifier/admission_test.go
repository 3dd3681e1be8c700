package verifier_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
	"github.com/palisade-dev/palisade/verifier/pop"
)

// TestAdmit checks that an Admission carries exactly what verification
// checked, that a refused token yields none, and that no store runs a
// write for the zero Admission, the only one code outside verification can
// make.
func TestAdmit(t *testing.T) {
	fx := mainFixture()
	v := verifier.New(fx.Cluster)
	tok := fx.Token(t, "orders-db", 7, "client-a")

	adm, err := v.Admit(tok, "orders-db")
	require.NoError(t, err)
	require.Equal(t, "orders-db", adm.Resource())
	require.EqualValues(t, 7, adm.Epoch())
	require.Equal(t, tok.Holder, adm.Holder())

	forged := tok
	forged.Epoch = 8
	tests := []struct {
		name     string
		v        *verifier.Verifier
		tok      protocol.Token
		resource string
		want     error
	}{
		{"another resource", v, tok, "bucket", verifier.ErrWrongResource},
		{"forged", v, forged, "orders-db", verifier.ErrInvalidToken},
		{"another cluster", v, otherFixture().Token(t, "orders-db", 7, "client-a"), "orders-db", verifier.ErrWrongCluster},
		{"proof mode", verifier.New(fx.Cluster, verifier.RequireProof(pop.Config{})), tok, "orders-db", pop.ErrNoProof},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adm, err := tt.v.Admit(tt.tok, tt.resource)
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, verifier.Admission{}, adm)
		})
	}
}

func TestZeroAdmissionRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bolt, err := verifier.OpenBoltStore(filepath.Join(dir, "barriers.db"))
	require.NoError(t, err)
	defer bolt.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db"))
	require.NoError(t, err)
	defer db.Close()
	sqls, err := verifier.NewSQLStore(ctx, db, verifier.SQLite)
	require.NoError(t, err)
	defer sqls.Close()
	mem := verifier.NewMemoryStore()
	defer mem.Close()

	ran := false
	write := func(verifier.Tx) error { ran = true; return nil }
	for _, s := range []verifier.BarrierStore{mem, bolt, sqls} {
		require.Error(t, s.Guard(ctx, verifier.Admission{}, write))
	}
	require.Error(t, bolt.Update(ctx, verifier.Admission{}, func(*bbolt.Tx, verifier.Tx) error { ran = true; return nil }))
	require.Error(t, sqls.Update(ctx, verifier.Admission{}, func(*sql.Tx, verifier.Tx) error { ran = true; return nil }))
	require.False(t, ran, "a write ran for the zero Admission")
}
