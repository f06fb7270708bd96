package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/hookgate/hookgate/verify"
)

const devSecret = "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="

func signer(t testing.TB, scheme, secret string) *verify.Verifier {
	t.Helper()
	v, err := verify.New(scheme, []string{secret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// problemBody decodes a problem+json rejection and checks its shape.
func problemBody(t testing.TB, status int, h http.Header, body []byte) string {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d: Content-Type = %q, want application/problem+json; body %s", status, ct, body)
	}
	var p struct {
		Status int    `json:"status"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if p.Status != status {
		t.Errorf("problem status = %d, want %d", p.Status, status)
	}
	return p.Reason
}

// TestVerifyStatusTable sends each row of docs/receiving.md's webhook_verify rejection table
// through a real hookgate and checks the answer and what reached upstream.
func TestVerifyStatusTable(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	webhook_verify standard {
		secret %s
	}
	reverse_proxy %s`, devSecret, up.Addr()), gatewayOptions{})

	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1","amount":100}`)
	now := time.Now()
	big := bytes.Repeat([]byte("a"), 2<<20)

	flip := func(h http.Header, name string) http.Header {
		h = h.Clone()
		v := []byte(h.Get(name))
		i := len(v) / 2
		switch {
		case v[i] >= '0' && v[i] <= '9': // a digit stays a digit: 9 wraps to 0
			v[i] = '0' + (v[i]-'0'+1)%10
		case v[i] == 'A':
			v[i] = 'B'
		default:
			v[i] = 'A'
		}
		h.Set(name, string(v))
		return h
	}
	changedBody := bytes.Replace(body, []byte("100"), []byte("101"), 1)

	tests := []struct {
		name       string
		header     http.Header
		body       []byte
		wantStatus int
		wantReason string
	}{
		{"genuine", s.Sign("msg_ok", now, body), body, 200, ""},
		{"one changed body byte", s.Sign("msg_b", now, body), changedBody, 401, "bad_signature"},
		{"one changed signature byte", flip(s.Sign("msg_s", now, body), "Webhook-Signature"), body, 401, "bad_signature"},
		{"one changed timestamp digit", flip(s.Sign("msg_t", now, body), "Webhook-Timestamp"), body, 401, "bad_signature"},
		{"6 minutes old", s.Sign("msg_old", now.Add(-6*time.Minute), body), body, 401, "timestamp_out_of_tolerance"},
		{"6 minutes ahead", s.Sign("msg_new", now.Add(6*time.Minute), body), body, 401, "timestamp_out_of_tolerance"},
		{"2 MiB body", s.Sign("msg_big", now, big), big, 413, "body_too_large"},
		{"no headers", http.Header{}, body, 400, "missing_header"},
		{"no v1 or v1a pair", func() http.Header {
			h := s.Sign("msg_m", now, body)
			h.Set("Webhook-Signature", "v2,AAAA")
			return h
		}(), body, 400, "malformed_header"},
		{"non-integer timestamp", func() http.Header {
			h := s.Sign("msg_m", now, body)
			h.Set("Webhook-Timestamp", "yesterday")
			return h
		}(), body, 400, "malformed_header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.count()
			status, h, got := post(t, g.URL+"/hooks", tt.header, tt.body)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", status, tt.wantStatus, got)
			}
			if tt.wantStatus == 200 {
				if up.count() != before+1 {
					t.Fatalf("upstream got %d requests, want 1", up.count()-before)
				}
				r := up.received()[before]
				if !bytes.Equal(r.Body, tt.body) {
					t.Errorf("upstream body differs:\n got %q\nwant %q", r.Body, tt.body)
				}
				for _, name := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
					if r.Header.Get(name) != tt.header.Get(name) {
						t.Errorf("upstream %s = %q, want %q", name, r.Header.Get(name), tt.header.Get(name))
					}
				}
				if r.Header.Get("Content-Length") != strconv.Itoa(len(tt.body)) {
					t.Errorf("upstream Content-Length = %q, want %d", r.Header.Get("Content-Length"), len(tt.body))
				}
				return
			}
			if reason := problemBody(t, status, h, got); reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", reason, tt.wantReason)
			}
			if up.count() != before {
				t.Errorf("upstream got %d requests on a rejection", up.count()-before)
			}
			if strings.Contains(string(got), devSecret) || strings.Contains(string(got), tt.header.Get("Webhook-Signature")+"x") {
				t.Errorf("rejection body holds a secret: %s", got)
			}
		})
	}

	t.Run("chunked 2 MiB body", func(t *testing.T) {
		before := up.count()
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/hooks", struct{ *bytes.Reader }{bytes.NewReader(big)})
		req.Header = s.Sign("msg_chunked", now, big)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 413 || up.count() != before {
			t.Errorf("status %d, upstream +%d; want 413 and nothing forwarded", resp.StatusCode, up.count()-before)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := g.Metrics()
		for _, want := range []string{
			`hookgate_verify_requests_total{result="accepted",scheme="standard"} 1`,
			`hookgate_verify_requests_total{result="bad_signature",scheme="standard"} 3`,
			`hookgate_verify_requests_total{result="body_too_large",scheme="standard"} 2`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q; hookgate lines:\n%s", want, grepLines(m, "hookgate_"))
			}
		}
	})

	t.Run("no secret in logs", func(t *testing.T) {
		if strings.Contains(g.logs.String(), devSecret) {
			t.Error("logs hold the secret")
		}
	})
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestVerifyEverySchemeAndPlaceholders runs one route per scheme and checks
// that a genuine request passes with its placeholders set, and that a
// request signed for another route's secret does not.
func TestVerifyEverySchemeAndPlaceholders(t *testing.T) {
	up := newUpstream(t, nil)
	secrets := map[string]string{
		"standard": devSecret, "stripe": "whsec_stripe_test", "github": "gh-secret",
		"shopify": "shop-secret", "slack": "slack-secret", "hookgate": "hg-secret",
		"zoom": "zoom-secret", "meta": "meta-secret", "twitter": "x-secret", "twilio": "twilio-token",
	}
	// The named HMAC schemes; the generic hmac has its own test
	// (TestGenericHMACEndToEnd), as it needs its configuration block, and
	// so have rfc9421 (TestRFC9421EndToEnd), whose secrets carry a keyid,
	// twilio (TestTwilioEndToEnd), which signs the URL, and the
	// catalogue's other providers (verify's vector tests; their handshakes
	// and the public-key ones in TestHandshakes and TestPublicKeyProviders).
	named := []string{"standard", "stripe", "github", "shopify", "slack", "hookgate", "zoom", "meta", "twitter"}
	var site strings.Builder
	for _, scheme := range named {
		fmt.Fprintf(&site, `
	handle /%[1]s {
		webhook_verify %[1]s {
			secret old-%[2]s %[2]s
		}
		request_header X-Hookgate-Id {webhook.id}
		request_header X-Hookgate-Scheme {webhook.scheme}
		request_header X-Hookgate-Ts {webhook.timestamp}
		request_header X-Hookgate-Entity {webhook.json.reservation_id}
		reverse_proxy %[3]s
	}`, scheme, secrets[scheme], up.Addr())
	}
	// The standard scheme's secret must be base64: give it a valid old one.
	g := startGateway(t, strings.Replace(site.String(), "old-"+devSecret, "whsec_b2xkLXNlY3JldC1mb3Itcm90YXRpb24=", 1), gatewayOptions{})

	body := []byte(`{"id":"evt_77","event_id":"Ev77","reservation_id":"r-42"}`)
	now := time.Now()
	for _, scheme := range named {
		t.Run(scheme, func(t *testing.T) {
			h := signer(t, scheme, secrets[scheme]).Sign("msg_77", now, body)
			before := up.count()
			status, _, got := post(t, g.URL+"/"+scheme, h, body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, got)
			}
			r := up.received()[before]
			// The schemes that carry no delivery ID leave {webhook.id} empty
			// (dedupe keys them by body); those without a time leave
			// {webhook.timestamp} empty.
			wantID := "msg_77"
			switch scheme {
			case "stripe":
				wantID = "evt_77"
			case "slack":
				wantID = "Ev77"
			case "zoom", "meta", "twitter":
				wantID = ""
			}
			wantTS := strconv.FormatInt(now.Unix(), 10)
			if scheme == "github" || scheme == "shopify" || scheme == "meta" || scheme == "twitter" {
				wantTS = ""
			}
			gotPH := []string{r.Header.Get("X-Hookgate-Id"), r.Header.Get("X-Hookgate-Scheme"), r.Header.Get("X-Hookgate-Ts"), r.Header.Get("X-Hookgate-Entity")}
			if diff := cmp.Diff([]string{wantID, scheme, wantTS, "r-42"}, gotPH); diff != "" {
				t.Errorf("placeholders (-want +got):\n%s", diff)
			}
			// Signed for another scheme's secret: rejected, nothing forwarded.
			other := "standard"
			if scheme == "standard" {
				other = "hookgate"
			}
			h = signer(t, scheme, fakeSecretFor(scheme, secrets[other])).Sign("msg_78", now, body)
			before = up.count()
			if status, _, got := post(t, g.URL+"/"+scheme, h, body); status != 401 || up.count() != before {
				t.Errorf("wrong secret: status %d (%s), upstream +%d; want 401, nothing", status, got, up.count()-before)
			}
		})
	}

	t.Run("stripe-go signed", func(t *testing.T) {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secrets["stripe"], Timestamp: time.Now()})
		h := http.Header{"Stripe-Signature": {signed.Header}}
		if status, _, got := post(t, g.URL+"/stripe", h, body); status != 200 {
			t.Errorf("status %d: %s", status, got)
		}
	})
}

