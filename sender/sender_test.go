package sender_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/verify"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a real HTTP receiver that verifies each request and answers
// with what answer says.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	byID   map[string]int
	total  atomic.Int64
	answer atomic.Value // func(id string, n int) int
	hdrs   []http.Header
}

func newReceiver(t *testing.T, answer func(id string, n int) int) *receiver {
	t.Helper()
	v, err := verify.New("standard", []string{secret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{byID: map[string]int{}}
	r.answer.Store(answer)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d, err := v.Verify(verify.Request{Header: req.Header, Body: body}, time.Now())
		if err != nil {
			t.Errorf("receiver: %v", err)
			w.WriteHeader(401)
			return
		}
		r.mu.Lock()
		r.byID[d.ID]++
		n := r.byID[d.ID]
		r.hdrs = append(r.hdrs, req.Header.Clone())
		r.mu.Unlock()
		r.total.Add(1)
		w.WriteHeader(r.answer.Load().(func(string, int) int)(d.ID, n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func newQueue(t testing.TB) sender.Queue {
	t.Helper()
	db := bolttest.Open(t, nil)
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func signer(t *testing.T) sender.Signer {
	v, err := verify.New("standard", []string{secret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fast is a config whose retries come at once.
var fast = sender.Config{
	Workers: 8, Attempts: 3, Backoff: sender.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond},
	Timeout: 2 * time.Second, Lease: 10 * time.Second, Poll: 20 * time.Millisecond,
	Breaker: sender.BreakerConfig{Failures: 1000},
}

// start runs s until the test ends, or until the returned stop, which
// waits for Run to return.
func start(t *testing.T, s *sender.Sender) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// eventually polls cond for up to 20 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func enqueue(t *testing.T, s *sender.Sender, dest, id string) {
	t.Helper()
	res, err := s.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: dest, Payload: []byte(`{"id":"` + id + `"}`),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if err != nil || res.Duplicate {
		t.Fatalf("Enqueue(%s) = %+v, %v", id, res, err)
	}
}

func TestDeliversEachOnceSigned(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	const n = 200
	for i := range n {
		enqueue(t, s, "d", fmt.Sprint("msg_", i))
	}
	eventually(t, "all delivered", func() bool { return rcv.total.Load() >= n })
	time.Sleep(100 * time.Millisecond)
	for i := range n {
		if c := rcv.count(fmt.Sprint("msg_", i)); c != 1 {
			t.Fatalf("msg_%d delivered %d times", i, c)
		}
	}
	if got := rcv.hdrs[0].Get("Traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent = %q", got)
	}
	eventually(t, "the queue empty", func() bool {
		st, _ := q.Stats(t.Context(), "d", time.Now())
		return st.Queued == 0 && st.Leased == 0
	})
	if res, _ := s.Enqueue(t.Context(), &sender.Envelope{ID: "msg_0", Destination: "d", Payload: []byte(`{"id":"msg_0"}`)}); res.State != sender.StateDelivered || !res.Duplicate {
		t.Errorf("re-enqueue of a delivered ID = %+v, want a delivered duplicate", res)
	}
}

// TestAttemptsCountEveryDelivery: attempts 3 means three deliveries in
// all, the first included; then the envelope is dead, with its log.
func TestAttemptsCountEveryDelivery(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 503 })
	e := deadLetterOf(t, rcv.URL, "msg_503")
	if rcv.count("msg_503") != 3 || len(e.Log) != 3 || e.Attempts != 3 || e.LastStatus != 503 || e.Class != sender.ClassHTTP5xx {
		t.Fatalf("delivered %d times; dead letter attempts %d, log %d, last %d %s; want 3, 3, 3, 503 http_5xx",
			rcv.count("msg_503"), e.Attempts, len(e.Log), e.LastStatus, e.Class)
	}
}

// deadLetterOf sends one event, id, to a destination at url and returns
// its dead letter once it has died.
func deadLetterOf(t *testing.T, url, id string) *sender.Envelope {
	t.Helper()
	q := newQueue(t)
	s, _ := sender.New(q, fast, []sender.Destination{{Name: "d", URL: url, Signer: signer(t), Header: http.Header{}}}, sender.Options{})
	start(t, s)
	enqueue(t, s, "d", id)
	eventually(t, "dead", func() bool {
		_, state, _ := q.Get(t.Context(), "d", id)
		return state == sender.StateDead
	})
	e, _, _ := q.Get(t.Context(), "d", id)
	return e
}

func TestPermanentFailuresGoStraightToTheDLQ(t *testing.T) {
	for _, tt := range []struct {
		status int
		class  sender.Class
	}{{400, sender.ClassHTTP4xx}, {302, sender.ClassHTTP3xx}, {409, sender.ClassHTTP4xx}} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			rcv := newReceiver(t, func(string, int) int { return tt.status })
			e := deadLetterOf(t, rcv.URL, "m")
			if rcv.count("m") != 1 || e.Class != tt.class {
				t.Fatalf("%d: delivered %d times, class %s; want once, %s", tt.status, rcv.count("m"), e.Class, tt.class)
			}
		})
	}
}

// TestGonePausesTheDestination: a 410 dead-letters its envelope and
// pauses the destination; envelopes enqueued meanwhile are kept; resume
// delivers them.
func TestGonePausesTheDestination(t *testing.T) {
	var gone atomic.Bool
	gone.Store(true)
	rcv := newReceiver(t, func(string, int) int {
		if gone.Load() {
			return 410
		}
		return 200
	})
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() (*bolt.DB, sender.Queue) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, err := boltqueue.New(db, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return db, q
	}
	db, q := open()
	s, _ := sender.New(q, fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}, sender.Options{})
	stop := start(t, s)
	enqueue(t, s, "d", "first")
	eventually(t, "paused", func() bool {
		st, _ := q.Stats(t.Context(), "d", time.Now())
		return st.Paused && st.Dead == 1
	})
	gone.Store(false)
	res, err := s.Enqueue(t.Context(), &sender.Envelope{ID: "kept", Destination: "d", Payload: []byte(`{}`)})
	if err != nil || res.State != sender.StatePaused {
		t.Fatalf("enqueue while paused = %+v, %v; want paused", res, err)
	}

	// A restart: the file closed and opened again, a new sender. Still
	// paused: nothing is delivered until an operator resumes.
	stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, q = open()
	t.Cleanup(func() { _ = db.Close() })
	s, _ = sender.New(q, fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}, sender.Options{})
	start(t, s)
	if st, _ := q.Stats(t.Context(), "d", time.Now()); !st.Paused || st.Queued != 1 {
		t.Fatalf("after a restart: %+v; want paused, the event kept", st)
	}
	time.Sleep(200 * time.Millisecond)
	if rcv.count("kept") != 0 {
		t.Fatal("a paused destination was delivered to")
	}
	if err := q.SetPaused(t.Context(), "d", false, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivered after resume", func() bool { return rcv.count("kept") == 1 })
}

