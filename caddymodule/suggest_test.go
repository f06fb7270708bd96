package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestUnknownSubdirectiveSuggests: a mistyped subdirective of each block
// names the one meant; one like none of them lists them.
func TestUnknownSubdirectiveSuggests(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tt := range []struct{ caddyfile, want string }{
		{":80 {\n webhook_verify {\n  secrets s\n }\n}", `unknown webhook_verify subdirective "secrets"; did you mean "secret"?`},
		{":80 {\n webhook_verify {\n  scheme standard\n  hmac {\n   signature_heder X\n  }\n }\n}", `unknown hmac subdirective "signature_heder"; did you mean "signature_header"?`},
		{":80 {\n webhook_dedupe {\n  leese 1s\n }\n}", `unknown webhook_dedupe subdirective "leese"; did you mean "lease"?`},
		{":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  maxage 1h\n }\n}", `unknown webhook_freshness subdirective "maxage"; did you mean "max_age"?`},
		{":80 {\n webhook_enqueue d {\n  entitiy e\n }\n}", `unknown webhook_enqueue subdirective "entitiy"; did you mean "entity"?`},
		{":80 {\n webhook_console {\n  max_redirve 10\n }\n}", `unknown webhook_console subdirective "max_redirve"; did you mean "max_redrive"?`},
		{"{\n hookgate {\n  stor file\n }\n}\n:80", `unknown hookgate subdirective "stor"; did you mean "store"?`},
		{"{\n hookgate {\n  store redis redis://h {\n   sentinel_mastr m\n  }\n }\n}\n:80", `unknown store subdirective "sentinel_mastr"; did you mean "sentinel_master"?`},
		{"{\n hookgate {\n  sender {\n   worker 2\n  }\n }\n}\n:80", `unknown sender subdirective "worker"; did you mean "workers"?`},
		{"{\n hookgate {\n  sender {\n   breaker {\n    half-open 1\n   }\n  }\n }\n}\n:80", `unknown breaker subdirective "half-open"; did you mean "half_open"?`},
		{"{\n hookgate {\n  destination d {\n   urls http://x\n  }\n }\n}\n:80", `unknown destination subdirective "urls"; did you mean "url"?`},
		{"{\n hookgate {\n  reconcile j {\n   grase 1m\n  }\n }\n}\n:80", `unknown reconcile subdirective "grase"; did you mean "grace"?`},
		{"{\n hookgate {\n  reconcile j {\n   truth http http://x {\n    headers A b\n   }\n  }\n }\n}\n:80", `unknown http source subdirective "headers"; did you mean "header"?`},
		{"{\n hookgate {\n  reconcile j {\n   repair {\n    limt 5\n   }\n  }\n }\n}\n:80", `unknown repair subdirective "limt"; did you mean "limit"?`},
		{":80 {\n webhook_dedupe {\n  colour red\n }\n}", `unknown webhook_dedupe subdirective "colour" (want one of key, retention, lease, in_flight, record, max_record, on_store_error, replay_cache)`},
	} {
		_, _, err := adapter.Adapt([]byte(tt.caddyfile), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("adapting\n%s\n: %v; want %q", tt.caddyfile, err, tt.want)
		}
	}
}
