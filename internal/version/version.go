package version

import "runtime/debug"

// version is set at build time (make build, make images, make release):
//
//	-ldflags "-X github.com/tether-csi/tether/internal/version.version=v0.1.0"
//
// from `git describe --tags --always --dirty`, or VERSION=.
var version string

// String is the build's version: the one stamped at build time; else the
// module version Go recorded (a `go install ...@vX.Y.Z`); else "devel"
// with the VCS revision, and "-dirty" for a tree with local changes.
func String() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(info)
}

func fromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if len(s.Value) > 12 {
				s.Value = s.Value[:12]
			}
			v += "-" + s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		v += "-dirty"
	}
	return v
}