// recordingObserver counts attempts.
type recordingObserver struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (o *recordingObserver) Attempt(dest, _ string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts[dest]++
}
func (o *recordingObserver) Delivered(string, time.Duration) {}
func (o *recordingObserver) StoreError(string, string)       {}
func (o *recordingObserver) Dead(string, time.Duration)      {}
func (o *recordingObserver) Enqueued(string, string)         {}
func (o *recordingObserver) Disabled(string, string)         {}

// TestBreakerStopsAttempts: a destination that is down opens its breaker
// after the configured failures; while open it gets no attempts and none
// are charged, and a healthy destination keeps delivering.
func TestBreakerStopsAttempts(t *testing.T) {
	down := newReceiver(t, func(string, int) int { return 503 })
	up := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	cfg := fast
	cfg.Attempts = 100
	cfg.Breaker = sender.BreakerConfig{Failures: 3, Open: time.Hour, HalfOpen: 1}
	obs := &recordingObserver{attempts: map[string]int{}}
	s, _ := sender.New(q, cfg, []sender.Destination{
		{Name: "down", URL: down.URL, Signer: signer(t), Workers: 1},
		{Name: "up", URL: up.URL, Signer: signer(t)},
	}, sender.Options{Observer: obs})
	start(t, s)
	for i := range 10 {
		enqueue(t, s, "down", fmt.Sprint("d", i))
	}
	eventually(t, "breaker open", func() bool {
		st, _ := s.BreakerState("down")
		return st == gobreaker.StateOpen
	})
	time.Sleep(100 * time.Millisecond)
	attempts := down.total.Load()
	for i := range 100 {
		enqueue(t, s, "up", fmt.Sprint("u", i))
	}
	eventually(t, "the healthy destination delivered", func() bool { return up.total.Load() == 100 })
	time.Sleep(200 * time.Millisecond)
	if got := down.total.Load(); got != attempts || got != 3 {
		t.Fatalf("the down destination got %d attempts (%d when the breaker opened); want 3 and none while open", got, attempts)
	}
	var charged int
	for i := range 10 {
		e, _, _ := q.Get(t.Context(), "down", fmt.Sprint("d", i))
		if e != nil {
			charged += e.Attempts
		}
	}
	if charged != 3 {
		t.Errorf("%d attempts charged, want 3", charged)
	}
}

