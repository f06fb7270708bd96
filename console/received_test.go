package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// TestDetailsShowReceived: the dead letter's page and the delivery's page
// show what durable ingress kept of the request (source, path, each
// header line, escaped), the values redact_headers names masked and
// never the values themselves; a page of an envelope that kept nothing
// has no such section.
func TestDetailsShowReceived(t *testing.T) {
	const secret = "tok-9f8e7d6c"
	f := newFake()
	f.dead["a/in-1"] = &sender.Envelope{ID: "in-1", Destination: "a", Class: sender.ClassHTTP4xx, LastStatus: 400,
		DeadAt: chartNow, Payload: []byte(`{}`), Log: []sender.Attempt{{At: chartNow, Status: 400}},
		Received: &sender.Received{
			Source: "github",
			Path:   "/gh/hooks?org=<acme>",
			Header: http.Header{
				"X-Github-Event": {"push"},
				"X-Forwarded":    {"a", "<b>"},
				"X-Some-Token":   {secret},
			},
			Redact: []string{"X-Some-Token"},
		}}
	c := New(f, onceStore(t, t.TempDir()), func() time.Time { return chartNow })
	want := []string{
		`id="received-source">github<`,
		`<code>/gh/hooks?org=&lt;acme&gt;</code>`,
		`<tr><th>X-Forwarded</th><td><code>a</code></td></tr><tr><th>X-Forwarded</th><td><code>&lt;b&gt;</code></td></tr>` +
			`<tr><th>X-Github-Event</th><td><code>push</code></td></tr><tr><th>X-Some-Token</th><td><code>(not shown)</code></td></tr>`,
	}
	for _, target := range []string{"/dead/in-1?destination=a", "/deliveries/in-1?destination=a"} {
		w := request(c, View{Base: "/c"}, "GET", target, nil)
		body := w.Body.String()
		if w.Code != 200 {
			t.Fatalf("GET %s: %d\n%s", target, w.Code, body)
		}
		for _, s := range want {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s: no %s in\n%s", target, s, body)
			}
		}
		if strings.Contains(body, secret) {
			t.Errorf("GET %s shows the redacted value", target)
		}
	}
	for _, target := range []string{"/dead/1?destination=a", "/deliveries/1?destination=a"} {
		w := request(c, View{Base: "/c"}, "GET", target, nil)
		if body := w.Body.String(); w.Code != 200 || strings.Contains(body, `id="received"`) {
			t.Errorf("GET %s, nothing kept: %d, a Received section\n%s", target, w.Code, body)
		}
	}
}
