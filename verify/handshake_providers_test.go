package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

func TestMetaSubscribe(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "meta", []string{"app-secret"}, Options{VerifyToken: "meta-token"})
	get := func(q string) Request {
		return Request{Method: http.MethodGet, URL: "https://gw.example/meta?" + q, Header: http.Header{}}
	}
	a, ok := v.Handshake(get("hub.mode=subscribe&hub.verify_token=meta-token&hub.challenge=1158201444"), t0)
	if !ok || a.Status != http.StatusOK || string(a.Body) != "1158201444" {
		t.Errorf("the right token: ok = %v, answer = %+v, want 200 1158201444", ok, a)
	}
	for _, q := range []string{"hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1", "hub.mode=subscribe&hub.challenge=1"} {
		if a, ok := v.Handshake(get(q), t0); !ok || a.Status != http.StatusForbidden || a.Reason != problem.BadVerifyToken {
			t.Errorf("%s: ok = %v, answer = %+v, want 403 %s", q, ok, a, problem.BadVerifyToken.Code)
		}
	}
	// Without a verify_token configured, no token is right.
	bare := mustNew(t, "meta", []string{"app-secret"}, Options{})
	if a, _ := bare.Handshake(get("hub.mode=subscribe&hub.verify_token=&hub.challenge=1"), t0); a.Status != http.StatusForbidden {
		t.Errorf("no verify_token configured, an empty token: answer = %+v, want 403", a)
	}
	if _, ok := v.Handshake(get("foo=bar"), t0); ok {
		t.Error("a GET without hub.mode was answered as the handshake")
	}
}

func TestTwitterCRC(t *testing.T) {
	t.Parallel()
	const secret = "consumer-secret"
	v := mustNew(t, "twitter", []string{secret}, Options{})
	get := func(token string) Request {
		return Request{Method: http.MethodGet, URL: "https://gw.example/x?crc_token=" + token, Header: http.Header{}}
	}
	a, ok := v.Handshake(get("9b4507b3-9040-4669-9ec0-d1ad4d0b3d49"), t0)
	if !ok || a.Status != http.StatusOK {
		t.Fatalf("crc: ok = %v, answer = %+v", ok, a)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("9b4507b3-9040-4669-9ec0-d1ad4d0b3d49"))
	var got struct {
		ResponseToken string `json:"response_token"`
	}
	if err := json.Unmarshal(a.Body, &got); err != nil || got.ResponseToken != "sha256="+base64.StdEncoding.EncodeToString(m.Sum(nil)) {
		t.Errorf("response_token = %q (%v)", a.Body, err)
	}

	// The CRC answer is X's body signature of the token: were any token
	// answered, the gateway would sign a body an attacker chose. A JSON
	// body cannot pass as a token.
	forged := []byte(`{"for_user_id":"1","tweet_create_events":[]}`)
	if a, ok := v.Handshake(get(urlEscape(string(forged))), t0); !ok || a.Status != http.StatusBadRequest || a.Reason != problem.BadCRCToken {
		t.Fatalf("a JSON body as the token: ok = %v, answer = %+v, want 400 %s", ok, a, problem.BadCRCToken.Code)
	}
	// Nor can any token the CRC does answer pass as a body: X posts JSON
	// objects only, and every other body is refused, however signed.
	for _, token := range []string{"null", "true", "123", "-1e5", "event=deleted", "abc"} {
		a, _ := v.Handshake(get(urlEscape(token)), t0)
		var answer struct {
			ResponseToken string `json:"response_token"`
		}
		if err := json.Unmarshal(a.Body, &answer); err != nil || a.Status != http.StatusOK {
			t.Fatalf("crc_token %q: %+v", token, a)
		}
		h := http.Header{"X-Twitter-Webhooks-Signature": {answer.ResponseToken}}
		if _, err := v.Verify(Request{Method: http.MethodPost, Header: h, Body: []byte(token)}, t0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("the body %q under the CRC answer for it: err = %v, want ErrBadSignature", token, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 129), "a%20b", "a.b", "a%7Bb"} {
		if a, _ := v.Handshake(get(bad), t0); a.Status != http.StatusBadRequest {
			t.Errorf("crc_token %q: answer = %+v, want 400", bad, a)
		}
	}
	if a, _ := v.Handshake(get(strings.Repeat("A-_=9", 25)+"abc"), t0); a.Status != http.StatusOK {
		t.Errorf("a 128-character token of the allowed set: answer = %+v, want 200", a)
	}
}

func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("%" + hex.EncodeToString([]byte{s[i]}))
	}
	return b.String()
}

