// Package systemd holds the test of hookgate's systemd unit: installed into
// a scratch root as docs/deploy.md says, systemd-analyze verifies it without a
// warning and rates its exposure, and its command line loads the config.
package systemd

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxExposure is the highest exposure systemd-analyze security may rate
// the unit, in its --threshold's tenths: 20 is the 2.0 it prints (0 to 10,
// lower is tighter). The unit is at 1.7.
const maxExposure = "20"

// unitDirs hold the host's targets and slices, which a service's default
// dependencies name: the scratch root gets copies.
var unitDirs = []string{"/usr/lib/systemd/system", "/lib/systemd/system"}

// TestUnit installs the unit, its sysusers file, the binary and the
// image's Caddyfile into a scratch root, as docs/deploy.md's steps do, then
// runs systemd-analyze verify (any warning fails) and security (the
// exposure at most maxExposure) on it, checks the settings the
// deployment relies on, and validates the config with ExecStart's flags.
func TestUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs systemd-analyze and builds the hookgate binary: skipped under -short")
	}
	for _, tool := range []string{"systemd-analyze", "systemd-sysusers"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: install systemd (Debian: apt-get install systemd); .ci/run does", tool)
		}
	}
	root := t.TempDir()
	install := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst = filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // G301: a scratch root laid out as a system's
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil { //nolint:gosec // G306: as above
			t.Fatal(err)
		}
	}
	install("hookgate.service", "etc/systemd/system/hookgate.service")
	install("hookgate.sysusers", "usr/lib/sysusers.d/hookgate.conf")
	install("../container/Caddyfile", "etc/hookgate/Caddyfile")
	install("/dev/null", "etc/hookgate/hookgate.env")
	var copied int
	for _, dir := range unitDirs {
		for _, pattern := range []string{"*.target", "*.slice"} {
			files, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
					install(f, filepath.Join("usr/lib/systemd/system", filepath.Base(f)))
					copied++
				}
			}
		}
	}
	if copied == 0 {
		t.Fatalf("no systemd targets in %v: is systemd installed?", unitDirs)
	}
	bin := filepath.Join(root, "usr/bin/hookgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/hookgate").CombinedOutput(); err != nil {
		t.Fatalf("building hookgate: %v\n%s", err, out)
	}

	run(t, "systemd-sysusers", "--root="+root)
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !slices.ContainsFunc(strings.Split(string(passwd), "\n"), func(l string) bool { return strings.HasPrefix(l, "hookgate:") }) {
		t.Errorf("systemd-sysusers made no hookgate user: %q %v", passwd, err)
	}
	if out := run(t, "systemd-analyze", "verify", "--root="+root, "hookgate.service"); out != "" {
		t.Errorf("systemd-analyze verify warns:\n%s", out)
	}
	run(t, "systemd-analyze", "security", "--offline=yes", "--root="+root, "--threshold="+maxExposure, "--no-pager", "hookgate.service")

	unit := parse(t, "hookgate.service")
	for key, want := range map[string]string{
		"Type": "simple", "User": "hookgate", "Group": "hookgate", "StateDirectory": "hookgate",
		"ProtectSystem": "strict", "NoNewPrivileges": "true", "PrivateTmp": "true",
		"CapabilityBoundingSet": "CAP_NET_BIND_SERVICE", "AmbientCapabilities": "CAP_NET_BIND_SERVICE",
	} {
		if got := unit[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	env := map[string]string{}
	for _, e := range unit["Environment"] {
		for kv := range strings.FieldsSeq(e) {
			k, v, _ := strings.Cut(strings.Trim(kv, `"`), "=")
			env[k] = v
		}
	}
	if env["XDG_DATA_HOME"] != "/var/lib/hookgate" {
		t.Errorf("XDG_DATA_HOME=%q, want the StateDirectory /var/lib/hookgate: the embedded store lives there", env["XDG_DATA_HOME"])
	}
	// The admin API: a socket of mode 0600 in the runtime directory, which
	// is the user's alone.
	if env["CADDY_ADMIN"] != "unix//run/hookgate/admin.sock|0600" || !slices.Equal(unit["RuntimeDirectory"], []string{"hookgate"}) ||
		!slices.Equal(unit["RuntimeDirectoryMode"], []string{"0700"}) {
		t.Errorf("CADDY_ADMIN=%q, RuntimeDirectory=%q, RuntimeDirectoryMode=%q; want unix//run/hookgate/admin.sock|0600 in hookgate, mode 0700",
			env["CADDY_ADMIN"], unit["RuntimeDirectory"], unit["RuntimeDirectoryMode"])
	}

	// ExecStart's flags and config, validated (run becomes validate), in
	// the unit's environment with its directories under the scratch root.
	exec0 := strings.Fields(unit["ExecStart"][0])
	if exec0[0] != "/usr/bin/hookgate" || exec0[1] != "run" {
		t.Fatalf("ExecStart=%q, want /usr/bin/hookgate run ...", exec0)
	}
	args := append([]string{"validate"}, exec0[2:]...)
	for i, a := range args {
		if strings.HasPrefix(a, "/etc/") {
			args[i] = filepath.Join(root, a)
		}
	}
	validate := exec.Command(bin, args...)
	validate.Env = []string{"PATH=" + os.Getenv("PATH"), "HOOKGATE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "HOOKGATE_UPSTREAM=127.0.0.1:1"}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := filepath.Join(root, env[k])
		if k == "CADDY_ADMIN" {
			v = "unix/" + filepath.Join(root, strings.TrimPrefix(env[k], "unix/"))
		}
		validate.Env = append(validate.Env, k+"="+v)
	}
	if out, err := validate.CombinedOutput(); err != nil {
		t.Errorf("hookgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// The config binds the admin API where CADDY_ADMIN says.
	adapt := exec.Command(bin, "adapt", "--config", filepath.Join(root, "etc/hookgate/Caddyfile"))
	adapt.Env = []string{"PATH=" + os.Getenv("PATH"), "CADDY_ADMIN=" + env["CADDY_ADMIN"], "HOME=" + root}
	out, err := adapt.Output()
	if err != nil || !strings.Contains(string(out), `"admin":{"listen":"unix//run/hookgate/admin.sock|0600"`) {
		t.Errorf("hookgate adapt with the unit's CADDY_ADMIN: %v; want the admin API on its socket:\n%s", err, out)
	}
}

// run runs a command that must succeed, and returns its output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// parse reads a unit file's settings: each key's values, in order.
// Sections are not told apart: a key names one setting in this unit.
func parse(t *testing.T, path string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	for line := range strings.Lines(string(src)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no setting", path, line)
		}
		settings[k] = append(settings[k], v)
	}
	return settings
}
