package sender_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// opsReceiver records the operational events it is sent.
type opsReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []sender.OperationalEvent
	ids    []string
}

func newOpsReceiver(t *testing.T) *opsReceiver {
	r := &opsReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev sender.OperationalEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("an operational event that does not parse: %s", b)
		}
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.ids = append(r.ids, req.Header.Get("Webhook-Id"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// of returns the events of type typ received.
func (r *opsReceiver) of(typ string) []sender.OperationalEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sender.OperationalEvent
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestDisableAfter: a destination whose attempts all fail is told
// failing after FailingAfter, once, and disabled after DisableAfter:
// paused by "disabled", its envelope kept; each told to the operational
// destination with its tenant. Enabling it resumes it, tells
// destination.enabled, and starts its failing run afresh. A 410 disables
// too, and a dead letter is told as dead_letter.created once its minute
// is over.
func TestDisableAfter(t *testing.T) {
	var answer atomic.Int32
	var hits atomic.Int64
	answer.Store(503)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(answer.Load()))
	}))
	t.Cleanup(down.Close)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(410) }))
	t.Cleanup(gone.Close)
	ops := newOpsReceiver(t)
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC).UnixNano())
	cfg := fast
	cfg.Attempts, cfg.DisableAfter, cfg.FailingAfter = 1000000, 2*time.Hour, 30*time.Minute
	cfg.Backoff = sender.Backoff{Base: 20 * time.Millisecond, Cap: 20 * time.Millisecond}
	dests := []sender.Destination{
		{Name: "acme/orders", URL: down.URL, Signer: signer(t)},
		{Name: "acme/old", URL: gone.URL, Signer: signer(t)},
		{Name: "ops", URL: ops.URL, Signer: signer(t)},
	}
	q := newQueue(t).(sender.AuditedQueue)
	s, err := sender.New(q, cfg, dests, sender.Options{Now: clock.now, Operational: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	o := sender.NewOps(s, sender.NewSettled(q, s.Destinations, 0, clock.now), sender.OpsOptions{})
	status := func(name string) sender.DestinationStatus {
		st, err := s.Status(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	enqueue(t, s, "acme/orders", "e1")
	time.Sleep(100 * time.Millisecond) // a few failures, at one instant of the clock
	if len(ops.of(sender.EventDestinationFailing)) != 0 || status("acme/orders").State != "active" {
		t.Fatal("told failing, or disabled, at once")
	}
	clock.advance(31 * time.Minute)
	eventually(t, "destination.failing", func() bool { return len(ops.of(sender.EventDestinationFailing)) == 1 })
	f := ops.of(sender.EventDestinationFailing)[0].Data
	if f.Destination != "acme/orders" || f.Tenant != "acme" || f.FailingSince == nil || !f.FailingSince.Equal(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("destination.failing tells %+v", f)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(ops.of(sender.EventDestinationFailing)); n != 1 || status("acme/orders").State != "active" {
		t.Fatalf("told failing %d times (want once per run); state %s", n, status("acme/orders").State)
	}
	clock.advance(90 * time.Minute)
	eventually(t, "disabled", func() bool { return status("acme/orders").PausedBy == sender.PausedByDisabled })
	eventually(t, "destination.disabled", func() bool { return len(ops.of(sender.EventDestinationDisabled)) == 1 })
	if d := ops.of(sender.EventDestinationDisabled)[0].Data; d.Reason != "failing" || d.Tenant != "acme" {
		t.Errorf("destination.disabled tells %+v", d)
	}
	if st := status("acme/orders"); st.Depth["paused"] != 1 {
		t.Errorf("the disabled destination's envelope: %+v, want kept, paused", st.Depth)
	}

	// Enabled: resumed, told, and its run starts afresh.
	if _, err := o.Enable(t.Context(), "acme/orders", "operator"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "destination.enabled", func() bool { return len(ops.of(sender.EventDestinationEnabled)) == 1 })
	if e := ops.of(sender.EventDestinationEnabled)[0].Data; e.By != "operator" || e.Destination != "acme/orders" {
		t.Errorf("destination.enabled tells %+v", e)
	}
	before := hits.Load()
	clock.advance(time.Second) // its retry is due: it fails again, a second into a new run
	eventually(t, "a failure after the enable", func() bool { return hits.Load() > before })
	time.Sleep(50 * time.Millisecond) // its outcome judged
	if st := status("acme/orders"); st.State != "active" {
		t.Fatalf("disabled again at once after the enable: %+v", st)
	}
	answer.Store(200)
	clock.advance(time.Second)
	eventually(t, "delivered once up", func() bool { return status("acme/orders").Depth["queued"] == 0 })

	// A 410: disabled at once, its envelope dead, told both.
	enqueue(t, s, "acme/old", "e2")
	eventually(t, "disabled by the 410", func() bool { return status("acme/old").PausedBy == sender.PausedByGone })
	eventually(t, "destination.disabled for gone", func() bool { return len(ops.of(sender.EventDestinationDisabled)) == 2 })
	if d := ops.of(sender.EventDestinationDisabled)[1].Data; d.Reason != "gone" || d.Destination != "acme/old" {
		t.Errorf("destination.disabled for a 410 tells %+v", d)
	}
	clock.advance(2 * time.Minute)
	eventually(t, "dead_letter.created", func() bool { return len(ops.of(sender.EventDeadLetterCreated)) == 1 })
	if d := ops.of(sender.EventDeadLetterCreated)[0].Data; d.Destination != "acme/old" || d.Count != 1 || d.Since == nil || d.Until.Sub(*d.Since) != time.Minute {
		t.Errorf("dead_letter.created tells %+v", d)
	}
	// A subscriber enables its own disabled destination.
	if _, err := o.SetPaused(t.Context(), "acme/old", false, sender.SubscriberPause("acme/old")+" portal"); err != nil {
		t.Fatalf("the subscriber enabling its disabled destination: %v", err)
	}
	// Nothing is told of the operational destination itself.
	for _, e := range ops.events {
		if e.Data.Destination == "ops" {
			t.Errorf("told about ops itself: %+v", e)
		}
	}
}