func fakeSecretFor(scheme, s string) string {
	if scheme == "standard" {
		return "whsec_d3Jvbmcgc2VjcmV0LCBsb25nIGVub3VnaA=="
	}
	return s
}

// TestSignCommand drives `hookgate sign --send` against a running gateway,
// as the README's walk-through does; the secret reaches the gateway through
// {env.*}.
func TestSignCommand(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	webhook_verify {
		secret {env.TEST_WEBHOOK_SECRET}
	}
	reverse_proxy %s`, up.Addr()), gatewayOptions{Env: []string{"TEST_WEBHOOK_SECRET=" + devSecret}})

	body := `{"type":"reservation.confirmed","reservation_id":"r-9"}`
	cmd := exec.Command(binary, "sign", "--id", "msg_cli", "--send", g.URL+"/hooks", body)
	cmd.Env = append(cmd.Environ(), "HOOKGATE_SECRET="+devSecret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sign --send: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "HTTP/1.1 200 OK") {
		t.Errorf("sign --send printed:\n%s", out)
	}
	if r := up.received(); len(r) != 1 || string(r[0].Body) != body || r[0].Header.Get("Webhook-Id") != "msg_cli" {
		t.Fatalf("upstream received %+v", r)
	}

	cmd = exec.Command(binary, "sign", "--secret", "whsec_d3Jvbmcgc2VjcmV0LCBsb25nIGVub3VnaA==", "--send", g.URL+"/hooks", body)
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("wrong secret: err = %v, want exit code 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "401") || !strings.Contains(string(out), "bad_signature") {
		t.Errorf("wrong secret printed:\n%s", out)
	}
	if up.count() != 1 {
		t.Errorf("upstream got %d requests, want 1", up.count())
	}
}

// TestListModules checks the binary carries hookgate's modules.
func TestListModules(t *testing.T) {
	out, err := exec.Command(binary, "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, out)
	}
	for _, want := range []string{"\nhookgate\n", "\nhttp.handlers.webhook_verify\n", "\nhttp.handlers.webhook_dedupe\n", "\nhttp.handlers.webhook_freshness\n"} {
		if !strings.Contains("\n"+string(out), want) {
			t.Errorf("list-modules lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestVerifyRequestBodyLimit checks Caddy's own request_body limit, when
// lower than max_body, also answers 413 body_too_large.
func TestVerifyRequestBodyLimit(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	request_body {
		max_size 1KB
	}
	webhook_verify {
		secret %s
	}
	reverse_proxy %s`, devSecret, up.Addr()), gatewayOptions{})
	// Chunked, so Caddy cannot refuse it by Content-Length before verify
	// reads it.
	body := bytes.Repeat([]byte("a"), 4096)
	req, _ := http.NewRequest(http.MethodPost, g.URL, struct{ *bytes.Reader }{bytes.NewReader(body)})
	req.Header = signer(t, "standard", devSecret).Sign("msg_rb", time.Now(), body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || problemBody(t, resp.StatusCode, resp.Header, got) != "body_too_large" || up.count() != 0 {
		t.Fatalf("%d %s, upstream %d; want 413 body_too_large", resp.StatusCode, got, up.count())
	}
}
