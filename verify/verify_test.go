package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testSecret returns a valid secret for the scheme.
func testSecret(scheme string, n int) string {
	if p, ok := provider(scheme); ok && p.Scheme != "" {
		scheme = p.Scheme
	}
	switch scheme {
	case "standard":
		return []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="}[n]
	case "stripe":
		return []string{"whsec_test_secret", "whsec_rotated"}[n]
	case "rfc9421":
		return []string{testRFCKey1, testRFCKey2}[n]
	case "discord", "telnyx":
		return []string{testEd25519Key1, testEd25519Key2}[n]
	case "sendgrid":
		return []string{testP256Key1, testP256Key2}[n]
	}
	return []string{"It's a Secret to Everybody", "the next secret"}[n]
}

var t0 = time.Unix(1_700_000_000, 0)

// testHMAC is the generic scheme as the tests over every scheme use it:
// every field in play.
var testHMAC = HMAC{
	IDHeader: "X-Test-Id", TimestampHeader: "X-Test-Timestamp", SignatureHeader: "X-Test-Signature",
	Algorithm: "sha512", Encoding: "base64", Prefix: "v1=", Content: "{id}:{timestamp}:{body}",
}

func mustNew(t *testing.T, scheme string, secrets []string, o Options) *Verifier {
	t.Helper()
	if scheme == "hmac" && o.HMAC == nil {
		o.HMAC = &testHMAC
	}
	if scheme == "rfc9421" && o.KeyIDs == nil {
		o.KeyIDs = testKeyIDs(len(secrets))
	}
	if scheme == "sns" { // no secret: each message names its certificate
		secrets = nil
		if o.SNS == nil {
			o.SNS = &SNS{Topics: []string{snsTopic}}
		}
	}
	if scheme == "pubsub" { // no secret: Google's keys verify
		secrets = nil
		if o.PubSub == nil {
			o.PubSub = &PubSub{Audience: googleTokenAudience, ServiceAccounts: []string{googleTokenAccount}}
		}
	}
	v, err := New(scheme, secrets, o)
	if err != nil {
		t.Fatalf("New(%s): %v", scheme, err)
	}
	return v
}

func TestRoundTripEveryScheme(t *testing.T) {
	body := []byte(`{"id":"evt_1","event_id":"Ev1","type":"reservation.confirmed"}`)
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			signer := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
			if signer.SignsURL() {
				t.Skip("signs the URL the request is sent to: see its own tests")
			}
			if _, ok := signer.scheme.(tokenScheme); ok {
				t.Skip("a token signs nothing: TestTokenSchemes")
			}
			if signer.sns != nil {
				t.Skip("signs inside the body, with a certificate: TestSNSSignAndConfirm")
			}
			h, sent := signed(t, signer, "msg_1", t0, body)
			d, err := signer.Verify(Request{Header: h, Body: sent}, t0)
			if err != nil {
				t.Fatalf("Verify of own signature: %v", err)
			}
			wantID := map[string]string{"standard": "msg_1", "stripe": "evt_1", "github": "msg_1", "shopify": "msg_1", "slack": "Ev1", "hookgate": "msg_1", "hmac": "msg_1",
				"discord": "evt_1", "mailgun": "msg_1"}[scheme]
			if p, ok := provider(scheme); ok && (p.HMAC != nil && p.HMAC.IDHeader != "" || p.Scheme == "standard") {
				wantID = "msg_1" // the row's ID header, or Standard Webhooks'
			}
			if d.ID != wantID {
				t.Errorf("ID = %q, want %q", d.ID, wantID)
			}
		})
	}
}

