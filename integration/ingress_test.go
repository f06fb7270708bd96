package integration

// Durable ingress (issue 31): webhook_enqueue behind webhook_verify
// answers the provider once the event is stored, and the sender delivers
// it to the service behind with the headers it kept.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// standardSecret is a standard scheme secret for tests.
const standardSecret = "whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5"

// contractGlobal is a hookgate block whose destination svc is up's URL
// under /in, signed with the standard scheme, retried fast.
func contractGlobal(url string) string {
	return fmt.Sprintf(`hookgate {
		sender {
			backoff 50ms 200ms
		}
		destination svc {
			url %s/in
			scheme standard
			secret %s
		}
	}`, url, standardSecret)
}

// TestIngressContract: on the embedded store, what the DESIGN's "Durable
// ingress" promises, through the built binary:
//   - a GitHub delivery is answered as configured, once stored, and reaches
//     the service once, with the kept headers, Hookgate-Source and
//     Hookgate-Received-At, under the kept path, signed by the destination;
//   - the provider's redelivery (GitHub's: the same request again) is a
//     duplicate; under a scheme that signs its ID (standard), the same ID
//     with another body is 422;
//   - the signature header is not kept by keep_headers *, nor sent on;
//   - too many headers to keep is 431 headers_too_large, nothing stored;
//   - a handshake is answered by webhook_verify and never enqueued.
func TestIngressContract(t *testing.T) {
	const secret = "github-secret-for-tests"
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	route /github/* {
		webhook_verify github {
			secret %s
		}
		webhook_enqueue svc {
			keep_headers *
			keep_path
			redact_headers X-Github-Hook-Id
			answer 200 ok
		}
	}
	route /standard/* {
		webhook_verify standard {
			secret %s
		}
		webhook_enqueue svc
	}
	route /slack/* {
		webhook_verify slack {
			secret %s
		}
		webhook_enqueue svc
	}`, secret, standardSecret, secret), gatewayOptions{Global: contractGlobal(up.URL)})
	gh := signer(t, "github", secret)

	delivery := randomID("gh-")
	body := []byte(`{"action":"opened","number":7}`)
	h := gh.Sign(delivery, time.Now(), body)
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "pull_request")
	h.Set("X-GitHub-Hook-ID", "424242")
	st, hdr, got := post(t, g.URL+"/github/org?install=9", h, body)
	if st != 200 || string(got) != "ok" || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("a GitHub delivery: %d %q (%s); want 200 ok", st, got, hdr.Get("Content-Type"))
	}
	// The provider's redelivery: signed again, the same delivery ID.
	if st, _, got := post(t, g.URL+"/github/org?install=9", h, body); st != 200 || string(got) != "ok" {
		t.Fatalf("the redelivery: %d %q; want 200 ok", st, got)
	}
	std := signer(t, "standard", standardSecret)
	msg := randomID("msg_")
	first := []byte(`{"type":"a"}`)
	if st, _, got := post(t, g.URL+"/standard/x", std.Sign(msg, time.Now(), first), first); st != 202 {
		t.Fatalf("a standard delivery: %d %s; want 202", st, got)
	}
	other := []byte(`{"type":"b"}`)
	if st, hdr, got := post(t, g.URL+"/standard/x", std.Sign(msg, time.Now(), other), other); st != 422 || problemBody(t, st, hdr, got) != "key_reused_with_different_payload" {
		t.Fatalf("the same webhook-id with another body: %d %s; want 422", st, got)
	}
	many := gh.Sign(randomID("gh-"), time.Now(), body)
	for i := range 70 {
		many.Set(fmt.Sprintf("X-Extra-%02d", i), "v")
	}
	if st, hdr, got := post(t, g.URL+"/github/org", many, body); st != 431 || problemBody(t, st, hdr, got) != "headers_too_large" {
		t.Fatalf("70 headers to keep: %d %s; want 431 headers_too_large", st, got)
	}
	challenge := []byte(`{"token":"t","challenge":"c-42","type":"url_verification"}`)
	if st, _, got := post(t, g.URL+"/slack/events", signer(t, "slack", secret).Sign("", time.Now(), challenge), challenge); st != 200 || !strings.Contains(string(got), "c-42") {
		t.Fatalf("Slack's url_verification: %d %s; want 200 and the challenge", st, got)
	}

	waitCount(t, up, 2)
	var r recorded
	for _, x := range up.received() {
		if x.Header.Get("Hookgate-Source") == "github" {
			r = x
		}
	}
	if r.Path != "/in/github/org" || string(r.Body) != string(body) {
		t.Errorf("delivered to %s with %q; want /in/github/org and the body", r.Path, r.Body)
	}
	for name, want := range map[string]string{
		"X-Github-Event":    "pull_request",
		"X-Github-Delivery": delivery,
		"X-Github-Hook-Id":  "424242", // redacted where shown, sent as it came
		"Hookgate-Source":   "github",
		"Content-Type":      "application/json",
	} {
		if r.Header.Get(name) != want {
			t.Errorf("delivered %s = %q, want %q", name, r.Header.Get(name), want)
		}
	}
	if r.Header.Get("X-Hub-Signature-256") != "" {
		t.Error("the provider's signature was kept by keep_headers *")
	}
	if at, err := time.Parse(time.RFC3339, r.Header.Get("Hookgate-Received-At")); err != nil || time.Since(at) > time.Minute {
		t.Errorf("Hookgate-Received-At %q: %v", r.Header.Get("Hookgate-Received-At"), err)
	}
	// GitHub signs no delivery ID: webhook_dedupe's key, and so the
	// envelope's ID, is the scheme's, the secret's and the body's.
	id := r.Header.Get("Webhook-Id")
	if !strings.HasPrefix(id, "github:") {
		t.Errorf("the envelope's ID %q is not webhook_dedupe's key for GitHub", id)
	}
	if st, _, got := send(t, http.MethodGet, g.Admin+"/hookgate/deliveries/svc/"+id, nil, nil); st != 200 {
		t.Fatalf("deliveries show: %d %s", st, got)
	} else {
		var d struct{ State string }
		if err := json.Unmarshal(got, &d); err != nil || d.State != "delivered" {
			t.Errorf("deliveries show = %s, %v", got, err)
		}
		if strings.Contains(string(got), "424242") {
			t.Errorf("a redacted header's value is shown: %s", got)
		}
	}
}
