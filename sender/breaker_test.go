package sender

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// memRemote is a Remote in memory that counts its calls.
type memRemote struct {
	mu          sync.Mutex
	boards      map[string]*Board
	loads, puts int
}

func newMemRemote() *memRemote { return &memRemote{boards: map[string]*Board{}} }

func (r *memRemote) Load(_ context.Context, name string) (Board, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads++
	b := r.boards[name]
	if b == nil {
		return Board{}, nil
	}
	return Board{Shared: b.Shared, Reports: maps.Clone(b.Reports)}, nil
}

func (r *memRemote) Put(_ context.Context, name string, u Update) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.puts++
	b := r.boards[name]
	if b == nil {
		b = &Board{Reports: map[string]Report{}}
		r.boards[name] = b
	}
	b.Reports[u.Instance] = u.Report
	for _, id := range u.Forget {
		delete(b.Reports, id)
	}
	if u.Next == nil || b.Shared.Gen != u.Gen {
		return false, nil
	}
	b.Shared = *u.Next
	return true, nil
}

func (r *memRemote) counts() (loads, puts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loads, r.puts
}

// TestIdleSenderWritesNoBreakerState: 20 destinations deliver an event
// each, then have nothing to deliver for 5s, their state read at each
// poll and by a scrape every 100ms: no breaker state is written while
// idle, and each destination's is read at most once per refresh interval.
func TestIdleSenderWritesNoBreakerState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		var dests []Destination
		for i := range 20 {
			dests = append(dests, Destination{Name: fmt.Sprint("d", i), URL: "http://d.test/"})
		}
		cfg := testConfig()
		cfg.Poll = 0 // the default, 1s
		rcv := newFakeReceiver(answers(10*time.Millisecond, 200))
		s, _ := newTestSender(t, newMemQueue(), cfg, dests, rcv, Options{Breakers: remote})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		for _, d := range s.Destinations() {
			enqueueN(t, s, d, d, 1)
		}
		time.Sleep(time.Second)
		if rcv.total() != len(dests) {
			t.Fatalf("%d delivered, want %d", rcv.total(), len(dests))
		}
		loads0, merges0 := remote.counts()
		if merges0 == 0 {
			t.Fatal("the deliveries' counts were not merged")
		}
		const idle = 5 * time.Second
		for range idle / (100 * time.Millisecond) {
			for _, d := range s.Destinations() {
				s.BreakerState(d) // as the metrics' scrape does
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		<-done
		loads, merges := remote.counts()
		if merges != merges0 {
			t.Errorf("%d breaker states written while idle, want none", merges-merges0)
		}
		if most := len(dests) * int(idle/breakerRefresh+2); loads-loads0 > most {
			t.Errorf("%d breaker states read while idle, want at most %d (one per destination per %s)", loads-loads0, most, breakerRefresh)
		}
	})
}

// TestBreakerOpenedElsewhereIsSeen: two instances share a Remote; the
// failures of one open the breaker, and the other, which delivers
// nothing, reads it open within the merge and refresh intervals.
func TestBreakerOpenedElsewhereIsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		cfg := testConfig()
		cfg.Attempts = 100
		cfg.Breaker = BreakerConfig{Failures: 2, Open: time.Hour}
		dests := func() []Destination { return []Destination{{Name: "d", URL: "http://d.test/"}} }
		failing, _ := newTestSender(t, newMemQueue(), cfg, dests(), newFakeReceiver(answers(10*time.Millisecond, 503)), Options{Breakers: remote})
		other, _ := newTestSender(t, newMemQueue(), cfg, dests(), newFakeReceiver(answers(0, 200)), Options{Breakers: remote})
		run(t, failing)
		run(t, other)
		enqueueN(t, failing, "d", "f", 5)
		time.Sleep(50 * time.Millisecond) // two attempts of 10ms open it
		if st, _ := failing.BreakerState("d"); st != gobreaker.StateOpen {
			t.Fatalf("the failing instance's breaker is %s, want open", st)
		}
		time.Sleep(50*time.Millisecond + breakerRefresh)
		if st, _ := other.BreakerState("d"); st != gobreaker.StateOpen {
			t.Errorf("the other instance reads %s, want open", st)
		}
	})
}

