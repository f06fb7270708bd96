package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestSubdirectiveGivenTwice: every block refuses a subdirective given
// twice, naming it, and the block when nested; only the repeatable ones
// repeat.
func TestSubdirectiveGivenTwice(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tt := range []struct{ caddyfile, want string }{
		{":80 {\n webhook_dedupe {\n  lease 1s\n  lease 2s\n }\n}", "lease given twice, at Caddyfile:4"},
		{"{\n hookgate {\n  store redis redis://h {\n   sentinel_master a\n   sentinel_master b\n  }\n }\n}\n:80", "store: sentinel_master given twice, at Caddyfile:5"},
		{"{\n hookgate {\n  sender {\n   breaker {\n    open 1s\n    open 2s\n   }\n  }\n }\n}\n:80", "breaker: open given twice, at Caddyfile:6"},
		{"{\n hookgate {\n  reconcile j {\n   grace 1m\n   grace 2m\n  }\n }\n}\n:80", "reconcile: grace given twice, at Caddyfile:5"},
		{"{\n hookgate {\n  reconcile j {\n   repair {\n    destination a\n    destination b\n   }\n  }\n }\n}\n:80", "repair: destination given twice, at Caddyfile:6"},
		{"{\n hookgate {\n  key_prefix a\n }\n hookgate {\n  key_prefix b\n }\n}\n:80", "key_prefix given twice, at Caddyfile:6"},
		{"{\n hookgate {\n  destination d {\n   url http://x\n   url http://y\n  }\n }\n}\n:80", "destination: url given twice, at Caddyfile:5"},
		{":80 {\n webhook_verify hmac {\n  hmac {\n   prefix a\n   prefix b\n  }\n }\n}", "hmac: prefix given twice, at Caddyfile:5"},
	} {
		_, _, err := adapter.Adapt([]byte(tt.caddyfile), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("adapting\n%s\n: %v; want %q", tt.caddyfile, err, tt.want)
		}
	}
	// The repeatable ones.
	for _, in := range []string{
		":80 {\n webhook_verify {\n  secret a\n  secret b\n }\n}",
		"{\n hookgate {\n  reconcile j {\n   truth http http://x {\n    header A b\n    header C d\n   }\n   receiver postgres x y\n   expect a b\n   expect c none\n  }\n }\n}\n:80",
	} {
		if _, _, err := adapter.Adapt([]byte(in), map[string]any{"filename": "Caddyfile"}); err != nil {
			t.Errorf("adapting\n%s\n: %v", in, err)
		}
	}
}

// TestMinReplicasCaddyfile adapts min_replicas, with and without its
// timeout, and refuses what it cannot be.
func TestMinReplicasCaddyfile(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	store := func(backend, lines string) string {
		return "{\n hookgate {\n  store " + backend + " {\n   " + lines + "\n  }\n }\n}\n:80"
	}
	for _, tt := range []struct{ lines, want string }{
		{"min_replicas 1", `"store":{"backend":"redis","urls":["redis://h"],"min_replicas":1}`},
		{"min_replicas 2 250ms", `"store":{"backend":"redis","urls":["redis://h"],"min_replicas":2,"replica_timeout":250000000}`},
		{"min_replicas 0", `"store":{"backend":"redis","urls":["redis://h"]}`},
	} {
		out, _, err := adapter.Adapt([]byte(store("redis redis://h", tt.lines)), map[string]any{"filename": "Caddyfile"})
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %s, %v; want %s", tt.lines, out, err, tt.want)
		}
	}
	for _, tt := range []struct{ backend, lines, want string }{
		{"redis redis://h", "min_replicas", "min_replicas <n> [<timeout>]"},
		{"redis redis://h", "min_replicas 1 2s 3", "min_replicas <n> [<timeout>]"},
		{"redis redis://h", "min_replicas -1", `want a number of replicas, 0 or more, got "-1"`},
		{"redis redis://h", "min_replicas one", `got "one"`},
		{"redis redis://h", "min_replicas 1 0s", `min_replicas: want a positive duration, got "0s"`},
		{"redis redis://h", "min_replicas 1 1500ms", `min_replicas: a timeout of at most 1s, got "1500ms"`},
		{"file", "min_replicas 1", "min_replicas is a Redis store's"},
	} {
		_, _, err := adapter.Adapt([]byte(store(tt.backend, tt.lines)), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("store %s { %s }: %v; want %q", tt.backend, tt.lines, err, tt.want)
		}
	}
}

// TestOrderingCaddyfile adapts a destination's ordering and on_dead, and
// refuses what they cannot be, naming the destination.
func TestOrderingCaddyfile(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	dest := func(lines string) string {
		return "{\n hookgate {\n  destination ledger {\n   url http://127.0.0.1:1\n   secret s\n   " + lines + "\n  }\n }\n}\n:80"
	}
	for _, tt := range []struct{ lines, want string }{
		{"ordering entity", `"ordering":"entity"`},
		{"ordering entity\n on_dead hold", `"ordering":"entity","on_dead":"hold"`},
		{"ordering none", `"ordering":"none"`},
	} {
		out, _, err := adapter.Adapt([]byte(dest(tt.lines)), map[string]any{"filename": "Caddyfile"})
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %s, %v; want %s", tt.lines, out, err, tt.want)
		}
	}
	for _, tt := range []struct{ lines, want string }{
		{"ordering fifo", `destination ledger: ordering "fifo": want none or entity`},
		{"ordering entity\n on_dead retry", `destination ledger: on_dead "retry": want skip or hold`},
		{"on_dead hold", "destination ledger: on_dead hold needs ordering entity"},
		{"ordering", "ordering"},
	} {
		_, _, err := adapter.Adapt([]byte(dest(tt.lines)), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want %q", tt.lines, err, tt.want)
		}
	}
}

// TestHMACSignatureListCaddyfile adapts the hmac block's separator and
// timestamp_field, and a catalogue provider's name as the scheme.
func TestHMACSignatureListCaddyfile(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tt := range []struct{ in, want string }{
		{":80 {\n webhook_verify hmac {\n  secret s\n  hmac {\n   signature_header Paddle-Signature\n   separator ;\n   timestamp_field ts\n   prefix h1=\n   content {timestamp}:{body}\n  }\n }\n}",
			`"hmac":{"content":"{timestamp}:{body}","prefix":"h1=","separator":";","signature_header":"Paddle-Signature","timestamp_field":"ts"}`},
		{":80 {\n webhook_verify pagerduty {\n  secret s\n }\n}", `"scheme":"pagerduty"`},
	} {
		out, _, err := adapter.Adapt([]byte(tt.in), map[string]any{"filename": "Caddyfile"})
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("adapting\n%s\n: %s, %v; want %s", tt.in, out, err, tt.want)
		}
	}
}
