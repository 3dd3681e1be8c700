package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/palisade-dev/palisade"

// layers gives each package of the module its layer. A package may import
// only packages of strictly lower layers.
var layers = map[string]int{
	"internal/version":               0,
	"internal/fuzzseed":              0,
	"internal/testwait":              0,
	"internal/metricstest":           0,
	"crypto/bls12381":                0,
	"crypto/bls12381/bls12381test":   0,
	"verifier/internal/mint":         0,
	"crypto":                         1,
	"crypto/dkg":                     2,
	"protocol":                       2,
	"internal/dkg/dkgtest":           3,
	"internal/transport":             3,
	"verifier/pop":                   3,
	"verifier":                       4,
	"verifier/verifiertest":          4,
	"verifier/barriertest":           5,
	"node":                           5,
	"client":                         5,
	"internal/dkg":                   6,
	"testnet":                        7,
	"cmd/palisade/internal/agent":    8,
	"cmd/palisade/internal/resource": 8,
	"cmd/palisade/internal/cli":      9,
	"cmd/palisade":                   10,
	"e2e":                            10,
	"internal/layout":                10,
}

// TestNoImportClimbsUp lists the module's packages with their imports
// (not their tests') and checks each import points down the layers.
func TestNoImportClimbsUp(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		from, ok := layers[pkg]
		if !assertPlaced(t, pkg, ok) {
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			to, ok := layers[dep]
			if !assertPlaced(t, dep, ok) {
				continue
			}
			if to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", pkg, from, dep, to)
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, seen, 20, "go list found too few packages: %s", out)
}

func assertPlaced(t *testing.T, pkg string, ok bool) bool {
	t.Helper()
	if !ok {
		t.Errorf("package %q has no layer: add it to layers in internal/layout", pkg)
	}
	return ok
}
