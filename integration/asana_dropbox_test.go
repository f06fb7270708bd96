package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

// TestDropbox: Dropbox's verification request is answered by the gateway
// (the challenge echoed as plain text, nosniff) and never forwarded; a
// signed notification is forwarded once, its duplicate replayed; a
// forged one is refused.
func TestDropbox(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	handle /dropbox {
		webhook_verify dropbox {
			secret dropbox-app-secret
		}
		webhook_dedupe
		reverse_proxy %s
	}`, up.Addr()), gatewayOptions{})

	status, h, got := send(t, http.MethodGet, g.URL+"/dropbox?challenge=abc123", nil, nil)
	if status != 200 || string(got) != "abc123" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("challenge: %d %q %v, want 200 abc123 as text/plain, nosniff", status, got, h)
	}
	status, h, got = send(t, http.MethodGet, g.URL+"/dropbox?challenge=%3Cscript%3E", nil, nil)
	if status != 400 || problemBody(t, status, h, got) != problem.MissingHeader.Code || strings.Contains(string(got), "script") {
		t.Errorf("a challenge outside the token characters: %d %s, want 400 missing_header, not echoed", status, got)
	}
	if n := up.count(); n != 0 {
		t.Fatalf("the upstream got %d requests from the challenges, want 0", n)
	}

	body := []byte(`{"list_folder": {"accounts": ["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]}, "delta": {"users": [12345678]}}`)
	signed := signer(t, "dropbox", "dropbox-app-secret").Sign("", time.Now(), body)
	for i, wantReplay := range []string{"", "true"} {
		status, h, got := post(t, g.URL+"/dropbox", signed, body)
		if status != 200 || h.Get("Idempotent-Replayed") != wantReplay {
			t.Errorf("copy %d: %d %s, Idempotent-Replayed %q; want 200, %q", i+1, status, got, h.Get("Idempotent-Replayed"), wantReplay)
		}
	}
	forged := signer(t, "dropbox", "a guess").Sign("", time.Now(), body)
	if status, _, _ := post(t, g.URL+"/dropbox", forged, body); status != 401 {
		t.Errorf("forged: %d, want 401", status)
	}
	if n := up.count(); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
	if m := g.Metrics(); !strings.Contains(m, `hookgate_verify_requests_total{result="handshake",scheme="dropbox"} 1`) {
		t.Errorf("the challenge is not counted as a handshake:\n%s", grepLines(m, "hookgate_verify"))
	}
}

// The X-Hook-Secret of Asana's own handshake example, and another.
const (
	asanaSecret = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"
	asanaOther  = "0f8e4ad8b5c1d8f0c9a1e6b2a7d3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5"
)

// TestAsana, on each store: the webhook's handshake stores its secret
// (echoed, never forwarded); a second handshake with another secret is
// 409 handshake_refused, the same one 200; a delivery signed with the
// learned secret is forwarded once, a forged one refused; the secret
// survives a restart on the same store; on Redis, a second instance
// verifies with it and cannot store another; and it appears in no log
// line, debug and the filtered access log included.
func TestAsana(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		// The access log, filtered as docs/providers.md says: it would
		// print the handshake's header and its echo.
		site := fmt.Sprintf(`
	log {
		format filter {
			request>headers>X-Hook-Secret delete
			resp_headers>X-Hook-Secret delete
		}
	}
	handle /asana/* {
		webhook_verify asana
		webhook_dedupe
		reverse_proxy %s
	}`, up.Addr())
		opts := gatewayOptions{Global: "debug\n\t" + global}
		g := startGateway(t, site, opts)
		opts.DataDir = g.DataDir

		handshake := func(g *gateway, path, secret string) (int, http.Header, []byte) {
			t.Helper()
			return post(t, g.URL+path, http.Header{"X-Hook-Secret": {secret}}, nil)
		}
		status, h, got := handshake(g, "/asana/tasks", asanaSecret)
		if status != 200 || h.Get("X-Hook-Secret") != asanaSecret {
			t.Fatalf("handshake: %d %s, X-Hook-Secret %q; want 200 with the secret echoed", status, got, h.Get("X-Hook-Secret"))
		}
		status, h, got = handshake(g, "/asana/tasks", asanaOther)
		if status != 409 || problemBody(t, status, h, got) != problem.HandshakeRefused.Code || h.Get("X-Hook-Secret") != "" {
			t.Errorf("a second handshake, another secret: %d %s, want 409 %s, nothing echoed", status, got, problem.HandshakeRefused.Code)
		}
		if status, h, _ := handshake(g, "/asana/tasks", asanaSecret); status != 200 || h.Get("X-Hook-Secret") != asanaSecret {
			t.Errorf("the same handshake again (a retry): %d, want 200", status)
		}
		if n := up.count(); n != 0 {
			t.Fatalf("the upstream got %d requests from the handshakes, want 0", n)
		}

		deliver := func(g *gateway, secret, body string) (int, http.Header) {
			t.Helper()
			signed := signer(t, "asana", secret).Sign("", time.Now(), []byte(body))
			status, h, _ := post(t, g.URL+"/asana/tasks", signed, []byte(body))
			return status, h
		}
		const body = `{"events":[{"action":"changed","resource":{"gid":"1337","resource_type":"task"}}]}`
		if status, h := deliver(g, asanaSecret, body); status != 200 || h.Get("Idempotent-Replayed") != "" {
			t.Errorf("a delivery under the learned secret: %d, want 200 forwarded", status)
		}
		if status, h := deliver(g, asanaSecret, body); status != 200 || h.Get("Idempotent-Replayed") != "true" {
			t.Errorf("its duplicate: %d, want 200 replayed", status)
		}
		if status, _ := deliver(g, asanaOther, body); status != 401 {
			t.Errorf("forged under another secret: %d, want 401", status)
		}
		if status, _, _ := post(t, g.URL+"/asana/other", signer(t, "asana", asanaSecret).Sign("", time.Now(), []byte(body)), []byte(body)); status != 401 {
			t.Errorf("the learned secret on another path: %d, want 401", status)
		}
		// Another spelling of the same route (Caddy's path matcher takes
		// any case, // and dot segments) is the same endpoint: it cannot
		// learn a secret of its own, nor take a forged delivery.
		for _, variant := range []string{"/ASANA/tasks", "//asana/tasks", "/asana/./tasks", "/x/../asana/tasks"} {
			if status, h, got := handshake(g, variant, asanaOther); status != 409 {
				t.Errorf("an attacker's handshake at %s: %d %s, want 409", variant, status, got)
			} else if problemBody(t, status, h, got) != problem.HandshakeRefused.Code {
				t.Errorf("an attacker's handshake at %s: %s", variant, got)
			}
			signed := signer(t, "asana", asanaOther).Sign("", time.Now(), []byte(body))
			if status, _, _ := post(t, g.URL+variant, signed, []byte(body)); status != 401 {
				t.Errorf("a delivery forged under the attacker's secret at %s: %d, want 401", variant, status)
			}
		}
		if n := up.count(); n != 1 {
			t.Errorf("the upstream got %d requests, want 1", n)
		}

		// A restart on the same store: the secret is still the endpoint's.
		logs := g.logs.String()
		g.Stop()
		g = startGateway(t, site, opts)
		const later = `{"events":[{"action":"added","resource":{"gid":"1338","resource_type":"task"}}]}`
		if status, _ := deliver(g, asanaSecret, later); status != 200 {
			t.Errorf("after a restart, a delivery under the learned secret: %d, want 200", status)
		}
		if status, _, _ := handshake(g, "/asana/tasks", asanaOther); status != 409 {
			t.Errorf("after a restart, another secret's handshake: %d, want 409", status)
		}
		if global != "" {
			// A second instance on the same Redis: same secret, same answers.
			g2 := startGateway(t, site, gatewayOptions{Global: opts.Global})
			if status, _, _ := handshake(g2, "/asana/tasks", asanaOther); status != 409 {
				t.Errorf("another instance, another secret's handshake: %d, want 409", status)
			}
			if status, _ := deliver(g2, asanaSecret, `{"events":[{"action":"removed"}]}`); status != 200 {
				t.Errorf("another instance, a delivery under the learned secret: %d, want 200", status)
			}
			logs += g2.logs.String()
		}
		if n := up.count(); n < 2 {
			t.Errorf("the upstream got %d requests, want the deliveries after the restart", n)
		}
		logs += g.logs.String()
		if !strings.Contains(logs, "webhook rejected") || !strings.Contains(logs, "handled request") {
			t.Errorf("no debug or access log line in the logs: the check below would prove nothing")
		}
		for _, secret := range []string{asanaSecret, asanaOther} {
			if strings.Contains(logs, secret) {
				t.Errorf("the logs hold a handshake's secret:\n%s", grepLines(logs, secret))
			}
		}
		if m := g.Metrics(); strings.Contains(m, asanaSecret) || strings.Contains(m, asanaOther) {
			t.Error("the metrics hold a handshake's secret")
		}
	})
}
