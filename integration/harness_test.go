// Package integration holds hookgate's end-to-end tests: the built hookgate
// binary, real upstreams, and (for the store tests) real Redis servers.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// binary is the hookgate binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookgate-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hookgate")
	build := exec.Command("go", "build", "-o", binary, "../cmd/hookgate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building hookgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
var freePort = redistest.FreePort

// gateway is one running hookgate process.
type gateway struct {
	t       testing.TB
	URL     string // the site, http://127.0.0.1:<port>
	Admin   string // the admin endpoint, http://127.0.0.1:<port>
	DataDir string
	Config  string // the Caddyfile's path
	cmd     *exec.Cmd
	logs    *syncBuffer
	done    chan struct{}
}

// gatewayOptions tune startGateway.
type gatewayOptions struct {
	// Global is extra global options, e.g. a hookgate block.
	Global string
	// DataDir is the XDG data home; a fresh temp dir when empty. Reuse it to
	// restart on the same embedded store.
	DataDir string
	// Port is the site port; a free one when zero.
	Port int
	// Env is added to the process environment.
	Env []string
}

// startGateway runs hookgate with a Caddyfile whose site block is site,
// served on a free loopback port, and waits until it serves.
func startGateway(t testing.TB, site string, opts gatewayOptions) *gateway {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Port == 0 {
		opts.Port = freePort(t)
	}
	adminPort := freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	%s
}

http://127.0.0.1:%d {
	%s
}
`, adminPort, opts.Global, opts.Port, site)
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gateway{
		t:       t,
		URL:     fmt.Sprintf("http://127.0.0.1:%d", opts.Port),
		Admin:   fmt.Sprintf("http://127.0.0.1:%d", adminPort),
		DataDir: opts.DataDir,
		Config:  path,
		logs:    new(syncBuffer),
		done:    make(chan struct{}),
	}
	g.cmd = exec.Command(binary, "run", "--config", path, "--adapter", "caddyfile")
	g.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+opts.DataDir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	g.cmd.Env = append(g.cmd.Env, opts.Env...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			t.Logf("hookgate logs:\n%s", g.logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(g.Admin + "/config/")
		if err == nil {
			_ = resp.Body.Close()
			if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port)); err == nil {
				_ = conn.Close()
				return g
			}
		}
		select {
		case <-g.done:
			t.Fatalf("hookgate exited at start:\n%s", g.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookgate did not start in 20s:\n%s", g.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the gateway gracefully.
func (g *gateway) Stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// Kill kills the gateway with SIGKILL: no cleanup runs.
func (g *gateway) Kill() {
	_ = g.cmd.Process.Kill()
	<-g.done
}

// Metrics returns the admin endpoint's /metrics text.
func (g *gateway) Metrics() string {
	g.t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for a process's stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recorded is one request an upstream received.
type recorded struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// upstream is a real HTTP server standing in for the webhook receiver: it
// records every request and answers with what handle says.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	handle   func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newUpstream(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *upstream {
	t.Helper()
	u := &upstream{handle: handle}
	if u.handle == nil {
		u.handle = func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprintf(w, `{"enrolled":true,"n":%d}`, u.count())
		}
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.requests = append(u.requests, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
		handle := u.handle
		u.mu.Unlock()
		handle(w, r, body)
	}))
	t.Cleanup(u.Close)
	return u
}

// Addr is the upstream's host:port for reverse_proxy.
func (u *upstream) Addr() string { return strings.TrimPrefix(u.URL, "http://") }

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

func (u *upstream) received() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.requests...)
}

// post sends body with headers to url and returns the status, headers and body.
func post(t testing.TB, url string, h http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	return send(t, http.MethodPost, url, h, body)
}

// send sends a request of method with headers and body to url, and
// returns the status, headers and body.
func send(t testing.TB, method, url string, h http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// destDepth is a destination's depth, as the admin API says it.
type destDepth struct {
	Queued, Leased, Paused, Dead, Corrupt, Waiting, Held int
}

// destination is a destination as GET /hookgate/destinations says it.
type destination struct {
	Name    string
	State   string // active, paused or orphaned
	Depth   destDepth
	Headers map[string]string
}

// destinationOf is destination name, as GET /hookgate/destinations says it.
func destinationOf(t *testing.T, g *gateway, name string) destination {
	t.Helper()
	resp, err := http.Get(g.Admin + "/hookgate/destinations")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct{ Destinations []destination }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("GET /hookgate/destinations: %s: %v", resp.Status, err)
	}
	for _, d := range list.Destinations {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("GET /hookgate/destinations: no %s in %+v", name, list)
	return destination{}
}

// destinationStatus is destination name's state (active, paused or
// orphaned) and depth, as GET /hookgate/destinations says them.
func destinationStatus(t *testing.T, g *gateway, name string) (string, destDepth) {
	t.Helper()
	d := destinationOf(t, g, name)
	return d.State, d.Depth
}

// validate runs hookgate validate on caddyfile, in a fresh data
// directory: whether the config loads, and what it printed.
func validate(t *testing.T, caddyfile string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "--config", cfg, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
