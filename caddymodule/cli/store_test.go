package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/store"
)

// TestStoreCheck: store check of a sound, an empty, a missing and a
// corrupt file, named or by its directory or by default: exit 0 and the
// verdict on standard output, or 1 and the error, unprefixed, on the
// error output.
func TestStoreCheck(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", dir)

	sound := filepath.Join(dir, "sound", "state.db")
	if err := os.MkdirAll(filepath.Dir(sound), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := boltfile.OpenFile(sound, time.Second, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corrupt, []byte(strings.Repeat("not a bbolt file ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	byDefault := filepath.Join(dir, "caddy", "hookgate", "state.db")

	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string // its start
	}{
		{args: []string{sound}, stdout: sound + ": sound\n"},
		{args: []string{filepath.Dir(sound)}, stdout: sound + ": sound\n"},
		{args: []string{empty}, stdout: empty + ": empty (a new store: hookgate initialises it at start)\n"},
		{args: []string{corrupt, "--timeout", "30s"}, code: 1, stderr: "store file " + corrupt + " is corrupt ("},
		{args: []string{dir}, code: 1, stderr: "store file: stat " + filepath.Join(dir, "state.db") + ": no such file or directory\n"},
		{args: nil, code: 1, stderr: "store file: stat " + byDefault + ": no such file or directory\n"},
		{args: []string{"a", "b"}, code: 1, stderr: "Error: accepts at most 1 arg(s), received 2\n"},
		{args: []string{"--timeout", "soon", sound}, code: 1, stderr: "Error: invalid argument \"soon\" for \"--timeout\" flag"},
	} {
		got := execute(t, "", append([]string{"store", "check"}, tc.args...)...)
		if got.code != tc.code || got.stdout != tc.stdout || !strings.HasPrefix(got.stderr, tc.stderr) || (tc.stderr == "") != (got.stderr == "") {
			t.Errorf("store check %q: %+v; want exit %d, stdout %q, stderr starting %q", tc.args, got, tc.code, tc.stdout, tc.stderr)
		}
	}

	if err := os.MkdirAll(filepath.Dir(byDefault), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sound, byDefault); err != nil {
		t.Fatal(err)
	}
	if got := execute(t, "", "store", "check"); got != (result{stdout: byDefault + ": sound\n"}) {
		t.Errorf("store check of the default store: %+v", got)
	}
}

// TestStoreCheckOfARunningGatewaysFile: store check of a file a gateway
// holds says so, and how to check it: back it up, and check the copy.
func TestStoreCheckOfARunningGatewaysFile(t *testing.T) {
	dir := t.TempDir()
	c, err := store.Open(store.Config{Backend: "file", Dir: dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	path := filepath.Join(dir, store.StateFile)
	got := execute(t, "", "store", "check", dir)
	want := "store file " + path + " is held by a running gateway (its lock): a check reads a stopped gateway's file. " +
		"To check a running one's, back it up and check the copy: `hookgate store backup <file>` (it checks the copy too)\n"
	if got != (result{stderr: want, code: 1}) {
		t.Errorf("%+v; want exit 1 and %q", got, want)
	}
}
