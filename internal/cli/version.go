package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release this binary is, when the build says so:
// go build -ldflags "-X github.com/locktop/locktop/internal/cli.version=v1.2.3". Otherwise the module version
// from the build information is used ("devel" for a local build).
var version = ""

// versionString is what `locktop version` prints: the version, the commit
// of a development build when the build recorded one, and the Go toolchain and platform.
func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if v == "" && ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	if ok && v == "devel" {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
		if rev != "" {
			v += "-" + rev + dirty
		}
	}
	return fmt.Sprintf("locktop %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
