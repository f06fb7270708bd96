package cli

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelp runs `hookgate [command...] --help` for every command, hidden
// ones too: no help names Caddy's binary or website for hookgate's, and
// every flag a help mentions is one its command has: the command's own, or
// a subcommand's, or, on a line that names another command ("hookgate run
// --config ..."), that one's.
func TestHelp(t *testing.T) {
	// mentionedElsewhere are flags a help names as another command's.
	mentionedElsewhere := map[string][]string{
		"environ": {"--environ"}, // "hookgate run ... by adding the --environ flag"
	}
	flag := regexp.MustCompile(`(?:^|[\s"'(\[,/|])--([a-z][a-z0-9-]*)`)
	named := regexp.MustCompile(`\bhookgate((?: [a-z][a-z-]*)+)`)
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(), nil)
	if len(paths) < 30 {
		t.Fatalf("%d commands found; want Caddy's and hookgate's", len(paths))
	}
	for _, path := range paths {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string(nil), path...), "--help"))
		name := strings.Join(append([]string{"hookgate"}, path...), " ")
		if err := root.Execute(); err != nil {
			t.Errorf("%s --help: %v", name, err)
			continue
		}
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		help := out.String()
		if !strings.Contains(help, "Usage:") {
			t.Errorf("%s --help printed no usage:\n%s", name, help)
		}
		for _, bad := range []string{"caddy run", "caddyserver.com"} {
			if strings.Contains(help, bad) {
				t.Errorf("%s --help mentions %q:\n%s", name, bad, help)
			}
		}
		for _, line := range strings.Split(help, "\n") {
			if strings.Contains(line, "xcaddy build") {
				continue // xcaddy's flags
			}
			of := cmd
			if m := named.FindStringSubmatch(line); m != nil {
				if c, _, err := root.Find(strings.Fields(m[1])); err == nil && c != root {
					of = c
				}
			}
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				if f := m[1]; !hasFlag(of, f) && !slices.Contains(mentionedElsewhere[of.Name()], "--"+f) {
					t.Errorf("%s --help mentions --%s, a flag %s lacks:\n%s", name, f, of.CommandPath(), line)
				}
			}
		}
	}
}

// hasFlag reports whether c, or one of its subcommands, has the flag.
func hasFlag(c *cobra.Command, name string) bool {
	if name == "help" || c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil {
		return true
	}
	for _, sub := range c.Commands() {
		if hasFlag(sub, name) {
			return true
		}
	}
	return false
}

// TestRefused: the commands that would replace hookgate with a plain Caddy
// refuse, and say how to build hookgate instead.
func TestRefused(t *testing.T) {
	for _, name := range []string{"upgrade", "add-package", "remove-package"} {
		root := newRoot()
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs([]string{name, "github.com/example/module", "--keep-backup"})
		code := exitCode(root.Execute())
		if code != 1 || !strings.Contains(stderr.String(), "would replace hookgate with a plain Caddy") ||
			!strings.Contains(stderr.String(), "xcaddy build --with github.com/hookgate/hookgate/caddymodule/cli") {
			t.Errorf("hookgate %s: exit %d, stderr %q; want 1 and the refusal with the xcaddy recipe", name, code, stderr.String())
		}
		var help bytes.Buffer
		root = newRoot()
		root.SetOut(&help)
		root.SetArgs([]string{"--help"})
		if err := root.Execute(); err != nil || strings.Contains(help.String(), "\n  "+name+" ") {
			t.Errorf("hookgate --help lists %s (err %v)", name, err)
		}
	}
}
