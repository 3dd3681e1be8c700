package verifier_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// forbiddenDeps are the packages no verifier package may depend on, even
// indirectly: libp2p and the node (the transport and the server side), and
// the DKG's machinery (kyber's Pedersen DKG, VSS and Schnorr signatures and
// the protobuf codec kyber's deals use), which belongs to crypto/dkg.
var forbiddenDeps = []string{
	"libp2p",
	"github.com/palisade-dev/palisade/node",
	"github.com/palisade-dev/palisade/crypto/dkg",
	"go.dedis.ch/kyber/v3/share/dkg",
	"go.dedis.ch/kyber/v3/share/vss",
	"go.dedis.ch/kyber/v3/sign/schnorr",
	"go.dedis.ch/protobuf",
}

// TestImportGraph keeps verifier embeddable: resources must not pull in
// libp2p, the node or the DKG (DESIGN "Packages", STYLE 14). It covers
// every package under verifier/, whatever subpackages come along.
func TestImportGraph(t *testing.T) {
	goList := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
		require.NoError(t, err, "go list: %s", out)
		return strings.Fields(string(out))
	}

	pkgs := goList("./...")
	require.Contains(t, pkgs, "github.com/palisade-dev/palisade/verifier")
	require.Contains(t, pkgs, "github.com/palisade-dev/palisade/verifier/barriertest")
	for _, pkg := range pkgs {
		for _, d := range goList("-deps", pkg) {
			for _, bad := range forbiddenDeps {
				if strings.Contains(d, bad) {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}

	// Direct imports: the standard library, protocol, crypto, bbolt and
	// verifier's own subpackages only.
	allowed := map[string]bool{
		"github.com/palisade-dev/palisade/protocol": true,
		"github.com/palisade-dev/palisade/crypto":   true,
		"go.etcd.io/bbolt":                          true,
	}
	for _, imp := range goList("-f", `{{join .Imports "\n"}}`, ".") {
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		own := strings.HasPrefix(imp, "github.com/palisade-dev/palisade/verifier/")
		if !std && !own && !allowed[imp] {
			t.Errorf("verifier imports %s", imp)
		}
	}
}
