package cli

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "68c5633a1b2c3d4e5f60718293a4b5c6d7e8f901"},
		{Key: "vcs.time", Value: "2026-01-31T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tt := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"a release, as a dependency", debug.BuildInfo{
			Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.2.3"}},
		}, "v1.2.3"},
		{"go install ...@v1.2.3", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.3"}}, "v1.2.3"},
		{"go build in a git clone", debug.BuildInfo{
			Main:     debug.Module{Path: modulePath, Version: "v0.0.0-20260131120000-68c5633a1b2c+dirty"},
			Settings: vcs,
		}, "v0.0.0-20260131120000-68c5633a1b2c+dirty (commit 68c5633a1b2c, 2026-01-31T12:00:00Z, modified)"},
		{"a commit, no version", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs[:3]},
			"commit 68c5633a1b2c, 2026-01-31T12:00:00Z"},
		{"nothing recorded", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}},
			"(devel: no version or commit recorded; build with go build in a git clone, without -buildvcs=false (check GOFLAGS: go env GOFLAGS), or go install ...@<version>)"},
	} {
		if got := versionOf(&tt.bi); got != tt.want {
			t.Errorf("%s: versionOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}
