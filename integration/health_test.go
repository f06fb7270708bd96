package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestHealthRedisOutage runs webhook_health on a Redis store with a
// sender: 200 while Redis answers; 503 naming the store, within the
// probe's second, once Redis stops; 200 again once Redis is back,
// without a restart. Each answer is probed for: none is cached.
func TestHealthRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		store redis %s
		key_prefix %s
		destination receiver {
			url http://%s/
			secret %s
		}
	}`, srv.URL(), redistest.Prefix("it"), up.Addr(), devSecret)
	site := `handle /healthz {
		webhook_health
	}
	handle {` + dedupeSite(up.Addr(), "") + `
	}`
	g := startGateway(t, site, gatewayOptions{Global: global})
	health := func() (int, string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := http.Get(g.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
			t.Errorf("Content-Type %q, Cache-Control %q; want application/json, no-store", ct, cc)
		}
		return resp.StatusCode, strings.TrimSpace(string(body)), time.Since(start)
	}
	const ready = `{"status":"ok","store":"ok","sender":"ok"}`
	if st, body, _ := health(); st != 200 || body != ready {
		t.Fatalf("Redis up: %d %s; want 200 %s", st, body, ready)
	}

	srv.Stop()
	const down = `{"status":"unavailable","store":"unavailable","sender":"ok"}`
	for i := range 3 { // each answer probes: the first after the outage shows it
		st, body, took := health()
		if st != 503 || body != down {
			t.Fatalf("Redis stopped, check %d: %d %s; want 503 %s", i, st, body, down)
		}
		if took > 3*time.Second { // the probe's 1s, and a busy machine's slack
			t.Errorf("Redis stopped, check %d: answered in %s; the probe waits at most a second", i, took)
		}
	}

	srv.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, body, _ := health()
		if st == 200 && body == ready {
			break
		}
		if st != 503 || time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %d %s; want 200 %s within 15s", st, body, ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The process's log reaches us through a pipe, shortly after.
	logs := g.logs.String()
	for end := time.Now().Add(5 * time.Second); !strings.Contains(logs, "readiness: store works again"); logs = g.logs.String() {
		if time.Now().After(end) {
			t.Fatalf("the store's recovery not logged:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logs, "readiness: store unavailable"); n != 1 {
		t.Errorf("the store's failure logged %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, devSecret) {
		t.Error("the logs hold the secret")
	}
}