func TestZoomURLValidation(t *testing.T) {
	t.Parallel()
	const secret = "zoom-secret-token"
	v := mustNew(t, "zoom", []string{secret}, Options{})
	body := []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
	a, ok := v.Handshake(Request{Method: http.MethodPost, Header: v.Sign("", t0, body), Body: body}, t0)
	if !ok || a.Status != http.StatusOK {
		t.Fatalf("url_validation: ok = %v, answer = %+v", ok, a)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("qgg8vlvZRS6UYooatFL8Aw"))
	want := `{"encryptedToken":"` + hex.EncodeToString(m.Sum(nil)) + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`
	if string(a.Body) != want {
		t.Errorf("answer = %s, want %s", a.Body, want)
	}
	// Unsigned, it is not answered: the encrypted token is an HMAC under
	// the secret, which only Zoom may ask for.
	if _, ok := v.Handshake(Request{Method: http.MethodPost, Header: http.Header{}, Body: body}, t0); ok {
		t.Error("an unsigned url_validation was answered")
	}
}

// TestZoomURLValidationRotation: during a rotation, Zoom's token is
// encrypted with the secret Zoom signed the handshake with, not the first.
func TestZoomURLValidationRotation(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "zoom", []string{"new-zoom-secret", "old-zoom-secret"}, Options{})
	oldSigner := mustNew(t, "zoom", []string{"old-zoom-secret"}, Options{})
	body := []byte(`{"payload":{"plainToken":"tok"},"event":"endpoint.url_validation"}`)
	a, ok := v.Handshake(Request{Method: http.MethodPost, Header: oldSigner.Sign("", t0, body), Body: body}, t0)
	m := hmac.New(sha256.New, []byte("old-zoom-secret"))
	m.Write([]byte("tok"))
	if !ok || !strings.Contains(string(a.Body), hex.EncodeToString(m.Sum(nil))) {
		t.Errorf("signed with the second secret: ok = %v, answer %s; want the token under that secret", ok, a.Body)
	}
}

// TestTwitchCallbackVerification: EventSub's webhook_callback_verification
// is answered with its challenge, as plain text, only when it is signed
// under the secret; a notification is no handshake.
func TestTwitchCallbackVerification(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "twitch", []string{"s3cRe7s3cRe7"}, Options{})
	body := []byte(`{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2"}}`)
	h := v.Sign("e76c6bd4-55c9-4987-8304-da1588d8988b", t0, body)
	h.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
	a, ok := v.Handshake(Request{Method: http.MethodPost, Header: h, Body: body}, t0)
	if !ok || a.Status != http.StatusOK || string(a.Body) != "pogchamp-kappa-360noscope-vohiyo" || a.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("callback verification: ok = %v, answer = %d %q %v", ok, a.Status, a.Body, a.Header)
	}
	forged := h.Clone()
	forged.Set("Twitch-Eventsub-Message-Signature", "sha256="+strings.Repeat("0", 64))
	if _, ok := v.Handshake(Request{Method: http.MethodPost, Header: forged, Body: body}, t0); ok {
		t.Error("a mis-signed callback verification was answered")
	}
	if _, ok := v.Handshake(Request{Method: http.MethodPost, Header: h, Body: body}, t0.Add(time.Hour)); ok {
		t.Error("a stale callback verification was answered")
	}
	h.Set("Twitch-Eventsub-Message-Type", "notification")
	if _, ok := v.Handshake(Request{Method: http.MethodPost, Header: h, Body: body}, t0); ok {
		t.Error("a notification was answered as a handshake")
	}
}

// TestDropboxChallenge: a webhook's verification, GET ?challenge=<c>, is
// answered 200 with c as plain text the browser must not sniff, as
// Dropbox's reference asks; it is unsigned, so a challenge that is empty,
// over 128 characters or outside the token characters is not echoed, and
// goes on to Verify (which refuses it: no signature).
func TestDropboxChallenge(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "dropbox", []string{"dropbox-app-secret"}, Options{})
	get := func(q string) Request {
		return Request{Method: http.MethodGet, URL: "https://gw.example/dropbox?" + q, Header: http.Header{}}
	}
	a, ok := v.Handshake(get("challenge=abc123"), t0)
	if !ok || a.Status != http.StatusOK || string(a.Body) != "abc123" {
		t.Fatalf("challenge: ok = %v, answer = %+v, want 200 abc123", ok, a)
	}
	if a.Header.Get("Content-Type") != "text/plain; charset=utf-8" || a.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers = %v, want text/plain and nosniff", a.Header)
	}
	if a, ok := v.Handshake(get("challenge="+strings.Repeat("A", crcTokenMax)), t0); !ok || len(a.Body) != crcTokenMax {
		t.Errorf("a challenge of %d characters: ok = %v, answer = %+v, want it echoed", crcTokenMax, ok, a)
	}
	for _, q := range []string{"challenge=", "challenge=" + strings.Repeat("A", crcTokenMax+1), "challenge=%3Cscript%3E", "challenge=a+b", "other=1"} {
		r := get(q)
		if a, ok := v.Handshake(r, t0); ok {
			t.Errorf("%.40s: answered %+v, want it left to Verify", q, a)
		}
		if _, err := v.Verify(r, t0); !errors.Is(err, ErrMissingHeader) {
			t.Errorf("%.40s: Verify = %v, want ErrMissingHeader", q, err)
		}
	}
	if _, ok := v.Handshake(Request{Method: http.MethodPost, URL: "https://gw.example/dropbox?challenge=abc123", Header: http.Header{}}, t0); ok {
		t.Error("a POST with a challenge was answered as the handshake")
	}
}
