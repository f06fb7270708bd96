package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

const twilioToken = "twilio-auth-token"

// twilioSite verifies twilio (behind a proxy at public.example.com when
// url is set), dedupes, and forwards to upstreamAddr.
func twilioSite(url, upstreamAddr string) string {
	if url != "" {
		url = "url " + url
	}
	return fmt.Sprintf(`
	webhook_verify twilio {
		secret %s
		%s
	}
	webhook_dedupe
	reverse_proxy %s`, twilioToken, url, upstreamAddr)
}

// twilioSigned returns the headers of a request Twilio sends to u: its
// signature, the body's type, and the idempotency token when id is set.
func twilioSigned(t *testing.T, u, id, contentType string, body []byte) http.Header {
	t.Helper()
	h := http.Header{"Content-Type": {contentType}}
	sig, err := signer(t, "twilio", twilioToken).SignRequest(verify.Request{Method: http.MethodPost, URL: u, Header: h, Body: body}, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sig {
		h[k] = v
	}
	return h
}

// TestTwilioEndToEnd: behind a proxy, a gateway verifies twilio against
// its url setting: a form POST signed for the public URL passes once and
// its retry is replayed, with or without the idempotency token; the same
// request at a gateway without the setting is refused, as it sees another
// URL; a JSON body is verified through the URL's bodySHA256.
func TestTwilioEndToEnd(t *testing.T) {
	up := newUpstream(t, nil)
	const publicURL = "https://public.example.com{http.request.uri}"
	behindProxy := startGateway(t, twilioSite(publicURL, up.Addr()), gatewayOptions{})
	direct := startGateway(t, twilioSite("", up.Addr()), gatewayOptions{})
	const form = "application/x-www-form-urlencoded"

	const path = "/sms?tenant=t-1"
	call := []byte("AccountSid=AC1&Body=Hello%2C+world&From=%2B15005550006&MessageSid=SM" + randomID("") + "&To=%2B15005550001")
	h := twilioSigned(t, "https://public.example.com"+path, randomID("idem_"), form, call)

	before := up.count()
	st, hdr, got := post(t, behindProxy.URL+path, h, call)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a genuine form POST: status %d, replayed %q: %s", st, hdr.Get("Idempotent-Replayed"), got)
	}
	if r := up.received()[before]; !bytes.Equal(r.Body, call) || r.Header.Get("Content-Type") != form {
		t.Errorf("upstream got %q (%s), want the body unchanged", r.Body, r.Header.Get("Content-Type"))
	}
	st, hdr, got2 := post(t, behindProxy.URL+path, h, call)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || !bytes.Equal(got2, got) || up.count() != before+1 {
		t.Errorf("its retry: status %d, replayed %q, upstream hit %d times; want a replay and one hit", st, hdr.Get("Idempotent-Replayed"), up.count()-before)
	}

	// A captured request re-sent under a fresh token, or with its form
	// parameters reordered or repeated, still verifies (Twilio signs no
	// token, and sorts the parameters), but is never forwarded again:
	// dedupe keys twilio by its signature, which every copy carries. The
	// same body is replayed; another body under that key is 422.
	fresh := h.Clone()
	fresh.Set("I-Twilio-Idempotency-Token", randomID("idem_"))
	reordered := []byte(strings.Join(append(strings.Split(string(call), "&")[2:], strings.Split(string(call), "&")[:2]...), "&"))
	for name, c := range map[string]struct {
		h      http.Header
		body   []byte
		status int
	}{
		"a fresh token":           {fresh, call, 200},
		"reordered parameters":    {h, reordered, 422},
		"a parameter given twice": {h, append(append([]byte{}, call...), "&To=%2B15005550001"...), 422},
	} {
		st, hdr, got := post(t, behindProxy.URL+path, c.h, c.body)
		if st != c.status || (st == 200) != (hdr.Get("Idempotent-Replayed") == "true") {
			t.Errorf("the captured request with %s: status %d, replayed %q; want %d, replayed if 200: %s", name, st, hdr.Get("Idempotent-Replayed"), c.status, got)
		}
	}
	if up.count() != before+1 {
		t.Errorf("the captured request's copies reached the upstream %d times, want once in all", up.count()-before)
	}

	// Without a token, the retry is keyed by the signature too.
	noToken := bytes.Replace(call, []byte("Hello"), []byte("Again"), 1)
	h2 := twilioSigned(t, "https://public.example.com"+path, "", form, noToken)
	before = up.count()
	for i, want := range []string{"", "true"} {
		if st, hdr, got := post(t, behindProxy.URL+path, h2, noToken); st != 200 || hdr.Get("Idempotent-Replayed") != want {
			t.Errorf("no token, copy %d: status %d, replayed %q, want %q: %s", i+1, st, hdr.Get("Idempotent-Replayed"), want, got)
		}
	}
	if n := up.count() - before; n != 1 {
		t.Errorf("no token: upstream hit %d times, want 1", n)
	}

	// The gateway without the url setting signs its own URL, http://127.0.0.1:<port>.
	before = up.count()
	st, hdr, got = post(t, direct.URL+path, h, call)
	if reason := problemBody(t, st, hdr, got); st != 401 || reason != "bad_signature" {
		t.Errorf("the public URL's signature at the gateway's own URL: %d %s, want 401 bad_signature", st, reason)
	}
	own := twilioSigned(t, direct.URL+path, randomID("idem_"), form, call)
	if st, _, got := post(t, direct.URL+path, own, call); st != 200 {
		t.Errorf("signed for the gateway's own URL: status %d: %s", st, got)
	}
	if n := up.count() - before; n != 1 {
		t.Errorf("the direct gateway: upstream hit %d times, want 1", n)
	}

	// Behind handle_path, the default URL is still the one the request
	// arrived at, not the rewritten one.
	rewritten := startGateway(t, "handle_path /twilio/* {"+twilioSite("", up.Addr())+"\n\t}", gatewayOptions{})
	before = up.count()
	arrived := rewritten.URL + "/twilio" + path
	if st, _, got := post(t, arrived, twilioSigned(t, arrived, randomID("idem_"), form, call), call); st != 200 || up.count()-before != 1 {
		t.Errorf("behind handle_path, signed for the URL called: status %d (%s), upstream +%d; want 200, 1", st, got, up.count()-before)
	}

	// A JSON body is signed through the URL's bodySHA256.
	event := []byte(`{"sid":"EV` + randomID("") + `","type":"com.twilio.messaging.message.delivered"}`)
	sum := sha256.Sum256(event)
	jsonPath := "/events?bodySHA256=" + hex.EncodeToString(sum[:])
	hj := twilioSigned(t, "https://public.example.com"+jsonPath, randomID("idem_"), "application/json", event)
	before = up.count()
	if st, _, got := post(t, behindProxy.URL+jsonPath, hj, event); st != 200 {
		t.Errorf("a JSON body with its bodySHA256: status %d: %s", st, got)
	}
	changed := bytes.Replace(event, []byte("delivered"), []byte("undelivered"), 1)
	hc := hj.Clone()
	hc.Set("I-Twilio-Idempotency-Token", randomID("idem_"))
	st, hdr, got = post(t, behindProxy.URL+jsonPath, hc, changed)
	if reason := problemBody(t, st, hdr, got); st != 401 || reason != "bad_signature" {
		t.Errorf("a changed JSON body: %d %s, want 401 bad_signature", st, reason)
	}
	if n := up.count() - before; n != 1 {
		t.Errorf("JSON: upstream hit %d times, want 1", n)
	}

	// A missing or undecodable signature is the sender's mistake: 400.
	for name, sig := range map[string]string{"missing_header": "", "malformed_header": "not base64!"} {
		bad := h.Clone()
		bad.Set("X-Twilio-Signature", sig)
		if sig == "" {
			bad.Del("X-Twilio-Signature")
		}
		st, hdr, got := post(t, behindProxy.URL+path, bad, call)
		if reason := problemBody(t, st, hdr, got); st != 400 || reason != name {
			t.Errorf("signature %q: %d %s, want 400 %s", sig, st, reason, name)
		}
	}
}
