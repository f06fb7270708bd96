package redisqueue_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestBreakersPut: a report is kept per instance, a forgotten one goes,
// and the shared state is replaced only from the generation it was read
// at; the hash, under the destination's name, holds them in hookgate's
// text, and expires after Keep.
func TestBreakersPut(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	b := redisqueue.NewBreakers(rdb, p)
	ctx := t.Context()
	t0 := time.UnixMilli(1_800_000_000_000)
	r1 := sender.Report{OK: t0, At: t0}
	r2 := sender.Report{OK: t0.Add(-time.Minute), Failing: t0.Add(-time.Second), At: t0}
	open := &sender.Shared{Gen: 1, Open: true, Expiry: t0.Add(time.Minute), Since: t0.Add(-time.Second)}
	for _, step := range []struct {
		u    sender.Update
		want bool
	}{
		{sender.Update{Instance: "a", Report: r1, Keep: time.Hour}, false},
		{sender.Update{Instance: "old", Report: r1, Keep: time.Hour}, false},
		{sender.Update{Instance: "b", Report: r2, Forget: []string{"old"}, Gen: 0, Next: open, Keep: time.Hour}, true},
		// Read at generation 0, when another has made it 1: not stored.
		{sender.Update{Instance: "a", Report: r1, Gen: 0, Next: &sender.Shared{Gen: 1}, Keep: time.Hour}, false},
	} {
		stored, err := b.Put(ctx, "d", step.u)
		if err != nil || stored != step.want {
			t.Fatalf("Put(%+v) = %v, %v; want %v", step.u, stored, err, step.want)
		}
	}
	got, err := b.Load(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	want := sender.Board{Shared: *open, Reports: map[string]sender.Report{"a": r1, "b": r2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	// The hash is under the destination's name, in hookgate's own text.
	if h := rdb.HGetAll(ctx, p+":breaker:{d}").Val(); h["s"] != "1 open 1800000060000 1799999999000" || h["i:b"] != "1799999940000 1799999999000 1800000000000" {
		t.Errorf("the breaker's hash holds %q, want the shared state and the reports in hookgate's text", h)
	}
	if ttl := rdb.PTTL(ctx, p+":breaker:{d}").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("the breaker's hash expires in %s, want within the hour", ttl)
	}
	if got, err := b.Load(ctx, "none"); err != nil || got.Shared != (sender.Shared{}) || len(got.Reports) != 0 {
		t.Errorf("Load of a breaker never written = %+v, %v; want the zero state", got, err)
	}
}

// counting answers 200 on every path, or 503 once down is set, and
// counts what it answers by path and status.
type counting struct {
	down atomic.Bool
	mu   sync.Mutex
	n    map[string]int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if c.down.Load() {
		status = http.StatusServiceUnavailable
	}
	c.mu.Lock()
	c.n[r.URL.Path+" "+strconv.Itoa(status)]++
	c.mu.Unlock()
	w.WriteHeader(status)
}

func (c *counting) count(path string, status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path+" "+strconv.Itoa(status)]
}

func newCounting(t *testing.T) (*counting, string) {
	c := &counting{n: map[string]int{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// instance is a sender of dests over its own queue, sharing its breakers
// on rdb under bp.
func instance(t *testing.T, rdb redis.UniversalClient, bp string, cfg sender.Config, dests []sender.Destination) *sender.Sender {
	t.Helper()
	s, err := sender.New(redisqueue.New(rdb, redistest.Prefix("test"), time.Hour), cfg, dests, sender.Options{Breakers: redisqueue.NewBreakers(rdb, bp)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs s until the test ends.
func run(t *testing.T, s *sender.Sender) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func enqueue(t *testing.T, s *sender.Sender, dest string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Enqueue(t.Context(), &sender.Envelope{ID: dest + "-" + strconv.Itoa(i), Destination: dest, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// until polls cond every 10ms; it fails the test after a minute, a bound
// for a broken build only.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 6000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("still not %s after a minute", what)
}

// TestInstanceFailingFastAloneKeepsTheOthersRate: two instances share the
// breaker of destination d on Redis. One fails fast alone: its own path
// to d closes every connection at once, and its breaker, open for 200ms,
// tries again and fails over and over. The other delivers to d, and to
// ctl beside it, a destination of the same receiver with no failing peer.
// From the first failure, until it has delivered 1,000 more to ctl, it
// delivers to d at least 90% as many: nothing of the failing instance
// holds it. The failing instance keeps making its trials.
func TestInstanceFailingFastAloneKeepsTheOthersRate(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rcv, url := newCounting(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var refused atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			refused.Add(1)
			_ = c.Close()
		}
	}()
	cfg := sender.Config{Workers: 4, Attempts: 1000, Backoff: sender.Backoff{Base: time.Millisecond, Cap: time.Millisecond},
		Poll: 10 * time.Millisecond, Breaker: sender.BreakerConfig{Failures: 3, Open: 200 * time.Millisecond}}
	bp := redistest.Prefix("test")
	failing := instance(t, rdb, bp, cfg, []sender.Destination{{Name: "d", URL: "http://" + ln.Addr().String() + "/d", Workers: 2}})
	healthy := instance(t, rdb, bp, cfg, []sender.Destination{{Name: "d", URL: url + "/d", Workers: 2}, {Name: "ctl", URL: url + "/ctl", Workers: 2}})
	enqueue(t, healthy, "d", 2500)
	enqueue(t, healthy, "ctl", 2500)
	run(t, healthy)
	until(t, "delivering", func() bool { return rcv.count("/d", 200) >= 100 })
	enqueue(t, failing, "d", 200)
	run(t, failing)
	until(t, "failing", func() bool { return refused.Load() >= 1 })
	d0, ctl0 := rcv.count("/d", 200), rcv.count("/ctl", 200)
	const n = 1000
	until(t, "delivered to ctl", func() bool { return rcv.count("/ctl", 200)-ctl0 >= n })
	d, ctl := rcv.count("/d", 200)-d0, rcv.count("/ctl", 200)-ctl0
	t.Logf("delivered %d to d, %d to ctl (%.2f); the failing instance made %d attempts", d, ctl, float64(d)/float64(ctl), refused.Load())
	if float64(d) < 0.9*float64(ctl) {
		t.Errorf("the healthy instance delivered %d to d, whose breaker it shares with an instance failing alone, and %d to ctl: %.2f of its rate, want 0.9 at least", d, ctl, float64(d)/float64(ctl))
	}
	// Its own breaker keeps trying: three more trials, each after its
	// open time (the faster the healthy instance, the fewer fall inside
	// the window above, so they are awaited, not counted there).
	until(t, "trying again and again", func() bool { return refused.Load() >= 6 })
	if st, _ := failing.BreakerState("d"); st == gobreaker.StateClosed {
		t.Errorf("the failing instance's own breaker is closed, want it open or trying")
	}
}

// TestDestinationDownForAllOpensEverywhere: two instances deliver to d,
// each with one worker, then d fails for both. Each makes its own
// `failures` failing attempts at most, and the breaker is then open on
// both and on a third instance that delivers nothing.
func TestDestinationDownForAllOpensEverywhere(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rcv, url := newCounting(t)
	cfg := sender.Config{Workers: 2, Attempts: 1000, Backoff: sender.Backoff{Base: time.Millisecond, Cap: time.Millisecond},
		Poll: 10 * time.Millisecond, Breaker: sender.BreakerConfig{Failures: 4, Open: time.Hour}}
	bp := redistest.Prefix("test")
	x := instance(t, rdb, bp, cfg, []sender.Destination{{Name: "d", URL: url + "/x", Workers: 1}})
	y := instance(t, rdb, bp, cfg, []sender.Destination{{Name: "d", URL: url + "/y", Workers: 1}})
	observer := instance(t, rdb, bp, cfg, []sender.Destination{{Name: "d", URL: url + "/o", Workers: 1}})
	enqueue(t, x, "d", 2000)
	enqueue(t, y, "d", 2000)
	for _, s := range []*sender.Sender{x, y, observer} {
		run(t, s)
	}
	until(t, "delivering", func() bool { return rcv.count("/x", 200) >= 100 && rcv.count("/y", 200) >= 100 })
	rcv.down.Store(true)
	until(t, "open everywhere", func() bool {
		for _, s := range []*sender.Sender{x, y, observer} {
			if st, _ := s.BreakerState("d"); st != gobreaker.StateOpen {
				return false
			}
		}
		return true
	})
	for _, path := range []string{"/x", "/y"} {
		if got := rcv.count(path, 503); got > cfg.Breaker.Failures {
			t.Errorf("the instance at %s made %d failing attempts, want %d at most", path, got, cfg.Breaker.Failures)
		}
	}
}
