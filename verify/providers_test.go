package verify

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v74/github"
	"github.com/slack-go/slack"
)

// Bodies of the vectors below, in the shapes the providers document: Zoom's
// meeting.started (zoom/webhook-sample's README) and a Graph API User
// notification (developers.facebook.com, "Webhooks from Meta", Sample
// Notification).
const (
	zoomVectorBody = `{"event":"meeting.started","payload":{"account_id":"AAAAAABBBB","object":{"duration":0,"start_time":"2021-11-02T20:43:19Z","timezone":"America/Denver","topic":"My Meeting","id":"1234567890","type":4,"uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN"}},"event_ts":1635885799302}`
	metaVectorBody = `{"entry":[{"time":1520383571,"changes":[{"field":"photos","value":{"verb":"update","object_id":"10211885744794461"}}],"id":"10210299214172187","uid":"10210299214172187"}],"object":"user"}`
)

// providerVectors are zoom's, meta's and twitter's vectors. X publishes
// two (its own autohook library's tests); Zoom and Meta publish the
// construction but no secret with its signature, so theirs were computed
// outside Go, with the openssl command line:
//
//	printf '%s' "v0:1635885799:$body" | openssl dgst -sha256 -hmac zoom-secret-token-ZmQ4 -hex
//	printf '%s' "$body" | openssl dgst -sha256 -hmac meta-app-secret-7f3a -hex
//
// Zoom signs as Slack does (v0:ts:body, hex, "v0="), so Slack's published
// vector is checked under zoom's header names too.
var providerVectors = []struct {
	name, source string
	scheme       string
	secret       string
	headers      map[string]string
	body         func(t *testing.T) []byte
	ts           int64 // the example's time; 0 for schemes without one
	// refused says why hookgate refuses the vector's request though its
	// signature is right: the signer must still reproduce it.
	refused string
}{
	{
		name: "twitter form body", source: "xdevplatform/autohook test/signature.js (published)",
		scheme: "twitter", secret: "test", refused: "X posts JSON objects only: a form body could be a CRC answer's token",
		headers: map[string]string{"x-twitter-webhooks-signature": "sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc="},
		body:    literal("test=1&other_test=2"),
	},
	{
		name: "twitter json body", source: "xdevplatform/autohook test/signature.js (published)",
		scheme: "twitter", secret: "test",
		headers: map[string]string{"x-twitter-webhooks-signature": "sha256=YWHphPn/JFq43jkF0y4/w8R/SelmLjvpunhVFY8JhlI="},
		body:    literal(`{"test_number":1,"test_string":"two"}`),
	},
	{
		name: "zoom meeting.started", source: "computed with openssl (Zoom publishes no secret with a signature)",
		scheme: "zoom", secret: "zoom-secret-token-ZmQ4",
		headers: map[string]string{"x-zm-request-timestamp": "1635885799", "x-zm-signature": "v0=8f56a4719b75f690a4e349fd0910bdfeaf770f5138cd81edad8b1ebbfbc57710"},
		body:    literal(zoomVectorBody), ts: 1635885799,
	},
	{
		name: "zoom under slack's published vector", source: "Slack, Verifying requests from Slack (published; the same construction)",
		scheme: "zoom", secret: "8f742231b10e8888abcd99yyyzzz85a5",
		headers: map[string]string{"x-zm-request-timestamp": "1531420618", "x-zm-signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
		body:    func(t *testing.T) []byte { return readVector(t, "slack_command.txt") }, ts: 1531420618,
	},
	{
		name: "meta user notification", source: "computed with openssl (Meta publishes no secret with a signature)",
		scheme: "meta", secret: "meta-app-secret-7f3a",
		headers: map[string]string{"x-hub-signature-256": "sha256=46214fad10591739789cd5e1adfc1a22f1b754fcfda19fbe0c56b225d7d879fe"},
		body:    literal(metaVectorBody),
	},
	{
		name: "meta under github's published vector", source: "GitHub docs, Validating webhook deliveries (published; the same construction and header)",
		scheme: "meta", secret: "It's a Secret to Everybody",
		headers: map[string]string{"x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
		body:    literal("Hello, World!"),
	},
}

func literal(s string) func(*testing.T) []byte { return func(*testing.T) []byte { return []byte(s) } }

// TestProviderVectors checks zoom, meta and twitter both ways: each vector
// verifies (with another secret configured first), a changed body does
// not, and the signer writes the vector's very headers.
func TestProviderVectors(t *testing.T) {
	for _, tt := range providerVectors {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body(t)
			h := http.Header{}
			for k, val := range tt.headers {
				h.Set(k, val)
			}
			now := time.Unix(tt.ts, 0).Add(30 * time.Second)
			if tt.ts == 0 {
				now = t0 // no timestamp: any time will do
			}
			v := mustNew(t, tt.scheme, []string{"another secret", tt.secret}, Options{})
			d, err := v.Verify(Request{Header: h, Body: body}, now)
			switch {
			case tt.refused != "" && !errors.Is(err, ErrBadSignature):
				t.Errorf("the vector (%s): err = %v, want ErrBadSignature: %s", tt.source, err, tt.refused)
			case tt.refused == "" && err != nil:
				t.Fatalf("the vector (%s): %v", tt.source, err)
			}
			if d.ID != "" {
				t.Errorf("ID = %q, want none: %s carries no delivery ID", d.ID, tt.scheme)
			}
			if tt.ts != 0 && d.Timestamp.Unix() != tt.ts {
				t.Errorf("Timestamp = %d, want %d", d.Timestamp.Unix(), tt.ts)
			}
			changed := bytes.Clone(body)
			changed[len(changed)/2] ^= 1
			if _, err := v.Verify(Request{Header: h, Body: changed}, now); !errors.Is(err, ErrBadSignature) {
				t.Errorf("a changed body: err = %v, want ErrBadSignature", err)
			}
			signer := mustNew(t, tt.scheme, []string{tt.secret}, Options{})
			signed := signer.Sign("ignored-id", time.Unix(tt.ts, 0), body)
			if len(signed) != len(tt.headers) {
				t.Errorf("signed headers %v, want exactly the vector's %v", signed, tt.headers)
			}
			for k, want := range tt.headers {
				if got := signed.Get(k); got != want {
					t.Errorf("signed %s: %q, want the vector's %q", k, got, want)
				}
			}
			if _, err := v.Verify(Request{Header: signed, Body: body}, now); err != nil && tt.refused == "" {
				t.Errorf("verifying our own signature: %v", err)
			}
		})
	}
}