// signed is what a sender of v's scheme sends with body: its headers,
// and the body, which mailgun signs inside (as JSON).
func signed(t *testing.T, v *Verifier, id string, ts time.Time, body []byte) (http.Header, []byte) {
	t.Helper()
	if _, ok := v.scheme.(mailgunScheme); !ok {
		return v.Sign(id, ts, body), body
	}
	h, out, err := v.SignMessage(Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, id, ts)
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

// mailgunSignsNoBody: under mailgun, a changed byte of the event data
// still verifies (Mailgun signs the timestamp and token only, as
// docs/providers.md says), and a changed byte of the token does not.
func mailgunSignsNoBody(t *testing.T, v *Verifier, body []byte) {
	t.Helper()
	h, sent := signed(t, v, "msg_1", t0, body)
	changed := bytes.Replace(sent, []byte(`100`), []byte(`101`), 1)
	if _, err := v.Verify(Request{Header: h, Body: changed}, t0); err != nil || bytes.Equal(changed, sent) {
		t.Errorf("changed event data: err = %v, want it verified (unsigned)", err)
	}
	forged := bytes.Replace(sent, []byte(`"msg_1"`), []byte(`"msg_2"`), 1)
	if _, err := v.Verify(Request{Header: h, Body: forged}, t0); !errors.Is(err, ErrBadSignature) || bytes.Equal(forged, sent) {
		t.Errorf("changed token: err = %v, want ErrBadSignature", err)
	}
}

func TestRotation(t *testing.T) {
	body := []byte(`{"a":1}`)
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			old := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
			next := mustNew(t, scheme, []string{testSecret(scheme, 1)}, Options{})
			both := mustNew(t, scheme, []string{testSecret(scheme, 1), testSecret(scheme, 0)}, Options{})
			if both.SignsURL() {
				t.Skip("signs the URL the request is sent to: see its own tests")
			}
			if _, ok := both.scheme.(tokenScheme); ok {
				t.Skip("a token signs nothing: TestTokenSchemes")
			}
			if both.sns != nil {
				t.Skip("verifies with the certificate each message names: TestSNSVectors")
			}
			for name, s := range map[string]*Verifier{"old": old, "next": next} {
				h, sent := signed(t, s, "m", t0, body)
				if _, err := both.Verify(Request{Header: h, Body: sent}, t0); err != nil {
					t.Errorf("signed with %s secret: %v", name, err)
				}
			}
			h, sent := signed(t, old, "m", t0, body)
			if _, err := next.Verify(Request{Header: h, Body: sent}, t0); !errors.Is(err, ErrBadSignature) {
				t.Errorf("old signature against next-only verifier: err = %v, want ErrBadSignature", err)
			}
		})
	}
}

func TestOneChangedByteIsRejected(t *testing.T) {
	body := []byte(`{"id":"evt_1","amount":100}`)
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
			if v.SignsURL() {
				t.Skip("signs the URL the request is sent to: see its own tests")
			}
			if _, ok := v.scheme.(tokenScheme); ok {
				t.Skip("a token signs nothing: TestTokenSchemes")
			}
			if v.sns != nil {
				t.Skip("signs inside the body: TestSNSVectors")
			}
			if _, ok := v.scheme.(mailgunScheme); ok {
				mailgunSignsNoBody(t, v, body)
				return
			}
			h := v.Sign("msg_1", t0, body)

			changed := append([]byte(nil), body...)
			changed[len(changed)-2] = '1' // 100 -> 101
			if _, err := v.Verify(Request{Header: h, Body: changed}, t0); !errors.Is(err, ErrBadSignature) {
				t.Errorf("changed body: err = %v, want ErrBadSignature", err)
			}
			for name := range h {
				if name == "X-Github-Delivery" || name == "X-Shopify-Webhook-Id" || name == "X-Webhook-Id" {
					continue // not signed by these schemes
				}
				if p, ok := provider(scheme); ok && p.HMAC != nil && http.CanonicalHeaderKey(p.HMAC.IDHeader) == name && !strings.Contains(p.HMAC.Content, "{id}") {
					continue // an ID the row does not sign
				}
				h2 := h.Clone()
				h2.Set(name, flipMiddle(h.Get(name)))
				if ts, err := time.Parse(time.RFC3339, h.Get(name)); err == nil {
					h2.Set(name, ts.Add(time.Second).Format(time.RFC3339)) // a time still, a second later
				}
				_, err := v.Verify(Request{Header: h2, Body: body}, t0)
				if !errors.Is(err, ErrBadSignature) {
					t.Errorf("changed %s: err = %v, want ErrBadSignature", name, err)
				}
			}
		})
	}
}

