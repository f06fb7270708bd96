package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"
)

// TestRotationThroughTheBinary: a destination rotating its secret
// (previous_secret until a time) sends both signatures until then, so
// that receivers using svix's and standard-webhooks' own verifiers accept
// it under the old secret or the new one; one whose previous secret has
// expired sends the new signature only, which the old secret refuses.
func TestRotationThroughTheBinary(t *testing.T) {
	const oldSecret, newSecret = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24=", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	up := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		destination rotating {
			url http://%[1]s/rotating
			secret %[2]s
			previous_secret %[3]s %[4]s
		}
		destination rotated {
			url http://%[1]s/rotated
			secret %[2]s
			previous_secret %[3]s %[5]s
		}
	}`, up.Addr(), newSecret, oldSecret, time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	site := `
	handle /rotating {
		webhook_enqueue rotating
	}
	handle /rotated {
		webhook_enqueue rotated
	}`
	g := startGateway(t, site, gatewayOptions{Global: global})
	for _, path := range []string{"/rotating", "/rotated"} {
		if st, _, got := post(t, g.URL+path, http.Header{"Idempotency-Key": {"rot" + path[1:]}}, []byte(`{"type":"seat.released"}`)); st != 202 {
			t.Fatalf("enqueue %s: %d %s", path, st, got)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for up.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]recorded{}
	for _, r := range up.received() {
		got[r.Path] = r
	}
	if len(got) != 2 {
		t.Fatalf("the receivers got %d requests, want one each", len(got))
	}
	for path, oldOK := range map[string]bool{"/rotating": true, "/rotated": false} {
		r := got[path]
		for secret, want := range map[string]bool{newSecret: true, oldSecret: oldOK} {
			sv, _ := svix.NewWebhook(secret)
			swh, _ := standardwebhooks.NewWebhook(secret)
			for lib, err := range map[string]error{"svix": sv.Verify(r.Body, r.Header), "standard-webhooks": swh.Verify(r.Body, r.Header)} {
				if (err == nil) != want {
					t.Errorf("%s, %s's verifier under the %s secret: %v, want accepted %v (Webhook-Signature %q)",
						path, lib, map[bool]string{true: "new", false: "old"}[secret == newSecret], err, want, r.Header.Get("Webhook-Signature"))
				}
			}
		}
	}
}
