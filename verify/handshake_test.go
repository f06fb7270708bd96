package verify

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

func TestSlackURLVerification(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "slack", []string{testSecret("slack", 0)}, Options{})
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	signed := Request{Method: http.MethodPost, Header: v.Sign("", t0, body), Body: body}

	a, ok := v.Handshake(signed, t0)
	if !ok || a.Status != http.StatusOK || a.Reason != (problem.Reason{}) {
		t.Fatalf("a signed url_verification: ok = %v, answer = %+v", ok, a)
	}
	if string(a.Body) != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" || a.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("answer = %q (%s), want the challenge as text/plain", a.Body, a.Header.Get("Content-Type"))
	}

	// Only a genuine one is answered: anyone else's goes on to Verify,
	// which rejects it.
	forged := signed
	forged.Header = mustNew(t, "slack", []string{"another"}, Options{}).Sign("", t0, body)
	if _, ok := v.Handshake(forged, t0); ok {
		t.Error("a url_verification under another secret was answered")
	}
	if _, ok := v.Handshake(signed, t0.Add(DefaultTolerance+1e9)); ok {
		t.Error("a stale url_verification was answered")
	}
	event := []byte(`{"type":"event_callback","event":{"text":"url_verification"}}`)
	if _, ok := v.Handshake(Request{Header: v.Sign("", t0, event), Body: event}, t0); ok {
		t.Error("an event that mentions url_verification was answered as the handshake")
	}
}

func TestCloudEventsHandshake(t *testing.T) {
	t.Parallel()
	req := func(origin string) Request {
		h := http.Header{}
		if origin != "" {
			h.Set("WebHook-Request-Origin", origin)
		}
		return Request{Method: http.MethodOptions, URL: "https://gw.example/hooks", Header: h}
	}
	off := mustNew(t, "standard", []string{testSecret("standard", 0)}, Options{})
	if _, ok := off.Handshake(req("eventgrid.azure.net"), t0); ok {
		t.Error("answered without cloudevents_origins")
	}

	v := mustNew(t, "standard", []string{testSecret("standard", 0)}, Options{CloudEventsOrigins: []string{"eventgrid.azure.net"}})
	a, ok := v.Handshake(req("eventgrid.azure.net"), t0)
	if !ok || a.Status != http.StatusOK || a.Header.Get("Allow") != "POST" ||
		a.Header.Get("WebHook-Allowed-Origin") != "eventgrid.azure.net" || a.Header.Get("WebHook-Allowed-Rate") != "*" {
		t.Errorf("allowed origin: ok = %v, answer = %+v", ok, a)
	}
	if a, ok := v.Handshake(req("EventGrid.Azure.NET"), t0); !ok || a.Status != http.StatusOK {
		t.Errorf("the allowed origin in another case: ok = %v, answer = %+v, want 200", ok, a)
	}
	if a, ok := v.Handshake(req("evil.example"), t0); !ok || a.Status != http.StatusForbidden || a.Reason != problem.OriginNotAllowed {
		t.Errorf("another origin: ok = %v, answer = %+v, want 403 %s", ok, a, problem.OriginNotAllowed.Code)
	}
	if _, ok := v.Handshake(req(""), t0); ok {
		t.Error("an OPTIONS without WebHook-Request-Origin was answered as the handshake")
	}

	rated := mustNew(t, "github", []string{"s"}, Options{CloudEventsOrigins: []string{"a.example", "b.example"}, CloudEventsRate: "120"})
	if a, _ := rated.Handshake(req("b.example"), t0); a.Header.Get("WebHook-Allowed-Rate") != "120" {
		t.Errorf("WebHook-Allowed-Rate = %q, want 120", a.Header.Get("WebHook-Allowed-Rate"))
	}
}

func TestVerifyTokenNeedsMeta(t *testing.T) {
	t.Parallel()
	if _, err := New("github", []string{"s"}, Options{VerifyToken: "t"}); err == nil {
		t.Error("verify_token under github: no error")
	}
}

