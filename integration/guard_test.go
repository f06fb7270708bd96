package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGuardThroughTheBinary runs destinations with the SSRF guard on in
// the built binary: a guarded destination whose host is, or resolves to,
// a refused address fails the config, naming the rule; with
// allow_networks opening 127.0.0.0/8 a destination on localhost is
// delivered, while one aimed at the gateway's own listener is
// dead-lettered at its first attempt, a permanent request failure naming
// the rule, and its request never sent.
func TestGuardThroughTheBinary(t *testing.T) {
	up := newUpstream(t, nil)
	upPort := strings.TrimPrefix(up.Addr(), "127.0.0.1:")
	enqueue := func(g *gateway, path, id string) {
		t.Helper()
		if st, _, got := post(t, g.URL+path, http.Header{"Idempotency-Key": {id}}, []byte(`{"type":"seat.released"}`)); st != 202 {
			t.Fatalf("enqueue %s: %d %s", path, st, got)
		}
	}
	// dead waits for id to be dead-lettered, and returns dlq show's JSON.
	dead := func(g *gateway, id string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, err := cli(t, g, "dlq", "show", id, "--format", "json")
			if err == nil {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not dead-lettered: %s\n%s", id, out, g.logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	site := `
	handle /inside {
		webhook_enqueue inside
	}
	handle /self {
		webhook_enqueue self
	}`
	port := freePort(t)
	global := func(allow string) string {
		return fmt.Sprintf(`hookgate {
		%s
		sender {
			attempts 3
			backoff 10ms 10ms
		}
		destination inside {
			url http://localhost:%s/hooks
			secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
			guard on
		}
		destination self {
			url http://127.0.0.1:%d/loop
			secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
			guard on
		}
	}`, allow, upPort, port)
	}

	g := startGateway(t, site, gatewayOptions{Global: global("allow_networks 127.0.0.0/8"), Port: port})
	enqueue(g, "/inside", "g-2")
	deadline := time.Now().Add(20 * time.Second)
	for up.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := up.count(); n != 1 {
		t.Fatalf("allow_networks 127.0.0.0/8: the receiver got %d requests, want 1", n)
	}
	enqueue(g, "/self", "g-3")
	if out := dead(g, "g-3"); !strings.Contains(out, "the gateway's own listener: the SSRF guard refuses it") || !strings.Contains(out, `"class": "request"`) {
		t.Fatalf("a guarded destination at the gateway's own listener: %s", out)
	}

	// A guarded destination whose URL is, or resolves to, a refused
	// address fails the config, naming the rule.
	for url, want := range map[string]string{
		"http://169.254.169.254/latest/meta-data/": `url: 169.254.169.254 is a metadata address`,
		"http://localhost:" + upPort + "/hooks":    `, a loopback address: the SSRF guard refuses it`,
	} {
		out, err := validate(t, fmt.Sprintf(`{
	hookgate {
		destination meta {
			url %s
			secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
			guard on
		}
	}
}
:0 {
	webhook_enqueue meta
}
`, url))
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("hookgate validate of a guarded %s: %v\n%s", url, err, out)
		}
	}
}