// TestShutdownLosesNothing: a sender stopped mid-run, and a new one on the
// same queue, deliver everything.
func TestShutdownLosesNothing(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int {
		time.Sleep(5 * time.Millisecond)
		return 200
	})
	q := newQueue(t)
	dests := []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}
	s1, _ := sender.New(q, fast, dests, sender.Options{})
	const n = 300
	for i := range n {
		enqueue(t, s1, "d", fmt.Sprint("m", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s1.Run(ctx); close(done) }()
	eventually(t, "some delivered", func() bool { return rcv.total.Load() > 20 })
	cancel()
	<-done
	st, _ := q.Stats(t.Context(), "d", time.Now())
	if st.Leased != 0 {
		t.Fatalf("%d envelopes still leased after a clean stop", st.Leased)
	}
	s2, _ := sender.New(q, fast, dests, sender.Options{})
	start(t, s2)
	eventually(t, "all delivered", func() bool {
		for i := range n {
			if rcv.count(fmt.Sprint("m", i)) == 0 {
				return false
			}
		}
		return true
	})
	for i := range n {
		if c := rcv.count(fmt.Sprint("m", i)); c != 1 {
			t.Fatalf("m%d delivered %d times", i, c)
		}
	}
}

// TestRateLimitedLeasesOutliveTheirWait: a destination limited to 10
// attempts a second with 20 workers would hold leases longer than they
// last; each envelope is still delivered exactly once.
func TestRateLimitedLeasesOutliveTheirWait(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	cfg := fast
	cfg.Workers, cfg.Lease, cfg.Timeout = 20, 2*time.Second, 500*time.Millisecond
	s, err := sender.New(q, cfg, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t), Rate: 10, Burst: 1}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	const n = 40
	for i := range n {
		enqueue(t, s, "d", fmt.Sprint("r", i))
	}
	eventually(t, "all delivered", func() bool { return rcv.total.Load() >= n })
	time.Sleep(300 * time.Millisecond)
	for i := range n {
		if c := rcv.count(fmt.Sprint("r", i)); c != 1 {
			t.Errorf("r%d delivered %d times", i, c)
		}
	}
}

// TestHalfOpenWithMoreTrialsThanWorkers: half_open 3 with 2 workers still
// closes the breaker and delivers.
func TestHalfOpenWithMoreTrialsThanWorkers(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rcv := newReceiver(t, func(string, int) int {
		if down.Load() {
			return 503
		}
		return 200
	})
	q := newQueue(t)
	cfg := fast
	cfg.Attempts = 50
	cfg.Breaker = sender.BreakerConfig{Failures: 1, Open: 200 * time.Millisecond, HalfOpen: 3}
	s, _ := sender.New(q, cfg, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t), Workers: 2}}, sender.Options{})
	start(t, s)
	for i := range 5 {
		enqueue(t, s, "d", fmt.Sprint("h", i))
	}
	eventually(t, "the breaker open", func() bool { st, _ := s.BreakerState("d"); return st == gobreaker.StateOpen })
	down.Store(false)
	eventually(t, "all delivered after the trials", func() bool {
		for i := range 5 {
			if rcv.count(fmt.Sprint("h", i)) == 0 {
				return false
			}
		}
		st, _ := q.Stats(t.Context(), "d", time.Now())
		return st.Queued == 0 && st.Leased == 0
	})
}

