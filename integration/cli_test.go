package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
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

// TestStartupLogNamesTheStore: at start, one line says which store is
// used, where, and whether it answered; with Redis down, a warning, and
// go-redis's own lines are JSON like the rest.
func TestStartupLogNamesTheStore(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	waitLog := func(g *gateway, want string) string {
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(g.logs.String(), want) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		logs := g.logs.String()
		if !strings.Contains(logs, want) {
			t.Fatalf("no %q in the log:\n%s", want, logs)
		}
		return logs
	}
	t.Run("file", func(t *testing.T) {
		g := startGateway(t, site, gatewayOptions{})
		logs := waitLog(g, `"msg":"store: the embedded file"`)
		if !strings.Contains(logs, `"path":"`+g.DataDir+`/caddy/hookgate/state.db","answered":true`) {
			t.Errorf("the store line lacks the path:\n%s", logs)
		}
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		g := startGateway(t, site, gatewayOptions{Global: redisGlobal(srv.URL())})
		logs := waitLog(g, `"msg":"store: Redis"`)
		if !strings.Contains(logs, `"addrs":["`+srv.Addr()+`"],"answered":true`) {
			t.Errorf("the store line lacks the address:\n%s", logs)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		port := freePort(t)
		g := startGateway(t, site, gatewayOptions{Global: redisGlobal(fmt.Sprintf("redis://:pw-%d@127.0.0.1:%d", port, port))})
		body := []byte(`{}`)
		post(t, g.URL, signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body), body)
		logs := waitLog(g, "Redis does not answer at start")
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("a log line is not JSON: %s", line)
			}
		}
		if strings.Contains(logs, fmt.Sprintf("pw-%d", port)) {
			t.Errorf("the log shows the Redis password:\n%s", logs)
		}
	})
}
