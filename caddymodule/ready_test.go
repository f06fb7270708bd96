package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestReadySenderOnly: a gateway that only sends (no webhook_dedupe) on a
// Redis out of memory under noeviction answered ready while every enqueue
// failed: readiness knew only the dedupe handlers' writes. The sender's
// queue writes now count: an enqueue refused makes /healthz 503, and once
// Redis takes writes again /healthz is 200 with no request in between.
func TestReadySenderOnly(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(upstream.Close)
	rdb, do := readyGateway(t, map[string]any{
		"key_prefix":   "readysender",
		"destinations": []map[string]any{{"name": "billing", "url": upstream.URL, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
	}, map[string]any{"match": []map[string]any{{"path": []string{"/enqueue"}}}, "handle": []map[string]any{{"handler": "webhook_enqueue", "destination": "billing"}}})
	get := func(path, id string) (int, string) {
		t.Helper()
		if id == "" {
			return do(path, "")
		}
		return do(path, `{"id":"`+id+`"}`)
	}
	if code, body := get("/enqueue", "evt_1"); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", code, body)
	}
	if code, body := get("/healthz", ""); code != 200 {
		t.Fatalf("healthz before: %d %s", code, body)
	}

	if err := rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/enqueue", "evt_2"); code != http.StatusServiceUnavailable {
		t.Fatalf("enqueue on a Redis out of memory: %d %s, want 503", code, body)
	}
	if code, body := get("/healthz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"store":"unavailable"`) {
		t.Errorf("healthz after an enqueue failed: %d %s, want 503 store unavailable", code, body)
	}

	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/healthz", ""); code != 200 {
		t.Errorf("healthz once Redis takes writes: %d %s, want 200", code, body)
	}
}

// TestReadyAfterReadOnlyAnswers: on a Redis out of memory under
// noeviction, a superseded event is answered by a script that only reads,
// which Redis runs all the same. Its success made /healthz 200 again
// while every write was still refused; it is no verdict now, and
// readiness stays 503 until a write of its own succeeds.
func TestReadyAfterReadOnlyAnswers(t *testing.T) {
	rdb, do := readyGateway(t, map[string]any{"key_prefix": "readyro"}, map[string]any{
		"match": []map[string]any{{"path": []string{"/fresh"}}}, "handle": []map[string]any{
			{"handler": "webhook_freshness", "entity": "{webhook.json.e}", "sequence": "{webhook.json.seq}"},
			{"handler": "static_response", "status_code": 200}}})
	if code, body := do("/fresh", `{"e":"a","seq":5}`); code != 200 {
		t.Fatalf("first event: %d %s", code, body)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := do("/fresh", `{"e":"b","seq":1}`); code != http.StatusServiceUnavailable {
		t.Fatalf("an event while writes are refused: %d %s, want 503", code, body)
	}
	if code, body := do("/healthz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz after a refused write: %d %s, want 503", code, body)
	}
	if code, body := do("/fresh", `{"e":"a","seq":1}`); code == http.StatusServiceUnavailable {
		t.Fatalf("a superseded event: %d %s, want it answered (the script only reads)", code, body)
	}
	if code, body := do("/healthz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("healthz after a superseded event, every write still refused: %d %s, want 503", code, body)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := do("/healthz", ""); code != 200 {
		t.Errorf("healthz once Redis takes writes: %d %s, want 200", code, body)
	}
}

// readyGateway runs a gateway whose hookgate app (hookgate, its store
// added) keeps its state in a Redis of its own under noeviction, serving
// route and webhook_health at /healthz. do sends a request, a POST of
// body when there is one, and returns the answer's status and body.
func readyGateway(t *testing.T, hookgate, route map[string]any) (rdb *redis.Client, do func(path, body string) (int, string)) {
	t.Helper()
	srv := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	rdb = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	hookgate["store"] = map[string]any{"backend": "redis", "urls": []string{srv.URL()}}
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{
			"hookgate": hookgate,
			"http": map[string]any{"servers": map[string]any{"s": map[string]any{"listen": []string{addr}, "routes": []map[string]any{
				route,
				{"match": []map[string]any{{"path": []string{"/healthz"}}}, "handle": []map[string]any{{"handler": "webhook_health"}}},
			}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	return rdb, func(path, body string) (int, string) {
		t.Helper()
		method, r := http.MethodGet, io.Reader(nil)
		if body != "" {
			method, r = http.MethodPost, strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, fmt.Sprintf("http://%s%s", addr, path), r)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(b)
	}
}