// TestInstanceStartedLaterFindsTheBreakerOpen: an instance started while
// the shared breaker is open makes no attempt, though it holds envelopes.
func TestInstanceStartedLaterFindsTheBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		cfg := testConfig()
		cfg.Attempts = 100
		cfg.Breaker = BreakerConfig{Failures: 2, Open: time.Hour}
		dests := func() []Destination { return []Destination{{Name: "d", URL: "http://d.test/"}} }
		first, _ := newTestSender(t, newMemQueue(), cfg, dests(), newFakeReceiver(answers(time.Millisecond, 503)), Options{Breakers: remote})
		run(t, first)
		enqueueN(t, first, "d", "f", 5)
		time.Sleep(time.Second)
		later := newFakeReceiver(answers(time.Millisecond, 503))
		second, _ := newTestSender(t, newMemQueue(), cfg, dests(), later, Options{Breakers: remote})
		enqueueN(t, second, "d", "s", 5)
		run(t, second)
		time.Sleep(time.Second)
		if st, _ := second.BreakerState("d"); st != gobreaker.StateOpen || later.total() != 0 {
			t.Errorf("the instance started later reads the breaker %s and made %d attempts, want open and none", st, later.total())
		}
	})
}

// TestSuccessesAreCountedOrReported: with Failures 3, answers that fail
// twice, then succeed, over and over, never open the breaker (the success
// that ends a run of failures is counted at once); the successes that
// follow go into the instance's report, merged into the remote.
func TestSuccessesAreCountedOrReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		cfg := testConfig()
		cfg.Workers = 1
		cfg.Attempts = 100
		cfg.Breaker = BreakerConfig{Failures: 3, Open: time.Hour}
		var mu sync.Mutex
		calls := 0
		rcv := newFakeReceiver(func(*http.Request, string, int) (time.Duration, int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls <= 60 && calls%3 != 0 {
				return time.Millisecond, 503, nil
			}
			return time.Millisecond, 200, nil
		})
		s, _ := newTestSender(t, newMemQueue(), cfg, []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{Breakers: remote})
		run(t, s)
		enqueueN(t, s, "d", "e", 20)
		time.Sleep(time.Second)
		if got := rcv.total(); got != 60 {
			t.Fatalf("%d attempts, want 60 (40 failures, 20 successes)", got)
		}
		if st, _ := s.BreakerState("d"); st != gobreaker.StateClosed {
			t.Fatalf("the breaker is %s: a success after failures was not counted", st)
		}
		if c := breakerCounts(t, s, "d"); c.TotalFailures != 40 || c.TotalSuccesses != 20 || c.Requests != 60 {
			t.Fatalf("counts %+v, want 40 failures and 20 successes of 60 requests", c)
		}
		enqueueN(t, s, "d", "ok", 50)
		time.Sleep(time.Second)
		last := time.Now()
		if c := breakerCounts(t, s, "d"); c.TotalFailures != 40 || c.ConsecutiveFailures != 0 {
			t.Errorf("counts %+v after 50 more successes, want no failure more", c)
		}
		b, _ := remote.Load(t.Context(), "d")
		if r := b.Reports[s.shared.self]; len(b.Reports) != 1 || !r.Failing.IsZero() || last.Sub(r.OK) > time.Second {
			t.Errorf("the remote holds %+v, want this instance's latest success, within the second, and no failure", b.Reports)
		}
	})
}

