package cli

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/store"
)

// gatewayStandIn serves the backup route with h, and releases a handler
// that holds its answer when the test ends.
func gatewayStandIn(t *testing.T, h func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, release) }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// stalls answers 200 with a Content-Length of 1 MiB, sends 64 KiB, then
// nothing until the client goes or the test ends.
func stalls(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
	w.Header().Set("Content-Length", "1048576")
	_, _ = w.Write(make([]byte, 64<<10))
	_ = http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
	case <-release:
	}
}

// TestStoreBackupKeepsTheEarlierCopy: an answer that is empty, refused,
// cut short or stalled (--stall) never replaces an earlier backup, and
// leaves no temporary file; a sound copy from a real store does replace
// it. A missing directory is named as such.
func TestStoreBackupKeepsTheEarlierCopy(t *testing.T) {
	c, err := store.Open(store.Config{Backend: "file", Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	real := gatewayStandIn(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		store.BackupHandler{Conn: func() (*store.Conn, error) { return c, nil }, Logger: slog.New(slog.DiscardHandler)}.ServeHTTP(w, r)
	})
	empty := gatewayStandIn(t, func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		w.Header().Set("Content-Length", "0")
	})
	refused := gatewayStandIn(t, func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		problem.Write(w, problem.StoreUnavailable, "the store did not open", time.Second)
	})
	short := gatewayStandIn(t, func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write(make([]byte, 1000))
	})
	stalled := gatewayStandIn(t, stalls)

	for _, tc := range []struct {
		name, address string
		flags         []string
		stderr        string // a part of it
	}{
		{"empty", empty, nil, "Error: the gateway at " + empty + " answered an empty copy\n"},
		{"refused", refused, nil, "Error: the store did not open (503 store_unavailable)\n"},
		{"cut short", short, nil, "Error: the backup from " + short + ": unexpected EOF\n"},
		{"stalled", stalled, []string{"--stall", "200ms"}, "Error: no data from the gateway for 200ms (--stall): the backup was abandoned\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "backup.db")
			if err := os.WriteFile(dest, []byte("an earlier backup"), 0o600); err != nil {
				t.Fatal(err)
			}
			got := execute(t, "", append([]string{"store", "backup", dest, "--address", tc.address}, tc.flags...)...)
			if got.code != 1 || got.stdout != "" || got.stderr != tc.stderr+dest+" is left as it was\n" {
				t.Errorf("%+v; want exit 1 and %q", got, tc.stderr)
			}
			assertOnly(t, dir, dest, "an earlier backup")
		})
	}

	t.Run("sound", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, store.StateFile), []byte("an earlier backup"), 0o600); err != nil {
			t.Fatal(err)
		}
		got := execute(t, "", "store", "backup", dir, "--address", real)
		dest := filepath.Join(dir, store.StateFile)
		if got.code != 0 || !strings.HasPrefix(got.stdout, dest+": ") || !strings.HasSuffix(got.stdout, ": sound\n") {
			t.Fatalf("%+v; want the copy written", got)
		}
		if _, _, err := checkStore(dest, 0); err != nil {
			t.Error(err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("the directory holds %v; want only %s", entries, store.StateFile)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "backups")
		got := execute(t, "", "store", "backup", filepath.Join(dir, "state.db"), "--address", real)
		want := "Error: the directory " + dir + " does not exist: store backup makes none; create it first\n"
		if got.code != 1 || got.stderr != want {
			t.Errorf("%+v; want exit 1 and %q", got, want)
		}
	})
}

// assertOnly fails unless dir holds only file, and file holds content.
func assertOnly(t *testing.T, dir, file, content string) {
	t.Helper()
	if b, err := os.ReadFile(file); err != nil || string(b) != content {
		t.Errorf("%s holds %q (%v); want %q, unchanged", file, b, err, content)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("%s holds %v (%v); want only %s", dir, entries, err, filepath.Base(file))
	}
}

// TestStoreBackupInterrupted: SIGINT to a `store backup` process while the
// copy downloads ends it with exit 1 and "interrupted", its temporary
// file removed and the earlier backup unchanged.
func TestStoreBackupInterrupted(t *testing.T) {
	stalled := gatewayStandIn(t, stalls)
	dir := t.TempDir()
	dest := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(dest, []byte("an earlier backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "store", "backup", dest, "--address", stalled)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the copy is under way: its temporary file holds bytes.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		partials, _ := filepath.Glob(filepath.Join(dir, ".backup.db.*.partial"))
		if len(partials) == 1 {
			if fi, err := os.Stat(partials[0]); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no partial copy within 30s: %s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := errors.AsType[*exec.ExitError](err)
	want := "Error: interrupted\n" + dest + " is left as it was\n"
	if !ok || ee.ExitCode() != 1 || stderr.String() != want {
		t.Errorf("exit %v, stderr %q; want 1 and %q", err, stderr.String(), want)
	}
	assertOnly(t, dir, dest, "an earlier backup")
}