// flipMiddle changes one digit or letter from the middle of s on, keeping
// the value well-formed (hex stays hex, base64 stays base64).
func flipMiddle(s string) string {
	b := []byte(s)
	for i := len(b) / 2; i < len(b); i++ {
		switch c := b[i]; {
		case c >= '0' && c <= '8', c >= 'a' && c <= 'e', c >= 'A' && c <= 'Y':
			b[i]++
			return string(b)
		case c == '9':
			b[i] = '0'
			return string(b)
		}
	}
	return s
}

func TestTolerance(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	tests := []struct {
		scheme string
		opts   Options
		skew   time.Duration // now - signed timestamp
		ok     bool
	}{
		{"standard", Options{}, 4*time.Minute + 59*time.Second, true},
		{"standard", Options{}, 6 * time.Minute, false},
		{"standard", Options{}, -4 * time.Minute, true},
		{"standard", Options{}, -6 * time.Minute, false}, // from the future
		{"standard", Options{Past: 10 * time.Minute}, 6 * time.Minute, true},
		{"standard", Options{Past: 10 * time.Minute, Future: time.Minute}, -2 * time.Minute, false},
		{"stripe", Options{}, 6 * time.Minute, false},
		{"stripe", Options{}, -time.Hour, true}, // stripe: no future limit by default
		{"stripe", Options{Future: time.Minute}, -2 * time.Minute, false},
		{"slack", Options{}, 6 * time.Minute, false},
		{"slack", Options{}, -6 * time.Minute, false},
		{"hookgate", Options{}, 6 * time.Minute, false},
		{"hookgate", Options{}, 0, true},
		{"standard", Options{}, -200 * 365 * 24 * time.Hour, false},
		{"hookgate", Options{}, -250 * 365 * 24 * time.Hour, false},
		{"standard", Options{}, 50 * 365 * 24 * time.Hour, false},
		{"github", Options{}, 24 * time.Hour, true}, // no timestamp: tolerance ignored
		{"shopify", Options{}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		v := mustNew(t, tt.scheme, []string{testSecret(tt.scheme, 0)}, tt.opts)
		h := v.Sign("msg_1", t0, body)
		_, err := v.Verify(Request{Header: h, Body: body}, t0.Add(tt.skew))
		if tt.ok && err != nil {
			t.Errorf("%s %+v skew %s: %v, want ok", tt.scheme, tt.opts, tt.skew, err)
		}
		if !tt.ok && !errors.Is(err, ErrTimestampOutOfTolerance) {
			t.Errorf("%s %+v skew %s: err = %v, want ErrTimestampOutOfTolerance", tt.scheme, tt.opts, tt.skew, err)
		}
	}
}

// TestFarFutureTimestampRegression: a timestamp millennia ahead made
// now.Sub saturate, and its negation overflow past the future check.
func TestFarFutureTimestampRegression(t *testing.T) {
	body := []byte(`{}`)
	v := mustNew(t, "standard", []string{testSecret("standard", 0)}, Options{})
	h := v.Sign("msg_1", time.Unix(99999999999, 0), body)
	if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrTimestampOutOfTolerance) {
		t.Fatalf("timestamp 99999999999: err = %v, want ErrTimestampOutOfTolerance", err)
	}
}

