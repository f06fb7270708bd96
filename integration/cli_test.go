package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLIKnowsItsName: version and help name hookgate, not caddy.
func TestCLIKnowsItsName(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hookgate ") || !strings.Contains(string(out), "Caddy v2.") {
		t.Errorf("hookgate version: %v\n%s", err, out)
	}
	out, _ = exec.Command(binary, "help", "sign").CombinedOutput()
	if !strings.Contains(string(out), "hookgate sign [--scheme") || strings.Contains(string(out), "caddy sign") {
		t.Errorf("hookgate help sign:\n%s", out)
	}
	out, _ = exec.Command(binary, "--help").CombinedOutput()
	if !strings.HasPrefix(string(out), "hookgate is a webhook reliability layer") || !strings.Contains(string(out), "hookgate dlq") {
		t.Errorf("hookgate --help:\n%s", out)
	}
}

// TestSignSendHeaders: sign --send adds -H headers and the content type.
func TestSignSendHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	cmd := exec.Command(binary, "sign", "--secret", devSecret, "--id", "msg_cli",
		"--send", up.URL, "-H", "X-Tenant: t-1", "-H", "X-Trace: a:b", "--content-type", "text/plain", "hello")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK") {
		t.Fatalf("sign --send: %v\n%s", err, out)
	}
	rs := up.received()
	if len(rs) != 1 {
		t.Fatalf("upstream got %d requests", len(rs))
	}
	h := rs[0].Header
	if h.Get("X-Tenant") != "t-1" || h.Get("X-Trace") != "a:b" || h.Get("Content-Type") != "text/plain" || h.Get("Webhook-Id") != "msg_cli" {
		t.Errorf("headers sent: %v", h)
	}
	if _, err := signer(t, "standard", devSecret).Verify(h, rs[0].Body, time.Now()); err != nil {
		t.Errorf("the request does not verify: %v", err)
	}
	out, err := exec.Command(binary, "sign", "--secret", devSecret, "--send", up.URL, "-H", "no-colon", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "want 'Name: value'") {
		t.Errorf("a bad -H: %v\n%s", err, out)
	}
}
