package protocol

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/crypto/bls12381/bls12381test"
)

func testClusterFile(tb testing.TB) ClusterFile {
	tb.Helper()
	fx := testFixture(tb)
	nodes := make([]NodeInfo, 4)
	for i := range nodes {
		nodes[i] = NodeInfo{
			Index:  i + 1,
			PeerID: "12D3KooWNode" + string(rune('A'+i)),
			Addrs:  []string{"/ip4/127.0.0.1/tcp/" + string(rune('1'+i)) + "000"},
		}
	}
	clients := []ClientInfo{
		{Name: "orders", PeerID: "12D3KooWClientOrders", Resources: []string{"orders/*", "orders-db"}},
		{Name: "admin", PeerID: "12D3KooWClientAdmin", Resources: []string{"*"}},
	}
	return NewClusterFile("test-cluster", fx.gk, nodes, clients)
}

func saveLoad(t *testing.T, f ClusterFile) (*Cluster, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, f.Save(path))
	return LoadCluster(path)
}

func TestClusterFileRoundTrip(t *testing.T) {
	fx := testFixture(t)
	f := testClusterFile(t)
	require.Equal(t, ClusterFileVersion, f.Version)
	require.Equal(t, crypto.Ciphersuite, f.Ciphersuite)
	require.Equal(t, 4, f.N)
	require.Equal(t, 3, f.T)
	require.Len(t, f.GroupKey, 3)
	require.Equal(t, uint64(DefaultMaxEpochStep), f.MaxEpochStep)

	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, f.Save(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	c, err := LoadCluster(path)
	require.NoError(t, err)
	require.Equal(t, f, c.File)
	require.Equal(t, fx.stmt.Cluster, c.ID)
	require.Equal(t, f.ClusterID, c.ID.String())
	require.True(t, c.Key.Equal(fx.gk))
	require.Equal(t, fx.gk.PublicKey(), c.Key.PublicKey())
	require.Equal(t, 1, c.F)

	// The loaded key verifies tokens of the dealt key.
	require.NoError(t, c.Key.Verify(fx.tok.SignedBytes(), fx.tok.Signature))
	require.Equal(t, fx.stmt, c.Statement(fx.stmt.Resource, fx.stmt.Epoch, fx.stmt.Holder))

	require.Equal(t, 3, c.NodeIndex("12D3KooWNodeC"))
	require.Equal(t, 0, c.NodeIndex("12D3KooWClientOrders"))
	cl, ok := c.Client("12D3KooWClientOrders")
	require.True(t, ok)
	require.Equal(t, "orders", cl.Name)
	_, ok = c.Client("12D3KooWNodeA")
	require.False(t, ok)

	// Saving what was loaded gives the same file.
	b1, err := os.ReadFile(path)
	require.NoError(t, err)
	path2 := filepath.Join(t.TempDir(), "again.json")
	require.NoError(t, c.File.Save(path2))
	b2, err := os.ReadFile(path2)
	require.NoError(t, err)
	require.Equal(t, string(b1), string(b2))
}

func TestClusterFileDefaults(t *testing.T) {
	f := testClusterFile(t)
	f.MaxEpochStep = 0
	f.Nodes = nil
	f.Clients = nil
	c, err := saveLoad(t, f)
	require.NoError(t, err)
	require.Equal(t, uint64(DefaultMaxEpochStep), c.File.MaxEpochStep)

	f.MaxEpochStep = 7
	c, err = saveLoad(t, f)
	require.NoError(t, err)
	require.Equal(t, uint64(7), c.File.MaxEpochStep)
}

// TestClusterFileLimits: max_epoch_step is bounded and epoch_floor starts
// an era; the largest allowed values are accepted, also when parsed.
func TestClusterFileLimits(t *testing.T) {
	for _, step := range []uint64{1, DefaultMaxEpochStep, MaxMaxEpochStep} {
		f := testClusterFile(t)
		f.MaxEpochStep = step
		c, err := saveLoad(t, f)
		require.NoError(t, err, "step %d", step)
		require.Equal(t, step, c.File.MaxEpochStep)
	}
	for _, floor := range []uint64{0, 1 << EraBits, 2 << EraBits, 0xffff << EraBits} {
		f := testClusterFile(t)
		f.EpochFloor = floor
		c, err := saveLoad(t, f)
		require.NoError(t, err, "floor %#x", floor)
		require.Equal(t, floor, c.File.EpochFloor)
		require.Equal(t, testClusterFile(t).ClusterID, c.ID.String(), "the cluster ID does not depend on the floor")
	}

	// Hand-edited JSON is checked the same way.
	f := testClusterFile(t)
	good, err := json.Marshal(f)
	require.NoError(t, err)
	for name, edit := range map[string]func(map[string]any){
		"step 2^60":    func(m map[string]any) { m["max_epoch_step"] = uint64(1) << 60 },
		"step limit+1": func(m map[string]any) { m["max_epoch_step"] = MaxMaxEpochStep + 1 },
		"floor 5":      func(m map[string]any) { m["epoch_floor"] = 5 },
		"pattern RLO": func(m map[string]any) {
			m["clients"].([]any)[0].(map[string]any)["resources"] = []string{"orders-\u202egpj.exe"}
		},
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		edit(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		c, err := LoadCluster(writeRaw(t, string(b)))
		require.ErrorIs(t, err, ErrBadClusterFile, name)
		require.Nil(t, c, name)
	}
}

// TestClusterFilePatternNotUTF8: NewCluster refuses a pattern that is not
// UTF-8. (Through JSON it cannot arrive: encoding/json writes U+FFFD.)
func TestClusterFilePatternNotUTF8(t *testing.T) {
	f := testClusterFile(t)
	f.Clients = append([]ClientInfo(nil), f.Clients...)
	f.Clients[1].Resources = []string{"orders\xff"}
	c, err := NewCluster(f)
	require.ErrorIs(t, err, ErrBadClusterFile)
	require.Nil(t, c)
}

// TestClusterFilePatterns: every pattern a name may use is accepted.
func TestClusterFilePatterns(t *testing.T) {
	f := testClusterFile(t)
	f.Clients = append([]ClientInfo(nil), f.Clients...)
	f.Clients[0].Resources = []string{"orders-*", "bucket/photos", "Bücher/*", "日本", "a:b@c#1", "**", strings.Repeat("x", MaxResourceLen)}
	c, err := saveLoad(t, f)
	require.NoError(t, err)
	require.Equal(t, f.Clients, c.File.Clients)
}

func TestClusterFileRefused(t *testing.T) {
	fx := testFixture(t)
	other, _, err := crypto.Deal(seeded(99), 4, 3)
	require.NoError(t, err)
	seven, _, err := crypto.Deal(seeded(7), 7, 5)
	require.NoError(t, err)
	notAPoint := hex.EncodeToString(make([]byte, crypto.PublicKeySize))
	notOnCurve := bls12381test.NotOnCurveG2(1)
	outside := bls12381test.NonSubgroupG2(1)

	cases := []struct {
		name   string
		mutate func(*ClusterFile)
	}{
		{"version 0", func(f *ClusterFile) { f.Version = 0 }},
		{"version 1", func(f *ClusterFile) { f.Version = 1 }},
		{"version 3", func(f *ClusterFile) { f.Version = 3 }},
		{"no ciphersuite", func(f *ClusterFile) { f.Ciphersuite = "" }},
		{"other ciphersuite", func(f *ClusterFile) { f.Ciphersuite = "BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_" }},
		{"ciphersuite lower-case", func(f *ClusterFile) { f.Ciphersuite = strings.ToLower(f.Ciphersuite) }},
		{"empty name", func(f *ClusterFile) { f.Name = "" }},
		{"renamed", func(f *ClusterFile) { f.Name = "other-cluster" }},
		{"cluster_id of another name", func(f *ClusterFile) { f.ClusterID = NewClusterID("other", fx.gk.PublicKey()).String() }},
		{"cluster_id of another key", func(f *ClusterFile) { f.ClusterID = NewClusterID(f.Name, other.PublicKey()).String() }},
		{"cluster_id upper-case", func(f *ClusterFile) { f.ClusterID = strings.ToUpper(f.ClusterID) }},
		{"cluster_id empty", func(f *ClusterFile) { f.ClusterID = "" }},
		{"t too small", func(f *ClusterFile) { f.T = 2 }},
		{"t too large", func(f *ClusterFile) { f.T = 4 }},
		{"n=0", func(f *ClusterFile) { f.N = 0; f.Nodes = nil }},
		{"n negative", func(f *ClusterFile) { f.N = -2; f.Nodes = nil }},
		{"n=7 with t=3", func(f *ClusterFile) { f.N = 7; f.Nodes = nil }},
		{"n too large", func(f *ClusterFile) { f.N = crypto.MaxNodes + 1; f.T = 2*((crypto.MaxNodes)/3) + 1; f.Nodes = nil }},
		{"too few commitments", func(f *ClusterFile) { f.GroupKey = f.GroupKey[:2] }},
		{"too many commitments", func(f *ClusterFile) { f.GroupKey = append(f.GroupKey, f.GroupKey[1]) }},
		{"no commitments", func(f *ClusterFile) { f.GroupKey = nil }},
		{"commitments of 7-node key", func(f *ClusterFile) {
			f.GroupKey = nil
			for _, c := range seven.Commitments() {
				f.GroupKey = append(f.GroupKey, hex.EncodeToString(c))
			}
		}},
		{"commitment not hex", func(f *ClusterFile) { f.GroupKey[1] = "zz" }},
		{"commitment not a point", func(f *ClusterFile) { f.GroupKey[1] = notAPoint }},
		{"commitment not on the curve", func(f *ClusterFile) { f.GroupKey[1] = hex.EncodeToString(notOnCurve[:]) }},
		{"commitment outside the subgroup", func(f *ClusterFile) { f.GroupKey[2] = hex.EncodeToString(outside[:]) }},
		{"group key outside the subgroup", func(f *ClusterFile) { f.GroupKey[0] = hex.EncodeToString(outside[:]) }},
		{"group key identity", func(f *ClusterFile) { f.GroupKey[0] = hex.EncodeToString(bls12381test.Identity(crypto.PublicKeySize)) }},
		{"commitment x+p", func(f *ClusterFile) {
			b, err := hex.DecodeString(f.GroupKey[1])
			require.NoError(t, err)
			plus, ok := bls12381test.AddModulus(b)
			if !ok {
				plus = append([]byte{b[0] | 0x1f}, b[1:]...) // x ≥ p some other way
			}
			f.GroupKey[1] = hex.EncodeToString(plus)
		}},
		{"commitment compression flag clear", func(f *ClusterFile) {
			b, err := hex.DecodeString(f.GroupKey[1])
			require.NoError(t, err)
			b[0] &^= 0x80
			f.GroupKey[1] = hex.EncodeToString(b)
		}},
		{"bn256 commitment size", func(f *ClusterFile) { f.GroupKey[1] = strings.Repeat("ab", 128) }},
		{"commitment short", func(f *ClusterFile) { f.GroupKey[2] = f.GroupKey[2][:len(f.GroupKey[2])-2] }},
		{"group key of another key", func(f *ClusterFile) {
			f.GroupKey[0] = hex.EncodeToString(other.Commitments()[0])
		}},
		{"too few nodes", func(f *ClusterFile) { f.Nodes = f.Nodes[:3] }},
		{"node index 0", func(f *ClusterFile) { f.Nodes[0].Index = 0 }},
		{"node indices swapped", func(f *ClusterFile) { f.Nodes[0].Index, f.Nodes[1].Index = 2, 1 }},
		{"duplicate node peer ID", func(f *ClusterFile) { f.Nodes[3].PeerID = f.Nodes[1].PeerID }},
		{"empty node peer ID", func(f *ClusterFile) { f.Nodes[2].PeerID = "" }},
		{"client with node peer ID", func(f *ClusterFile) { f.Clients[0].PeerID = f.Nodes[0].PeerID }},
		{"duplicate client peer ID", func(f *ClusterFile) { f.Clients[1].PeerID = f.Clients[0].PeerID }},
		{"empty client peer ID", func(f *ClusterFile) { f.Clients[1].PeerID = "" }},
		{"max_epoch_step 2^60", func(f *ClusterFile) { f.MaxEpochStep = 1 << 60 }},
		{"max_epoch_step max uint64", func(f *ClusterFile) { f.MaxEpochStep = ^uint64(0) }},
		{"max_epoch_step MaxMaxEpochStep+1", func(f *ClusterFile) { f.MaxEpochStep = MaxMaxEpochStep + 1 }},
		{"epoch_floor 5", func(f *ClusterFile) { f.EpochFloor = 5 }},
		{"epoch_floor 2^48+1", func(f *ClusterFile) { f.EpochFloor = 1<<EraBits + 1 }},
		{"epoch_floor 2^47", func(f *ClusterFile) { f.EpochFloor = 1 << (EraBits - 1) }},
		{"epoch_floor max uint64", func(f *ClusterFile) { f.EpochFloor = ^uint64(0) }},
		{"client pattern with RLO", func(f *ClusterFile) {
			f.Clients[0].Resources = []string{"orders/*", "orders-\u202egpj.exe"}
		}},
		{"client pattern with zero width space", func(f *ClusterFile) { f.Clients[1].Resources = []string{"*\u200b"} }},
		{"client pattern with BOM", func(f *ClusterFile) { f.Clients[1].Resources = []string{"\ufeff*"} }},
		{"client pattern with space", func(f *ClusterFile) { f.Clients[1].Resources = []string{"orders db"} }},
		{"client pattern with newline", func(f *ClusterFile) { f.Clients[1].Resources = []string{"orders\n*"} }},
		{"client pattern empty", func(f *ClusterFile) { f.Clients[1].Resources = []string{""} }},
		{"client pattern too long", func(f *ClusterFile) { f.Clients[1].Resources = []string{strings.Repeat("x", MaxResourceLen+1)} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := testClusterFile(t)
			f.Nodes = append([]NodeInfo(nil), f.Nodes...)
			f.Clients = append([]ClientInfo(nil), f.Clients...)
			f.GroupKey = append([]string(nil), f.GroupKey...)
			for i := range f.Clients {
				f.Clients[i].Resources = append([]string(nil), f.Clients[i].Resources...)
			}
			c.mutate(&f)

			got, err := NewCluster(f)
			require.ErrorIs(t, err, ErrBadClusterFile)
			require.Nil(t, got)

			got, err = saveLoad(t, f)
			require.ErrorIs(t, err, ErrBadClusterFile)
			require.Nil(t, got)
		})
	}
}

// v1ClusterFile is a version 1 cluster file as earlier releases wrote it:
// no ciphersuite field, bn256 commitments of 128 bytes.
func v1ClusterFile(t *testing.T) string {
	t.Helper()
	f := testClusterFile(t)
	b, err := json.Marshal(f)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	m["version"] = 1
	delete(m, "ciphersuite")
	m["group_key"] = []string{strings.Repeat("1a", 128), strings.Repeat("2b", 128), strings.Repeat("3c", 128)}
	b, err = json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	return string(b)
}

// TestClusterFileVersion1Refused: a version 1 (bn256) cluster file is
// refused with ErrClusterFileVersion, naming the version and saying to run
// a new DKG; a version from the future names the version this release
// reads.
func TestClusterFileVersion1Refused(t *testing.T) {
	path := writeRaw(t, v1ClusterFile(t))
	c, err := LoadCluster(path)
	require.Nil(t, c)
	require.ErrorIs(t, err, ErrClusterFileVersion)
	require.ErrorIs(t, err, ErrBadClusterFile)
	require.Contains(t, err.Error(), "version 1")
	require.Contains(t, err.Error(), "bn256")
	require.Contains(t, err.Error(), "run a new DKG")
	require.Contains(t, err.Error(), path)

	f := testClusterFile(t)
	f.Version = ClusterFileVersion + 1
	c, err = NewCluster(f)
	require.Nil(t, c)
	require.ErrorIs(t, err, ErrClusterFileVersion)
	require.Contains(t, err.Error(), fmt.Sprintf("version %d", ClusterFileVersion+1))
	require.Contains(t, err.Error(), fmt.Sprintf("reads version %d", ClusterFileVersion))

	// A current file with a wrong ciphersuite is bad, but not of another
	// version.
	f = testClusterFile(t)
	f.Ciphersuite = "bn256"
	_, err = NewCluster(f)
	require.ErrorIs(t, err, ErrBadClusterFile)
	require.NotErrorIs(t, err, ErrClusterFileVersion)
	require.Contains(t, err.Error(), crypto.Ciphersuite)
}

// writeRaw writes content as a cluster file and returns its path.
func writeRaw(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestLoadClusterRefusesBadJSON(t *testing.T) {
	f := testClusterFile(t)
	good, err := json.Marshal(f)
	require.NoError(t, err)
	withField := func(edit func(map[string]any)) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		edit(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return string(b)
	}
	cases := map[string]string{
		"empty file":           "",
		"not JSON":             "cluster",
		"array":                "[]",
		"truncated":            string(good[:len(good)/2]),
		"unknown field":        withField(func(m map[string]any) { m["threshold"] = 3 }),
		"unknown node field":   withField(func(m map[string]any) { m["nodes"].([]any)[0].(map[string]any)["secret"] = "x" }),
		"unknown client field": withField(func(m map[string]any) { m["clients"].([]any)[0].(map[string]any)["admin"] = true }),
		"string version":       withField(func(m map[string]any) { m["version"] = "1" }),
		"version 1":            withField(func(m map[string]any) { m["version"] = 1 }),
		"version 3":            withField(func(m map[string]any) { m["version"] = 3 }),
		"missing ciphersuite":  withField(func(m map[string]any) { delete(m, "ciphersuite") }),
		"numeric ciphersuite":  withField(func(m map[string]any) { m["ciphersuite"] = 1 }),
		"missing version":      withField(func(m map[string]any) { delete(m, "version") }),
		"missing cluster_id":   withField(func(m map[string]any) { delete(m, "cluster_id") }),
		"negative step":        withField(func(m map[string]any) { m["max_epoch_step"] = -1 }),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := LoadCluster(writeRaw(t, content))
			require.ErrorIs(t, err, ErrBadClusterFile)
			require.Nil(t, c)
		})
	}

	// The unmodified document loads, so the refusals above are the edits'.
	c, err := LoadCluster(writeRaw(t, string(good)))
	require.NoError(t, err)
	require.Equal(t, f, c.File)
}

// TestLoadClusterRefusesTrailingData: a cluster file is one JSON document.
// json.Decoder.Decode stops after the first value, so anything after it (a
// second, different document from a bad merge or a botched edit) must be
// refused explicitly.
func TestLoadClusterRefusesTrailingData(t *testing.T) {
	f := testClusterFile(t)
	good, err := json.Marshal(f)
	require.NoError(t, err)
	for name, tail := range map[string]string{
		"garbage":         " garbage",
		"second document": `{"version": 2, "ciphersuite": "` + crypto.Ciphersuite + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c, err := LoadCluster(writeRaw(t, string(good)+"\n"+tail+"\n"))
			require.ErrorIs(t, err, ErrBadClusterFile)
			require.Nil(t, c)
		})
	}
}

