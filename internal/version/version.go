// Package version is the one home of gpupolicy's own version: set at link
// time with
//
//	go build -ldflags "-X github.com/gpupolicy/gpupolicy/internal/version.Version=v1.2.3"
//
// or, when not set, read from the binary's build info (the module version
// `go install ...@v1.2.3` records, else the VCS revision it was built at).
package version

import (
	"runtime/debug"
	"strings"
)

// Version is the version set with -ldflags -X; empty when not set.
var Version = ""

// InformationURI is the tool's home page (SARIF's informationUri).
const InformationURI = "https://github.com/gpupolicy/gpupolicy"

// Tool is gpupolicy's version: Version when set at link time, else the
// module version in the build info (go install ...@VERSION), else
// "devel+REVISION" (with "-dirty" for a modified tree), else "devel".
func Tool() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel+" + rev
	if modified == "true" {
		v += "-dirty"
	}
	return v
}

// GoVersion is the Go toolchain the binary was built with.
func GoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return strings.TrimPrefix(bi.GoVersion, "go")
	}
	return ""
}