// TestZoomTolerance: zoom's timestamp is signed and must lie within the
// tolerance, both ways; meta and twitter sign none, so any time verifies.
func TestZoomTolerance(t *testing.T) {
	body := []byte(zoomVectorBody)
	v := mustNew(t, "zoom", []string{testSecret("zoom", 0)}, Options{})
	h := v.Sign("", t0, body)
	for _, tt := range []struct {
		skew time.Duration
		ok   bool
	}{{0, true}, {4 * time.Minute, true}, {-4 * time.Minute, true}, {6 * time.Minute, false}, {-6 * time.Minute, false}, {24 * time.Hour, false}} {
		_, err := v.Verify(Request{Header: h, Body: body}, t0.Add(tt.skew))
		if tt.ok != (err == nil) || !tt.ok && !errors.Is(err, ErrTimestampOutOfTolerance) {
			t.Errorf("zoom, signed %s ago: err = %v, want ok %v", tt.skew, err, tt.ok)
		}
	}
	wide := mustNew(t, "zoom", []string{testSecret("zoom", 0)}, Options{Past: time.Hour})
	if _, err := wide.Verify(Request{Header: h, Body: body}, t0.Add(30*time.Minute)); err != nil {
		t.Errorf("zoom with tolerance 1h, signed 30m ago: %v", err)
	}
	for _, scheme := range []string{"meta", "twitter"} {
		v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
		if _, err := v.Verify(Request{Header: v.Sign("", t0, body), Body: body}, t0.Add(365*24*time.Hour)); err != nil {
			t.Errorf("%s a year later: %v (no timestamp: the tolerance does not apply)", scheme, err)
		}
	}
}

// TestProviderLibraries checks our zoom and meta signatures against the Go
// libraries of the providers that sign the same way: slack-go's
// SecretsVerifier (Zoom's v0:ts:body construction) and go-github's
// ValidateSignature (Meta's X-Hub-Signature-256, GitHub's very header).
func TestProviderLibraries(t *testing.T) {
	body := []byte(zoomVectorBody)
	now := time.Now() // slack-go reads the wall clock
	t.Run("zoom/slack-go", func(t *testing.T) {
		const secret = "zoom secret token"
		h := mustNew(t, "zoom", []string{secret}, Options{}).Sign("", now, body)
		sh := http.Header{}
		sh.Set("X-Slack-Signature", h.Get("X-Zm-Signature"))
		sh.Set("X-Slack-Request-Timestamp", h.Get("X-Zm-Request-Timestamp"))
		sv, err := slack.NewSecretsVerifier(sh, secret)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sv.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := sv.Ensure(); err != nil {
			t.Errorf("slack-go rejects zoom's construction as we sign it: %v", err)
		}
	})
	t.Run("meta/go-github", func(t *testing.T) {
		const secret = "meta app secret"
		sig := mustNew(t, "meta", []string{secret}, Options{}).Sign("", now, body).Get("X-Hub-Signature-256")
		if err := github.ValidateSignature(sig, body, []byte(secret)); err != nil {
			t.Errorf("go-github rejects meta's signature as we sign it: %v", err)
		}
		if err := github.ValidateSignature(sig, append(body, ' '), []byte(secret)); err == nil {
			t.Error("go-github accepts our signature over another body: the check proves nothing")
		}
	})
}

