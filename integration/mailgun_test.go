package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// TestMailgunThroughTheBinary runs scheme mailgun, whose signature is in
// the body, through the built binary with webhook_dedupe: a JSON event
// signed and sent by hookgate sign is forwarded once, then replayed; a
// legacy form-encoded event signed by hookgate sign is forwarded; the
// captured event with changed event data (unsigned) verifies, and dedupe,
// keyed by its signed token, refuses it 422, never forwarded; a forged token is 401 bad_signature, a
// stale timestamp 401 timestamp_out_of_tolerance, a token given twice or
// no signature at all 400 malformed_body.
func TestMailgunThroughTheBinary(t *testing.T) {
	const key = "key-mailgun-integration-0c1d"
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	handle /mailgun {
		webhook_verify mailgun {
			secret %s
		}
		webhook_dedupe
		reverse_proxy %s
	}`, key, up.Addr()), gatewayOptions{})
	url := g.URL + "/mailgun"

	// hookgate sign signs and sends a JSON event, twice: Mailgun's retry.
	token := randomID("mg")
	event := `{"event-data":{"event":"delivered","id":"CPgfbmQMTCKtHW6uIWtuVe","recipient":"alice@example.com"}}`
	stamp := fmt.Sprint(time.Now().Unix())
	for i := range 2 {
		out, err := exec.Command(binary, "sign", "--scheme", "mailgun", "--secret", key, "--id", token,
			"--timestamp", stamp, "--send", url, event).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "200 OK") || (i == 1) != strings.Contains(string(out), "Idempotent-Replayed: true") {
			t.Fatalf("hookgate sign --send, %d: %v\n%s", i+1, err, out)
		}
	}
	rs := up.received()
	if len(rs) != 1 || !bytes.Contains(rs[0].Body, []byte(`"token":"`+token+`"`)) || !bytes.Contains(rs[0].Body, []byte(`"event":"delivered"`)) ||
		rs[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the upstream got %d requests, want the signed event once: %+v", len(rs), rs)
	}
	captured := rs[0].Body

	// A legacy webhook: a form, signed by hookgate sign.
	formToken := randomID("mg")
	out, err := exec.Command(binary, "sign", "--scheme", "mailgun", "--secret", key, "--id", formToken,
		"--send", url, "event=delivered&recipient=alice%40example.com").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "200 OK") || strings.Contains(string(out), "Idempotent-Replayed") {
		t.Fatalf("hookgate sign --send of a form: %v\n%s", err, out)
	}
	rs = up.received()
	if len(rs) != 2 || rs[1].Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		!bytes.Contains(rs[1].Body, []byte("token="+formToken)) || !bytes.Contains(rs[1].Body, []byte("signature=")) {
		t.Fatalf("the upstream got %d requests, want the signed form second: %+v", len(rs), rs)
	}

	// The event data is not signed: the captured event, changed, still
	// verifies, and dedupe keyed by its signed token refuses it: the
	// token's delivery had another payload.
	jsonType := http.Header{"Content-Type": {"application/json"}}
	changed := bytes.Replace(captured, []byte("alice@example.com"), []byte("mallory@example.com"), 1)
	if status, h, got := post(t, url, jsonType, changed); status != 422 || problemBody(t, status, h, got) != "key_reused_with_different_payload" {
		t.Fatalf("the captured event, changed: %d %s; want 422 key_reused_with_different_payload", status, got)
	}

	s, err := verify.NewSigner("mailgun", key, "")
	if err != nil {
		t.Fatal(err)
	}
	sign := func(token string, at time.Time) []byte {
		_, body, err := s.SignMessage(verify.Request{Header: jsonType, Body: []byte(event)}, token, at)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	formType := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	for _, tt := range []struct {
		name   string
		header http.Header
		body   []byte
		status int
		reason string
	}{
		{"forged token", jsonType, bytes.Replace(sign("mg-forged-1", time.Now()), []byte("mg-forged-1"), []byte("mg-forged-2"), 1), 401, "bad_signature"},
		{"stale", jsonType, sign(randomID("mg"), time.Now().Add(-10*time.Minute)), 401, "timestamp_out_of_tolerance"},
		{"token given twice", formType, append(bytes.Clone(rs[1].Body), "&token=unsigned"...), 400, "malformed_body"},
		{"no signature", jsonType, []byte(event), 400, "malformed_body"},
	} {
		status, h, got := post(t, url, tt.header, tt.body)
		if status != tt.status || problemBody(t, status, h, got) != tt.reason {
			t.Errorf("%s: %d %s, want %d %s", tt.name, status, got, tt.status, tt.reason)
		}
	}
	if n := up.count(); n != 2 {
		t.Fatalf("a refused or replayed event was forwarded: the upstream has %d requests, want 2", n)
	}
}
