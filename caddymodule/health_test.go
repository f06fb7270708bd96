package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestHealthCaddyfile: webhook_health takes nothing.
func TestHealthCaddyfile(t *testing.T) {
	for in, ok := range map[string]bool{
		"webhook_health":             true,
		"webhook_health now":         false,
		"webhook_health {\n\tx\n}":   false,
		"webhook_health {\n\tx 1\n}": false,
	} {
		err := new(Health).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
		if (err == nil) != ok {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestHealthRunning: a running config answers with the parts it uses:
// the store and the sender when it has a destination, neither when no
// handler uses the store and no destination is configured.
func TestHealthRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		app  map[string]any
		site []map[string]any // the handlers before webhook_health's route
		want string
	}{
		{"nothing used", map[string]any{}, nil, `{"status":"ok","store":"off","sender":"off"}`},
		{"store and sender", map[string]any{
			"store":        map[string]any{"backend": "file", "dir": t.TempDir()},
			"destinations": []map[string]any{{"name": "billing", "url": "http://127.0.0.1:1", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		}, nil, `{"status":"ok","store":"ok","sender":"ok"}`},
		{"store only", map[string]any{"store": map[string]any{"backend": "file", "dir": t.TempDir()}},
			[]map[string]any{{"match": []map[string]any{{"path": []string{"/hooks"}}}, "handle": []map[string]any{{"handler": "webhook_dedupe"}}}},
			`{"status":"ok","store":"ok","sender":"off"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			_ = l.Close()
			routes := append(tc.site, map[string]any{"match": []map[string]any{{"path": []string{"/healthz"}}}, "handle": []map[string]any{{"handler": "webhook_health"}}})
			cfg, err := json.Marshal(map[string]any{
				"admin": map[string]any{"disabled": true},
				"apps": map[string]any{
					"hookgate": tc.app,
					"http":     map[string]any{"servers": map[string]any{"s": map[string]any{"listen": []string{addr}, "routes": routes}}},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := caddy.Load(cfg, true); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = caddy.Stop() }()
			resp, err := http.Get(fmt.Sprintf("http://%s/healthz", addr))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != tc.want {
				t.Errorf("%d %s, want 200 %s", resp.StatusCode, body, tc.want)
			}
		})
	}
}
