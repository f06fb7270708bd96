package verify

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// graphNotification is the change notification of Microsoft Graph's
// documentation (Receive change notifications through webhooks), whose
// clientState is the subscription's secret, "secretClientValue".
const graphNotification = `{"value":[{"id":"lsgTZMr9KwAAA","subscriptionId":"{subscription_guid}","subscriptionExpirationDateTime":"2016-03-19T22:11:09.952Z",` +
	`"clientState":"secretClientValue","changeType":"created","resource":"users/{user_guid}@{tenant_guid}/messages/{long_id_string}",` +
	`"tenantId":"84bd8158-6d4d-4958-8b9f-9d6445542f95","resourceData":{"@odata.type":"#Microsoft.Graph.Message","@odata.id":"Users/{user_guid}@{tenant_guid}/Messages/{long_id_string}",` +
	`"@odata.etag":"W/\"CQAAABYAAADkrWGo7bouTKlsgTZMr9KwAAAUWRHf\"","id":"{long_id_string}"}}]}`

// TestTokenSchemes: the providers that send a shared secret rather than a
// signature, each as its documentation shows the request: the token
// verifies, where the provider puts it; another, or none, does not; a
// batch verifies only when every element carries it; the dedupe key is
// the body, scoped to the secret.
func TestTokenSchemes(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		scheme, secret string
		header         http.Header
		body           string
		want           error // nil: genuine
	}{
		{"gitlab", "glwt-token-1", http.Header{"X-Gitlab-Token": {"glwt-token-1"}}, `{"object_kind":"push"}`, nil},
		{"gitlab", "glwt-token-1", http.Header{"X-Gitlab-Token": {"glwt-token-2"}}, `{"object_kind":"push"}`, ErrBadSignature},
		{"gitlab", "glwt-token-1", http.Header{}, `{"object_kind":"push"}`, ErrMissingHeader},
		{"postmark", "hooks:pa55word", http.Header{"Authorization": {basic("hooks:pa55word")}}, `{"RecordType":"Delivery"}`, nil},
		{"postmark", "hooks:pa55word", http.Header{"Authorization": {basic("hooks:guess")}}, `{"RecordType":"Delivery"}`, ErrBadSignature},
		{"postmark", "hooks:pa55word", http.Header{"Authorization": {"Bearer hooks:pa55word"}}, `{"RecordType":"Delivery"}`, ErrMalformedHeader},
		{"okta", "Basic c2VjcmV0", http.Header{"Authorization": {"Basic c2VjcmV0"}}, `{"eventType":"com.okta.event_hook"}`, nil},
		{"okta", "Basic c2VjcmV0", http.Header{"Authorization": {"Basic c2VjcmV1"}}, `{"eventType":"com.okta.event_hook"}`, ErrBadSignature},
		{"figma", "figma-passcode", nil, `{"event_type":"PING","passcode":"figma-passcode","timestamp":"2020-02-23T20:27:16Z","webhook_id":"22"}`, nil},
		{"figma", "figma-passcode", nil, `{"event_type":"PING","passcode":"guess","webhook_id":"22"}`, ErrBadSignature},
		{"figma", "figma-passcode", nil, `{"event_type":"PING","webhook_id":"22"}`, ErrBadSignature},
		{"figma", "figma-passcode", nil, `{"event_type":"PING","passcode":7}`, ErrBadSignature},
		{"msgraph", "secretClientValue", nil, graphNotification, nil},
		{"msgraph", "anotherValue", nil, graphNotification, ErrBadSignature},
		{"msgraph", "secretClientValue", nil, `{"value":[{"clientState":"secretClientValue","id":"1"},{"clientState":"forged","id":"2"}]}`, ErrBadSignature},
		{"msgraph", "secretClientValue", nil, `{"value":[{"clientState":"secretClientValue","id":"1"},{"id":"2"}]}`, ErrBadSignature},
		{"msgraph", "secretClientValue", nil, `{"value":[]}`, ErrBadSignature},
		// Two subscriptions to one URL, each with its own clientState,
		// both configured: a batch of both is genuine.
		{"msgraph", "secretClientValue", nil, `{"value":[{"clientState":"secretClientValue","id":"1"},{"clientState":"an older secret","id":"2"}]}`, nil},
		// Read as the service behind reads it: the last of duplicate keys;
		// and only JSON.
		{"msgraph", "secretClientValue", nil, `{"value":[{"clientState":"secretClientValue"}],"value":[{"resource":"evil"}]}`, ErrBadSignature},
		{"msgraph", "secretClientValue", nil, `{"value":[{"clientState":"secretClientValue"}]`, ErrBadSignature},
		{"figma", "figma-passcode", nil, `{"passcode":"figma-passcode","passcode":"guess"}`, ErrBadSignature},
		{"postmark", "hooks:pa55word", http.Header{"Authorization": {"basic " + base64.StdEncoding.EncodeToString([]byte("hooks:pa55word"))}}, `{}`, nil},
	} {
		v := mustNew(t, tt.scheme, []string{"an older secret", tt.secret}, Options{})
		d, err := v.Verify(Request{Header: tt.header, Body: []byte(tt.body)}, t0)
		switch {
		case tt.want == nil && (err != nil || d.Key != KeyBody || d.SecretFingerprint == ""):
			t.Errorf("%s, %.40s: %+v, %v; want genuine, keyed by the body", tt.scheme, tt.body, d, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("%s, %.40s: err = %v, want %v", tt.scheme, tt.body, err, tt.want)
		}
	}
	// hookgate sign writes the header token; a body's is the sender's, and
	// signing says so.
	if h := mustNew(t, "postmark", []string{"hooks:pa55word"}, Options{}).Sign("", t0, nil); h.Get("Authorization") != basic("hooks:pa55word") {
		t.Errorf("postmark signs %v", h)
	}
	if _, err := mustNew(t, "figma", []string{"p"}, Options{}).SignRequest(Request{Body: []byte(`{}`)}, "", t0); err == nil || !strings.Contains(err.Error(), "passcode") {
		t.Errorf("signing figma: %v, want an error naming the passcode", err)
	}
}