func TestHeaderErrors(t *testing.T) {
	body := []byte(`{}`)
	tests := []struct {
		scheme  string
		headers map[string]string
		want    error
	}{
		{"standard", map[string]string{}, ErrMissingHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000"}, ErrMissingHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "soon", "webhook-signature": "v1,AAAA"}, ErrMalformedHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "v1a,AAAA"}, ErrMalformedHeader}, // no Ed25519 key: skipped, nothing usable
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "v2,AAAA"}, ErrMalformedHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "v1,not*base64"}, ErrMalformedHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "garbage"}, ErrMalformedHeader},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "v1a,xyz v1,AAAA"}, ErrBadSignature}, // v1a skipped, v1 judged
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": "v2,xyz v1,AAAA"}, ErrBadSignature},
		{"stripe", map[string]string{}, ErrMissingHeader},
		{"stripe", map[string]string{"stripe-signature": "v1=00ff"}, ErrMalformedHeader},
		{"stripe", map[string]string{"stripe-signature": "t=1700000000"}, ErrMalformedHeader},
		{"stripe", map[string]string{"stripe-signature": "t=1700000000,v1=zz"}, ErrMalformedHeader},
		{"stripe", map[string]string{"stripe-signature": "t=-5,v1=00"}, ErrMalformedHeader},
		{"stripe", map[string]string{"stripe-signature": "t=1700000000,v1=00ff"}, ErrBadSignature},
		{"github", map[string]string{}, ErrMissingHeader},
		{"github", map[string]string{"x-hub-signature-256": "sha1=00"}, ErrMalformedHeader},
		{"github", map[string]string{"x-hub-signature-256": "sha256=0g"}, ErrMalformedHeader},
		{"shopify", map[string]string{"x-shopify-hmac-sha256": "%%%"}, ErrMalformedHeader},
		{"slack", map[string]string{"x-slack-signature": "v0=00"}, ErrMissingHeader},
		{"slack", map[string]string{"x-slack-signature": "v1=00", "x-slack-request-timestamp": "1700000000"}, ErrMalformedHeader},
		{"hookgate", map[string]string{"x-webhook-id": "m", "x-webhook-timestamp": "1.5", "x-webhook-signature": "00"}, ErrMalformedHeader},
		{"hookgate", map[string]string{"x-webhook-id": "m", "x-webhook-timestamp": "1700000000"}, ErrMissingHeader},
	}
	for _, tt := range tests {
		v := mustNew(t, tt.scheme, []string{testSecret(tt.scheme, 0)}, Options{})
		h := make(http.Header)
		for k, val := range tt.headers {
			h.Set(k, val)
		}
		_, err := v.Verify(Request{Header: h, Body: body}, t0)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s %v: err = %v, want %v", tt.scheme, tt.headers, err, tt.want)
		}
	}
}

func TestSvixHeaderNames(t *testing.T) {
	v := mustNew(t, "standard", []string{testSecret("standard", 0)}, Options{})
	body := []byte(`{"a":1}`)
	h := v.Sign("msg_x", t0, body)
	svix := http.Header{}
	for k, vals := range h {
		svix[strings.Replace(k, "Webhook-", "Svix-", 1)] = vals
	}
	d, err := v.Verify(Request{Header: svix, Body: body}, t0)
	if err != nil || d.ID != "msg_x" {
		t.Fatalf("svix-* headers: %+v, %v", d, err)
	}
}

func TestNewErrorsNeverHoldSecrets(t *testing.T) {
	for _, tt := range []struct{ scheme, secret string }{
		{"standard", "whsec_!!not-base64-supersecret"},
		{"nope", "supersecret"},
		{"github", ""},
	} {
		_, err := New(tt.scheme, []string{tt.secret}, Options{})
		if err == nil {
			t.Errorf("New(%q, %q) succeeded, want error", tt.scheme, tt.secret)
			continue
		}
		if tt.secret != "" && strings.Contains(err.Error(), "supersecret") {
			t.Errorf("error %q holds the secret", err)
		}
	}
	if _, err := New("github", nil, Options{}); err == nil {
		t.Error("New without secrets succeeded")
	}
}

func unixTime(ts int64) time.Time { return time.Unix(ts, 0) }

