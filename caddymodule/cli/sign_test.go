package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestSignPrintsHeaders: without --send, sign prints the scheme's headers,
// sorted, one "Name: value" a line, for a body given inline, as @file or
// as @- (standard input).
func TestSignPrintsHeaders(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "")
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "Webhook-Id: msg_1\nWebhook-Signature: v1,+xVE8FAZIm7LgRUMek7bIxFHD6uoOR4OSIBAVqRTjuo=\nWebhook-Timestamp: 1700000000\n"
	for _, tc := range []struct{ arg, stdin string }{{"hello", ""}, {"@" + file, ""}, {"@-", "hello"}} {
		got := execute(t, tc.stdin, "sign", "--secret", testSecret, "--id", "msg_1", "--timestamp", "1700000000", tc.arg)
		if got != (result{stdout: want}) {
			t.Errorf("sign %s: %+v; want exit 0 and\n%s", tc.arg, got, want)
		}
	}

	t.Setenv("HOOKGATE_SECRET", testSecret)
	got := execute(t, "", "sign", "--scheme", "stripe", "--timestamp", "1700000000", `{"id":"x"}`)
	if want := "Stripe-Signature: t=1700000000,v1=5c0f6789d2efab10985138588cf88203ba9ba4763f0ec0fe4fbe4c21aa87184b\n"; got != (result{stdout: want}) {
		t.Errorf("sign --scheme stripe, the secret from the environment: %+v; want exit 0 and\n%s", got, want)
	}
}

// TestSignMailgun: sign --scheme mailgun prints its Content-Type, then
// the body with the signature inside: mailgun-php's vector, in a JSON
// webhook's signature object, or, for a form body, in its fields.
func TestSignMailgun(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "key-3ax6xnjp29jd6fds4gc373sgvjxteol0")
	const (
		token = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6"
		sig   = "9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"
	)
	got := execute(t, "", "sign", "--scheme", "mailgun", "--id", token, "--timestamp", "1403645220", `{"event-data":{"event":"delivered"}}`)
	want := "Content-Type: application/json\n\n" +
		`{"event-data":{"event":"delivered"},"signature":{"signature":"` + sig + `","timestamp":"1403645220","token":"` + token + `"}}` + "\n"
	if got != (result{stdout: want}) {
		t.Errorf("sign --scheme mailgun, a JSON body: %+v; want exit 0 and\n%s", got, want)
	}
	got = execute(t, "", "sign", "--scheme", "mailgun", "--id", token, "--timestamp", "1403645220", "event=delivered")
	want = "Content-Type: application/x-www-form-urlencoded\n\nevent=delivered&signature=" + sig + "&timestamp=1403645220&token=" + token + "\n"
	if got != (result{stdout: want}) {
		t.Errorf("sign --scheme mailgun, a form body: %+v; want exit 0 and\n%s", got, want)
	}
}

