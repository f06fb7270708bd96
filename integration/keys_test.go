package integration

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// docs/receiving.md's Box example: Box signs the body and the timestamp, not
// BOX-DELIVERY-ID.
var boxHMAC = verify.HMAC{
	IDHeader: "BOX-DELIVERY-ID", TimestampHeader: "BOX-DELIVERY-TIMESTAMP", SignatureHeader: "BOX-SIGNATURE-PRIMARY",
	Encoding: "base64", Content: "{body}{timestamp}",
}

const boxKey = "box-primary-key-7d1f"

// TestHMACKeyedByBody: a captured Box request re-sent under fresh
// BOX-DELIVERY-ID values verifies (the ID is not signed), and reached the
// upstream once per ID. It is now keyed by its body: the copies are
// replayed, and a copy sent under the ID of a genuine delivery still to
// come no longer squats it.
func TestHMACKeyedByBody(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	webhook_verify hmac {
		secret %s
		hmac {
			id_header        BOX-DELIVERY-ID
			timestamp_header BOX-DELIVERY-TIMESTAMP
			signature_header BOX-SIGNATURE-PRIMARY
			encoding         base64
			content          "{body}{timestamp}"
		}
	}
	webhook_dedupe
	reverse_proxy %s`, boxKey, up.Addr()), gatewayOptions{})
	box, err := verify.New("hmac", []string{boxKey}, verify.Options{HMAC: &boxHMAC})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	captured := []byte(`{"type":"webhook_event","id":"` + randomID("e") + `","trigger":"FILE.UPLOADED"}`)
	h := box.Sign(randomID("box_"), now, captured)
	nextID := randomID("box_") // the ID of a genuine delivery still to come
	for i, id := range []string{h.Get("BOX-DELIVERY-ID"), randomID("box_"), nextID} {
		h.Set("BOX-DELIVERY-ID", id)
		st, hdr, got := post(t, g.URL, h, captured)
		if want := map[bool]string{true: "", false: "true"}[i == 0]; st != 200 || hdr.Get("Idempotent-Replayed") != want {
			t.Errorf("copy %d (BOX-DELIVERY-ID %s): %d, replayed %q; want 200, replayed %q: %s", i+1, id, st, hdr.Get("Idempotent-Replayed"), want, got)
		}
	}
	if n := up.count(); n != 1 {
		t.Errorf("the captured request reached the upstream %d times, want once", n)
	}

	genuine := []byte(`{"type":"webhook_event","id":"` + randomID("e") + `","trigger":"FILE.DELETED"}`)
	st, hdr, got := post(t, g.URL, box.Sign(nextID, now, genuine), genuine)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "" {
		t.Errorf("the genuine delivery %s after a copy took its ID: %d, replayed %q; want 200, forwarded: %s", nextID, st, hdr.Get("Idempotent-Replayed"), got)
	}
	if n := up.count(); n != 2 {
		t.Errorf("upstream hit %d times, want 2: the captured request once, the genuine delivery once", n)
	}
}

// TestBodyKeysScopedBySecret: two Meta apps behind one store receive a
// byte-identical body for one event. Keyed by the body alone, the second
// app was replayed the first one's answer; within each secret's scope,
// each app's upstream gets it once, and each app's retry is replayed.
func TestBodyKeysScopedBySecret(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		upA, upB := newUpstream(t, nil), newUpstream(t, nil)
		const secretA, secretB = "meta-app-secret-a-1c9e", "meta-app-secret-b-52f0"
		g := startGateway(t, fmt.Sprintf(`
	handle /a {
		webhook_verify meta {
			secret %s
		}
		webhook_dedupe
		reverse_proxy %s
	}
	handle /b {
		webhook_verify meta {
			secret %s
		}
		webhook_dedupe
		reverse_proxy %s
	}`, secretA, upA.Addr(), secretB, upB.Addr()), gatewayOptions{Global: global})
		body := []byte(`{"object":"page","entry":[{"id":"` + randomID("") + `","time":1700000000,"changes":[{"field":"feed"}]}]}`)
		for _, app := range []struct {
			path, secret string
			up           *upstream
		}{{"/a", secretA, upA}, {"/b", secretB, upB}} {
			h := signer(t, "meta", app.secret).Sign("", time.Now(), body)
			for i, want := range []string{"", "true"} {
				st, hdr, got := post(t, g.URL+app.path, h, body)
				if st != 200 || hdr.Get("Idempotent-Replayed") != want {
					t.Errorf("app %s, copy %d: %d, replayed %q; want 200, replayed %q: %s", app.path, i+1, st, hdr.Get("Idempotent-Replayed"), want, got)
				}
			}
			if n := app.up.count(); n != 1 {
				t.Errorf("app %s's upstream got the event %d times, want once", app.path, n)
			}
		}
	})
}

// TestSlackFormsKeyedBySignature: slash commands and interactions are
// form bodies without an event_id. They got 400 missing_idempotency_key;
// they are keyed by their signature, as twilio is: a copy is replayed,
// another command is forwarded, and an event is still keyed by its ID.
func TestSlackFormsKeyedBySignature(t *testing.T) {
	up := newUpstream(t, nil)
	const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	g := startGateway(t, fmt.Sprintf(`
	webhook_verify slack {
		secret %s
	}
	webhook_dedupe
	reverse_proxy %s`, slackSecret, up.Addr()), gatewayOptions{})
	s := signer(t, "slack", slackSecret)
	form := func(vals url.Values) []byte { return []byte(vals.Encode()) }
	command := form(url.Values{"command": {"/deploy"}, "text": {"prod"}, "team_id": {"T1"}, "user_id": {"U2147483697"}, "trigger_id": {randomID("13345224609.")}})
	interaction := form(url.Values{"payload": {`{"type":"block_actions","trigger_id":"` + randomID("1.") + `","actions":[{"action_id":"approve"}]}`}})
	for name, body := range map[string][]byte{"a slash command": command, "an interaction": interaction} {
		h := s.Sign("", time.Now(), body)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		before := up.count()
		for i, want := range []string{"", "true"} {
			st, hdr, got := post(t, g.URL, h, body)
			if st != 200 || hdr.Get("Idempotent-Replayed") != want {
				t.Errorf("%s, copy %d: %d, replayed %q; want 200, replayed %q: %s", name, i+1, st, hdr.Get("Idempotent-Replayed"), want, got)
			}
		}
		if n := up.count() - before; n != 1 {
			t.Errorf("%s reached the upstream %d times, want once", name, n)
		}
	}
	// The same command signed a second later is another request (Slack
	// does not retry slash commands): forwarded.
	h := s.Sign("", time.Now().Add(time.Second), command)
	if st, hdr, got := post(t, g.URL, h, command); st != 200 || hdr.Get("Idempotent-Replayed") != "" {
		t.Errorf("the command signed anew: %d, replayed %q; want forwarded: %s", st, hdr.Get("Idempotent-Replayed"), got)
	}
	// An event is keyed by its event_id: a retry signed anew is replayed.
	event := []byte(`{"type":"event_callback","event_id":"` + randomID("Ev") + `","event":{"type":"app_mention"}}`)
	before := up.count()
	for i, at := range []time.Time{time.Now(), time.Now().Add(time.Second)} {
		st, hdr, got := post(t, g.URL, s.Sign("", at, event), event)
		if want := map[bool]string{true: "", false: "true"}[i == 0]; st != 200 || hdr.Get("Idempotent-Replayed") != want {
			t.Errorf("event, attempt %d: %d, replayed %q; want %q: %s", i+1, st, hdr.Get("Idempotent-Replayed"), want, got)
		}
	}
	if n := up.count() - before; n != 1 || !strings.Contains(string(up.received()[before].Body), "event_id") {
		t.Errorf("the event reached the upstream %d times, want once", n)
	}
}