// validHeaderValue reports whether s survives as an HTTP header value.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// TestRepeatedHeadersAreMalformed: a second delivery-ID, timestamp or
// signature header is rejected, never forwarded beside the signed one.
func TestRepeatedHeadersAreMalformed(t *testing.T) {
	body := []byte(`{"id":"evt_1","event_id":"Ev1"}`)
	repeatable := map[string][]string{
		"standard": {"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
		"stripe":   {"Stripe-Signature"},
		"github":   {"X-Hub-Signature-256", "X-GitHub-Delivery"},
		"shopify":  {"X-Shopify-Hmac-Sha256", "X-Shopify-Webhook-Id"},
		"slack":    {"X-Slack-Signature", "X-Slack-Request-Timestamp"},
		"hookgate": {"X-Webhook-Id", "X-Webhook-Timestamp", "X-Webhook-Signature"},
		"hmac":     {"X-Test-Id", "X-Test-Timestamp", "X-Test-Signature"},
	}
	for _, scheme := range Schemes() {
		v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
		for _, name := range repeatable[scheme] {
			t.Run(scheme+"/"+name, func(t *testing.T) {
				h := v.Sign("msg_1", t0, body)
				if _, err := v.Verify(Request{Header: h, Body: body}, t0); err != nil {
					t.Fatalf("genuine request: %v", err)
				}
				h.Add(name, h.Get(name)) // even the same value twice
				if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrMalformedHeader) {
					t.Errorf("%s given twice: err = %v, want ErrMalformedHeader", name, err)
				}
			})
		}
	}
	t.Run("stripe/two t=", func(t *testing.T) {
		v := mustNew(t, "stripe", []string{testSecret("stripe", 0)}, Options{})
		h := v.Sign("", t0, body)
		h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",t=1")
		if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrMalformedHeader) {
			t.Errorf("two t= items: err = %v, want ErrMalformedHeader", err)
		}
	})
}

// TestNonCanonicalTimestamp: "007" or "+7" would verify against the MAC
// over the canonical number; only canonical decimal is accepted.
func TestNonCanonicalTimestamp(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	tsHeader := map[string]string{"standard": "Webhook-Timestamp", "slack": "X-Slack-Request-Timestamp", "hookgate": "X-Webhook-Timestamp", "hmac": "X-Test-Timestamp"}
	for scheme, header := range tsHeader {
		for _, bad := range []string{"0", "+", " "} {
			t.Run(scheme+"/"+bad, func(t *testing.T) {
				v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
				h := v.Sign("msg_1", t0, body)
				h.Set(header, bad+h.Get(header))
				if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrMalformedHeader) {
					t.Errorf("timestamp %q: err = %v, want ErrMalformedHeader", h.Get(header), err)
				}
			})
		}
	}
	v := mustNew(t, "stripe", []string{testSecret("stripe", 0)}, Options{})
	h := v.Sign("", t0, body)
	h.Set("Stripe-Signature", strings.Replace(h.Get("Stripe-Signature"), "t=", "t=00", 1))
	if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("stripe t=00...: err = %v, want ErrMalformedHeader", err)
	}
}

// The v1a vector of the Standard Webhooks reference library for Go
// (libraries/go/webhook_asymmetric_test.go, TestAsymmetricWebhookSign):
// an Ed25519 seed, and the signature of "id.timestamp.payload".
const (
	v1aSeed      = "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk="
	v1aMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	v1aTimestamp = 1614265330
	v1aPayload   = `{"test": 2432232314}`
	v1aExpected  = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
)

// TestStandardV1a: a whsk_ key signs as the reference library does; its
// whpk_ public key verifies (and cannot sign); v1 and v1a entries mix in
// one header; another key's signature is bad.
func TestStandardV1a(t *testing.T) {
	ts := time.Unix(v1aTimestamp, 0)
	signer := mustNew(t, "standard", []string{"whsk_" + v1aSeed}, Options{})
	h := signer.Sign(v1aMsgID, ts, []byte(v1aPayload))
	if got := h.Get("Webhook-Signature"); got != v1aExpected {
		t.Fatalf("v1a signature = %s, want the reference library's %s", got, v1aExpected)
	}
	seed, _ := base64.StdEncoding.DecodeString(v1aSeed)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	verifier := mustNew(t, "standard", []string{"whpk_" + base64.StdEncoding.EncodeToString(pub)}, Options{})
	if verifier.CanSign() {
		t.Error("a public key claims it can sign")
	}
	if _, err := verifier.Verify(Request{Header: h, Body: []byte(v1aPayload)}, ts); err != nil {
		t.Fatalf("the reference vector against its public key: %v", err)
	}
	if _, err := signer.Verify(Request{Header: h, Body: []byte(v1aPayload)}, ts); err != nil {
		t.Fatalf("the reference vector against its private key: %v", err)
	}
	if _, err := verifier.Verify(Request{Header: h, Body: []byte(v1aPayload + " ")}, ts); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another body: err = %v, want ErrBadSignature", err)
	}
	// Rotation across kinds: an HMAC secret and a public key together.
	both := mustNew(t, "standard", []string{testSecret("standard", 0), "whpk_" + base64.StdEncoding.EncodeToString(pub)}, Options{})
	mixed := h.Clone()
	mixed.Set("Webhook-Signature", "v1,AAAA "+v1aExpected)
	if _, err := both.Verify(Request{Header: mixed, Body: []byte(v1aPayload)}, ts); err != nil {
		t.Errorf("v1 and v1a in one header: %v", err)
	}
	hmacOnly := mustNew(t, "standard", []string{testSecret("standard", 0)}, Options{})
	if _, err := hmacOnly.Verify(Request{Header: h, Body: []byte(v1aPayload)}, ts); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("a v1a signature alone against an HMAC secret: err = %v, want ErrMalformedHeader (v1a skipped without an Ed25519 key)", err)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	otherSigner := mustNew(t, "standard", []string{"whsk_" + base64.StdEncoding.EncodeToString(other.Seed())}, Options{})
	if _, err := verifier.Verify(Request{Header: otherSigner.Sign(v1aMsgID, ts, []byte(v1aPayload)), Body: []byte(v1aPayload)}, ts); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key's signature: err = %v, want ErrBadSignature", err)
	}
	for _, bad := range []string{"whpk_AAAA", "whsk_!!", "whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 64))} {
		if _, err := New("standard", []string{bad}, Options{}); err == nil || strings.Contains(err.Error(), bad[5:]) && len(bad) > 9 {
			t.Errorf("New(%q) = %v, want an error without the key", bad, err)
		}
	}
}

func TestHMACConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  HMAC
		want string
	}{
		{HMAC{}, "signature_header is required"},
		{HMAC{SignatureHeader: "S", Algorithm: "md5"}, `algorithm "md5"`},
		{HMAC{SignatureHeader: "S", Encoding: "base32"}, `encoding "base32"`},
		{HMAC{SignatureHeader: "S", Content: "{id}.{body}"}, "id_header is required"},
		{HMAC{SignatureHeader: "S", Content: "{timestamp}.{body}"}, "timestamp_header is required"},
		{HMAC{SignatureHeader: "S", Content: "{nonce}{body}"}, "unknown field {nonce}"},
		{HMAC{SignatureHeader: "S", Content: "{body"}, "an unclosed {"},
		{HMAC{SignatureHeader: "S", TimestampFormat: "rfc3339"}, "timestamp_header is required"},
		{HMAC{SignatureHeader: "S", TimestampHeader: "T", TimestampFormat: "iso"}, `timestamp_format "iso"`},
		{HMAC{SignatureHeader: "S", TimestampField: "ts", Prefix: "h1="}, "timestamp_field needs the separator"},
		{HMAC{SignatureHeader: "S", TimestampField: "ts", TimestampHeader: "T", Separator: ";", Prefix: "h1="}, "not both"},
		{HMAC{SignatureHeader: "S", Separator: ","}, "separator needs the prefix"},
		{HMAC{SignatureHeader: "S", TimestampHeader: "T"}, "only when content signs it"},
		{HMAC{SignatureHeader: "S", Separator: ",", TimestampField: "t", Prefix: "v1="}, "only when content signs it"},
	}
	for _, tt := range tests {
		cfg := tt.cfg
		if _, err := New("hmac", []string{"s3cr3t"}, Options{HMAC: &cfg}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(hmac %+v) = %v, want an error with %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := New("hmac", []string{"s3cr3t"}, Options{}); err == nil {
		t.Error("New(hmac) without its configuration succeeded")
	}
}

// TestHMACDefaults: the signature alone, over the body, sha256 in hex.
func TestHMACDefaults(t *testing.T) {
	v := mustNew(t, "hmac", []string{"It's a Secret to Everybody"}, Options{HMAC: &HMAC{SignatureHeader: "X-Sig"}})
	h := http.Header{}
	// GitHub's documented example: HMAC-SHA256 of "Hello, World!", hex.
	h.Set("X-Sig", "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	if _, err := v.Verify(Request{Header: h, Body: []byte("Hello, World!")}, t0); err != nil {
		t.Fatalf("the default template (sha256, hex, {body}): %v", err)
	}
}