// TestRateLimitedDestinationHoldsNoSlot: with one worker in all, a
// destination limited to one attempt per 10s does not hold that worker
// while it waits for its rate: a healthy destination delivers 50 events
// meanwhile, and the limited one is attempted at its rate.
func TestRateLimitedDestinationHoldsNoSlot(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	cfg := fast
	cfg.Workers = 1
	s, err := sender.New(q, cfg, []sender.Destination{
		{Name: "slow", URL: rcv.URL, Signer: signer(t), Rate: 0.1, Burst: 1},
		{Name: "healthy", URL: rcv.URL, Signer: signer(t)},
	}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		enqueue(t, s, "slow", fmt.Sprint("slow", i))
	}
	const n = 50
	for i := range n {
		enqueue(t, s, "healthy", fmt.Sprint("ok", i))
	}
	start(t, s)
	eventually(t, "the healthy destination's events delivered", func() bool {
		for i := range n {
			if rcv.count(fmt.Sprint("ok", i)) == 0 {
				return false
			}
		}
		return true
	})
	slow := 0
	for i := range 5 {
		slow += rcv.count(fmt.Sprint("slow", i))
	}
	if slow > 2 {
		t.Errorf("the limited destination was attempted %d times while the other delivered %d: want its rate (1 per 10s)", slow, n)
	}
}

// TestRedirectsAreNotFollowed: a 302 with a Location is a permanent
// failure; the Location is never requested.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	t.Cleanup(target.Close)
	rcv := newReceiver(t, func(string, int) int { return 302 })
	rcv.Config.Handler = withHeader(rcv.Config.Handler, "Location", target.URL)
	q := newQueue(t)
	s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	enqueue(t, s, "d", "moved")
	eventually(t, "the dead letter", func() bool {
		_, state, err := q.Get(t.Context(), "d", "moved")
		return err == nil && state == sender.StateDead
	})
	if rcv.count("moved") != 1 || followed.Load() != 0 {
		t.Errorf("attempts %d, redirect followed %d times; want 1 and 0", rcv.count("moved"), followed.Load())
	}
}

// TestRetryAfterIsHonouredWithinTheCap: a 429 with Retry-After is retried
// no sooner than it asks, and no later than the backoff cap.
func TestRetryAfterIsHonouredWithinTheCap(t *testing.T) {
	for _, tt := range []struct {
		retryAfter string
		want       time.Duration // from the attempt to the envelope's next time
	}{
		{"30", 30 * time.Second},
		{"7200", time.Minute},                 // asks for 2h; the cap is 1m
		{"99999999999999999999", time.Minute}, // past an int64: the cap, not at once
	} {
		t.Run(tt.retryAfter, func(t *testing.T) {
			rcv := newReceiver(t, func(string, int) int { return 429 })
			rcv.Config.Handler = withHeader(rcv.Config.Handler, "Retry-After", tt.retryAfter)
			q := newQueue(t)
			t0 := time.Now().Truncate(time.Millisecond)
			cfg := fast
			cfg.Backoff = sender.Backoff{Base: time.Millisecond, Cap: time.Minute}
			s, err := sender.New(q, cfg, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}},
				sender.Options{Now: func() time.Time { return t0 }}) // one instant: the delay is exact
			if err != nil {
				t.Fatal(err)
			}
			enqueue(t, s, "d", "busy")
			start(t, s)
			eventually(t, "the retry scheduled", func() bool {
				e, state, err := q.Get(t.Context(), "d", "busy")
				return err == nil && state == sender.StateQueued && e.Attempts == 1
			})
			e, _, _ := q.Get(t.Context(), "d", "busy")
			if wait := e.NextAt.Sub(t0); wait != tt.want {
				t.Errorf("Retry-After %s: retried after %s, want %s", tt.retryAfter, wait, tt.want)
			}
			if rcv.count("busy") != 1 {
				t.Errorf("attempted %d times, want once", rcv.count("busy"))
			}
		})
	}
}

// withHeader sets a header on h's answers.
func withHeader(h http.Handler, name, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(name, value)
		h.ServeHTTP(w, r)
	})
}

