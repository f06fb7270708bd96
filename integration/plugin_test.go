package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildsAsPlugin builds a plain Caddy main that imports caddymodule,
// the way xcaddy does (a module that requires hookgate, replaced by this
// checkout), and checks the modules are there.
func TestBuildsAsPlugin(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	main := `package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/hookgate/hookgate/caddymodule"
)

func main() { caddycmd.Main() }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("mod", "init", "caddy")
	run("mod", "edit", "-require", "github.com/hookgate/hookgate@v0.0.0", "-replace", "github.com/hookgate/hookgate="+root)
	// The same Caddy as hookgate's go.mod, so the build reuses the cache.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/caddyserver/caddy/v2" {
			run("mod", "edit", "-require", "github.com/caddyserver/caddy/v2@"+f[1])
		}
	}
	run("mod", "tidy")
	run("build", "-o", "caddy", ".")
	out, err := exec.Command(filepath.Join(dir, "caddy"), "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, out)
	}
	for _, want := range []string{"hookgate", "http.handlers.webhook_verify", "http.handlers.webhook_dedupe", "http.handlers.webhook_freshness"} {
		if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
			t.Errorf("plain Caddy with the plugin lacks %s", want)
		}
	}
}
