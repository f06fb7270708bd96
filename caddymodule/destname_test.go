package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestDestinationNameWithABraceIsRefused: a destination whose name holds
// a brace is refused when the config loads. On Redis every key of a
// destination shares the hash tag {<name>}: a name starting with } made
// an empty tag, each key in its own Cluster slot, and every script of
// the queue failed with CROSSSLOT (issue 29, item 10).
func TestDestinationNameWithABraceIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"}billing", `destination "}billing": a name must not hold { or }`},
		{"bill}ing", `destination "bill}ing": a name must not hold { or }`},
		{"{billing", `destination "{billing": a name must not hold { or }`},
		{"billing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(map[string]any{
				"admin": map[string]any{"disabled": true},
				"apps": map[string]any{
					"hookgate": map[string]any{
						"store": map[string]any{"backend": "file", "dir": t.TempDir()},
						"destinations": []map[string]any{{"name": tc.name, "url": "http://127.0.0.1:1",
							"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
					},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var cfg caddy.Config
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			err = caddy.Validate(&cfg)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
