package container

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo records the environment build.sh builds in, and writes the
// file -o names; it answers `go env GOARCH` with arm64, a host's
// architecture.
const fakeGo = `#!/bin/sh
if [ "$1" = env ]; then echo arm64; exit 0; fi
echo "GOOS=$GOOS GOARCH=$GOARCH CGO_ENABLED=$CGO_ENABLED" > "$RECORD/go"
while [ $# -gt 0 ]; do
	if [ "$1" = -o ]; then : > "$2"; fi
	shift
done
`

// fakeEngine records the arguments build.sh gives podman or docker.
const fakeEngine = `#!/bin/sh
echo "$@" > "$RECORD/engine"
`

// TestBuildPlatform: build.sh --platform linux/amd64|linux/arm64 builds
// the binary for that platform and asks the engine for an image of it;
// without the flag, the build host's architecture; any other platform is
// refused before anything is built. The go toolchain and the engine are
// stand-ins that record what they are asked (TestImage builds for real).
func TestBuildPlatform(t *testing.T) {
	bin := t.TempDir()
	for name, src := range map[string]string{"go": fakeGo, "engine": fakeEngine} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(src), 0o755); err != nil { //nolint:gosec // G306: an executable
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args                 []string
		goEnv, platform, tag string
	}{
		{[]string{"--platform", "linux/arm64", "hg:arm"}, "GOOS=linux GOARCH=arm64 CGO_ENABLED=0", "linux/arm64", "hg:arm"},
		{[]string{"--platform=linux/amd64"}, "GOOS=linux GOARCH=amd64 CGO_ENABLED=0", "linux/amd64", "hookgate:latest"},
		{nil, "GOOS=linux GOARCH=arm64 CGO_ENABLED=0", "linux/arm64", "hookgate:latest"}, // the host's
	} {
		record := t.TempDir()
		cmd := exec.Command("./build.sh", tc.args...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HOOKGATE_ENGINE="+filepath.Join(bin, "engine"), "RECORD="+record)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build.sh %q: %v\n%s", tc.args, err, out)
		}
		goEnv, _ := os.ReadFile(filepath.Join(record, "go"))
		engine, _ := os.ReadFile(filepath.Join(record, "engine"))
		want := "-t " + tc.tag + " --platform " + tc.platform + " "
		if strings.TrimSpace(string(goEnv)) != tc.goEnv || !strings.Contains(string(engine), want) {
			t.Errorf("build.sh %q: go built with %q, the engine was asked %q; want %q and %q", tc.args, goEnv, engine, tc.goEnv, want)
		}
	}
	for _, args := range [][]string{{"--platform", "linux/386"}, {"--platform"}, {"--bogus"}, {"a", "b"}} {
		record := t.TempDir()
		cmd := exec.Command("./build.sh", args...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HOOKGATE_ENGINE="+filepath.Join(bin, "engine"), "RECORD="+record)
		out, err := cmd.CombinedOutput()
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.HasPrefix(string(out), "build.sh: ") {
			t.Errorf("build.sh %q: %v %q; want exit 2 and why", args, err, out)
		}
		if _, err := os.Stat(filepath.Join(record, "go")); err == nil {
			t.Errorf("build.sh %q built something", args)
		}
	}
}