// TestSignSend: with --send, sign POSTs the signed body with the -H
// headers and the content type, prints the answer, and exits 0 for a 2xx
// answer, 1 otherwise.
func TestSignSend(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "")
	v, err := verify.New("standard", []string{testSecret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got http.Header
	var gotBody []byte
	received := func() (http.Header, []byte) {
		mu.Lock()
		defer mu.Unlock()
		return got, gotBody
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, gotBody = r.Header, body
		mu.Unlock()
		if _, err := v.Verify(verify.Request{Header: r.Header, Body: body}, time.Now()); err != nil {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"reason":"bad_signature"}`)
			return
		}
		w.Header().Set("X-Answer", "yes")
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	res := execute(t, "", "sign", "--secret", testSecret, "--id", "msg_cli", "--send", srv.URL,
		"-H", "X-Tenant: t-1", "-H", "X-Trace: a:b", "--content-type", "text/plain", "hello")
	if res.code != 0 || res.stderr != "" || !strings.HasPrefix(res.stdout, "HTTP/1.1 200 OK\n") ||
		!strings.Contains(res.stdout, "\nX-Answer: yes\n") || !strings.HasSuffix(res.stdout, "\n\nok") {
		t.Errorf("sign --send, a 200 answer: %+v", res)
	}
	if h, body := received(); string(body) != "hello" || h.Get("X-Tenant") != "t-1" || h.Get("X-Trace") != "a:b" ||
		h.Get("Content-Type") != "text/plain" || h.Get("Webhook-Id") != "msg_cli" {
		t.Errorf("the request sent: %v, body %q", h, body)
	}

	res = execute(t, "", "sign", "--secret", testSecret, "--send", srv.URL, `{"a":1}`)
	if h, _ := received(); res.code != 0 || h.Get("Content-Type") != "application/json" {
		t.Errorf("sign --send of a JSON body: %+v, Content-Type %q", res, h.Get("Content-Type"))
	}

	res = execute(t, "", "sign", "--secret", "whsec_d3Jvbmcgc2VjcmV0LCBsb25nIGVub3VnaA==", "--send", srv.URL, "hello")
	if res.code != 1 || res.stderr != "" || !strings.HasPrefix(res.stdout, "HTTP/1.1 401 Unauthorized\n") || !strings.HasSuffix(res.stdout, `{"reason":"bad_signature"}`) {
		t.Errorf("sign --send, a 401 answer: %+v; want exit 1 and the answer", res)
	}
}

// TestSignErrors: each error is exit 1, "Error: ..." on the error output,
// nothing sent or printed.
func TestSignErrors(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "")
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent.Add(1) }))
	defer srv.Close()
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"hello"}, "Error: no secret: pass --secret or set HOOKGATE_SECRET\n"},
		{[]string{"--secret", testSecret, "--scheme", "nope", "hello"}, "Error: --scheme \"nope\": unknown scheme; want one of asana, bitbucket, box, clerk, coinbase-commerce, discord, dropbox, easypost, figma, github, gitlab, gocardless, hookgate, hubspot, linear, mailgun, meta, msgraph, mux, nylas, okta, openai, paddle, pagerduty, polar, postmark, pubsub, razorpay, replicate, resend, rfc9421, sanity, segment, sendgrid, shopify, slack, sns, square, standard, stripe, telnyx, twilio, twitch, twitter, webflow, workos, zoom\n"},
		{[]string{"--secret", testSecret, "--scheme", "stripee", "hello"}, "Error: --scheme \"stripee\": unknown scheme; did you mean \"stripe\"? want one of "},
		{[]string{"--secret", testSecret, "--scheme", "rfc9421", "--url", srv.URL, "hello"}, "Error: scheme rfc9421 names the key it signs with: pass --key-id <keyid>"},
		{[]string{"--secret", testSecret, "--scheme", "hmac", "hello"}, "Error: the generic hmac scheme is configured in a Caddyfile"},
		{[]string{"--secret", testSecret, "-H", "X-GitHub-Event: push", "hello"}, "Error: -H and --content-type are the request's, with --send"},
		{[]string{"--secret", testSecret, "--content-type", "text/plain", "hello"}, "Error: -H and --content-type are the request's, with --send"},
		{[]string{"--secret", testSecret, "@" + filepath.Join(t.TempDir(), "none")}, "Error: open "},
		{[]string{"--secret", testSecret, "--send", srv.URL, "-H", "no-colon", "x"}, "Error: -H \"no-colon\": want 'Name: value'\n"},
		{[]string{"--secret", testSecret, "--send", "http://127.0.0.1:1/", "x"}, "Error: Post \"http://127.0.0.1:1/\": "},
		{[]string{"--secret", testSecret, "--nope", "x"}, "Error: unknown flag: --nope\n"},
		{[]string{"--secret", testSecret, "a", "b"}, "Error: accepts 1 arg(s), received 2\n"},
	} {
		res := execute(t, "", append([]string{"sign"}, tc.args...)...)
		if res.code != 1 || res.stdout != "" || !strings.HasPrefix(res.stderr, tc.stderr) || strings.Count(res.stderr, "Error:") != 1 {
			t.Errorf("sign %q: %+v; want exit 1, stderr %q", tc.args, res, tc.stderr)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestSignRefusesSignedHeaders: an -H naming a header the signature sets
// (its delivery ID, timestamp or signature, in any case) would be replaced
// by sign's own without a word: it is refused, exit 1, pointing to --id,
// and nothing is sent. A header the signature does not set is sent as
// given.
func TestSignRefusesSignedHeaders(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "")
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent.Add(1) }))
	defer srv.Close()
	for _, tc := range []struct {
		scheme, secret, header string
		extra                  []string
	}{
		{"twilio", "twilio-token", "I-Twilio-Idempotency-Token: tok-1", nil},
		{"twilio", "twilio-token", "x-twilio-signature: abc", nil},
		{"standard", testSecret, "webhook-id: msg_mine", nil},
		{"standard", testSecret, "Webhook-Timestamp: 1700000000", nil},
		{"stripe", testSecret, "Stripe-Signature: t=1,v1=00", nil},
		{"github", testSecret, "X-Hub-Signature-256: sha256=00", nil},
		{"rfc9421", testSecret, "Idempotency-Key: k-1", []string{"--key-id", "k"}},
		{"rfc9421", testSecret, "Content-Digest: sha-256=:AA==:", []string{"--key-id", "k"}},
	} {
		name, _, _ := strings.Cut(tc.header, ":")
		args := append([]string{"sign", "--scheme", tc.scheme, "--secret", tc.secret, "--send", srv.URL, "-H", "X-Tenant: t-1", "-H", tc.header}, tc.extra...)
		res := execute(t, "", append(args, "a=1")...) // twilio signs a form
		want := "Error: -H " + name + ": scheme " + tc.scheme + " sets this header itself, with the signature; give the delivery ID with --id"
		if res.code != 1 || res.stdout != "" || !strings.HasPrefix(res.stderr, want) {
			t.Errorf("sign --scheme %s -H %q: %+v; want exit 1, stderr starting %q", tc.scheme, tc.header, res, want)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}

	// Another header goes as given, beside the signature's.
	res := execute(t, "", "sign", "--scheme", "twilio", "--secret", "twilio-token", "--id", "tok-1", "--send", srv.URL, "-H", "X-Tenant: t-1", "Body=hi")
	if res.code != 0 || sent.Load() != 1 {
		t.Errorf("sign --scheme twilio -H X-Tenant: %+v, %d sent; want exit 0, one request", res, sent.Load())
	}
}
