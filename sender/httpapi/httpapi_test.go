package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sony/gobreaker/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// remote is the address every test request comes from.
const remote = "192.0.2.7:4321"

// fixture is a sender with destinations billing and crm over a real
// bbolt queue (its workers do not run), the service over it, and the API.
type fixture struct {
	db  *bolt.DB
	q   *boltqueue.Queue
	ops *sender.Ops
	api http.Handler

	mu       sync.Mutex
	enqueued []string        // destination/result of each enqueue counted
	redriven []sender.Letter // letters each redrive moved
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, []sender.Destination{
		{Name: "billing", URL: "http://127.0.0.1:1/hooks", Events: []string{"reservation.*"}},
		{Name: "crm", URL: "http://127.0.0.1:1/crm", Events: []string{"reservation.confirmed", "seat.*"}},
	})
}

// setupWith is a fixture with dests instead.
func setupWith(t *testing.T, dests []sender.Destination) *fixture {
	t.Helper()
	db := bolttest.Open(t, nil)
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, q: q}
	s, err := sender.New(q, sender.Config{}, dests, sender.Options{Observer: enqueues{f}})
	if err != nil {
		t.Fatal(err)
	}
	f.ops = sender.NewOps(s, sender.NewSettled(q, s.Destinations, 10, nil), sender.OpsOptions{
		Redriven: func(_ context.Context, letters []sender.Letter) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.redriven = append(f.redriven, letters...)
		},
	})
	f.api = httpapi.New(f.ops, nil, nil, nil)
	return f
}

// enqueues records each enqueue the sender counts.
type enqueues struct{ f *fixture }

func (o enqueues) Enqueued(dest, result string) {
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	o.f.enqueued = append(o.f.enqueued, dest+"/"+result)
}
func (enqueues) Attempt(string, string, time.Duration) {}
func (enqueues) Delivered(string, time.Duration)       {}
func (enqueues) Dead(string, time.Duration)            {}
func (enqueues) Disabled(string, string)               {}
func (enqueues) BreakerState(string, gobreaker.State)  {}
func (enqueues) StoreError(string, string)             {}

// do sends a request to the API.
func (f *fixture) do(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

// decode reads a 2xx JSON answer into v.
func decode(t *testing.T, w *httptest.ResponseRecorder, status int, v any) {
	t.Helper()
	if w.Code != status || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q: %s; want %d application/json", w.Code, w.Header().Get("Content-Type"), w.Body.Bytes(), status)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatal(err)
	}
}

// refused checks a problem+json answer's status and reason.
func refused(t *testing.T, w *httptest.ResponseRecorder, status int, reason string) problem.Details {
	t.Helper()
	var p problem.Details
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("answer %d %q: %s; want problem+json", w.Code, ct, w.Body.Bytes())
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if w.Code != status || p.Reason != reason {
		t.Errorf("answer %d %q (%s), want %d %q", w.Code, p.Reason, p.Detail, status, reason)
	}
	return p
}

