package caddymodule

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

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