// TestHandshakesOfEachScheme: each scheme answers its own handshake and
// no other, and the CloudEvents one only with origins configured; a
// Verifier that takes part in none is known to at New, so Handshake
// answers it at once.
func TestHandshakesOfEachScheme(t *testing.T) {
	t.Parallel()
	get := func(query string) func(*Verifier) Request {
		return func(*Verifier) Request {
			return Request{Method: http.MethodGet, URL: "https://gw.example/hooks?" + query, Header: http.Header{}}
		}
	}
	signed := func(body string) func(*Verifier) Request {
		return func(v *Verifier) Request {
			return Request{Method: http.MethodPost, URL: "https://gw.example/hooks", Header: v.Sign("", t0, []byte(body)), Body: []byte(body)}
		}
	}
	handshakes := []struct {
		name    string // the schemes it is the handshake of, by spaces; "cloudevents" for any scheme's
		request func(*Verifier) Request
	}{
		{"meta", get("hub.mode=subscribe&hub.verify_token=t&hub.challenge=1")},
		{"twitter", get("crc_token=abc")},
		{"slack", signed(`{"token":"x","challenge":"c","type":"url_verification"}`)},
		{"zoom", signed(`{"payload":{"plainToken":"p"},"event":"endpoint.url_validation"}`)},
		{"discord", signed(`{"id":"ping-1","type":1,"application_id":"1"}`)},
		{"nylas dropbox", get("challenge=bc609b38-c81f-47fb-a275-1d9bd61a968b")}, // one handshake, two providers
		{"okta", func(*Verifier) Request {
			return Request{Method: http.MethodGet, URL: "https://gw.example/hooks", Header: http.Header{"X-Okta-Verification-Challenge": {"2QcG_1n4lY3WmGfo7G3YgwSC4hZ0ZCNNk5rbTPHk"}}}
		}},
		{"msgraph", func(*Verifier) Request {
			return Request{Method: http.MethodPost, URL: "https://gw.example/hooks?validationToken=Validation%3A+Testing+client+application+reachability+for+subscription+Request-Id%3A+1b5", Header: http.Header{}}
		}},
		{"twitch", func(v *Verifier) Request {
			body := []byte(`{"challenge":"pogchamp-kappa-360noscope-vohiyo"}`)
			h := v.Sign("msg_1", t0, body)
			if h == nil { // a scheme that signs the URL
				h = http.Header{}
			}
			h.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
			return Request{Method: http.MethodPost, URL: "https://gw.example/hooks", Header: h, Body: body}
		}},
		{"asana", func(*Verifier) Request {
			return Request{Method: http.MethodPost, URL: "https://gw.example/hooks", Endpoint: "/hooks", Header: http.Header{"X-Hook-Secret": {testSecret("asana", 0)}}}
		}},
		{"cloudevents", func(*Verifier) Request {
			return Request{Method: http.MethodOptions, URL: "https://gw.example/hooks", Header: http.Header{"Webhook-Request-Origin": {"a.example"}}}
		}},
	}
	for _, scheme := range Schemes() {
		for _, origins := range [][]string{nil, {"a.example"}} {
			v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{CloudEventsOrigins: origins})
			takesPart := false
			for _, hs := range handshakes {
				want := slices.Contains(strings.Fields(hs.name), scheme) || hs.name == "cloudevents" && origins != nil
				takesPart = takesPart || want
				if _, ok := v.Handshake(hs.request(v), t0); ok != want {
					t.Errorf("%s, origins %v: %s handshake answered = %v, want %v", scheme, origins, hs.name, ok, want)
				}
			}
			if v.handshakes != takesPart {
				t.Errorf("%s, origins %v: takes part in a handshake = %v, want %v", scheme, origins, v.handshakes, takesPart)
			}
		}
	}
}
