package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// enqueue queues an envelope of dest due at next.
func (f *fixture) enqueue(t *testing.T, dest, id, eventType string, next time.Time) {
	t.Helper()
	e := &sender.Envelope{ID: id, Destination: dest, EventType: eventType, Entity: "r-" + id,
		Payload: []byte(`{"id":"` + id + `"}`), CreatedAt: when.Add(-time.Hour), NextAt: next}
	if _, err := f.q.Enqueue(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveriesQueued: state=queued lists the envelopes not yet settled
// across destinations, in flight first, then by when due, in the entry
// shape of the history without settled_at, filtered and bounded by
// limit, in one page; what settled is not listed, and the filters that
// bound when an envelope settled are refused.
func TestDeliveriesQueued(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.delivered(t, "crm", when, "c-1")
	f.dead(t, "billing", when, "b-x")
	f.enqueue(t, "billing", "b-1", "reservation.confirmed", when.Add(-3*time.Minute))
	f.enqueue(t, "billing", "b-2", "reservation.confirmed", when.Add(-time.Minute))
	f.enqueue(t, "crm", "c-2", "seat.held", when.Add(-2*time.Minute))
	if l, err := f.q.Lease(t.Context(), "billing", 1, time.Now(), time.Minute); err != nil || len(l) != 1 || l[0].ID != "b-1" {
		t.Fatalf("leased %v, %v; want b-1", l, err)
	}

	list := func(query string) httpapi.DeliveriesPage {
		t.Helper()
		var page httpapi.DeliveriesPage
		w := f.do(t, "GET", "/hookgate/deliveries?state=queued"+query, "")
		decode(t, w, 200, &page)
		if strings.Contains(w.Body.String(), "settled_at") {
			t.Errorf("%s: an unsettled entry has a settled_at: %s", query, w.Body.Bytes())
		}
		if page.NextCursor != "" {
			t.Errorf("%s: next_cursor %q, want none", query, page.NextCursor)
		}
		return page
	}
	page := list("")
	want := []httpapi.DeliveryEntry{
		{ID: "b-1", Destination: "billing", EventType: "reservation.confirmed", Entity: "r-b-1", State: sender.StateLeased,
			CreatedAt: when.Add(-time.Hour)},
		{ID: "c-2", Destination: "crm", EventType: "seat.held", Entity: "r-c-2", State: sender.StateQueued,
			CreatedAt: when.Add(-time.Hour)},
		{ID: "b-2", Destination: "billing", EventType: "reservation.confirmed", Entity: "r-b-2", State: sender.StateQueued,
			CreatedAt: when.Add(-time.Hour)},
	}
	if diff := cmp.Diff(want, page.Entries, cmpTimes); diff != "" {
		t.Errorf("state=queued (-want +got):\n%s", diff)
	}

	entries := func(query string) []string {
		t.Helper()
		var got []string
		for _, e := range list(query).Entries {
			got = append(got, e.Destination+"/"+e.ID)
		}
		return got
	}
	for query, want := range map[string][]string{
		"&limit=1":                  {"billing/b-1"},
		"&limit=2":                  {"billing/b-1", "crm/c-2"},
		"&destination=billing":      {"billing/b-1", "billing/b-2"},
		"&destination=crm":          {"crm/c-2"},
		"&event_type=seat.held":     {"crm/c-2"},
		"&entity=r-b-2":             {"billing/b-2"},
		"&id=b-2":                   {"billing/b-2"},
		"&id=b-1&destination=crm":   nil,
		"&id=c-1":                   nil, // delivered
		"&id=b-x":                   nil, // dead
		"&event_type=none&limit=50": nil,
	} {
		if diff := cmp.Diff(want, entries(query)); diff != "" {
			t.Errorf("state=queued%s (-want +got):\n%s", query, diff)
		}
	}
	// Paused, they are still listed, as queued.
	if w := f.do(t, "POST", "/hookgate/destinations/crm/pause", ""); w.Code != 200 {
		t.Fatalf("pause: %d %s", w.Code, w.Body.Bytes())
	}
	if got := list("&id=c-2").Entries; len(got) != 1 || got[0].State != sender.StateQueued {
		t.Errorf("a paused destination's envelope by ID: %+v, want it queued", got)
	}
	if got := list("&destination=crm").Entries; len(got) != 1 || got[0].State != sender.StateQueued {
		t.Errorf("a paused destination's envelopes: %+v, want c-2 queued", got)
	}

	for _, c := range []struct {
		query, reason string
		status        int
	}{
		{"state=queued&since=" + when.Format(time.RFC3339), "bad_request", 400},
		{"state=queued&until=" + when.Format(time.RFC3339), "bad_request", 400},
		{"state=queued&cursor=abc", "bad_request", 400},
		{"state=leased", "bad_request", 400},
		{"state=queued&limit=1001", "bad_limit", 400},
		{"state=queued&destination=nowhere", "unknown_destination", 404},
	} {
		p := refused(t, f.do(t, "GET", "/hookgate/deliveries?"+c.query, ""), c.status, c.reason)
		if c.reason == "bad_request" && !strings.Contains(p.Detail, "queued") {
			t.Errorf("%s: %q does not say what is refused of a queued list", c.query, p.Detail)
		}
	}
}