// TestProviderHeaderErrors: what each new scheme's parser refuses, and how.
func TestProviderHeaderErrors(t *testing.T) {
	const ts = "1700000000"
	hex64 := strings.Repeat("ab", 32)
	tests := []struct {
		scheme  string
		headers map[string]string
		want    error
	}{
		{"zoom", map[string]string{}, ErrMissingHeader},
		{"zoom", map[string]string{"x-zm-signature": "v0=" + hex64}, ErrMissingHeader},
		{"zoom", map[string]string{"x-zm-request-timestamp": ts}, ErrMissingHeader},
		{"zoom", map[string]string{"x-zm-signature": "v1=" + hex64, "x-zm-request-timestamp": ts}, ErrMalformedHeader},
		{"zoom", map[string]string{"x-zm-signature": hex64, "x-zm-request-timestamp": ts}, ErrMalformedHeader},
		{"zoom", map[string]string{"x-zm-signature": "v0=zz", "x-zm-request-timestamp": ts}, ErrMalformedHeader},
		{"zoom", map[string]string{"x-zm-signature": "v0=" + hex64, "x-zm-request-timestamp": "0" + ts}, ErrMalformedHeader},
		{"zoom", map[string]string{"x-zm-signature": "v0=" + hex64, "x-zm-request-timestamp": ts}, ErrBadSignature},
		{"meta", map[string]string{}, ErrMissingHeader},
		{"meta", map[string]string{"x-hub-signature": "sha1=" + hex64[:40]}, ErrMissingHeader},
		{"meta", map[string]string{"x-hub-signature-256": hex64}, ErrMalformedHeader},
		{"meta", map[string]string{"x-hub-signature-256": "sha256=0g"}, ErrMalformedHeader},
		{"meta", map[string]string{"x-hub-signature-256": "sha256=" + hex64}, ErrBadSignature},
		{"twitter", map[string]string{}, ErrMissingHeader},
		{"twitter", map[string]string{"x-twitter-webhooks-signature": "25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc="}, ErrMalformedHeader},
		{"twitter", map[string]string{"x-twitter-webhooks-signature": "sha256=" + hex64 + "%"}, ErrMalformedHeader},
		{"twitter", map[string]string{"x-twitter-webhooks-signature": "sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc"}, ErrMalformedHeader}, // unpadded
		{"twitter", map[string]string{"x-twitter-webhooks-signature": "sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc="}, ErrBadSignature},
	}
	for _, tt := range tests {
		v := mustNew(t, tt.scheme, []string{testSecret(tt.scheme, 0)}, Options{})
		h := http.Header{}
		for k, val := range tt.headers {
			h.Set(k, val)
		}
		_, err := v.Verify(Request{Header: h, Body: []byte(`{}`)}, t0)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s %v: err = %v, want %v", tt.scheme, tt.headers, err, tt.want)
		}
	}
}

// TestProviderRepeatedHeaders: a signature or timestamp header given
// twice is malformed, even with the same value, as under every scheme.
func TestProviderRepeatedHeaders(t *testing.T) {
	body := []byte(metaVectorBody)
	for scheme, names := range map[string][]string{
		"zoom":    {"X-Zm-Signature", "X-Zm-Request-Timestamp"},
		"meta":    {"X-Hub-Signature-256"},
		"twitter": {"X-Twitter-Webhooks-Signature"},
	} {
		v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
		for _, name := range names {
			h := v.Sign("", t0, body)
			if _, err := v.Verify(Request{Header: h, Body: body}, t0); err != nil {
				t.Fatalf("%s: genuine request: %v", scheme, err)
			}
			h.Add(name, h.Get(name))
			if _, err := v.Verify(Request{Header: h, Body: body}, t0); !errors.Is(err, ErrMalformedHeader) {
				t.Errorf("%s: %s given twice: err = %v, want ErrMalformedHeader", scheme, name, err)
			}
		}
	}
}
