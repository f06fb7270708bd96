package caddymodule

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/go-cmp/cmp"
)

// TestRunningApp: the admin API serves the newest started app; when it
// stops, the one started before it (still running after a refused load)
// is served again; an app that stops after a newer one started does not
// take it away.
func TestRunningApp(t *testing.T) {
	first, second, refused := new(App), new(App), new(App)
	for i, s := range []struct {
		do   func()
		want *App
	}{
		{func() { setRunning(first) }, first},
		{func() { setRunning(second) }, second},  // a load: the new config starts first
		{func() { unsetRunning(first) }, second}, // then the old one stops
		{func() { setRunning(refused) }, refused},
		{func() { unsetRunning(refused) }, second}, // another app failed to start: the load is refused
		{func() { unsetRunning(second) }, nil},
	} {
		s.do()
		if got := runningApp(); got != s.want {
			t.Fatalf("step %d: the running app is %p, want %p", i, got, s.want)
		}
	}
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// TestAdminFollowsTheRunningApp loads a config, then one that Caddy
// refuses: the old config keeps running, and the admin API (which Caddy
// has already replaced with the refused config's) still serves it.
func TestAdminFollowsTheRunningApp(t *testing.T) {
	admin := freeAddr(t)
	config := func(url string) []byte {
		b, err := json.Marshal(map[string]any{
			"admin": map[string]any{"listen": admin},
			"apps": map[string]any{"hookgate": map[string]any{
				"store":        map[string]any{"backend": "file", "dir": t.TempDir()},
				"destinations": []map[string]any{{"name": "billing", "url": url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := caddy.Load(config("http://127.0.0.1:1/hooks"), true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	if err := caddy.Load(config("ftp://nowhere"), true); err == nil {
		t.Fatal("a destination with an ftp:// URL was loaded")
	}
	// Caddy stops the previous admin server in the background: a request
	// may meet it as it closes.
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err = http.Get("http://" + admin + "/hookgate/destinations"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got struct {
		Destinations []struct{ Name string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /hookgate/destinations after a refused load: %s, %v", resp.Status, err)
	}
	if diff := cmp.Diff([]struct{ Name string }{{"billing"}}, got.Destinations); diff != "" {
		t.Errorf("destinations (-want +got):\n%s", diff)
	}
}
