package integration

// RFC 9421 HTTP Message Signatures end to end (issue 20): a gateway
// verifying scheme rfc9421 in front of webhook_dedupe, fed by a signer in
// the test, by `hookgate sign` and by a sender destination of the same
// gateway signing with scheme rfc9421.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

func TestRFC9421EndToEnd(t *testing.T) {
	key := "whsec_" + base64.StdEncoding.EncodeToString([]byte("rfc 9421 end-to-end key, 32 b.."))
	up := newUpstream(t, nil)
	port := freePort(t)
	hooks := fmt.Sprintf("http://127.0.0.1:%d/hooks", port)
	g := startGateway(t, fmt.Sprintf(`
	handle /events {
		webhook_enqueue receiver
	}
	handle /hooks {
		webhook_verify rfc9421 {
			secret k1 %[1]s
		}
		request_header X-Hookgate-Id {webhook.id}
		webhook_dedupe
		reverse_proxy %[2]s
	}`, key, up.Addr()), gatewayOptions{Port: port, Global: fmt.Sprintf(`hookgate {
		store file
		destination receiver {
			url %s
			scheme rfc9421
			key_id k1
			secret %s
		}
	}`, hooks, key)})

	s, err := verify.New("rfc9421", []string{key}, verify.Options{KeyIDs: []string{"k1"}})
	if err != nil {
		t.Fatal(err)
	}
	// sign signs a JSON POST of body to /hooks, covering id when given.
	sign := func(t *testing.T, s *verify.Verifier, id string, body []byte) http.Header {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}}
		sig, err := s.SignRequest(verify.Request{Method: http.MethodPost, URL: hooks, Header: h, Body: body}, id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range sig {
			h[k] = v
		}
		return h
	}
	// expect posts and checks the answer and how many requests reached
	// upstream in all.
	expect := func(t *testing.T, h http.Header, body []byte, wantStatus int, wantReason, wantReplayed string, wantUpstream int) {
		t.Helper()
		status, rh, got := post(t, hooks, h, body)
		if status != wantStatus {
			t.Fatalf("status = %d, want %d; body %s", status, wantStatus, got)
		}
		if wantReason != "" {
			if reason := problemBody(t, status, rh, got); reason != wantReason {
				t.Errorf("reason = %q, want %q", reason, wantReason)
			}
		}
		if r := rh.Get("Idempotent-Replayed"); r != wantReplayed {
			t.Errorf("Idempotent-Replayed = %q, want %q", r, wantReplayed)
		}
		if n := up.count(); n != wantUpstream {
			t.Errorf("upstream got %d requests, want %d", n, wantUpstream)
		}
	}
	lastID := func() string { rs := up.received(); return rs[len(rs)-1].Header.Get("X-Hookgate-Id") }

	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1"}`)
	t.Run("covered id: the delivery ID keys dedupe", func(t *testing.T) {
		h := sign(t, s, "evt_1", body)
		expect(t, h, body, 200, "", "", 1)
		if id := lastID(); id != "evt_1" {
			t.Errorf("{webhook.id} = %q, want evt_1", id)
		}
		expect(t, h, body, 200, "", "true", 1) // the same request again: replayed
		// Signed afresh under the same ID: still the same key, replayed.
		expect(t, sign(t, s, "evt_1", body), body, 200, "", "true", 1)
		// The same ID with another body: the key is the ID.
		other := []byte(`{"type":"reservation.confirmed","reservation_id":"r-2"}`)
		expect(t, sign(t, s, "evt_1", other), other, 422, "key_reused_with_different_payload", "", 1)
	})
	t.Run("uncovered id: the body keys dedupe", func(t *testing.T) {
		body := []byte(`{"type":"seat.released","seat":"12A"}`)
		expect(t, sign(t, s, "", body), body, 200, "", "", 2)
		if id := lastID(); id != "" {
			t.Errorf("{webhook.id} = %q, want empty: no ID is covered", id)
		}
		// An Idempotency-Key the signature does not cover changes nothing:
		// the same body is the same delivery.
		h := sign(t, s, "", body)
		h.Set("Idempotency-Key", "evt_forged")
		expect(t, h, body, 200, "", "true", 2)
	})
	t.Run("rejections", func(t *testing.T) {
		h := sign(t, s, "evt_2", body)
		tampered := []byte(strings.Replace(string(body), "r-1", "r-9", 1))
		expect(t, h, tampered, 401, "bad_signature", "", 2)
		h2 := h.Clone()
		h2.Set("Content-Type", "text/plain")
		expect(t, h2, body, 401, "bad_signature", "", 2)
		other, err := verify.New("rfc9421", []string{key}, verify.Options{KeyIDs: []string{"k2"}})
		if err != nil {
			t.Fatal(err)
		}
		expect(t, sign(t, other, "evt_3", body), body, 401, "bad_signature", "", 2)
		old, err := s.SignRequest(verify.Request{Method: http.MethodPost, URL: hooks, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, "evt_4", time.Now().Add(-6*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		old.Set("Content-Type", "application/json")
		expect(t, old, body, 401, "timestamp_out_of_tolerance", "", 2)
		h3 := h.Clone()
		h3.Set("Signature-Input", strings.Replace(h.Get("Signature-Input"), `"content-digest" `, "", 1))
		expect(t, h3, body, 400, "malformed_header", "", 2)
	})
	t.Run("hookgate sign --scheme rfc9421", func(t *testing.T) {
		out, err := exec.Command(binary, "sign", "--scheme", "rfc9421", "--secret", key, "--key-id", "k1",
			"--id", "evt_cli", "--send", hooks, `{"from":"cli"}`).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK") {
			t.Fatalf("sign --send: %v\n%s", err, out)
		}
		if id := lastID(); id != "evt_cli" {
			t.Errorf("{webhook.id} = %q, want evt_cli", id)
		}
	})
	t.Run("a destination signing rfc9421", func(t *testing.T) {
		before := up.count()
		payload := `{"type":"reservation.confirmed","reservation_id":"r-3"}`
		st, _, got := request(t, http.MethodPost, g.URL+"/events", http.Header{"Idempotency-Key": {"evt_sent"}, "Content-Type": {"application/json"}}, payload)
		if st != 202 {
			t.Fatalf("enqueue: %d %s", st, got)
		}
		waitFor(t, "the delivery", func() bool { return up.count() > before })
		r := up.received()[before]
		if id := r.Header.Get("X-Hookgate-Id"); id != "evt_sent" || string(r.Body) != payload {
			t.Errorf("delivered ID %q body %s; want evt_sent, %s", id, r.Body, payload)
		}
		if in := r.Header.Get("Signature-Input"); !strings.Contains(in, `keyid="k1"`) || !strings.Contains(in, `"idempotency-key"`) {
			t.Errorf("Signature-Input = %s, want keyid k1 and the id covered", in)
		}
		time.Sleep(300 * time.Millisecond)
		if n := up.count(); n != before+1 {
			t.Errorf("upstream got %d deliveries, want 1: the destination's 2xx settles it", n-before)
		}
	})
}
