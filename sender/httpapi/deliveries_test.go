package httpapi_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// delivered makes delivered envelopes of dest: each ID enqueued, leased
// and settled delivered at the given time after one attempt answered 200.
func (f *fixture) delivered(t *testing.T, dest string, at time.Time, ids ...string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range ids {
		e := &sender.Envelope{ID: id, Destination: dest, EventType: "reservation.confirmed", Entity: "r-" + id,
			Payload: []byte(`{"id":"` + id + `"}`), CreatedAt: at.Add(-time.Minute), NextAt: at.Add(-time.Minute)}
		if _, err := f.q.Enqueue(ctx, e); err != nil {
			t.Fatal(err)
		}
		leased, err := f.q.Lease(ctx, dest, 1, time.Now(), time.Minute)
		if err != nil || len(leased) != 1 {
			t.Fatalf("leased %d: %v", len(leased), err)
		}
		e = leased[0].Envelope
		e.Attempts++
		e.LastStatus = 200
		e.Log = append(e.Log, sender.Attempt{At: at, Status: 200, Latency: 2 * time.Millisecond})
		out := sender.Outcome{Kind: sender.Delivered, ID: id, LeaseUntil: leased[0].LeaseUntil, Envelope: e}
		if _, err := f.q.Settle(ctx, dest, []sender.Outcome{out}, at); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveries pages through GET /hookgate/deliveries?query, limit entries
// a page, and returns every entry's destination/id.
func (f *fixture) deliveries(t *testing.T, query string, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 100 {
		var page httpapi.DeliveriesPage
		decode(t, f.do(t, "GET", "/hookgate/deliveries?"+query+"&limit="+strconv.Itoa(limit)+"&cursor="+cursor, ""), 200, &page)
		for _, e := range page.Entries {
			got = append(got, e.Destination+"/"+e.ID)
		}
		if page.NextCursor == "" {
			return got
		}
		cursor = page.NextCursor
	}
	t.Fatalf("%s: the walk does not end", query)
	return nil
}

// TestDeliveries: the history lists what settled newest first across
// destinations, filtered and paged; one delivery is read in whatever
// state it is; a resend answers as a redrive does and is followed as one.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	f.delivered(t, "billing", when, "b-1")
	f.delivered(t, "crm", when.Add(time.Minute), "c-1")
	f.delivered(t, "billing", when.Add(2*time.Minute), "b-2")
	f.dead(t, "crm", when.Add(3*time.Minute), "c-2")
	f.delivered(t, "old", when.Add(4*time.Minute), "o-1")

	want := []string{"crm/c-2", "billing/b-2", "crm/c-1", "billing/b-1"}
	for _, limit := range []int{1, 3, 50} {
		if diff := cmp.Diff(want, f.deliveries(t, "", limit)); diff != "" {
			t.Errorf("limit %d (-want +got):\n%s", limit, diff)
		}
	}
	for query, want := range map[string][]string{
		"destination=billing":             {"billing/b-2", "billing/b-1"},
		"destination=old":                 {"old/o-1"},
		"state=dead":                      {"crm/c-2"},
		"state=delivered&destination=crm": {"crm/c-1"},
		"id=b-1":                          {"billing/b-1"},
		"entity=r-b-2":                    {"billing/b-2"},
		"event_type=seat.released":        {"crm/c-2"},
		"since=" + when.Add(time.Minute).Format(time.RFC3339):                                                   {"crm/c-2", "billing/b-2", "crm/c-1"},
		"until=" + when.Add(time.Minute).Format(time.RFC3339):                                                   {"billing/b-1"},
		"since=" + when.Format(time.RFC3339) + "&until=" + when.Add(2*time.Minute).Format(time.RFC3339) + "&x=": {"crm/c-1", "billing/b-1"},
	} {
		if diff := cmp.Diff(want, f.deliveries(t, query, 2)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", query, diff)
		}
	}

	var page httpapi.DeliveriesPage
	decode(t, f.do(t, "GET", "/hookgate/deliveries?id=b-2", ""), 200, &page)
	wantEntry := httpapi.DeliveryEntry{ID: "b-2", Destination: "billing", EventType: "reservation.confirmed", Entity: "r-b-2",
		State: sender.StateDelivered, Attempts: 1, CreatedAt: when.Add(time.Minute), SettledAt: when.Add(2 * time.Minute), LastStatus: 200}
	if len(page.Entries) != 1 {
		t.Fatalf("by ID: %+v", page)
	}
	if diff := cmp.Diff(wantEntry, page.Entries[0], cmpTimes); diff != "" {
		t.Errorf("an entry (-want +got):\n%s", diff)
	}
	if w := f.do(t, "GET", "/hookgate/deliveries?id=none", ""); !strings.Contains(w.Body.String(), `"entries":[]`) {
		t.Errorf("an empty page is %s, want entries []", w.Body.Bytes())
	}

	// One delivery, in each state.
	var one map[string]any
	decode(t, f.do(t, "GET", "/hookgate/deliveries/billing/b-1", ""), 200, &one)
	if one["state"] != "delivered" || one["payload"].(map[string]any)["id"] != "b-1" || one["payload_expired"] != nil ||
		len(one["attempt_log"].([]any)) != 1 {
		t.Errorf("a delivered one: %v", one)
	}
	decode(t, f.do(t, "GET", "/hookgate/deliveries/crm/c-2", ""), 200, &one)
	if one["state"] != "dead" || one["class"] != "http_4xx" {
		t.Errorf("a dead one: %v", one)
	}
	if _, err := f.ops.Enqueue(t.Context(), &sender.Envelope{ID: "q/1", Destination: "crm", Payload: []byte(`{}`), CreatedAt: time.Now(), NextAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	decode(t, f.do(t, "GET", "/hookgate/deliveries/crm/q%2F1", ""), 200, &one)
	if one["state"] != "queued" || one["id"] != "q/1" {
		t.Errorf("a queued one: %v", one)
	}

	// A resend: a dry run, then one bounded by its limit, followed.
	var rd struct {
		ID             string `json:"redrive_id"`
		Matched, Moved int
		More           bool
	}
	decode(t, f.do(t, "POST", "/hookgate/deliveries/resend", `{"destination":"billing","dry_run":true,"limit":10}`), 200, &rd)
	if rd.ID != "" || rd.Matched != 2 || rd.More || rd.Moved != 0 {
		t.Errorf("dry run: %+v", rd)
	}
	// Counted up to its limit: more match.
	decode(t, f.do(t, "POST", "/hookgate/deliveries/resend", `{"state":"delivered","since":"`+when.Format(time.RFC3339)+`","limit":2,"by":"ann"}`), 200, &rd)
	if rd.ID == "" || rd.Matched != 2 || !rd.More || rd.Moved != 2 {
		t.Errorf("resend: %+v", rd)
	}
	var progress sender.Redrive
	decode(t, f.do(t, "GET", "/hookgate/redrives/"+rd.ID, ""), 200, &progress)
	if progress.Kind != "resend" || progress.By != "ann" || progress.Moved != 2 || progress.Pending != 2 {
		t.Errorf("progress: %+v", progress)
	}
	moved := slices.Sorted(func(yield func(string) bool) {
		for _, l := range f.redriven {
			if !yield(l.Destination + "/" + l.ID) {
				return
			}
		}
	})
	if diff := cmp.Diff([]string{"billing/b-2", "crm/c-1"}, moved); diff != "" {
		t.Errorf("resent (-want +got):\n%s", diff)
	}
}

// cmpTimes compares times by instant.
var cmpTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// TestDeliveryPayloadExpired: a delivered envelope whose payload the
// history no longer keeps is answered with "payload_expired":true.
func TestDeliveryPayloadExpired(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.q.KeepHistory(sender.History{Keep: time.Hour})
	f.delivered(t, "billing", when, "b-1")
	w := f.do(t, "GET", "/hookgate/deliveries/billing/b-1", "")
	var one map[string]any
	decode(t, w, 200, &one)
	if one["state"] != "delivered" || one["payload"] != nil || one["payload_expired"] != true {
		t.Errorf("an expired payload: %s", w.Body.Bytes())
	}
}

// TestDeliveriesRefused: each bad request has its reason.
func TestDeliveriesRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	f.delivered(t, "old", when, "o-1")
	for _, r := range []struct {
		method, path, body string
		status             int
		reason             string
	}{
		{"GET", "/hookgate/deliveries?limit=0", "", 400, "bad_limit"},
		{"GET", "/hookgate/deliveries?limit=1001", "", 400, "bad_limit"},
		{"GET", "/hookgate/deliveries?limit=x", "", 400, "bad_limit"},
		{"GET", "/hookgate/deliveries?state=leased", "", 400, "bad_request"},
		{"GET", "/hookgate/deliveries?since=yesterday", "", 400, "bad_request"},
		{"GET", "/hookgate/deliveries?cursor=nope", "", 400, "bad_request"},
		{"GET", "/hookgate/deliveries?destination=nowhere", "", 404, "unknown_destination"},
		{"GET", "/hookgate/deliveries/nowhere/x", "", 404, "unknown_destination"},
		{"GET", "/hookgate/deliveries/billing/x", "", 404, "not_found"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":0}`, 400, "bad_limit"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":11}`, 400, "bad_limit"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":1,"state":"queued"}`, 400, "bad_request"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":1,"class":"http_4xx"}`, 400, "bad_request"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":1,"until":"soon"}`, 400, "bad_request"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":1,"destination":"nowhere"}`, 404, "unknown_destination"},
		{"POST", "/hookgate/deliveries/resend", `{"limit":1,"destination":"old"}`, 409, "destination_orphaned"},
		{"POST", "/hookgate/deliveries", "", 405, "method_not_allowed"},
		{"GET", "/hookgate/deliveries/resend", "", 404, "not_found"},
	} {
		t.Run(r.method+" "+r.path+" "+r.body, func(t *testing.T) {
			refused(t, f.do(t, r.method, r.path, r.body), r.status, r.reason)
		})
	}
}
