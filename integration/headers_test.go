package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDestinationHeaders: a destination's own headers go with every
// request, an {env.*} value read at load; the admin API shows them, a
// secret's value masked; a header the transport or the signature owns
// fails the config, naming it, its value never shown.
func TestDestinationHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		destination crm {
			url http://%s/crm
			secret %s
			header X-Source hookgate
			header Authorization {env.CRM_TOKEN}
		}
	}`, up.Addr(), devSecret)
	g := startGateway(t, "webhook_enqueue crm", gatewayOptions{Global: global, Env: []string{"CRM_TOKEN=Bearer s3cr3t-crm"}})
	if st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {"h-1"}}, []byte(`{"type":"x"}`)); st != 202 {
		t.Fatalf("enqueue: %d %s", st, got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for up.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	rs := up.received()
	if len(rs) != 1 || rs[0].Header.Get("X-Source") != "hookgate" || rs[0].Header.Get("Authorization") != "Bearer s3cr3t-crm" || rs[0].Header.Get("Webhook-Signature") == "" {
		t.Fatalf("the receiver got %d requests; headers %v", len(rs), rs)
	}
	if h := destinationOf(t, g, "crm").Headers; h["X-Source"] != "hookgate" || h["Authorization"] != "(not shown)" {
		t.Fatalf("the admin API shows the headers %v", h)
	}
	if strings.Contains(g.logs.String(), "s3cr3t-crm") {
		t.Fatal("the logs hold the header's secret value")
	}

	for header, want := range map[string]string{
		"Webhook-Signature v1,s3cr3t": "header Webhook-Signature: the destination's scheme sets it",
		"Connection s3cr3t":           "header Connection: a hop-by-hop or framing header",
		"Host s3cr3t":                 "header Host: a hop-by-hop or framing header",
	} {
		out, err := validate(t, fmt.Sprintf("{\n\thookgate {\n\t\tdestination crm {\n\t\t\turl http://127.0.0.1:1/\n\t\t\tsecret %s\n\t\t\theader %s\n\t\t}\n\t}\n}\n:0 {\n\twebhook_enqueue crm\n}\n", devSecret, header))
		if err == nil || !strings.Contains(out, want) || strings.Contains(out, "s3cr3t") {
			t.Errorf("hookgate validate with header %s: %v\n%s", strings.Fields(header)[0], err, out)
		}
	}
}
