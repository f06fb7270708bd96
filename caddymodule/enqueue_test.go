package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/sender"
)

// fakeQueue records what is enqueued; with err set, Enqueue fails.
type fakeQueue struct {
	sender.Queue // nothing else is called: the sender does not run

	mu  sync.Mutex
	got []*sender.Envelope
	err error
}

func (q *fakeQueue) Enqueue(_ context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return sender.EnqueueResult{}, q.err
	}
	q.got = append(q.got, e)
	return sender.EnqueueResult{State: sender.StateQueued}, nil
}

// Metas answers that the queue holds nothing of ids, unless an enqueue
// failed: a fan-out reads what its destinations hold first.
// Order is called by sender.New for each destination.
func (*fakeQueue) Order(string, sender.Ordering) {}

func (q *fakeQueue) Metas(context.Context, string, []string) ([]*sender.Meta, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return nil, q.err
}

func (q *fakeQueue) MetasAcross(_ context.Context, dests []string, _ string) ([]*sender.Meta, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return make([]*sender.Meta, len(dests)), q.err
}

// FirstSeen answers now for each destination: a fan-out records them
// before its first write.
func (q *fakeQueue) FirstSeen(_ context.Context, dests []string, now time.Time) (map[string]time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]time.Time{}
	for _, d := range dests {
		out[d] = now
	}
	return out, q.err
}

func (q *fakeQueue) enqueued() []*sender.Envelope {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*sender.Envelope(nil), q.got...)
}

// enqueueFixture is an app with destination "billing" over a fake queue,
// and its webhook_enqueue handler.
type enqueueFixture struct {
	app     *App
	queue   *fakeQueue
	handler *Enqueue
}

func newEnqueueFixture(t *testing.T) *enqueueFixture {
	t.Helper()
	m, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q := new(fakeQueue)
	dests := []sender.Destination{
		{Name: "billing", URL: "http://127.0.0.1:1/hooks"},
		{Name: "crm", URL: "http://127.0.0.1:1/crm", Events: []string{"reservation.*"}},
		{Name: "audit", URL: "http://127.0.0.1:1/audit", Events: []string{"reservation.confirmed", "seat.*"}},
	}
	s, err := sender.New(q, sender.Config{}, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := &App{sender: s, destinations: dests, metrics: m, logger: zap.NewNop()}
	h := &Enqueue{Destination: "billing", MaxBody: 1 << 10, app: app, logger: zap.NewNop()}
	return &enqueueFixture{app: app, queue: q, handler: h}
}

// serve sends a request through webhook_enqueue.
func (f *enqueueFixture) serve(t *testing.T, method string, h http.Header, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/events", strings.NewReader(body))
	for k, v := range h {
		r.Header[k] = v
	}
	r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
	w := httptest.NewRecorder()
	if err := f.handler.ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// reasonOf reads a problem+json answer's reason.
func reasonOf(t *testing.T, w *httptest.ResponseRecorder) problem.Details {
	t.Helper()
	var p problem.Details
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d, Content-Type %q: %s", w.Code, ct, w.Body.Bytes())
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func key(id string) http.Header { return http.Header{"Idempotency-Key": {id}} }

func withType(h http.Header, contentType string) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", contentType)
	return h
}

// TestEnqueueRejects: webhook_enqueue refuses, and enqueues nothing for,
// a method but POST, an empty body, a JSON body that does not parse (sent
// as JSON, or holding the ID), an ID that is not 1 to 1024 bytes of
// visible ASCII, and a body "id" that is not a string.
func TestEnqueueRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		body   string
		status int
		reason string
	}{
		{"GET", http.MethodGet, key("k"), "", 405, "method_not_allowed"},
		{"PUT", http.MethodPut, key("k"), `{}`, 405, "method_not_allowed"},
		{"empty body", http.MethodPost, key("k"), "", 400, "empty_payload"},
		{"truncated, ID in the body", http.MethodPost, nil, `{"id":"x",`, 400, "malformed_json"},
		{"truncated, no Content-Type", http.MethodPost, key("k"), `{"type":"a"`, 400, "malformed_json"},
		{"truncated application/json", http.MethodPost, withType(key("k"), "application/json; charset=utf-8"), `{"type":`, 400, "malformed_json"},
		{"truncated application/*+json", http.MethodPost, withType(key("k"), "application/cloudevents+json"), `[1,`, 400, "malformed_json"},
		{"text, ID in the body", http.MethodPost, withType(nil, "text/plain"), `id=x`, 400, "malformed_json"},
		{"ID with a space", http.MethodPost, key("a b"), `{}`, 400, "bad_id"},
		{"ID with a tab", http.MethodPost, key("a\tb"), `{}`, 400, "bad_id"},
		{"ID not ASCII", http.MethodPost, key("évt"), `{}`, 400, "bad_id"},
		{"ID over 1024 bytes", http.MethodPost, key(strings.Repeat("x", 1025)), `{}`, 400, "bad_id"},
		{"body ID with CR LF", http.MethodPost, nil, `{"id":"a\r\nb"}`, 400, "bad_id"},
		{"body ID with NUL", http.MethodPost, nil, `{"id":"a\u0000b"}`, 400, "bad_id"},
		{"body ID a number", http.MethodPost, nil, `{"id":42}`, 400, "bad_id"},
		{"body ID an object", http.MethodPost, nil, `{"id":{"a":1}}`, 400, "bad_id"},
		{"body ID null", http.MethodPost, nil, `{"id":null}`, 400, "bad_id"},
		{"no ID", http.MethodPost, nil, `{"type":"a"}`, 400, "missing_idempotency_key"},
		{"body over max_body", http.MethodPost, key("k"), `"` + strings.Repeat("x", 1024) + `"`, 413, "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEnqueueFixture(t)
			w := f.serve(t, tc.method, tc.header, tc.body)
			p := reasonOf(t, w)
			if w.Code != tc.status || p.Reason != tc.reason {
				t.Errorf("answer %d %q (%s), want %d %q", w.Code, p.Reason, p.Detail, tc.status, tc.reason)
			}
			if tc.status == 405 && w.Header().Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", w.Header().Get("Allow"))
			}
			if got := f.queue.enqueued(); len(got) != 0 {
				t.Errorf("enqueued %d envelopes, want none", len(got))
			}
		})
	}
}

