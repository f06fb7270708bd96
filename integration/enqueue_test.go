package integration

// The enqueue doors (issue 17): webhook_enqueue and the admin API's
// enqueue refuse what is not a valid event, say the truth when the store
// hangs, and the admin API keeps serving the running config after a
// refused reload.

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitCount waits until up has received n requests, then a little more
// to see that no more come.
func waitCount(t *testing.T, up *upstream, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for up.count() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if got := up.count(); got != n {
		t.Fatalf("the destination received %d requests, want %d", got, n)
	}
}

// TestAdminAPIFollowsTheRunningConfig: a reload that Caddy refuses (a
// webhook_enqueue naming a destination that is not configured) leaves the
// old config running; the admin API, the CLI and the admin enqueue
// (reconcile's repairs) keep working on it.
func TestAdminAPIFollowsTheRunningConfig(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, "route /events {\n\t\twebhook_enqueue enrollment\n\t}", gatewayOptions{Global: senderGlobal(storeOf(global), "http://"+up.Addr(), "")})
		running, err := os.ReadFile(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		refused := filepath.Join(t.TempDir(), "Caddyfile")
		bad := strings.Replace(string(running), "webhook_enqueue enrollment", "webhook_enqueue nowhere", 1)
		if err := os.WriteFile(refused, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "reload", "--config", refused, "--adapter", "caddyfile",
			"--address", strings.TrimPrefix(g.Admin, "http://"), "--force").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "nowhere") || !strings.Contains(string(out), "is not configured") {
			t.Fatalf("the reload with an unknown destination: %v\n%s", err, out)
		}

		// Caddy stops the previous admin server in the background: a
		// request may meet it as it closes.
		var resp *http.Response
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err = http.Get(g.Admin + "/hookgate/destinations"); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Destinations []struct{ Name string }
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || len(list.Destinations) != 1 || list.Destinations[0].Name != "enrollment" {
			t.Fatalf("GET /hookgate/destinations after the refused reload: %s %+v %v; want 200 with enrollment", resp.Status, list, err)
		}
		if out, err := cli(t, g, "destinations", "list"); err != nil || !strings.Contains(out, "enrollment") {
			t.Fatalf("hookgate destinations list after the refused reload: %v\n%s", err, out)
		}
		st, _, got := post(t, g.Admin+"/hookgate/destinations/enrollment/enqueue", http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"id":"repair-1","event_type":"reservation.confirmed","payload":{"key":"r-1"}}`))
		if st != 202 {
			t.Fatalf("admin enqueue after the refused reload: %d %s; want 202", st, got)
		}
		if st, _, got := post(t, g.URL+"/events", http.Header{"Idempotency-Key": {"evt-1"}}, []byte(`{"n":1}`)); st != 202 {
			t.Fatalf("webhook_enqueue after the refused reload: %d %s; want 202", st, got)
		}
		waitCount(t, up, 2)
		if rs := up.received(); rs[0].Header.Get("Webhook-Id") != "repair-1" && rs[1].Header.Get("Webhook-Id") != "repair-1" {
			t.Errorf("repair-1 was not delivered")
		}

		// A good reload after it: the admin API serves the new config.
		if out, err := exec.Command(binary, "reload", "--config", g.Config, "--adapter", "caddyfile",
			"--address", strings.TrimPrefix(g.Admin, "http://"), "--force").CombinedOutput(); err != nil {
			t.Fatalf("a good reload: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "destinations", "list"); err != nil || !strings.Contains(out, "enrollment") {
			t.Fatalf("hookgate destinations list after a good reload: %v\n%s", err, out)
		}
	})
}
