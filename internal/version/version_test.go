package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"a module version", debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0"},
		{"a source tree", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, "devel-0123456789ab"},
		{"a changed tree", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "devel-0123456789ab-dirty"},
		{"no VCS", debug.BuildInfo{}, "devel"},
	} {
		if got := fromBuildInfo(&tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestStampedWins(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v9.9.9"
	if got := String(); got != "v9.9.9" {
		t.Errorf("String() = %q, want the stamped v9.9.9", got)
	}
}