// TestEnqueueKeepsContentType: the request's Content-Type goes with the
// envelope (application/json when absent); a body not sent as JSON and
// whose ID is not in it need not be JSON.
func TestEnqueueKeepsContentType(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   sender.Envelope
	}{
		{"none", nil, `{"id":"e1"}`, sender.Envelope{ID: "e1", ContentType: "application/json"}},
		{"with charset", withType(key("e2"), "application/json; charset=utf-8"), `{"a":1}`, sender.Envelope{ID: "e2", ContentType: "application/json; charset=utf-8"}},
		{"text", withType(key("e3"), "text/plain"), `not JSON`, sender.Envelope{ID: "e3", ContentType: "text/plain"}},
		{"form", withType(key("e4"), "application/x-www-form-urlencoded"), `a=1&b=2`, sender.Envelope{ID: "e4", ContentType: "application/x-www-form-urlencoded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEnqueueFixture(t)
			if w := f.serve(t, http.MethodPost, tc.header, tc.body); w.Code != 202 {
				t.Fatalf("answer %d %s, want 202", w.Code, w.Body.Bytes())
			}
			got := f.queue.enqueued()
			if len(got) != 1 {
				t.Fatalf("enqueued %d envelopes, want 1", len(got))
			}
			tc.want.Destination, tc.want.Payload = "billing", []byte(tc.body)
			g := got[0]
			if diff := cmp.Diff(tc.want, sender.Envelope{ID: g.ID, Destination: g.Destination, Payload: g.Payload, ContentType: g.ContentType}); diff != "" {
				t.Errorf("the envelope (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppEnqueueRefusesBadID: the Go API applies the delivery ID rule.
func TestAppEnqueueRefusesBadID(t *testing.T) {
	f := newEnqueueFixture(t)
	for _, id := range []string{"", "a\r\nb", "a b", strings.Repeat("x", sender.MaxIDLen+1)} {
		_, err := f.app.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "billing", Payload: []byte(`{}`)})
		if !errors.Is(err, sender.ErrBadID) {
			t.Errorf("Enqueue(ID %q) = %v, want ErrBadID", id, err)
		}
	}
	if got := f.queue.enqueued(); len(got) != 0 {
		t.Errorf("enqueued %d envelopes, want none", len(got))
	}
}

// serveAdmin sends a request to the admin API, which serves the running
// app.
func serveAdmin(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	a := &adminAPI{}
	if err := a.serve(w, httptest.NewRequest(method, path, strings.NewReader(body))); err != nil {
		t.Fatal(err)
	}
	return w
}

// running registers app as the running one for the test.
func (f *enqueueFixture) running(t *testing.T) {
	f.app.admin = f.app.adminRouter()
	setRunning(f.app)
	t.Cleanup(func() { unsetRunning(f.app) })
}

// TestAdminEnqueueRejects: the admin enqueue applies the delivery ID rule
// (an id that is not a string is not made one), and sends its payload as
// application/json.
func TestAdminEnqueueRejects(t *testing.T) {
	f := newEnqueueFixture(t)
	f.running(t)
	const path = "/hookgate/destinations/billing/enqueue"
	for _, tc := range []struct {
		body   string
		reason string
	}{
		{`{"id":"a\r\nb","payload":{}}`, "bad_id"},
		{`{"id":"a b","payload":{}}`, "bad_id"},
		{`{"id":"` + strings.Repeat("x", 1025) + `","payload":{}}`, "bad_id"},
		{`{"id":42,"payload":{}}`, "bad_id"},
		{`{"id":{"a":1},"payload":{}}`, "bad_id"},
		{`{"payload":{}}`, "missing_idempotency_key"},
		{`{"id":"","payload":{}}`, "missing_idempotency_key"},
	} {
		w := serveAdmin(t, http.MethodPost, path, tc.body)
		if p := reasonOf(t, w); w.Code != 400 || p.Reason != tc.reason {
			t.Errorf("%.40s: answer %d %q (%s), want 400 %q", tc.body, w.Code, p.Reason, p.Detail, tc.reason)
		}
	}
	if got := f.queue.enqueued(); len(got) != 0 {
		t.Fatalf("enqueued %d envelopes, want none", len(got))
	}
	if w := serveAdmin(t, http.MethodPost, path, `{"id":"evt_1","payload":{"a":1}}`); w.Code != 202 {
		t.Fatalf("a good enqueue: %d %s", w.Code, w.Body.Bytes())
	}
	got := f.queue.enqueued()
	if len(got) != 1 || got[0].ID != "evt_1" || got[0].ContentType != "application/json" || string(got[0].Payload) != `{"a":1}` {
		t.Fatalf("enqueued %+v", got)
	}
}

// TestEnqueueUnavailableSaysUnknown: when the store fails, both doors
// answer 503 store_unavailable saying the outcome is unknown and a retry
// with the same ID is safe, never that nothing was enqueued.
func TestEnqueueUnavailableSaysUnknown(t *testing.T) {
	f := newEnqueueFixture(t)
	f.running(t)
	f.queue.err = errors.New("redis enqueue: i/o timeout")
	for door, w := range map[string]*httptest.ResponseRecorder{
		"webhook_enqueue": f.serve(t, http.MethodPost, key("evt_1"), `{"a":1}`),
		"admin":           serveAdmin(t, http.MethodPost, "/hookgate/destinations/billing/enqueue", `{"id":"evt_1","payload":{"a":1}}`),
	} {
		p := reasonOf(t, w)
		if w.Code != 503 || p.Reason != "store_unavailable" || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: answer %d %q, Retry-After %q; want 503 store_unavailable, 1", door, w.Code, p.Reason, w.Header().Get("Retry-After"))
		}
		if strings.Contains(p.Detail, "nothing") || !strings.Contains(p.Detail, "unknown") || !strings.Contains(p.Detail, "same delivery ID") {
			t.Errorf("%s: the 503 says %q; want: the outcome is unknown, retry with the same delivery ID", door, p.Detail)
		}
	}
}

// TestEnqueueFansOut: webhook_enqueue without a destination enqueues the
// event for every destination subscribed to its type, under its one ID,
// and answers each delivery in config order; an event no destination
// subscribes to is 202 with no delivery, one whose type resolves to
// nothing is 400 missing_event_type, and a store failure 503 saying the
// outcome is unknown.
func TestEnqueueFansOut(t *testing.T) {
	type answer struct {
		ID         string            `json:"id"`
		EventType  string            `json:"event_type"`
		Deliveries []sender.Delivery `json:"deliveries"`
	}
	queued := func(dests ...string) []sender.Delivery {
		out := []sender.Delivery{}
		for _, d := range dests {
			out = append(out, sender.Delivery{Destination: d, State: sender.StateQueued})
		}
		return out
	}
	for _, tc := range []struct {
		name, body string
		want       answer
		enqueued   []string // destinations
	}{
		{"two subscribe", `{"id":"e1","type":"reservation.confirmed"}`, answer{"e1", "reservation.confirmed", queued("crm", "audit")}, []string{"crm", "audit"}},
		{"one subscribes", `{"id":"e2","type":"seat.released"}`, answer{"e2", "seat.released", queued("audit")}, []string{"audit"}},
		{"none subscribes", `{"id":"e3","type":"invoice.paid"}`, answer{"e3", "invoice.paid", queued()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEnqueueFixture(t)
			f.handler.Destination, f.handler.EventType, f.handler.Entity = "", "{webhook.json.type}", "{webhook.json.id}"
			w := f.serve(t, http.MethodPost, nil, tc.body)
			var got answer
			if w.Code != 202 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
				t.Fatalf("answer %d %s, want 202", w.Code, w.Body.Bytes())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			var dests []string
			for _, e := range f.queue.enqueued() {
				dests = append(dests, e.Destination)
				if e.ID != tc.want.ID || e.EventType != tc.want.EventType || e.Entity != tc.want.ID || string(e.Payload) != tc.body || e.ContentType != "application/json" {
					t.Errorf("%s's envelope: %+v", e.Destination, e)
				}
			}
			// A fan-out's enqueues run concurrently: written in any order.
			if diff := cmp.Diff(tc.enqueued, dests, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("enqueued for (-want +got):\n%s", diff)
			}
		})
	}

	f := newEnqueueFixture(t)
	f.handler.Destination, f.handler.EventType = "", "{webhook.json.type}"
	w := f.serve(t, http.MethodPost, key("e4"), `{"kind":"reservation.confirmed"}`)
	if p := reasonOf(t, w); w.Code != 400 || p.Reason != "missing_event_type" {
		t.Errorf("no event type: %d %q (%s), want 400 missing_event_type", w.Code, p.Reason, p.Detail)
	}
	if got := f.queue.enqueued(); len(got) != 0 {
		t.Errorf("enqueued %d envelopes, want none", len(got))
	}
	f.queue.err = errors.New("redis metas: i/o timeout")
	w = f.serve(t, http.MethodPost, key("e5"), `{"type":"reservation.confirmed"}`)
	if p := reasonOf(t, w); w.Code != 503 || p.Reason != "store_unavailable" || !strings.Contains(p.Detail, "unknown") || !strings.Contains(p.Detail, "same delivery ID") {
		t.Errorf("store down: %d %q (%s), want 503 store_unavailable, the outcome unknown", w.Code, p.Reason, p.Detail)
	}
}

// TestAppPublishRefuses: the Go API refuses a bad ID and an event without
// a type, and says so when the sender is not running.
func TestAppPublishRefuses(t *testing.T) {
	f := newEnqueueFixture(t)
	for _, tc := range []struct {
		ev   sender.Event
		want error
	}{
		{sender.Event{ID: "a b", EventType: "seat.released", Payload: []byte(`{}`)}, sender.ErrBadID},
		{sender.Event{ID: "", EventType: "seat.released", Payload: []byte(`{}`)}, sender.ErrBadID},
		{sender.Event{ID: "e1", Payload: []byte(`{}`)}, sender.ErrMissingEventType},
	} {
		if _, err := f.app.Publish(t.Context(), &tc.ev); !errors.Is(err, tc.want) {
			t.Errorf("Publish(%q, %q) = %v, want %v", tc.ev.ID, tc.ev.EventType, err, tc.want)
		}
	}
	if got := f.queue.enqueued(); len(got) != 0 {
		t.Errorf("enqueued %d envelopes, want none", len(got))
	}
	if _, err := new(App).Publish(t.Context(), &sender.Event{ID: "e1", EventType: "seat.released"}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Publish without a sender = %v, want: the sender is not running", err)
	}
}

// TestEnqueueWithoutSenderSaysSo: before the sender runs, webhook_enqueue
// answers 503 store_unavailable saying so: nothing was enqueued, the
// outcome is known.
func TestEnqueueWithoutSenderSaysSo(t *testing.T) {
	f := newEnqueueFixture(t)
	f.app.sender = nil
	w := f.serve(t, http.MethodPost, key("evt_1"), `{"a":1}`)
	p := reasonOf(t, w)
	if w.Code != 503 || p.Reason != "store_unavailable" || !strings.Contains(p.Detail, "not running") || strings.Contains(p.Detail, "unknown") {
		t.Errorf("answer %d %q %q; want 503 store_unavailable: the sender is not running", w.Code, p.Reason, p.Detail)
	}
}

// TestEnqueueRefusesALongEntity: webhook_enqueue's entity placeholder
// resolving to over 1024 bytes is 400 entity_too_long, and nothing is
// queued.
func TestEnqueueRefusesALongEntity(t *testing.T) {
	f := newEnqueueFixture(t)
	f.handler.Entity, f.handler.MaxBody = "{webhook.json.entity}", 4<<10
	w := f.serve(t, http.MethodPost, key("k"), `{"entity":"`+strings.Repeat("e", sender.MaxEntityLen+1)+`"}`)
	if p := reasonOf(t, w); w.Code != 400 || p.Reason != "entity_too_long" {
		t.Errorf("answer %d %q (%s), want 400 entity_too_long", w.Code, p.Reason, p.Detail)
	}
	if got := f.queue.enqueued(); len(got) != 0 {
		t.Errorf("enqueued %d envelopes, want none", len(got))
	}
}