// dead makes dead letters of dest: each ID enqueued, leased and settled
// dead after one attempt answered 400, dead at the given time.
func (f *fixture) dead(t *testing.T, dest string, at time.Time, ids ...string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range ids {
		e := &sender.Envelope{ID: id, Destination: dest, EventType: "seat.released", Payload: []byte(`{"id":"` + id + `"}`),
			CreatedAt: at.Add(-time.Minute), NextAt: at.Add(-time.Minute)}
		if _, err := f.q.Enqueue(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	leased, err := f.q.Lease(ctx, dest, len(ids), time.Now(), time.Minute)
	if err != nil || len(leased) != len(ids) {
		t.Fatalf("leased %d of %d: %v", len(leased), len(ids), err)
	}
	var outcomes []sender.Outcome
	for _, l := range leased {
		e := *l.Envelope
		e.Attempts, e.LastStatus, e.LastError, e.Class, e.DeadAt = 1, 400, "400 Bad Request", sender.ClassHTTP4xx, at
		e.Log = []sender.Attempt{{At: at, Status: 400, Error: "400 Bad Request", Latency: 1500 * time.Microsecond}}
		outcomes = append(outcomes, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: l.LeaseUntil, Envelope: &e})
	}
	if skipped, err := f.q.Settle(ctx, dest, outcomes, time.Now()); err != nil || skipped != 0 {
		t.Fatalf("settle: %d skipped, %v", skipped, err)
	}
}

// when is when the test's letters died: within the queue's retention.
var when = time.Now().UTC().Truncate(time.Second).Add(-30 * time.Minute)

// TestDestinations: the list holds the configured destinations in order,
// then the orphans; pause and resume answer the destination and say who
// paused it; an orphan is moved to a configured destination or purged,
// and a configured one is neither.
func TestDestinations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.dead(t, "old", when, "o-1", "o-2")

	type dest struct {
		Name     string         `json:"name"`
		State    string         `json:"state"`
		Breaker  string         `json:"breaker"`
		Ordering string         `json:"ordering"`
		PausedBy string         `json:"paused_by"`
		Depth    map[string]int `json:"depth"`
	}
	var list struct{ Destinations []dest }
	decode(t, f.do(t, "GET", "/hookgate/destinations", ""), 200, &list)
	depth := func(queued, paused, dead int) map[string]int {
		return map[string]int{"queued": queued, "leased": 0, "paused": paused, "dead": dead, "corrupt": 0, "waiting": 0, "held": 0}
	}
	want := []dest{
		{Name: "billing", State: "active", Breaker: "closed", Ordering: "none", Depth: depth(0, 0, 0)},
		{Name: "crm", State: "active", Breaker: "closed", Ordering: "none", Depth: depth(0, 0, 0)},
		{Name: "old", State: "orphaned", Depth: depth(0, 0, 2)},
	}
	if diff := cmp.Diff(want, list.Destinations); diff != "" {
		t.Errorf("destinations (-want +got):\n%s", diff)
	}

	var got dest
	decode(t, f.do(t, "POST", "/hookgate/destinations/crm/pause", ""), 200, &got)
	if diff := cmp.Diff(dest{Name: "crm", State: "paused", Breaker: "closed", Ordering: "none", PausedBy: "admin api from " + remote, Depth: depth(0, 0, 0)}, got); diff != "" {
		t.Errorf("pause (-want +got):\n%s", diff)
	}
	var resumed dest
	decode(t, f.do(t, "POST", "/hookgate/destinations/crm/resume", ""), 200, &resumed)
	if resumed.State != "active" || resumed.PausedBy != "" {
		t.Errorf("after resume: %+v", resumed)
	}
	refused(t, f.do(t, "POST", "/hookgate/destinations/nope/pause", ""), 404, "unknown_destination")
	refused(t, f.do(t, "POST", "/hookgate/destinations/old/pause", ""), 404, "unknown_destination")
	refused(t, f.do(t, "POST", "/hookgate/destinations/crm/restart", ""), 404, "not_found")

	refused(t, f.do(t, "POST", "/hookgate/destinations/billing/move", `{"to":"crm"}`), 409, "destination_configured")
	refused(t, f.do(t, "POST", "/hookgate/destinations/billing/purge", ""), 409, "destination_configured")
	refused(t, f.do(t, "POST", "/hookgate/destinations/old/move", `{}`), 400, "bad_request")
	refused(t, f.do(t, "POST", "/hookgate/destinations/old/move", `{"to":"crm","and":1}`), 400, "bad_request")
	refused(t, f.do(t, "POST", "/hookgate/destinations/old/move", `{"to":"nope"}`), 404, "unknown_destination")
	refused(t, f.do(t, "POST", "/hookgate/destinations/gone/purge", ""), 404, "unknown_destination")
	var moved map[string]int
	decode(t, f.do(t, "POST", "/hookgate/destinations/old/move", `{"to":"crm"}`), 200, &moved)
	if diff := cmp.Diff(map[string]int{"moved": 2, "kept": 0}, moved); diff != "" {
		t.Errorf("move (-want +got):\n%s", diff)
	}

	f.dead(t, "older", when, "p-1")
	var removed map[string]int
	decode(t, f.do(t, "POST", "/hookgate/destinations/older/purge", ""), 200, &removed)
	if diff := cmp.Diff(map[string]int{"removed": 1}, removed); diff != "" {
		t.Errorf("purge (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "GET", "/hookgate/destinations", ""), 200, &list)
	if n := len(list.Destinations); n != 2 || list.Destinations[1].Depth["dead"] != 2 {
		t.Errorf("after move and purge: %+v", list.Destinations)
	}
}

// TestEnqueue: the admin enqueue answers as webhook_enqueue does, sends
// its payload as application/json, counts each enqueue, and refuses a bad
// request with its reason, enqueuing nothing.
func TestEnqueue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const path = "/hookgate/destinations/billing/enqueue"
	for _, tc := range []struct {
		path, body string
		status     int
		reason     string
	}{
		{path, `{"id":"a b","payload":{}}`, 400, "bad_id"},
		{path, `{"id":"` + strings.Repeat("x", 1025) + `","payload":{}}`, 400, "bad_id"},
		{path, `{"id":42,"payload":{}}`, 400, "bad_id"},
		{path, `{"id":null,"payload":{}}`, 400, "bad_id"},
		{path, `{"payload":{}}`, 400, "missing_idempotency_key"},
		{path, `{"id":""}`, 400, "missing_idempotency_key"},
		{path, `{"id":"e"}`, 400, "bad_request"},
		{path, `{"id":"e","payload":{"a":}}`, 400, "bad_request"},
		{path, `{"id":"e","payload":{},"extra":1}`, 400, "bad_request"},
		{path, `{"id":"e","payload":{},"event_time":"yesterday"}`, 400, "malformed_event_time"},
		{"/hookgate/destinations/nope/enqueue", `{"id":"e","payload":{}}`, 404, "unknown_destination"},
	} {
		refused(t, f.do(t, "POST", tc.path, tc.body), tc.status, tc.reason)
	}
	if st, err := f.q.Stats(t.Context(), "billing", time.Now()); err != nil || st.Queued != 0 {
		t.Fatalf("queued %d after refusals, %v", st.Queued, err)
	}

	type answer struct {
		ID, Destination, State string
		Duplicate              bool
	}
	var got answer
	w := f.do(t, "POST", path, `{"id":"evt/1","event_type":"seat.released","entity":"r-1","event_time":"1796040300","payload":{"a":"<b>"}}`)
	decode(t, w, 202, &got)
	if diff := cmp.Diff(answer{ID: "evt/1", Destination: "billing", State: "queued"}, got); diff != "" {
		t.Errorf("enqueue (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "POST", path, `{"id":"evt/1","payload":{"a":"<b>"}}`), 202, &got)
	if !got.Duplicate {
		t.Errorf("the same ID again: %+v, want a duplicate", got)
	}
	refused(t, f.do(t, "POST", path, `{"id":"evt/1","payload":{"a":"c"}}`), 422, "key_reused_with_different_payload")

	e, state, err := f.q.Get(t.Context(), "billing", "evt/1")
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := sender.Envelope{ID: "evt/1", Destination: "billing", EventType: "seat.released", Entity: "r-1",
		EventTime: time.Unix(1796040300, 0), Payload: []byte(`{"a":"<b>"}`), ContentType: "application/json"}
	gotEnv := sender.Envelope{ID: e.ID, Destination: e.Destination, EventType: e.EventType, Entity: e.Entity,
		EventTime: e.EventTime, Payload: e.Payload, ContentType: e.ContentType}
	if diff := cmp.Diff(wantEnv, gotEnv); diff != "" || state != sender.StateQueued {
		t.Errorf("the envelope, %s (-want +got):\n%s", state, diff)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff([]string{"billing/queued", "billing/duplicate", "billing/duplicate"}, f.enqueued); diff != "" {
		t.Errorf("enqueues counted (-want +got):\n%s", diff)
	}
}

// TestPublish: POST /hookgate/events fans an event out to the destinations
// subscribed to its type and answers each one's delivery; it reads its
// body as the admin enqueue does, and refuses a bad request with its
// reason, enqueuing nothing.
func TestPublish(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const path = "/hookgate/events"
	for _, tc := range []struct {
		body   string
		status int
		reason string
	}{
		{`{"id":"a b","event_type":"seat.released","payload":{}}`, 400, "bad_id"},
		{`{"id":42,"event_type":"seat.released","payload":{}}`, 400, "bad_id"},
		{`{"event_type":"seat.released","payload":{}}`, 400, "missing_idempotency_key"},
		{`{"id":"e","event_type":"seat.released"}`, 400, "bad_request"},
		{`{"id":"e","event_type":"seat.released","payload":{},"destination":"crm"}`, 400, "bad_request"},
		{`{"id":"e","payload":{}}`, 400, "missing_event_type"},
		{`{"id":"e","event_type":"","payload":{}}`, 400, "missing_event_type"},
		{`{"id":"e","event_type":"seat.released","payload":{},"event_time":"yesterday"}`, 400, "malformed_event_time"},
	} {
		refused(t, f.do(t, "POST", path, tc.body), tc.status, tc.reason)
	}
	if w := f.do(t, "GET", path, ""); refused(t, w, 405, "method_not_allowed").Status != 0 && w.Header().Get("Allow") != "POST" {
		t.Errorf("GET %s: Allow %q, want POST", path, w.Header().Get("Allow"))
	}
	for _, d := range []string{"billing", "crm"} {
		if st, err := f.q.Stats(t.Context(), d, time.Now()); err != nil || st.Queued != 0 {
			t.Fatalf("%s queued %d after refusals, %v", d, st.Queued, err)
		}
	}

	type answer struct {
		ID         string            `json:"id"`
		EventType  string            `json:"event_type"`
		Deliveries []sender.Delivery `json:"deliveries"`
	}
	delivery := func(dest string, dup bool) sender.Delivery {
		return sender.Delivery{Destination: dest, State: sender.StateQueued, Duplicate: dup}
	}
	for _, tc := range []struct {
		name, body string
		want       answer
	}{
		{"both subscribe", `{"id":"evt/1","event_type":"reservation.confirmed","entity":"r-1","event_time":"1796040300","payload":{"a":"<b>"}}`,
			answer{"evt/1", "reservation.confirmed", []sender.Delivery{delivery("billing", false), delivery("crm", false)}}},
		{"the same again", `{"id":"evt/1","event_type":"reservation.confirmed","payload":{"a":"<b>"}}`,
			answer{"evt/1", "reservation.confirmed", []sender.Delivery{delivery("billing", true), delivery("crm", true)}}},
		{"one subscribes", `{"id":"evt/2","event_type":"seat.released","payload":{}}`,
			answer{"evt/2", "seat.released", []sender.Delivery{delivery("crm", false)}}},
		{"none subscribes", `{"id":"evt/3","event_type":"invoice.paid","payload":{}}`,
			answer{"evt/3", "invoice.paid", []sender.Delivery{}}},
	} {
		var got answer
		w := f.do(t, "POST", path, tc.body)
		decode(t, w, 202, &got)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if tc.name == "none subscribes" && !strings.Contains(w.Body.String(), `"deliveries":[]`) {
			t.Errorf("an unrouted event's answer %s lacks \"deliveries\":[]", w.Body.Bytes())
		}
	}
	refused(t, f.do(t, "POST", path, `{"id":"evt/1","event_type":"reservation.confirmed","payload":{"a":"c"}}`), 422, "key_reused_with_different_payload")

	for _, d := range []string{"billing", "crm"} {
		e, state, err := f.q.Get(t.Context(), d, "evt/1")
		if err != nil {
			t.Fatal(err)
		}
		want := sender.Envelope{ID: "evt/1", Destination: d, EventType: "reservation.confirmed", Entity: "r-1",
			EventTime: time.Unix(1796040300, 0), Payload: []byte(`{"a":"<b>"}`), ContentType: "application/json"}
		got := sender.Envelope{ID: e.ID, Destination: e.Destination, EventType: e.EventType, Entity: e.Entity,
			EventTime: e.EventTime, Payload: e.Payload, ContentType: e.ContentType}
		if diff := cmp.Diff(want, got); diff != "" || state != sender.StateQueued {
			t.Errorf("%s's envelope, %s (-want +got):\n%s", d, state, diff)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// A fan-out's enqueues run concurrently: counted in any order.
	want := []string{"/unrouted", "billing/duplicate", "billing/queued", "crm/duplicate", "crm/queued", "crm/queued"}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(f.enqueued))); diff != "" {
		t.Errorf("enqueues counted (-want +got):\n%s", diff)
	}
}

// TestDeadLetters: summary, list, show, redrive and its progress, delete
// and purge, with their filters, bounds and refusals.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.dead(t, "billing", when, "b-1", "b-2", "b/3")
	f.dead(t, "crm", when.Add(10*time.Minute), "c-1")
	f.dead(t, "old", when, "o-1")

	var summary struct {
		Groups []sender.Group
		Total  int
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq/summary?destination=billing", ""), 200, &summary)
	if diff := cmp.Diff([]sender.Group{{Destination: "billing", Class: "http_4xx", Count: 3, OldestDeadAt: when}}, summary.Groups); diff != "" || summary.Total != 3 {
		t.Errorf("summary, total %d (-want +got):\n%s", summary.Total, diff)
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq/summary?class=timeout", ""), 200, &summary)
	if summary.Groups == nil || len(summary.Groups) != 0 || summary.Total != 0 {
		t.Errorf("an empty summary: %+v, want groups [] and total 0", summary)
	}
	if w := f.do(t, "GET", "/hookgate/dlq/summary?class=timeout", ""); !strings.Contains(w.Body.String(), `"groups":[]`) {
		t.Errorf("an empty summary is %s, want groups []", w.Body.Bytes())
	}

	var list struct {
		Entries []httpapi.DeadEntry
		Next    string `json:"next_cursor"`
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq?destination=billing&limit=2", ""), 200, &list)
	if len(list.Entries) != 2 || list.Next == "" {
		t.Fatalf("first page: %+v", list)
	}
	want := httpapi.DeadEntry{ID: list.Entries[0].ID, Destination: "billing", EventType: "seat.released", Class: "http_4xx",
		LastStatus: 400, LastError: "400 Bad Request", Attempts: 1, DeadAt: when}
	if diff := cmp.Diff(want, list.Entries[0]); diff != "" {
		t.Errorf("an entry (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq?destination=billing&limit=2&cursor="+list.Next, ""), 200, &list)
	if len(list.Entries) != 1 || list.Next != "" {
		t.Errorf("last page: %+v", list)
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq?since="+when.Add(time.Minute).Format(time.RFC3339), ""), 200, &list)
	if len(list.Entries) != 1 || list.Entries[0].ID != "c-1" {
		t.Errorf("since: %+v", list.Entries)
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq?id=b-1&id=c-1", ""), 200, &list)
	if len(list.Entries) != 2 {
		t.Errorf("by ID: %+v", list.Entries)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "since=yesterday", "until=2026-03-01"} {
		refused(t, f.do(t, "GET", "/hookgate/dlq?"+q, ""), 400, "bad_request")
	}
	refused(t, f.do(t, "GET", "/hookgate/dlq?class=nope", ""), 400, "bad_request")
	refused(t, f.do(t, "GET", "/hookgate/dlq?destination=nope", ""), 400, "bad_request")

	var shown map[string]any
	decode(t, f.do(t, "GET", "/hookgate/dlq/b%2F3", ""), 200, &shown)
	wantShown := map[string]any{
		"id": "b/3", "destination": "billing", "state": "dead", "event_type": "seat.released", "entity": "",
		"event_time": nil, "created_at": jsonTime(when.Add(-time.Minute)), "payload": map[string]any{"id": "b/3"},
		"class": "http_4xx", "last_status": 400.0, "last_error": "400 Bad Request", "attempts": 1.0, "redrive_id": "",
		"dead_at":     jsonTime(when),
		"attempt_log": []any{map[string]any{"at": jsonTime(when), "status": 400.0, "error": "400 Bad Request", "latency_ms": 1.5}},
	}
	if diff := cmp.Diff(wantShown, shown); diff != "" {
		t.Errorf("show (-want +got):\n%s", diff)
	}
	refused(t, f.do(t, "GET", "/hookgate/dlq/nope", ""), 404, "not_found")

	// Redrive: bounded, refused for an orphan's letters, audited.
	refused(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"destination":"billing"}`), 400, "bad_limit")
	refused(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"destination":"billing","limit":11}`), 400, "bad_limit")
	refused(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"destination":"old","limit":1}`), 409, "destination_orphaned")
	refused(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"limit":1,"since":"now"}`), 400, "bad_request")
	refused(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"limit":1,"dry":true}`), 400, "bad_request")
	var rd map[string]any
	decode(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"destination":"billing","limit":2,"dry_run":true}`), 200, &rd)
	if diff := cmp.Diff(map[string]any{"redrive_id": "", "matched": 3.0, "moved": 0.0}, rd); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"destination":"billing","limit":2,"by":"cli: ann"}`), 200, &rd)
	id, _ := rd["redrive_id"].(string)
	if id == "" || rd["matched"] != 3.0 || rd["moved"] != 2.0 {
		t.Fatalf("redrive: %v", rd)
	}
	var progress sender.Redrive
	decode(t, f.do(t, "GET", "/hookgate/redrives/"+id, ""), 200, &progress)
	if progress.ID != id || progress.Moved != 2 || progress.Pending != 2 || progress.By != "cli: ann" || progress.Letters != nil {
		t.Errorf("progress: %+v", progress)
	}
	if w := f.do(t, "GET", "/hookgate/redrives/"+id, ""); strings.Contains(w.Body.String(), `"letters"`) {
		t.Errorf("progress lists its letters: %s", w.Body.Bytes())
	}
	refused(t, f.do(t, "GET", "/hookgate/redrives/nope", ""), 404, "not_found")
	decode(t, f.do(t, "POST", "/hookgate/dlq/redrive", `{"ids":["c-1"],"limit":1}`), 200, &rd)
	decode(t, f.do(t, "GET", "/hookgate/redrives/"+rd["redrive_id"].(string), ""), 200, &progress)
	if progress.By != "admin api from "+remote {
		t.Errorf("a redrive without by is by %q", progress.By)
	}
	f.mu.Lock()
	if len(f.redriven) != 3 {
		t.Errorf("redrives counted %d letters, want 3", len(f.redriven))
	}
	f.mu.Unlock()

	// Delete and purge.
	var removed map[string]int
	refused(t, f.do(t, "DELETE", "/hookgate/dlq/c-1", ""), 404, "not_found") // redriven: no longer dead
	decode(t, f.do(t, "GET", "/hookgate/dlq?destination=billing", ""), 200, &list)
	if len(list.Entries) != 1 {
		t.Fatalf("billing's dead letters after the redrive: %+v", list.Entries)
	}
	left := list.Entries[0].ID
	decode(t, f.do(t, "DELETE", "/hookgate/dlq/"+strings.ReplaceAll(left, "/", "%2F")+"?destination=billing", ""), 200, &removed)
	if diff := cmp.Diff(map[string]int{"removed": 1}, removed); diff != "" {
		t.Errorf("delete (-want +got):\n%s", diff)
	}
	refused(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"until":"soon","limit":1}`), 400, "bad_request")
	refused(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"destination":"old"}`), 400, "bad_limit")
	refused(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"destination":"old","limit":1,"cursor":"c"}`), 400, "bad_request")
	refused(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"limit":10}`), 400, "filter_required")
	refused(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"destination":"old","all":true,"limit":10}`), 400, "bad_request")
	decode(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"all":true,"dry_run":true}`), 200, &removed)
	if diff := cmp.Diff(map[string]int{"matched": 1, "removed": 0}, removed); diff != "" {
		t.Errorf("purge, a dry run (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "POST", "/hookgate/dlq/purge", `{"destination":"old","limit":1}`), 200, &removed)
	if diff := cmp.Diff(map[string]int{"matched": 1, "removed": 1}, removed); diff != "" {
		t.Errorf("purge (-want +got):\n%s", diff)
	}
	decode(t, f.do(t, "GET", "/hookgate/dlq/summary", ""), 200, &summary)
	if summary.Total != 0 {
		t.Errorf("%d dead letters left, want 0", summary.Total)
	}
}

// jsonTime is t as the API writes a stored time: in the local zone.
func jsonTime(t time.Time) string { return t.Local().Format(time.RFC3339Nano) }

// TestRefusals: an unknown route (404), a known route with another
// method (405 with Allow), a missing sender and a failing store each have
// their answer.
func TestRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, r := range []struct{ method, path, allow string }{
		{"GET", "/hookgate/", ""},
		{"GET", "/hookgate/nope", ""},
		{"GET", "/hookgate/dlq/a/b", ""},
		{"GET", "/hookgate/dlq/", ""},
		{"GET", "/hookgate/deliveries/billing", ""},
		{"PUT", "/hookgate/destinations", "GET, HEAD, POST"},
		{"PUT", "/hookgate/destinations/billing", "DELETE, GET, HEAD, PATCH"},
		{"GET", "/hookgate/destinations/billing/pause", "POST"},
		{"POST", "/hookgate/dlq", "GET, HEAD"},
		{"PUT", "/hookgate/dlq/x", "DELETE, GET, HEAD"},
		{"POST", "/hookgate/redrives/x", "GET, HEAD"},
	} {
		status, reason := 404, "not_found"
		if r.allow != "" {
			status, reason = 405, "method_not_allowed"
		}
		w := f.do(t, r.method, r.path, "")
		p := refused(t, w, status, reason)
		if !strings.Contains(p.Detail, r.method+" ") {
			t.Errorf("%s %s: detail %q does not name the request", r.method, r.path, p.Detail)
		}
		if got := w.Header().Get("Allow"); got != r.allow {
			t.Errorf("%s %s: Allow %q, want %q", r.method, r.path, got, r.allow)
		}
	}
	for _, path := range []string{"/hookgate/destinations", "/hookgate/nope", "/hookgate/dlq/x"} {
		none := httptest.NewRecorder()
		httpapi.New(nil, nil, nil, nil).ServeHTTP(none, httptest.NewRequest("GET", path, nil))
		refused(t, none, 404, "no_sender")
	}

	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/hookgate/destinations", ""},
		{"GET", "/hookgate/dlq/summary", ""},
		{"GET", "/hookgate/dlq", ""},
		{"POST", "/hookgate/dlq/purge", `{"all":true,"limit":10}`},
	} {
		w := f.do(t, r.method, r.path, r.body)
		refused(t, w, 503, "store_unavailable")
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("%s %s: Retry-After %q, want 1", r.method, r.path, got)
		}
	}
	for _, r := range []struct{ path, body string }{
		{"/hookgate/destinations/billing/enqueue", `{"id":"e","payload":{}}`},
		{"/hookgate/events", `{"id":"e","event_type":"reservation.confirmed","payload":{}}`},
	} {
		w := f.do(t, "POST", r.path, r.body)
		if p := refused(t, w, 503, "store_unavailable"); !strings.Contains(p.Detail, "outcome is unknown") || !strings.Contains(p.Detail, "same delivery ID") {
			t.Errorf("%s: the 503 says %q, want: the outcome is unknown, again with the same delivery ID", r.path, p.Detail)
		}
	}
}

// TestWriteJSON: payloads go out as they are, not escaped for HTML.
func TestWriteJSON(t *testing.T) {
	w := httptest.NewRecorder()
	if err := httpapi.WriteJSON(w, 201, map[string]string{"a": "<b>&"}); err != nil {
		t.Fatal(err)
	}
	if got, want := w.Body.String(), "{\"a\":\"<b>&\"}\n"; got != want || w.Code != 201 {
		t.Errorf("WriteJSON wrote %d %q, want 201 %q", w.Code, got, want)
	}
	if err := httpapi.WriteJSON(httptest.NewRecorder(), 200, func() {}); err == nil {
		t.Error("WriteJSON of a func: no error")
	}
}
