package httpapi_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// TestOrderedDestinationShowsWhatWaits: over a real queue, an ordered
// destination whose entity's head died under on_dead hold says so in GET
// /hookgate/destinations (ordering, on_dead, depth waiting and held), and
// state=queued lists the waiting envelopes behind the head, held; once
// the head is redriven it is listed first, and the others wait behind it,
// no longer held.
func TestOrderedDestinationShowsWhatWaits(t *testing.T) {
	t.Parallel()
	f := setupWith(t, []sender.Destination{
		{Name: "ledger", URL: "http://127.0.0.1:1/ledger", Ordering: sender.Ordering{ByEntity: true, Hold: true}},
		{Name: "plain", URL: "http://127.0.0.1:1/plain"},
	})
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		e := &sender.Envelope{ID: id, Destination: "ledger", EventType: "entry.posted", Entity: "acct-7",
			Payload: []byte(`{}`), CreatedAt: when.Add(-time.Hour), NextAt: when.Add(-time.Hour)}
		if _, err := f.q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	leased, err := f.q.Lease(t.Context(), "ledger", 10, time.Now(), time.Minute)
	if err != nil || len(leased) != 1 || leased[0].ID != "l-1" {
		t.Fatalf("leased %d, %v; want the head l-1 alone", len(leased), err)
	}
	e := *leased[0].Envelope
	e.Attempts, e.LastStatus, e.LastError, e.Class, e.DeadAt = 1, 422, "422 Unprocessable Entity", sender.ClassHTTP4xx, when
	e.Log = []sender.Attempt{{At: when, Status: 422, Error: "422 Unprocessable Entity"}}
	if _, err := f.q.Settle(t.Context(), "ledger", []sender.Outcome{{Kind: sender.Dead, ID: "l-1", LeaseUntil: leased[0].LeaseUntil, Envelope: &e}}, time.Now()); err != nil {
		t.Fatal(err)
	}

	var dests struct{ Destinations []sender.DestinationStatus }
	decode(t, f.do(t, "GET", "/hookgate/destinations", ""), 200, &dests)
	got := map[string]sender.DestinationStatus{}
	for _, d := range dests.Destinations {
		got[d.Name] = d
	}
	if l := got["ledger"]; l.Ordering != "entity" || l.OnDead != "hold" || l.Depth["waiting"] != 2 || l.Depth["held"] != 1 || l.Depth["queued"] != 2 || l.Depth["dead"] != 1 {
		t.Errorf("ledger: %+v; want ordering entity, on_dead hold, 2 queued and waiting, 1 held, 1 dead", l)
	}
	if p := got["plain"]; p.Ordering != "none" || p.OnDead != "" || p.Depth["waiting"] != 0 || p.Depth["held"] != 0 {
		t.Errorf("plain: %+v; want ordering none, no on_dead, nothing waiting or held", p)
	}

	queued := func() []httpapi.DeliveryEntry {
		t.Helper()
		var page httpapi.DeliveriesPage
		decode(t, f.do(t, "GET", "/hookgate/deliveries?state=queued&destination=ledger", ""), 200, &page)
		for i := range page.Entries {
			page.Entries[i] = httpapi.DeliveryEntry{ID: page.Entries[i].ID, State: page.Entries[i].State, Behind: page.Entries[i].Behind, Held: page.Entries[i].Held}
		}
		return page.Entries
	}
	want := []httpapi.DeliveryEntry{
		{ID: "l-2", State: sender.StateQueued, Behind: "l-1", Held: true},
		{ID: "l-3", State: sender.StateQueued, Behind: "l-1", Held: true},
	}
	if diff := cmp.Diff(want, queued()); diff != "" {
		t.Errorf("queued while held (-want +got):\n%s", diff)
	}

	var rd struct {
		Moved int `json:"moved"`
	}
	decode(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"ids":["l-1"],"destination":"ledger","limit":1}`), 200, &rd)
	if rd.Moved != 1 {
		t.Fatalf("redrive moved %d, want the head", rd.Moved)
	}
	want = []httpapi.DeliveryEntry{
		{ID: "l-1", State: sender.StateQueued},
		{ID: "l-2", State: sender.StateQueued, Behind: "l-1"},
		{ID: "l-3", State: sender.StateQueued, Behind: "l-1"},
	}
	if diff := cmp.Diff(want, queued()); diff != "" {
		t.Errorf("queued after the head's redrive (-want +got):\n%s", diff)
	}
}
