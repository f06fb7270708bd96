package sender

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBadRequestIsClassRequest: an ID with CR LF (the doors refuse it, but
// the sender must be safe on its own) makes a request that cannot be
// sent: it is dead at once, class request, and the breaker does not count
// it; the destination's breaker (one failure opens it) stays closed and
// its other envelopes are delivered.
func TestBadRequestIsClassRequest(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	t.Cleanup(srv.Close)
	q := newMemQueue()
	cfg := testConfig()
	cfg.Breaker = BreakerConfig{Failures: 1, Open: time.Hour}
	// One worker: gobreaker reads the shared state before it locks it, so
	// concurrent attempts may be counted as one.
	s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: srv.URL, Workers: 1}}, nil, Options{})
	bad := "bad\r\nX-Evil: 1"
	for _, id := range []string{bad, "ok-1", "ok-2"} {
		if _, err := s.Enqueue(t.Context(), &Envelope{ID: id, Destination: "d", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, s)
	waitFor(t, "settled", func() bool {
		_, state, _ := q.Get(t.Context(), "d", bad)
		return state == StateDead && q.isDelivered("ok-1") && q.isDelivered("ok-2")
	})
	e, _, _ := q.Get(t.Context(), "d", bad)
	if e.Class != ClassRequest || e.Attempts != 1 || e.LastStatus != 0 || !strings.Contains(e.LastError, `invalid header field value for "Webhook-Id"`) {
		t.Errorf("dead letter: class %s, attempts %d, status %d, error %q; want request, 1, 0, an invalid header value",
			e.Class, e.Attempts, e.LastStatus, e.LastError)
	}
	if got.Load() != 2 {
		t.Errorf("the receiver got %d requests, want the 2 good ones", got.Load())
	}
	if st, _ := s.BreakerState("d"); st != gobreaker.StateClosed {
		t.Errorf("breaker %s, want closed", st)
	}
	if c := breakerCounts(t, s, "d"); c.Requests != 2 || c.TotalFailures != 0 {
		t.Errorf("breaker counts %+v, want the 2 deliveries and no failure", c)
	}
}

// waitFor polls cond for up to 20 seconds (outside a bubble).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHookgate409IsNotCounted: hookgate's own 409 with Retry-After (the
// receiver's dedupe says another copy is in flight) is retried, and not
// counted by the breaker, which two failures would open.
func TestHookgate409IsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		rcv := newFakeReceiver(func(_ *http.Request, _ string, n int) (time.Duration, int, http.Header) {
			if n <= 3 {
				return 10 * time.Millisecond, 409, http.Header{"Retry-After": {"1"}}
			}
			return 10 * time.Millisecond, 200, nil
		})
		cfg := testConfig()
		cfg.Attempts = 10
		cfg.Backoff = Backoff{Base: time.Millisecond, Cap: 2 * time.Second}
		cfg.Breaker = BreakerConfig{Failures: 2, Open: time.Hour}
		obs := new(states)
		s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{Observer: obs})
		enqueueN(t, s, "d", "busy", 1)
		run(t, s)
		time.Sleep(30 * time.Second)
		if !q.isDelivered("busy-0") || rcv.count("busy-0") != 4 {
			t.Errorf("delivered %v after %d attempts; want delivered at the 4th", q.isDelivered("busy-0"), rcv.count("busy-0"))
		}
		if got := obs.all(); len(got) != 0 {
			t.Errorf("breaker went through %v, want no change", got)
		}
		if c := breakerCounts(t, s, "d"); c.Requests != 1 || c.TotalFailures != 0 {
			t.Errorf("breaker counts %+v, want the delivery alone", c)
		}
	})
}
