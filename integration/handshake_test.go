package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/verify"
)

// TestHandshakes answers each provider's endpoint handshake in a running
// gateway: nothing reaches the upstream, dedupe records nothing, each is
// counted as a handshake, and a genuine event sent after it is forwarded
// once.
func TestHandshakes(t *testing.T) {
	up := newUpstream(t, nil)
	secrets := map[string]string{"slack": "slack-secret", "meta": "meta-app-secret", "zoom": "zoom-secret", "twitter": "x-consumer-secret"}
	var site strings.Builder
	for scheme, secret := range secrets {
		extra := ""
		if scheme == "meta" {
			extra = "verify_token meta-verify-token"
		}
		fmt.Fprintf(&site, `
	handle /%[1]s {
		webhook_verify %[1]s {
			secret %[2]s
			%[3]s
		}
		webhook_dedupe
		reverse_proxy %[4]s
	}`, scheme, secret, extra, up.Addr())
	}
	fmt.Fprintf(&site, `
	handle /twitch {
		webhook_verify twitch {
			secret twitch-eventsub-secret
		}
		webhook_dedupe
		reverse_proxy %s
	}`, up.Addr())
	fmt.Fprintf(&site, `
	handle /okta {
		webhook_verify okta {
			secret "Basic b2t0YS1ob29r"
		}
		webhook_dedupe
		reverse_proxy %[1]s
	}
	handle /nylas {
		webhook_verify nylas {
			secret nylas-webhook-secret
		}
		webhook_dedupe
		reverse_proxy %[1]s
	}
	handle /msgraph {
		webhook_verify msgraph {
			secret secretClientValue
		}
		webhook_dedupe
		reverse_proxy %[1]s
	}`, up.Addr())
	fmt.Fprintf(&site, `
	handle /grid {
		webhook_verify {
			secret %s
			cloudevents_origins eventgrid.azure.net
			cloudevents_rate 120
		}
		webhook_dedupe
		reverse_proxy %s
	}`, devSecret, up.Addr())
	g := startGateway(t, site.String(), gatewayOptions{})
	now := time.Now()
	mac := func(key, msg string) []byte {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(msg))
		return m.Sum(nil)
	}

	t.Run("slack", func(t *testing.T) {
		body := []byte(`{"token":"t","challenge":"slack-challenge-42","type":"url_verification"}`)
		status, h, got := post(t, g.URL+"/slack", signer(t, "slack", secrets["slack"]).Sign("", now, body), body)
		if status != 200 || string(got) != "slack-challenge-42" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
			t.Errorf("answer %d %q (%s), want 200 and the challenge as text/plain", status, got, h.Get("Content-Type"))
		}
		// Unsigned, it is an ordinary request, and rejected.
		if status, _, _ := post(t, g.URL+"/slack", http.Header{}, body); status != 400 {
			t.Errorf("unsigned url_verification: %d, want 400", status)
		}
	})
	t.Run("meta", func(t *testing.T) {
		status, _, got := send(t, http.MethodGet, g.URL+"/meta?hub.mode=subscribe&hub.verify_token=meta-verify-token&hub.challenge=1158201444", nil, nil)
		if status != 200 || string(got) != "1158201444" {
			t.Errorf("answer %d %q, want 200 1158201444", status, got)
		}
		status, h, got := send(t, http.MethodGet, g.URL+"/meta?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1", nil, nil)
		if status != 403 || problemBody(t, status, h, got) != problem.BadVerifyToken.Code {
			t.Errorf("a wrong token: %d %s, want 403 %s", status, got, problem.BadVerifyToken.Code)
		}
	})
	t.Run("zoom", func(t *testing.T) {
		body := []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
		status, _, got := post(t, g.URL+"/zoom", signer(t, "zoom", secrets["zoom"]).Sign("", now, body), body)
		want := `{"encryptedToken":"` + hex.EncodeToString(mac(secrets["zoom"], "qgg8vlvZRS6UYooatFL8Aw")) + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`
		if status != 200 || string(got) != want {
			t.Errorf("answer %d %s, want 200 %s", status, got, want)
		}
		// The handshake left no dedupe record under its body key, which
		// is scoped to the secret (its fingerprint, as a request verified
		// under it shows).
		z := signer(t, "zoom", secrets["zoom"])
		d, err := z.Verify(verify.Request{Header: z.Sign("", now, body), Body: body}, now)
		if err != nil || d.SecretFingerprint == "" {
			t.Fatalf("the secret's fingerprint: %+v, %v", d, err)
		}
		key := "zoom:" + d.SecretFingerprint + ":" + fmt.Sprintf("%x", sha256.Sum256(body))
		if status, _, got := send(t, http.MethodGet, g.Admin+"/hookgate/dedupe/"+key, nil, nil); !strings.Contains(string(got), `"absent"`) {
			t.Errorf("dedupe record of the handshake: %d %s, want absent", status, got)
		}
	})
	t.Run("twitter", func(t *testing.T) {
		status, _, got := send(t, http.MethodGet, g.URL+"/twitter?crc_token=crc-token-7", nil, nil)
		want := `{"response_token":"sha256=` + base64.StdEncoding.EncodeToString(mac(secrets["twitter"], "crc-token-7")) + `"}`
		if status != 200 || string(got) != want {
			t.Errorf("answer %d %s, want 200 %s", status, got, want)
		}
		// The gateway must not sign a body of the attacker's choosing.
		status, h, got := send(t, http.MethodGet, g.URL+`/twitter?crc_token=%7B%22tweet_create_events%22%3A%5B%5D%7D`, nil, nil)
		if status != 400 || problemBody(t, status, h, got) != problem.BadCRCToken.Code || strings.Contains(string(got), "sha256=") {
			t.Errorf("a JSON body as crc_token: %d %s, want 400 %s and no signature", status, got, problem.BadCRCToken.Code)
		}
	})
	t.Run("twitch", func(t *testing.T) {
		body := []byte(`{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow","version":"2"}}`)
		h := signer(t, "twitch", "twitch-eventsub-secret").Sign("e76c6bd4-55c9-4987-8304-da1588d8988b", now, body)
		h.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
		status, rh, got := post(t, g.URL+"/twitch", h, body)
		if status != 200 || string(got) != "pogchamp-kappa-360noscope-vohiyo" || !strings.HasPrefix(rh.Get("Content-Type"), "text/plain") {
			t.Errorf("answer %d %q (%s), want 200 and the challenge as text/plain", status, got, rh.Get("Content-Type"))
		}
		// Signed under another secret, it is refused like any request.
		forged := signer(t, "twitch", "a guess").Sign("e76c6bd4-55c9-4987-8304-da1588d8988b", now, body)
		forged.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
		if status, _, got := post(t, g.URL+"/twitch", forged, body); status != 401 || strings.Contains(string(got), "pogchamp") {
			t.Errorf("a forged callback verification: %d %q, want 401 without the challenge", status, got)
		}
	})
	t.Run("okta", func(t *testing.T) {
		status, _, got := send(t, http.MethodGet, g.URL+"/okta", http.Header{"X-Okta-Verification-Challenge": {"2QcG_1n4lY3WmGfo7G3YgwSC4hZ0ZCNNk5rbTPHk"}}, nil)
		if status != 200 || string(got) != `{"verification":"2QcG_1n4lY3WmGfo7G3YgwSC4hZ0ZCNNk5rbTPHk"}` {
			t.Errorf("answer %d %s", status, got)
		}
	})
	t.Run("nylas", func(t *testing.T) {
		status, _, got := send(t, http.MethodGet, g.URL+"/nylas?challenge=bc609b38-c81f-47fb-a275-1d9bd61a968b", nil, nil)
		if status != 200 || string(got) != "bc609b38-c81f-47fb-a275-1d9bd61a968b" {
			t.Errorf("answer %d %q", status, got)
		}
	})
	t.Run("msgraph", func(t *testing.T) {
		status, h, got := send(t, http.MethodPost, g.URL+"/msgraph?validationToken=Validation%3A+Testing+client+application+reachability", http.Header{"Content-Type": {"text/plain"}}, nil)
		if status != 200 || string(got) != "Validation: Testing client application reachability" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
			t.Errorf("answer %d %q (%s)", status, got, h.Get("Content-Type"))
		}
	})
	t.Run("cloudevents", func(t *testing.T) {
		status, h, _ := send(t, http.MethodOptions, g.URL+"/grid", http.Header{"WebHook-Request-Origin": {"eventgrid.azure.net"}}, nil)
		if status != 200 || h.Get("Allow") != "POST" || h.Get("WebHook-Allowed-Origin") != "eventgrid.azure.net" || h.Get("WebHook-Allowed-Rate") != "120" {
			t.Errorf("answer %d %v", status, h)
		}
		status, h, got := send(t, http.MethodOptions, g.URL+"/grid", http.Header{"WebHook-Request-Origin": {"evil.example"}}, nil)
		if status != 403 || problemBody(t, status, h, got) != problem.OriginNotAllowed.Code {
			t.Errorf("another origin: %d %s, want 403 %s", status, got, problem.OriginNotAllowed.Code)
		}
	})

	if n := up.count(); n != 0 {
		t.Fatalf("the upstream got %d requests during the handshakes, want 0", n)
	}
	m := g.Metrics()
	if strings.Contains(m, "hookgate_dedupe_requests_total") {
		t.Errorf("dedupe saw a handshake:\n%s", grepLines(m, "hookgate_dedupe_requests_total"))
	}
	for _, want := range []string{
		`hookgate_verify_requests_total{result="handshake",scheme="slack"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="meta"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="zoom"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="twitter"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="twitch"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="okta"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="nylas"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="msgraph"} 1`,
		`hookgate_verify_requests_total{result="handshake",scheme="standard"} 1`,
		`hookgate_verify_requests_total{result="bad_verify_token",scheme="meta"} 1`,
		`hookgate_verify_requests_total{result="bad_crc_token",scheme="twitter"} 1`,
		`hookgate_verify_requests_total{result="origin_not_allowed",scheme="standard"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q; hookgate_verify lines:\n%s", want, grepLines(m, "hookgate_verify"))
		}
	}

	// A genuine event after the handshake is forwarded once, and its
	// duplicate replayed.
	secrets["twitch"] = "twitch-eventsub-secret"
	for scheme, secret := range secrets {
		body := []byte(`{"event_id":"Ev1","event":"meeting.started","type":"event_callback","object":"page"}`)
		h := signer(t, scheme, secret).Sign("ev-"+scheme, time.Now(), body)
		before := up.count()
		for i := range 2 {
			status, rh, got := post(t, g.URL+"/"+scheme, h, body)
			if status != 200 || (i == 1) != (rh.Get("Idempotent-Replayed") == "true") {
				t.Errorf("%s event, send %d: %d %s, Idempotent-Replayed %q", scheme, i+1, status, got, rh.Get("Idempotent-Replayed"))
			}
		}
		if n := up.count() - before; n != 1 {
			t.Errorf("%s: the upstream got the event %d times, want 1", scheme, n)
		}
	}

	// A Graph notification carries the clientState: forwarded once; a
	// forged one is refused.
	body := []byte(`{"value":[{"subscriptionId":"s1","clientState":"secretClientValue","changeType":"created","resource":"users/u/messages/m"}]}`)
	before := up.count()
	if status, _, got := post(t, g.URL+"/msgraph", http.Header{}, body); status != 200 || up.count() != before+1 {
		t.Errorf("a notification: %d %s, forwarded %d times", status, got, up.count()-before)
	}
	forged := []byte(`{"value":[{"subscriptionId":"s1","clientState":"guess","changeType":"created","resource":"users/u/messages/m"}]}`)
	if status, _, _ := post(t, g.URL+"/msgraph", http.Header{}, forged); status != 401 {
		t.Errorf("a forged notification: %d, want 401", status)
	}
}
