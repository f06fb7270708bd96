package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/suggest"
)

// checksDirectives are Caddy's commands whose --config a mistyped
// hookgate directive is checked in, before Caddy's adapter reads it.
var checksDirectives = map[string]bool{"run": true, "adapt": true, "validate": true, "reload": true}

// checkingDirectives is cmd, one of Caddy's commands that read a config
// (--config, --adapter), checking first that every webhook_ directive
// its Caddyfile names is one of hookgate's. Caddy's adapter reports a
// mistyped one without a suggestion; this names the line and the
// directive meant.
func checkingDirectives(cmd *cobra.Command) *cobra.Command {
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		file, _ := cmd.Flags().GetString("config")
		adapter, _ := cmd.Flags().GetString("adapter")
		if err := checkDirectives(file, adapter); err != nil {
			return exit(cmd, 1, err)
		}
		return run(cmd, args)
	}
	return cmd
}

// checkDirectives reads the Caddyfile that file and adapter name (as
// Caddy finds it: no file is ./Caddyfile, when there is one) and refuses
// a directive that starts with webhook_ and is none of hookgate's. What
// is not a Caddyfile, or does not parse, is left to Caddy's adapter.
func checkDirectives(file, adapter string) error {
	switch {
	case file == "-":
		return nil // standard input: Caddy reads it
	case file == "" && adapter == "":
		file = "Caddyfile"
	case !isCaddyfile(file, adapter):
		return nil
	}
	body, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) && file == "Caddyfile" {
		return nil
	}
	if err != nil {
		return nil // Caddy says why it cannot read it
	}
	blocks, err := caddyfile.Parse(file, body)
	if err != nil {
		return nil // Caddy's adapter says where it does not parse
	}
	known := hookgateDirectives()
	for _, b := range blocks {
		for _, seg := range b.Segments {
			for i, tok := range seg {
				// A directive is the first token of its line.
				first := i == 0 || seg[i-1].Line != tok.Line || seg[i-1].File != tok.File
				if !first || !strings.HasPrefix(tok.Text, "webhook_") || slices.Contains(known, tok.Text) {
					continue
				}
				if s := suggest.Closest(tok.Text, known); s != "" {
					return fmt.Errorf("%s:%d: unknown directive %q; did you mean %q?", tok.File, tok.Line, tok.Text, s)
				}
				return fmt.Errorf("%s:%d: unknown directive %q; hookgate's are %s", tok.File, tok.Line, tok.Text, strings.Join(known, ", "))
			}
		}
	}
	return nil
}

// isCaddyfile reports whether Caddy reads file with the Caddyfile
// adapter: when adapter says so, or when none is named and the file's
// name starts with Caddyfile or ends in .caddyfile (in any case), as
// Caddy decides.
func isCaddyfile(file, adapter string) bool {
	if adapter != "" {
		return adapter == "caddyfile"
	}
	base := strings.ToLower(filepath.Base(file))
	return filepath.Ext(base) != ".json" && (strings.HasPrefix(base, "caddyfile") || strings.HasSuffix(base, ".caddyfile"))
}

// hookgateDirectives are hookgate's directives: each is the handler
// module of its name, http.handlers.webhook_*.
func hookgateDirectives() []string {
	var out []string
	for _, m := range caddy.GetModules("http.handlers") {
		if name := m.ID.Name(); strings.HasPrefix(name, "webhook_") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
