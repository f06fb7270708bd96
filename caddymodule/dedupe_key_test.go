package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/internal/problem"
)

// TestDedupeKeyResolves: a key of one placeholder is read as the
// placeholder's value (no template parse); every key resolves as the
// replacer's ReplaceOrErr resolves it, errors included.
func TestDedupeKeyResolves(t *testing.T) {
	repl := caddy.NewReplacer()
	repl.Set("webhook.id", "msg_1")
	repl.Set("webhook.scheme", "standard")
	repl.Set("webhook.empty", "")
	repl.Set("n", 42)
	repl.Set("webhook.long", strings.Repeat("k", 1025))
	for _, tmpl := range []string{
		"", "{webhook.id}", "billing:{webhook.id}", "{webhook.scheme}:{webhook.id}", "{webhook.missing}",
		"{webhook.empty}", "{n}", "{webhook.long}", "{webhook.id}}", "{{webhook.id}", `{webhook\.id}`, "{}",
	} {
		t.Run(tmpl, func(t *testing.T) {
			key, reason, _ := (&Dedupe{Key: tmpl}).key(repl, "")
			if tmpl == "" {
				tmpl = defaultKey
			}
			want, err := repl.ReplaceOrErr(tmpl, true, true)
			var wantReason problem.Reason
			switch {
			case err != nil:
				want, wantReason = "", problem.MissingIdempotencyKey
			case len(want) > 1024:
				want, wantReason = "", problem.IdempotencyKeyTooLong
			}
			if key != want || reason != wantReason {
				t.Errorf("key(%q) = %q, %q; want %q, %q", tmpl, key, reason.Code, want, wantReason.Code)
			}
		})
	}
	if name, ok := placeholderOnly("{webhook.id}"); !ok || name != "webhook.id" {
		t.Errorf("placeholderOnly({webhook.id}) = %q, %v; want webhook.id, true", name, ok)
	}
}