// TestTokenHandshakes: Okta's one-time verification and Microsoft Graph's
// subscription validation are answered with their challenge, held to
// what such a challenge holds.
func TestTokenHandshakes(t *testing.T) {
	okta := mustNew(t, "okta", []string{"Basic c2VjcmV0"}, Options{})
	a, ok := okta.Handshake(Request{Method: http.MethodGet, Header: http.Header{"X-Okta-Verification-Challenge": {"2QcG_1n4lY3WmGfo7G3YgwSC4hZ0ZCNNk5rbTPHk"}}}, t0)
	if !ok || string(a.Body) != `{"verification":"2QcG_1n4lY3WmGfo7G3YgwSC4hZ0ZCNNk5rbTPHk"}` {
		t.Errorf("okta: %v %s", ok, a.Body)
	}
	if _, ok := okta.Handshake(Request{Method: http.MethodGet, Header: http.Header{"X-Okta-Verification-Challenge": {`"}<script>`}}}, t0); ok {
		t.Error("okta: a challenge of other characters was echoed")
	}
	graph := mustNew(t, "msgraph", []string{"secretClientValue"}, Options{})
	a, ok = graph.Handshake(Request{Method: http.MethodPost, URL: "https://gw.example/hooks?validationToken=Validation%3A+Testing+client+application+reachability", Header: http.Header{}}, t0)
	if !ok || string(a.Body) != "Validation: Testing client application reachability" || a.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("msgraph: %v %q %v", ok, a.Body, a.Header)
	}
	if _, ok := graph.Handshake(Request{Method: http.MethodPost, URL: "https://gw.example/hooks?validationToken=%00%FF", Header: http.Header{}}, t0); ok {
		t.Error("msgraph: a token of bytes that are not printable was echoed")
	}
	if _, ok := graph.Handshake(Request{Method: http.MethodPost, URL: "https://gw.example/hooks", Header: http.Header{}, Body: []byte(graphNotification)}, t0); ok {
		t.Error("msgraph: a notification was answered as a handshake")
	}
}