// twoInstances are two senders of destination d sharing a Remote, each
// with its own queue and receiver, and a third that delivers nothing and
// reads the shared state.
func twoInstances(t *testing.T, cfg Config, remote Remote, workers int, a, b *fakeReceiver) (x, y, observer *Sender) {
	t.Helper()
	dests := func() []Destination { return []Destination{{Name: "d", URL: "http://d.test/", Workers: workers}} }
	x, _ = newTestSender(t, newMemQueue(), cfg, dests(), a, Options{Breakers: remote})
	y, _ = newTestSender(t, newMemQueue(), cfg, dests(), b, Options{Breakers: remote})
	observer, _ = newTestSender(t, newMemQueue(), cfg, dests(), newFakeReceiver(answers(0, 200)), Options{Breakers: remote})
	run(t, x)
	run(t, y)
	run(t, observer)
	return x, y, observer
}

// TestHealthyInstanceKeepsSharedBreakerClosed: two instances share a
// Remote. One fails alone, slowly (a 503 after 60ms: a path of its own
// that is broken); the other delivers fast. The failing one's breaker
// opens for itself alone: the healthy one vouches for the destination,
// and neither it nor a third instance ever reads the breaker open.
func TestHealthyInstanceKeepsSharedBreakerClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Attempts = 1000
		cfg.Breaker = BreakerConfig{Failures: 5, Open: time.Hour}
		failing, healthy, observer := twoInstances(t, cfg, newMemRemote(), 2,
			newFakeReceiver(answers(60*time.Millisecond, 503)), newFakeReceiver(answers(5*time.Millisecond, 200)))
		enqueueN(t, healthy, "d", "h", 2500)
		enqueueN(t, failing, "d", "f", 10)
		for i := range 50 {
			time.Sleep(100 * time.Millisecond)
			for _, s := range []*Sender{healthy, observer} {
				if st, _ := s.BreakerState("d"); st != gobreaker.StateClosed {
					t.Fatalf("after %s the breaker is %s, want closed: one instance failing alone opened it", time.Duration(i+1)*100*time.Millisecond, st)
				}
			}
		}
		if st, _ := failing.BreakerState("d"); st != gobreaker.StateOpen {
			t.Errorf("the failing instance's own breaker is %s, want open", st)
		}
	})
}

// TestInstanceFailingFastAloneOpensNothingElsewhere: as above, but the
// failing instance fails at once (its own network path refuses), and its
// breaker is half-open again every 100ms, so that it fails over and over.
// The healthy instance, delivering when the other starts failing, makes
// at least 90% as many attempts as an instance beside it with no failing
// peer: nothing holds it.
func TestInstanceFailingFastAloneOpensNothingElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		cfg := testConfig()
		cfg.Attempts = 1000
		cfg.Backoff = Backoff{Base: time.Millisecond, Cap: time.Millisecond}
		cfg.Breaker = BreakerConfig{Failures: 3, Open: 100 * time.Millisecond}
		dests := func(name string) []Destination {
			return []Destination{{Name: name, URL: "http://d.test/", Workers: 2}}
		}
		refused := newFakeReceiver(answers(0, 503))
		healthyRcv, aloneRcv := newFakeReceiver(answers(5*time.Millisecond, 200)), newFakeReceiver(answers(5*time.Millisecond, 200))
		failing, _ := newTestSender(t, newMemQueue(), cfg, dests("d"), refused, Options{Breakers: remote})
		healthy, _ := newTestSender(t, newMemQueue(), cfg, dests("d"), healthyRcv, Options{Breakers: remote})
		alone, _ := newTestSender(t, newMemQueue(), cfg, dests("alone"), aloneRcv, Options{Breakers: remote})
		for _, s := range []*Sender{failing, healthy, alone} {
			run(t, s)
		}
		enqueueN(t, healthy, "d", "h", 1000)
		enqueueN(t, alone, "alone", "a", 1000)
		time.Sleep(100 * time.Millisecond)
		enqueueN(t, failing, "d", "f", 50)
		time.Sleep(time.Second)
		if refused.total() < 8 {
			t.Fatalf("the failing instance made %d attempts, want its trials over and over", refused.total())
		}
		if h, a := healthyRcv.total(), aloneRcv.total(); float64(h) < 0.9*float64(a) {
			t.Errorf("the healthy instance made %d attempts beside the failing one, %d with no failing peer: want 90%% at least", h, a)
		}
	})
}

