package cli

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// mainEnv, set, makes the test binary Main with its arguments:
// TestExitCodes runs the commands as the hookgate binary runs them.
const mainEnv = "HOOKGATE_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		Main()
	}
	os.Exit(m.Run())
}

// result is what a command printed, and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// execute runs the registered hookgate command args[0] in process, as
// caddycmd.Main would (a root with usage silenced, hookgate's help), with
// stdin as its input and buffers for its output and error output; the
// code is the one caddycmd.Main would exit with.
func execute(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	c, ok := caddycmd.Commands()[args[0]]
	if !ok {
		t.Fatalf("no command %q registered", args[0])
	}
	root := &cobra.Command{Use: "hookgate", SilenceUsage: true}
	cmd := &cobra.Command{Use: c.Name + " " + c.Usage, Short: c.Short, Long: c.Long}
	c.CobraFunc(cmd)
	root.AddCommand(cmd)
	var stdout, stderr bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return result{stdout.String(), stderr.String(), exitCode(err)}
}

// TestExitCodes runs commands through Main in a child process:
// the code a command returns is the process's exit code, and an error is
// printed once, as "Error: ...".
func TestExitCodes(t *testing.T) {
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer unauthorized.Close()
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"sign", "--secret", testSecret, "hello"}, 0, ""},
		{[]string{"sign", "--secret", testSecret, "--send", unauthorized.URL, "hello"}, 1, ""},
		{[]string{"sign", "hello"}, 1, "Error: no secret: pass --secret or set HOOKGATE_SECRET\n"},
		{[]string{"sign"}, 1, "Error: accepts 1 arg(s), received 0\n"},
		{[]string{"dlq", "summary", "--format", "yaml"}, 1, "Error: --format \"yaml\": want table or json\n"},
		{[]string{"store", "check", missing}, 1, "store file: stat " + missing + ": no such file or directory\n"},
		{[]string{"reconcile", "--job", "j"}, 2, "Error: --config and --job are required\n"},
		{[]string{"reconcile", "--nope"}, 2, "Error: unknown flag: --nope (see hookgate reconcile --help)\n"},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), mainEnv+"=1", "HOOKGATE_SECRET=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if code != tc.code || stderr.String() != tc.stderr {
			t.Errorf("hookgate %s: exit %d, stderr %q; want %d, %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// TestLostOutputFails: a command whose output cannot be written (a full
// disk) exits 1 and says so, rather than 0 with nothing written.
func TestLostOutputFails(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("this test writes to /dev/full: %v", err)
	}
	defer func() { _ = full.Close() }()
	cmd := exec.Command(os.Args[0], "sign", "--secret", testSecret, "hello")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	cmd.Stdout = full
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok || ee.ExitCode() != 1 || !strings.HasPrefix(stderr.String(), "Error: writing the output: ") {
		t.Errorf("exit %v, stderr %q; want 1 and the write error", err, stderr.String())
	}
}

// TestCaddymoduleHasNoCommands: no file of caddymodule imports cobra or
// this package; the commands are here.
func TestCaddymoduleHasNoCommands(t *testing.T) {
	files, err := filepath.Glob("../*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("caddymodule's files: %v, %v", files, err)
	}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/spf13/cobra" || path == "github.com/hookgate/hookgate/caddymodule/cli" {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
