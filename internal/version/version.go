// Package version is the one place the palisade binary's version comes
// from: the CLI's "version" command, the libp2p agent string members
// report, and the admin endpoint all read it.
package version

import (
	"runtime/debug"
	"sync"
)

// Version is set at link time for releases:
//
//	go build -ldflags "-X github.com/palisade-dev/palisade/internal/version.Version=v1.2.3" ./cmd/palisade
//
// Left empty, String derives a version from the build information.
var Version string

// String returns the version: Version if set, else the main module's
// version, else "devel" with the VCS revision (and "+dirty") when the
// build recorded one.
func String() string { return computed() }

var computed = sync.OnceValue(func() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev + dirty
})