// TestRateHoldsAfterSlotsWereScarce: workers of a limited destination that
// waited for the global slots (a slow destination held all 8 for 3s) do
// not then send together: its rate (2/s, burst 1) holds, counted at the
// receiver in any one-second window (3 at most; 5 allowed for a slow
// machine). Workers that took their tokens while queuing for a slot sent
// 7 at once.
func TestRateHoldsAfterSlotsWereScarce(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	limited := newReceiver(t, func(string, int) int {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return 200
	})
	release := make(chan struct{})
	slow := newReceiver(t, func(string, int) int { <-release; return 200 })
	q := newQueue(t)
	cfg := fast
	cfg.Workers = 8
	cfg.Timeout = 10 * time.Second // the slow answers hold the slots their 3s
	cfg.Lease = 20 * time.Second   // the limited destination runs all 8 workers (a quarter of a lease holds 10 attempts)
	s, err := sender.New(q, cfg, []sender.Destination{
		{Name: "slow", URL: slow.URL, Signer: signer(t), Workers: 8},
		{Name: "limited", URL: limited.URL, Signer: signer(t), Rate: 2, Burst: 1, Workers: 8},
	}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		enqueue(t, s, "slow", fmt.Sprint("hog", i))
	}
	start(t, s)
	eventually(t, "the slow destination holds every slot", func() bool { return slow.total.Load() == 8 })
	for i := range 8 {
		enqueue(t, s, "limited", fmt.Sprint("l", i))
	}
	time.Sleep(3 * time.Second)
	close(release)
	eventually(t, "the limited destination's events delivered", func() bool { return limited.total.Load() == 8 })
	mu.Lock()
	defer mu.Unlock()
	for i := range arrivals {
		in := 0
		for _, a := range arrivals[i:] {
			if a.Sub(arrivals[i]) < time.Second {
				in++
			}
		}
		if in > 5 {
			t.Fatalf("%d requests within one second of request %d: the rate (2/s) did not hold", in, i)
		}
	}
}

// TestEnqueueAndPublishRefuseBadIDsAndEntities: the sender checks a delivery ID and an entity
// itself, whichever door the envelope came in by, and writes nothing.
func TestEnqueueAndPublishRefuseBadIDsAndEntities(t *testing.T) {
	q := newQueue(t)
	s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: "http://127.0.0.1:1/", Events: []string{"*"}}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "has space", strings.Repeat("x", sender.MaxIDLen+1), "caf\u00e9"} {
		if _, err := s.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "d", Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrBadID) {
			t.Errorf("Enqueue(%.20q) = %v, want ErrBadID", id, err)
		}
		if _, err := s.Publish(t.Context(), &sender.Event{ID: id, EventType: "a", Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrBadID) {
			t.Errorf("Publish(%.20q) = %v, want ErrBadID", id, err)
		}
	}
	// An entity is part of a store key under ordering entity: capped, and
	// the error does not echo it.
	long := strings.Repeat("e", sender.MaxEntityLen+1)
	if _, err := s.Enqueue(t.Context(), &sender.Envelope{ID: "long", Destination: "d", Entity: long, Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrEntityTooLong) || strings.Contains(err.Error(), "eeee") {
		t.Errorf("Enqueue(an entity of %d bytes) = %v, want ErrEntityTooLong, not echoing it", len(long), err)
	}
	if _, err := s.Publish(t.Context(), &sender.Event{ID: "long", EventType: "a", Entity: long, Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrEntityTooLong) {
		t.Errorf("Publish(an entity of %d bytes) = %v, want ErrEntityTooLong", len(long), err)
	}
	if _, err := s.Enqueue(t.Context(), &sender.Envelope{ID: "fits", Destination: "d", Entity: long[1:], Payload: []byte(`{}`)}); err != nil {
		t.Errorf("Enqueue(an entity of %d bytes) = %v, want it queued", sender.MaxEntityLen, err)
	}
	if st, err := q.Stats(t.Context(), "d", time.Now()); err != nil || st.Queued != 1 {
		t.Errorf("after bad IDs and entities the queue holds %+v, %v; want the one that fits", st, err)
	}
}
