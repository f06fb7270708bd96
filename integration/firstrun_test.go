package integration

// The first run, and day two: what a new user meets around the
// walk-through (issue 22).

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runRefused runs hookgate with caddyfile and returns its output, failing
// the test unless it exits non-zero within 20s.
func runRefused(t *testing.T, caddyfile string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	logs := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the second gateway exited 0; want a refusal:\n%s", logs)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done //nolint:errcheck // killed: its exit status says nothing
		t.Fatalf("the second gateway still runs after 20s; want a refusal:\n%s", logs)
	}
	return logs.String()
}

// TestSharedPortRefused: a second gateway on the site port, or on the
// admin port, of a running one refuses to start, naming the address and
// the first's pid; the first serves on, and reloads as before.
func TestSharedPortRefused(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	g := startGateway(t, site, gatewayOptions{})
	port := strings.TrimPrefix(g.URL, "http://127.0.0.1:")
	adminPort := strings.TrimPrefix(g.Admin, "http://127.0.0.1:")

	want := "is already served by another process; hookgate listens with SO_REUSEPORT and would share it silently"
	pid := fmt.Sprintf("pid %d, hookgate", g.cmd.Process.Pid)
	for _, tt := range []struct{ name, admin, site, bind, addr string }{
		// The site address http://127.0.0.1:<port> listens on every
		// interface, as the first gateway does.
		{"site port", "127.0.0.1:" + fmt.Sprint(freePort(t)), "http://127.0.0.1:" + port, "", ":" + port},
		{"site port, bound to loopback", "127.0.0.1:" + fmt.Sprint(freePort(t)), "http://127.0.0.1:" + port, "bind 127.0.0.1", "127.0.0.1:" + port},
		{"admin port", "127.0.0.1:" + adminPort, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "", "127.0.0.1:" + adminPort},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := runRefused(t, fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n}\n\n%s {\n%s\n%s\n}\n", tt.admin, tt.site, tt.bind, site))
			if !strings.Contains(out, "address "+tt.addr+" "+want) || !strings.Contains(out, pid) {
				t.Errorf("the second gateway's output lacks %q and %q:\n%s", "address "+tt.addr+" "+want, pid, out)
			}
		})
	}

	// The first gateway still serves, and reloads: through the admin API's
	// /load and through `hookgate reload`, each onto its own listeners.
	body := []byte(`{"id":1}`)
	// postFresh posts a new delivery on a connection of its own. The old
	// server of a reload closes the connections it accepted as it shuts
	// down, so one of those may end without an answer: that is retried,
	// under the same delivery ID.
	postFresh := func() (int, http.Header, []byte) {
		id := randomID("msg_")
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		var status int
		var header http.Header
		var got []byte
		waitFor(t, "an answer on a new connection", func() bool {
			req, err := http.NewRequest(http.MethodPost, g.URL+"/", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = signer(t, "standard", devSecret).Sign(id, time.Now(), body)
			resp, err := client.Do(req)
			if err != nil {
				return false // EOF from a server shutting down: again
			}
			defer func() { _ = resp.Body.Close() }()
			got, _ = io.ReadAll(resp.Body)
			status, header = resp.StatusCode, resp.Header
			return true
		})
		return status, header, got
	}
	if st, _, got := postFresh(); st != http.StatusOK {
		t.Fatalf("the first gateway after the refusals: %d %s", st, got)
	}
	caddyfile, err := os.ReadFile(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	reload(t, g, strings.Replace(string(caddyfile), "webhook_dedupe {", "header X-Reloaded load\n\twebhook_dedupe {", 1))
	if st, h, got := postFresh(); st != http.StatusOK || h.Get("X-Reloaded") != "load" {
		t.Fatalf("after POST /load: %d %v %s; want 200 with X-Reloaded: load", st, h, got)
	}
	next := strings.Replace(string(caddyfile), "webhook_dedupe {", "header X-Reloaded cli\n\twebhook_dedupe {", 1)
	if err := os.WriteFile(g.Config, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "reload", "--config", g.Config, "--adapter", "caddyfile", "--address", strings.TrimPrefix(g.Admin, "http://")).CombinedOutput(); err != nil {
		t.Fatalf("hookgate reload: %v\n%s", err, out)
	}
	if st, h, got := postFresh(); st != http.StatusOK || h.Get("X-Reloaded") != "cli" {
		t.Fatalf("after hookgate reload: %d %v %s; want 200 with X-Reloaded: cli", st, h, got)
	}
	if strings.Contains(g.logs.String(), "SO_REUSEPORT") {
		t.Errorf("the first gateway refused an address of its own:\n%s", g.logs)
	}
}