func TestLoadClusterMissingFile(t *testing.T) {
	c, err := LoadCluster(filepath.Join(t.TempDir(), "nope.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, ErrBadClusterFile)
	require.Nil(t, c)
}

func TestClientInfoAllows(t *testing.T) {
	cases := []struct {
		pattern  string
		resource string
		want     bool
	}{
		{"*", "orders-db", true},
		{"*", "a/b/c", true},
		{"*", "x", true},
		{"orders/*", "orders/1", true},
		{"orders/*", "orders/", true},
		{"orders/*", "orders/a/b", true},
		{"orders/*", "orders", false},
		{"orders/*", "Orders/1", false},
		{"orders/*", "xorders/1", false},
		{"orders/*", "orders-db", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abbbc", true},
		{"a*b*c", "a/b/c", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "ab", false},
		{"a*b*c", "abcd", false},
		{"a*b*c", "xabc", false},
		{"a*b*c", "ac", false},
		{"*-db", "orders-db", true},
		{"*-db", "-db", true},
		{"*-db", "db", false},
		{"*-db", "orders-db2", false},
		{"**", "anything", true},
		{"orders-db", "orders-db", true},
		{"orders-db", "orders-db2", false},
		{"orders-db", "orders-d", false},
		{"orders-db", "ORDERS-DB", false},
		{"orders?db", "orders-db", false}, // only '*' is special
		{"orders[-]db", "orders-db", false},
		{"", "orders-db", false},
		{"ü/*", "ü/1", true},
	}
	for _, c := range cases {
		t.Run(c.pattern+"~"+c.resource, func(t *testing.T) {
			require.Equal(t, c.want, ClientInfo{Resources: []string{c.pattern}}.Allows(c.resource))
		})
	}

	multi := ClientInfo{Resources: []string{"orders-db", "bucket/*"}}
	require.True(t, multi.Allows("orders-db"))
	require.True(t, multi.Allows("bucket/photos"))
	require.False(t, multi.Allows("jobs/1"))
	require.False(t, ClientInfo{}.Allows("orders-db"), "no patterns allow nothing")
}

// TestGlobMatchLinear: a pattern with many stars cannot stall a node (the
// old backtracking matcher took exponential time on this input).
func TestGlobMatchLinear(t *testing.T) {
	s := strings.Repeat("a", MaxResourceLen)
	p := strings.Repeat("*a", 40) + "*b"
	require.False(t, globMatch(p, s))
	require.True(t, globMatch(p[:len(p)-1], s))
	for _, c := range []struct {
		p, s string
		ok   bool
	}{
		{"*", "", true}, {"*", "x/y", true}, {"a*c", "abc", true}, {"a*c", "abd", false},
		{"orders/*", "orders/1", true}, {"orders/*", "order/1", false}, {"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false}, {"abc", "abc", true}, {"abc", "abcd", false}, {"**", "z", true},
	} {
		require.Equal(t, c.ok, globMatch(c.p, c.s), "%q ~ %q", c.p, c.s)
	}
}
