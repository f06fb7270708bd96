package verify

import (
	"errors"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// namedVectors names, for each named scheme a catalogue row signs with,
// the test that checks it against vectors its provider published (or,
// where none is published, of the same construction): hmacVectors covers
// the rows without a scheme of their own.
var namedVectors = map[string]string{
	"standard": "TestDocumentedVectors, TestReferenceLibraries",
	"stripe":   "TestDocumentedVectors, TestReferenceLibraries",
	"github":   "TestDocumentedVectors, TestReferenceLibraries",
	"shopify":  "TestDocumentedVectors",
	"slack":    "TestDocumentedVectors, TestReferenceLibraries",
	"hookgate": "TestRoundTripEveryScheme (hookgate's own)",
	"zoom":     "TestProviderVectors",
	"meta":     "TestProviderVectors",
	"twitter":  "TestProviderVectors",
	"twilio":   "TestTwilioVectors",
	"discord":  "TestDiscordVector",
	"sendgrid": "TestSendGridVector",
	"telnyx":   "TestTelnyxVector",
	"gitlab":   "TestTokenSchemes",
	"postmark": "TestTokenSchemes",
	"okta":     "TestTokenSchemes",
	"figma":    "TestTokenSchemes",
	"msgraph":  "TestTokenSchemes (Microsoft Graph's documented notification)",
	"sns":      "TestSNSVectors (genuine SNS deliveries, from aws-sdk-java-v2's tests)",
	"pubsub":   "TestPubSubVector (a Google-signed ID token, from google-auth-library-java's tests)",
	"mailgun":  "TestMailgunVector (mailgun-php's testVerifyWebhookGood, accepted by mailgun-go v4.23.0)",
}

// TestCatalogue: the rows are in name order, each named once, with a
// title and its provider's documentation; each signs with a named scheme
// or an HMAC of its own (never both), which New accepts; and each is
// proved by a vector.
func TestCatalogue(t *testing.T) {
	names := []string{}
	for _, p := range catalogue {
		names = append(names, p.Name)
		switch {
		case p.Title == "" || !strings.HasPrefix(p.Docs, "https://"):
			t.Errorf("%s: a title and an https documentation link are required", p.Name)
		case (p.Scheme == "") == (p.HMAC == nil):
			t.Errorf("%s: a named scheme or an HMAC, one of them", p.Name)
		case p.Scheme != p.Name && func() bool { _, err := lookup(p.Name); return err == nil }():
			t.Errorf("%s: named after a scheme it does not sign with", p.Name)
		}
		secrets, opts := []string{testSecret(p.Scheme, 0)}, Options{}
		switch p.Scheme { // no secret: their keys are fetched
		case "sns":
			secrets, opts.SNS = nil, &SNS{Topics: []string{snsTopic}}
		case "pubsub":
			secrets, opts.PubSub = nil, &PubSub{Audience: googleTokenAudience, ServiceAccounts: []string{googleTokenAccount}}
		}
		if _, err := New(p.Name, secrets, opts); err != nil && p.Scheme != "rfc9421" {
			t.Errorf("New(%s): %v", p.Name, err)
		}
		proved := namedVectors[p.Scheme] != "" || slices.ContainsFunc(hmacVectors, func(v hmacVector) bool { return v.provider == p.Name })
		if !proved {
			t.Errorf("%s: no vector proves it (hmacVectors, or namedVectors for its scheme)", p.Name)
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("the catalogue is not in name order, each name once: %v", names)
	}
	if _, err := New("box", []string{"s"}, Options{HMAC: &HMAC{SignatureHeader: "X"}}); err == nil {
		t.Error("a provider's row took an hmac configuration")
	}
}

// TestProvidersDocumented: docs/providers.md has a section per row, which
// gives its webhook_verify line, and no section for a provider the
// catalogue does not have.
func TestProvidersDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	sections := map[string]string{} // title -> its text
	parts := regexp.MustCompile(`(?m)^## `).Split(doc, -1)
	for _, part := range parts[1:] {
		title, text, _ := strings.Cut(part, "\n")
		sections[title] = text
	}
	for _, p := range catalogue {
		text, ok := sections[p.Title]
		if !ok {
			t.Errorf("docs/providers.md has no section ## %s", p.Title)
			continue
		}
		if !strings.Contains(text, "webhook_verify "+p.Name) || !strings.Contains(text, p.Docs) {
			t.Errorf("docs/providers.md, ## %s: want its webhook_verify %s line and a link to %s", p.Title, p.Name, p.Docs)
		}
		delete(sections, p.Title)
	}
	for title := range sections {
		t.Errorf("docs/providers.md, ## %s: no such provider in the catalogue", title)
	}
}

// TestStandardProviders: the providers that send Standard Webhooks (or
// Svix's names for them) verify their SDKs' own vectors under their names:
// Svix's (svix-webhooks go/webhook_test.go, TestWebhookSign; accepted by
// @clerk/backend's verifyWebhook and resend's webhooks.verify, and the
// test of replicate-javascript's validateWebhook) and OpenAI's
// (openai-node tests/api-resources/webhooks.test.ts, "taken from a real
// webhook event").
func TestStandardProviders(t *testing.T) {
	svix := http.Header{
		"Svix-Id":        {"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		"Svix-Timestamp": {"1614265330"},
		"Svix-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	standard := http.Header{
		"Webhook-Id":        {"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	openai := http.Header{
		"Webhook-Id":        {"wh_685c059ae39c8190af8c71ed1022a24d"},
		"Webhook-Timestamp": {"1750861210"},
		"Webhook-Signature": {"v1,gUAg4R2hWouRZqRQG4uJypNS8YK885G838+EHb4nKBY="},
	}
	const svixSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tt := range []struct {
		name, secret string
		header       http.Header
		body         string
		now          time.Time
	}{
		{"clerk", svixSecret, svix, `{"test": 2432232314}`, time.Unix(1614265331, 0)},
		{"resend", svixSecret, svix, `{"test": 2432232314}`, time.Unix(1614265331, 0)},
		{"replicate", svixSecret, standard, `{"test": 2432232314}`, time.Unix(1614265331, 0)},
		{"openai", "whsec_RdvaYFYUXuIFuEbvZHwMfYFhUf7aMYjYcmM24+Aj40c=", openai, `{"id": "evt_685c059ae3a481909bdc86819b066fb6", "object": "event", "created_at": 1750861210, "type": "response.completed", "data": {"id": "resp_123"}}`, time.Unix(1750861210, 0)},
	} {
		v := mustNew(t, tt.name, []string{tt.secret}, Options{})
		d, err := v.Verify(Request{Header: tt.header, Body: []byte(tt.body)}, tt.now)
		if err != nil || d.ID != tt.header.Get("Svix-Id")+tt.header.Get("Webhook-Id") {
			t.Errorf("%s: Verify = %+v, %v", tt.name, d, err)
		}
		if _, err := v.Verify(Request{Header: tt.header, Body: []byte(tt.body + " ")}, tt.now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: another body: %v, want ErrBadSignature", tt.name, err)
		}
	}
}

// TestSignatureLists: a signature header split into fields (separator)
// verifies when any of its signatures does (a rotation), ignores fields
// of other versions, and refuses a header with none, with two
// timestamps, or with more signatures than a rotation has.
func TestSignatureLists(t *testing.T) {
	body := []byte(`{"event":{"id":"e1"}}`)
	pd := mustNew(t, "pagerduty", []string{"new secret"}, Options{})
	good := pd.Sign("", t0, body).Get("X-Pagerduty-Signature")
	stale := "v1=" + strings.Repeat("ab", 32)
	pa := mustNew(t, "paddle", []string{"pdl_ntfset_secret"}, Options{})
	paddle := pa.Sign("", t0, body).Get("Paddle-Signature") // ts=…;h1=…
	ts, h1, _ := strings.Cut(paddle, ";")
	for _, tt := range []struct {
		v      *Verifier
		header string
		value  string
		want   error // nil: genuine
	}{
		{pd, "X-PagerDuty-Signature", stale + "," + good, nil},
		{pd, "X-PagerDuty-Signature", good + ", v2=ff", nil},
		{pd, "X-PagerDuty-Signature", stale, ErrBadSignature},
		{pd, "X-PagerDuty-Signature", "v2=" + strings.TrimPrefix(good, "v1="), ErrMalformedHeader},
		{pd, "X-PagerDuty-Signature", good + ",v1=zz", ErrMalformedHeader},
		{pd, "X-PagerDuty-Signature", strings.Repeat(stale+",", 8) + good, ErrMalformedHeader},
		{pa, "Paddle-Signature", ts + ";h1=" + strings.Repeat("00", 32) + ";" + h1, nil},
		{pa, "Paddle-Signature", h1 + ";" + ts, nil},
		{pa, "Paddle-Signature", h1, ErrMalformedHeader},
		{pa, "Paddle-Signature", ts + ";" + ts + ";" + h1, ErrMalformedHeader},
		{pa, "Paddle-Signature", "ts=1700000001;" + h1, ErrBadSignature},
	} {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		_, err := tt.v.Verify(Request{Header: h, Body: body}, t0)
		if (tt.want == nil) != (err == nil) || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: %.60s: err = %v, want %v", tt.header, tt.value, err, tt.want)
		}
	}
}
