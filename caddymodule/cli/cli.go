// Package cli holds the hookgate commands: sign, dedupe, freshness, dlq,
// destinations, reconcile and store. Importing it registers them with
// Caddy's command line, and hookgate's modules with them: cmd/hookgate
// imports it, and so does a Caddy built with
// `xcaddy build --with github.com/hookgate/hookgate/caddymodule/cli`.
//
// A command's function returns the exit code and never calls os.Exit:
// runE, the one adapter to cobra, hands the code to caddycmd.Main, which
// exits with it.
package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// register registers one of hookgate's commands. Its help ends with
// hookgate's documentation, where Caddy's own commands point to Caddy's.
func register(c caddycmd.Command) {
	setup := c.CobraFunc
	if setup == nil {
		panic("hookgate command " + c.Name + ": CobraFunc is required")
	}
	c.CobraFunc = func(cmd *cobra.Command) {
		setup(cmd)
		cmd.SetHelpTemplate(helpTemplate)
	}
	caddycmd.RegisterCommand(c)
}

// helpTemplate is cobra's default help template, then hookgate's docs.
var helpTemplate = (&cobra.Command{}).HelpTemplate() + `
Full documentation is available at:
https://github.com/hookgate/hookgate#readme
`

// A commandFunc runs a command: cmd holds its parsed flags and its
// output, error output and input; args are its arguments. It returns the
// exit code, and the error, if any, that made it non-zero.
type commandFunc func(cmd *cobra.Command, args []string) (int, error)

// runE adapts f to cobra's RunE. The command's output keeps its first
// write error, so that the commands print without checking each write
// and a command whose output was lost (a full disk, a closed pipe) still
// fails: exit 1, with the error.
func runE(f commandFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		out := &stickyWriter{w: cmd.OutOrStdout()}
		cmd.SetOut(out)
		code, err := f(cmd, args)
		if code == 0 && out.err != nil {
			code, err = 1, fmt.Errorf("writing the output: %w", out.err)
		}
		return exit(cmd, code, err)
	}
}

// stickyWriter writes to w until a write fails, then keeps that error and
// writes nothing more.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// exit prints err, if any, as cobra prints a command's error ("Error:
// ..." on the error output), and returns what RunE returns for the exit
// code: nil for 0, else an *exitError, which cobra does not print again.
// It is the one place a command's code becomes the process's exit code.
func exit(cmd *cobra.Command, code int, err error) error {
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
	}
	if code == 0 {
		return nil
	}
	cmd.SilenceErrors = true
	// caddycmd.Main exits 1 on any error but its own exit error, which
	// carries another code. That type is unexported:
	// WrapCommandFuncForCobra is the way to make one, for codes above 1.
	caddyErr := caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) { return code, nil })(cmd, nil)
	return &exitError{code: code, caddy: caddyErr}
}

// exitError is a command's non-zero exit code, as the error RunE returns.
// It wraps caddycmd's exit error (nil for code 1), so caddycmd.Main
// exits with the code.
type exitError struct {
	code  int
	caddy error
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (e *exitError) Unwrap() error { return e.caddy }

// onlyFlags refuses each flag set on the command line that the
// subcommand sub of cmd does not use: a flag that would be ignored is an
// error, never ignored. uses are the flags sub reads; --address serves
// every subcommand that speaks to the admin API.
func onlyFlags(cmd *cobra.Command, sub string, uses ...string) error {
	var stray []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "address" && !slices.Contains(uses, f.Name) {
			stray = append(stray, "--"+f.Name)
		}
	})
	if len(stray) == 0 {
		return nil
	}
	takes := "only --address"
	if len(uses) > 0 {
		takes = "--" + strings.Join(uses, ", --") + " and --address"
	}
	return fmt.Errorf("%s %s does not use %s: it takes %s", cmd.Name(), sub, strings.Join(stray, ", "), takes)
}

// jsonOnly refuses --format but json for the subcommand sub of cmd,
// which prints only prints ("JSON", "JSON Lines"): --format json is
// what it does anyway, --format table it cannot do.
func jsonOnly(cmd *cobra.Command, sub, prints string) error {
	if f, _ := cmd.Flags().GetString("format"); cmd.Flags().Changed("format") && f != "json" {
		return fmt.Errorf("%s %s prints %s only: drop --format %s", cmd.Name(), sub, prints, f)
	}
	return nil
}

// noArgs refuses arguments after a subcommand that takes none.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("%s %s takes no argument, got %q", cmd.Name(), args[0], args[1])
	}
	return nil
}
