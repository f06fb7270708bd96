package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// secret is a kept header's value that redact_headers names: no answer
// may hold it.
const secret = "tok-9f8e7d6c"

// received is what durable ingress kept of a GitHub request: a header
// repeated, and one whose value is redacted.
func received() *sender.Received {
	return &sender.Received{
		Source: "github",
		Path:   "/gh/hooks?org=acme",
		Header: http.Header{
			"X-Github-Event": {"push"},
			"X-Forwarded":    {"a", "b"},
			"X-Some-Token":   {secret},
		},
		Redact: []string{"X-Some-Token"},
	}
}

// settleReceived enqueues an envelope of dest holding rec, leases it, and
// settles it as kind (Delivered after one 200, or Dead after one 400).
func (f *fixture) settleReceived(t *testing.T, dest, id string, rec *sender.Received, kind sender.OutcomeKind) {
	t.Helper()
	ctx := t.Context()
	e := &sender.Envelope{ID: id, Destination: dest, EventType: "reservation.confirmed", Payload: []byte(`{"id":"` + id + `"}`),
		CreatedAt: when.Add(-time.Minute), NextAt: when.Add(-time.Minute), Received: rec}
	if _, err := f.q.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	leased, err := f.q.Lease(ctx, dest, 1, time.Now(), time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("leased %d: %v", len(leased), err)
	}
	e = leased[0].Envelope
	e.Attempts = 1
	switch kind {
	case sender.Delivered:
		e.LastStatus = 200
		e.Log = []sender.Attempt{{At: when, Status: 200, Latency: time.Millisecond}}
	default:
		e.LastStatus, e.LastError, e.Class, e.DeadAt = 400, "400 Bad Request", sender.ClassHTTP4xx, when
		e.Log = []sender.Attempt{{At: when, Status: 400, Error: "400 Bad Request", Latency: time.Millisecond}}
	}
	out := sender.Outcome{Kind: kind, ID: id, LeaseUntil: leased[0].LeaseUntil, Envelope: e}
	if skipped, err := f.q.Settle(ctx, dest, []sender.Outcome{out}, when); err != nil || skipped != 0 {
		t.Fatalf("settle: %d skipped, %v", skipped, err)
	}
}

// TestShowReceived: a dead letter's and a delivery's detail hold what
// durable ingress kept of the request, the redacted values masked and
// never the values themselves; an envelope enqueued through the API, and
// a delivery whose payload the history no longer keeps, have none.
func TestShowReceived(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	f.settleReceived(t, "billing", "dead-1", received(), sender.Dead)
	f.settleReceived(t, "crm", "sent-1", received(), sender.Delivered)
	f.settleReceived(t, "billing", "plain-1", nil, sender.Dead)

	want := &httpapi.ReceivedView{
		Source: "github",
		Path:   "/gh/hooks?org=acme",
		Headers: http.Header{
			"X-Github-Event": {"push"},
			"X-Forwarded":    {"a", "b"},
			"X-Some-Token":   {sender.Redacted},
		},
	}
	for _, path := range []string{"/hookgate/dlq/dead-1?destination=billing", "/hookgate/deliveries/billing/dead-1", "/hookgate/deliveries/crm/sent-1"} {
		w := f.do(t, "GET", path, "")
		if strings.Contains(w.Body.String(), secret) {
			t.Errorf("%s shows the redacted value: %s", path, w.Body)
		}
		var got struct {
			Received *httpapi.ReceivedView `json:"received"`
		}
		decode(t, w, 200, &got)
		if diff := cmp.Diff(want, got.Received); diff != "" {
			t.Errorf("%s: received (-want +got):\n%s", path, diff)
		}
	}
	for _, path := range []string{"/hookgate/dlq/plain-1?destination=billing", "/hookgate/deliveries/billing/plain-1"} {
		var got map[string]any
		decode(t, f.do(t, "GET", path, ""), 200, &got)
		if r, ok := got["received"]; ok {
			t.Errorf("%s: received %v, want none", path, r)
		}
	}

	// A delivered payload not kept: nor are the headers stored with it.
	g := setup(t)
	g.q.KeepHistory(sender.History{Keep: time.Hour})
	g.settleReceived(t, "crm", "sent-2", received(), sender.Delivered)
	var got map[string]any
	decode(t, g.do(t, "GET", "/hookgate/deliveries/crm/sent-2", ""), 200, &got)
	if r, ok := got["received"]; ok || got["payload_expired"] != true {
		t.Errorf("payload expired %v: received %v, want none", got["payload_expired"], r)
	}
}

// TestListReceived: with received=true (the export's query) each history
// entry that durable ingress stored carries what it kept of the request,
// masked; the others, and every entry of a list that does not ask, carry
// none.
func TestListReceived(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	f.settleReceived(t, "billing", "dead-1", received(), sender.Dead)
	f.settleReceived(t, "crm", "sent-1", received(), sender.Delivered)
	f.settleReceived(t, "billing", "plain-1", nil, sender.Delivered)

	for _, tc := range []struct {
		query string
		want  map[string]bool // ID: carries received
	}{
		{"received=true", map[string]bool{"dead-1": true, "sent-1": true, "plain-1": false}},
		{"received=false", map[string]bool{"dead-1": false, "sent-1": false, "plain-1": false}},
		{"", map[string]bool{"dead-1": false, "sent-1": false, "plain-1": false}},
	} {
		w := f.do(t, "GET", "/hookgate/deliveries?"+tc.query, "")
		if strings.Contains(w.Body.String(), secret) {
			t.Errorf("%q shows the redacted value: %s", tc.query, w.Body)
		}
		var page httpapi.DeliveriesPage
		decode(t, w, 200, &page)
		got := map[string]bool{}
		for _, e := range page.Entries {
			got[e.ID] = e.Received != nil
			if e.Received != nil && e.Received.Headers.Get("X-Some-Token") != sender.Redacted {
				t.Errorf("%q: %s's received %+v", tc.query, e.ID, e.Received)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q: carries received (-want +got):\n%s", tc.query, diff)
		}
	}
	refused(t, f.do(t, "GET", "/hookgate/deliveries?received=yes-please", ""), 400, "bad_request")
}
