package cli

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// socketAdmin is an admin API on a unix socket that answers GET
// /hookgate/dlq/summary, and its address as the shipped configs write it
// (unix//<path>|0600).
func socketAdmin(t *testing.T) string {
	t.Helper()
	// A short directory: a socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "hg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method+" "+r.URL.RequestURI() != "GET /hookgate/dlq/summary?" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"groups":[{"destination":"d1","class":"gone","count":2,"oldest_dead_at":"0001-01-01T00:00:00Z"}],"total":2}`)
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix/" + path + "|0600"
}

// TestAdminOverUnixSocket: the admin commands speak to an admin API on a
// unix socket, named by --address in Caddy's unix//<path>|<mode> form or
// by CADDY_ADMIN (the shipped image's and unit's default), and an
// unreachable socket is an error naming it.
func TestAdminOverUnixSocket(t *testing.T) {
	addr := socketAdmin(t)
	const table = "DESTINATION  CLASS  COUNT  OLDEST\n" +
		"d1           gone   2      -\n" +
		"total: 2\n"
	got := execute(t, "", "dlq", "summary", "--address", addr)
	if diff := cmp.Diff(result{stdout: table}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("dlq summary --address %s (-want +got):\n%s", addr, diff)
	}

	// CADDY_ADMIN is read when the process starts: in a child process.
	cmd := exec.Command(os.Args[0], "dlq", "summary")
	cmd.Env = append(os.Environ(), mainEnv+"=1", "CADDY_ADMIN="+addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != table {
		t.Errorf("CADDY_ADMIN=%s hookgate dlq summary: %v, stdout %q, stderr %q; want the table", addr, err, stdout.String(), stderr.String())
	}

	gone := filepath.Join(t.TempDir(), "gone.sock")
	got = execute(t, "", "dlq", "summary", "--address", "unix/"+gone)
	want := "Error: is the gateway running with its admin API on unix/" + gone + "? dial unix " + gone + ": connect: no such file or directory\n"
	if got.code != 1 || got.stderr != want {
		t.Errorf("an absent socket: exit %d, stderr %q; want 1, %q", got.code, got.stderr, want)
	}
	got = execute(t, "", "dlq", "summary", "--address", "unix/")
	if want := "Error: --address: want host:port, an http:// URL, or unix//path/to/admin.sock\n"; got.code != 1 || got.stderr != want {
		t.Errorf("--address unix/: exit %d, stderr %q; want 1, %q", got.code, got.stderr, want)
	}
	if !strings.HasPrefix(addr, "unix//") {
		t.Fatalf("the socket's address %q is not absolute", addr)
	}
}
