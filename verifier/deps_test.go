package verifier_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportGraph keeps verifier embeddable: resources must not pull in
// libp2p or the node (DESIGN "Packages", STYLE 14).
func TestImportGraph(t *testing.T) {
	goList := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
		require.NoError(t, err, "go list: %s", out)
		return strings.Fields(string(out))
	}

	deps := goList("-deps", ".", "./barriertest")
	require.Contains(t, deps, "github.com/palisade-dev/palisade/verifier")
	for _, d := range deps {
		if strings.Contains(d, "libp2p") || strings.Contains(d, "/node") {
			t.Errorf("verifier depends on %s", d)
		}
	}

	// Direct imports: the standard library, protocol, crypto and bbolt only.
	allowed := map[string]bool{
		"github.com/palisade-dev/palisade/protocol": true,
		"github.com/palisade-dev/palisade/crypto":   true,
		"go.etcd.io/bbolt":                          true,
	}
	for _, imp := range goList("-f", `{{join .Imports "\n"}}`, ".") {
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		if !std && !allowed[imp] {
			t.Errorf("verifier imports %s", imp)
		}
	}
}
