package cli

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Main runs the hookgate command: Caddy's commands and hookgate's, under
// a root command that is hookgate's (its help, its examples, its version),
// where caddycmd.Main's would be Caddy's. Those of Caddy's commands that
// would replace the binary with a plain Caddy refuse (refused). It exits
// with the command's exit code.
func Main() {
	caddy.CustomBinaryName = "hookgate"
	caddy.CustomLongDescription = LongDescription
	caddy.CustomVersion = "hookgate " + Version() + " on Caddy"
	os.Exit(exitCode(newRoot().Execute()))
}

// newRoot builds the hookgate command with every registered command.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:  "hookgate",
		Long: LongDescription,
		Example: `  $ hookgate run --config caddyfiles/quickstart.Caddyfile
  $ hookgate reload --config caddyfiles/quickstart.Caddyfile
  $ hookgate sign --secret "$HOOKGATE_SECRET" '{"type":"ping"}'
  $ hookgate dlq summary
  $ hookgate stop`,
		// A failed start prints its error, not the usage as well.
		SilenceUsage: true,
		Version:      versionText(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetHelpTemplate(helpTemplate)
	cmds := caddycmd.Commands()
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cmds[name]
		switch {
		case refused[name]:
			root.AddCommand(refusal(c))
		case name == "version":
			root.AddCommand(versionCommand())
		case name == "stop":
			root.AddCommand(stopCommand(c))
		case name == "manpage" || name == "completion":
			// Caddy adds these to its own root; cobra adds completion to
			// this one, and manpage is below.
		case checksDirectives[name]:
			root.AddCommand(checkingDirectives(toCobra(c)))
		default:
			root.AddCommand(toCobra(c))
		}
	}
	root.AddCommand(manpage(root))
	return root
}

// refused are Caddy's commands that download a plain Caddy from Caddy's
// build server and put it in place of the running binary: hookgate's
// modules and commands would be gone.
var refused = map[string]bool{"upgrade": true, "add-package": true, "remove-package": true}

// refusal is c, hidden, refusing with the way to build hookgate instead.
func refusal(c caddycmd.Command) *cobra.Command {
	return &cobra.Command{
		Use:    c.Name,
		Short:  "Refuses: hookgate is built from its source, not downloaded",
		Hidden: true,
		Long: "\n`" + c.Name + "` would download a plain Caddy from Caddy's build server and put it in\n" +
			"place of this binary, without hookgate's modules and commands.\n" + buildRecipe,
		// Whatever the arguments and flags: the answer is the same.
		Args:               cobra.ArbitraryArgs,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return 1, fmt.Errorf("hookgate %s would replace hookgate with a plain Caddy, so it refuses.\n%s", c.Name, buildRecipe)
		}),
	}
}

// buildRecipe says how to build hookgate, with other Caddy modules too.
const buildRecipe = `To upgrade hookgate, build it again from its source:

	go install github.com/hookgate/hookgate/cmd/hookgate@latest

To add or remove Caddy modules, build a Caddy with hookgate's commands and
the modules you want with xcaddy:

	xcaddy build --with github.com/hookgate/hookgate/caddymodule/cli --with <module>[@<version>]
`

// toCobra is the cobra command of one of Caddy's or hookgate's commands,
// as caddycmd builds it; the help of Caddy's own says "hookgate" for
// "caddy" in its examples.
func toCobra(c caddycmd.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   c.Name + " " + caddyExample.ReplaceAllString(c.Usage, "hookgate$1"),
		Short: c.Short,
		Long:  caddyExample.ReplaceAllString(c.Long, "hookgate$1"),
	}
	if c.CobraFunc != nil {
		c.CobraFunc(cmd)
	} else {
		cmd.RunE = caddycmd.WrapCommandFuncForCobra(c.Func)
		cmd.Flags().AddGoFlagSet(c.Flags)
	}
	cmd.Example = caddyExample.ReplaceAllString(cmd.Example, "hookgate$1")
	return cmd
}

// caddyExample matches "caddy" as a command line's first word: "caddy run",
// "$ caddy storage export".
var caddyExample = regexp.MustCompile(`\bcaddy( [a-z])`)

// manpage generates the manual pages, as Caddy's manpage command does for
// Caddy's root.
func manpage(root *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manpage --directory <path>",
		Short: "Generates the manual pages for hookgate's commands",
		Long: `
Generates the manual pages for hookgate's commands, in section 8 (System
Administration), into the directory --directory names, created if missing.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringP("directory", "o", "", "the directory to write the manual pages in (required)")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) (int, error) {
		dir, _ := cmd.Flags().GetString("directory")
		if strings.TrimSpace(dir) == "" {
			return 1, errors.New("--directory is required")
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return 1, err
		}
		if err := doc.GenManTree(root, &doc.GenManHeader{Title: "hookgate", Section: "8"}, dir); err != nil {
			return 1, err
		}
		return 0, nil
	})
	return cmd
}

// exitCode is the code to exit with after Execute returned err: 0 for
// none, the code of a hookgate command's exitError or of caddycmd's exit
// error (Caddy's own commands'), else 1.
func exitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.code
	}
	// caddycmd's exit error is unexported; its ExitCode field is not.
	for u := err; u != nil; u = errors.Unwrap(u) {
		if v := reflect.ValueOf(u); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
			if f := v.Elem().FieldByName("ExitCode"); f.IsValid() && f.CanInt() {
				return int(f.Int())
			}
		}
	}
	return 1
}