// TestDestinationDownForAllOpensEverywhere: two instances deliver, then
// the destination fails fast for both. Each makes its own `failures`
// attempts at most, and the breaker is then open on both and on a third
// instance that delivers nothing.
func TestDestinationDownForAllOpensEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Attempts = 1000
		cfg.Breaker = BreakerConfig{Failures: 4, Open: time.Hour}
		a, b := newFakeReceiver(answers(2*time.Millisecond, 200)), newFakeReceiver(answers(3*time.Millisecond, 200))
		x, y, observer := twoInstances(t, cfg, newMemRemote(), 1, a, b)
		enqueueN(t, x, "d", "x", 1000)
		enqueueN(t, y, "d", "y", 1000)
		time.Sleep(500 * time.Millisecond)
		var failed [2]atomic.Int32
		for i, r := range []*fakeReceiver{a, b} {
			r.setAnswer(func(*http.Request, string, int) (time.Duration, int, http.Header) {
				failed[i].Add(1)
				return 0, 503, nil
			})
		}
		time.Sleep(time.Second)
		for i := range failed {
			if n := int(failed[i].Load()); n > cfg.Breaker.Failures {
				t.Errorf("instance %d made %d failing attempts, want %d at most", i, n, cfg.Breaker.Failures)
			}
		}
		for i, s := range []*Sender{x, y, observer} {
			if st, _ := s.BreakerState("d"); st != gobreaker.StateOpen {
				t.Errorf("instance %d reads the breaker %s, want open", i, st)
			}
		}
	})
}

// TestBreakerFollowsTheSharedState: a breaker that follows a shared
// opening is open until its expiry, untold, then half-open; a failed
// trial opens it again for the open time, not for what was left of the
// opening it followed, told once; following a closing starts its counts
// afresh.
func TestBreakerFollowsTheSharedState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told []string
		b := newBreaker("d", BreakerConfig{Failures: 2, Open: time.Second, HalfOpen: 1}, func(from, to gobreaker.State) {
			told = append(told, from.String()+">"+to.String())
		})
		b.follow(Shared{Gen: 1, Open: true, Expiry: time.Now().Add(100 * time.Millisecond)})
		if st := b.state(); st != gobreaker.StateOpen {
			t.Fatalf("after following an opening the breaker is %s, want open", st)
		}
		time.Sleep(101 * time.Millisecond)
		if st := b.state(); st != gobreaker.StateHalfOpen {
			t.Fatalf("past the shared expiry the breaker is %s, want half-open", st)
		}
		b.count(true)
		time.Sleep(900 * time.Millisecond)
		if st := b.state(); st != gobreaker.StateOpen {
			t.Fatalf("900ms after a failed trial the breaker is %s, want open (for the open time, 1s)", st)
		}
		time.Sleep(101 * time.Millisecond)
		if st := b.state(); st != gobreaker.StateHalfOpen {
			t.Fatalf("past the open time the breaker is %s, want half-open", st)
		}
		want := []string{"open>half-open", "half-open>open", "open>half-open"}
		if fmt.Sprint(told) != fmt.Sprint(want) {
			t.Errorf("told %v, want %v", told, want)
		}
		b.follow(Shared{Gen: 2})
		b.count(true)
		if st, c := b.state(), b.cur.Load().Counts(); st != gobreaker.StateClosed || c.Requests != 1 || c.ConsecutiveFailures != 1 {
			t.Errorf("after following a closing and one failure: %s, counts %+v; want closed, that failure alone", st, c)
		}
	})
}

var _ http.RoundTripper = (*fakeReceiver)(nil)
