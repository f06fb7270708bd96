package caddymodule

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// TestAppEnqueue: an in-process producer enqueues through the running
// app (the Go API): the event is delivered, signed, once; the same ID
// again is a duplicate.
func TestAppEnqueue(t *testing.T) {
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Webhook-Signature") != "" {
			got.Add(1)
		}
	}))
	defer rcv.Close()
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"hookgate": map[string]any{
			"store":        map[string]any{"backend": "file", "dir": t.TempDir()},
			"destinations": []map[string]any{{"name": "billing", "url": rcv.URL, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	v, err := caddy.ActiveContext().App("hookgate")
	if err != nil {
		t.Fatal(err)
	}
	app := v.(*App)
	e := &sender.Envelope{ID: "evt_1", Destination: "billing", Payload: []byte(`{"amount":1}`)}
	if res, err := app.Enqueue(t.Context(), e); err != nil || res.Duplicate || res.State != sender.StateQueued {
		t.Fatalf("Enqueue = %+v, %v", res, err)
	}
	for deadline := time.Now().Add(10 * time.Second); got.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not delivered")
		}
	}
	again := &sender.Envelope{ID: "evt_1", Destination: "billing", Payload: []byte(`{"amount":1}`)}
	if res, err := app.Enqueue(t.Context(), again); err != nil || !res.Duplicate {
		t.Fatalf("the same ID again = %+v, %v; want a duplicate", res, err)
	}
	time.Sleep(100 * time.Millisecond)
	if got.Load() != 1 {
		t.Errorf("delivered %d times, want once", got.Load())
	}
}

// TestAppPublish: an in-process producer fans an event out through the
// running app: each subscribed destination gets it signed, once, and the
// one that subscribes to nothing never; the same ID again is a duplicate
// everywhere.
func TestAppPublish(t *testing.T) {
	var got sync.Map // path -> *atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Webhook-Signature") != "" && r.Header.Get("Webhook-Id") == "evt_1" {
			n, _ := got.LoadOrStore(r.URL.Path, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}))
	defer rcv.Close()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"hookgate": map[string]any{
			"store": map[string]any{"backend": "file", "dir": t.TempDir()},
			"destinations": []map[string]any{
				{"name": "billing", "url": rcv.URL + "/billing", "secret": secret, "events": []string{"reservation.*"}},
				{"name": "manual", "url": rcv.URL + "/manual", "secret": secret},
				{"name": "audit", "url": rcv.URL + "/audit", "secret": secret, "events": []string{"*"}},
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	v, err := caddy.ActiveContext().App("hookgate")
	if err != nil {
		t.Fatal(err)
	}
	app := v.(*App)
	ev := func() *sender.Event {
		return &sender.Event{ID: "evt_1", EventType: "reservation.confirmed", Payload: []byte(`{"amount":1}`)}
	}
	res, err := app.Publish(t.Context(), ev())
	want := sender.PublishResult{Deliveries: []sender.Delivery{{Destination: "billing", State: sender.StateQueued}, {Destination: "audit", State: sender.StateQueued}}}
	if diff := cmp.Diff(want, res); err != nil || diff != "" {
		t.Fatalf("Publish: %v (-want +got):\n%s", err, diff)
	}
	count := func(path string) int64 {
		if n, ok := got.Load(path); ok {
			return n.(*atomic.Int64).Load()
		}
		return 0
	}
	for deadline := time.Now().Add(10 * time.Second); count("/billing") == 0 || count("/audit") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not delivered to both subscribers")
		}
	}
	if res, err := app.Publish(t.Context(), ev()); err != nil || len(res.Deliveries) != 2 || !res.Deliveries[0].Duplicate || !res.Deliveries[1].Duplicate {
		t.Fatalf("the same event again = %+v, %v; want two duplicates", res, err)
	}
	time.Sleep(100 * time.Millisecond)
	if b, a, m := count("/billing"), count("/audit"), count("/manual"); b != 1 || a != 1 || m != 0 {
		t.Errorf("delivered to billing %d, audit %d, manual %d times; want 1, 1, 0", b, a, m)
	}
}

// TestFanOutProvision: webhook_enqueue without a destination needs an
// event_type and a destination that subscribes to events; a destination's
// events must be globs.
func TestFanOutProvision(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		name    string
		events  []string
		handler map[string]any
		want    string
	}{
		{"no event_type", []string{"*"}, map[string]any{"handler": "webhook_enqueue"}, "it needs event_type"},
		{"no subscriber", nil, map[string]any{"handler": "webhook_enqueue", "event_type": "{webhook.json.type}"}, "no destination of the hookgate global option subscribes"},
		{"a bad glob", []string{"reservation.["}, map[string]any{"handler": "webhook_enqueue", "destination": "billing"}, `events "reservation.[" is not a glob`},
		{"fine", []string{"reservation.*"}, map[string]any{"handler": "webhook_enqueue", "event_type": "{webhook.json.type}"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(map[string]any{
				"admin": map[string]any{"disabled": true},
				"apps": map[string]any{
					"hookgate": map[string]any{
						"store":        map[string]any{"backend": "file", "dir": t.TempDir()},
						"destinations": []map[string]any{{"name": "billing", "url": "http://127.0.0.1:1", "secret": secret, "events": tc.events}},
					},
					"http": map[string]any{"servers": map[string]any{"s": map[string]any{
						"listen": []string{"127.0.0.1:0"},
						"routes": []map[string]any{{"handle": []map[string]any{tc.handler}}},
					}}},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var cfg caddy.Config
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			err = caddy.Validate(&cfg)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
