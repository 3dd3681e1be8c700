package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/palisade-dev/palisade/internal/version"
)

const versionUsage = `Usage:
    palisade version

Prints the version of this binary, the Go release that built it, and its
platform, on one line: "palisade VERSION GO OS/ARCH". A release build
sets VERSION at link time (-ldflags "-X
github.com/palisade-dev/palisade/internal/version.Version=v1.2.3");
otherwise it is the module version, or "devel" with the VCS revision.

Example:
    $ palisade version
    palisade v1.2.3 go1.26.8 linux/amd64
    $ palisade version | cut -d' ' -f2
    v1.2.3
`

func runVersion(_ context.Context, e *env, _ Config, args []string) error {
	if len(args) != 0 {
		return usageErrorf("version", "version: unexpected argument %q", args[0])
	}
	fmt.Fprintf(e.stdout, "palisade %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
