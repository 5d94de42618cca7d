package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse --short HEAD)" ./cmd/switchyard
//
// Unset, they come from the build information the go command records
// (the module version of `go install …@v1.2.0`, the VCS revision of a
// build in a git work tree).
var (
	version = ""
	commit  = ""
)

// versionInfo is what `switchyard --version` prints.
type versionInfo struct {
	Version, Commit, GoVersion, Platform string
	Modified                             bool
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if len(v.Commit) > 12 {
		v.Commit = v.Commit[:12]
	}
	return v
}

// String is the --version line: "v1.2.0 (commit 3f2a9c1d0b7e, go1.26.8 linux/amd64)".
func (v versionInfo) String() string {
	c := v.Commit
	if c == "" {
		c = "unknown"
	}
	if v.Modified {
		c += "+modified"
	}
	return fmt.Sprintf("%s (commit %s, %s %s)", v.Version, c, v.GoVersion, v.Platform)
}
