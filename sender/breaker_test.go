package sender

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// memRemote is a Remote in memory that counts its calls.
type memRemote struct {
	mu            sync.Mutex
	data          map[string][]byte
	loads, merges int
}

func newMemRemote() *memRemote { return &memRemote{data: map[string][]byte{}} }

func (r *memRemote) Load(_ context.Context, name string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads++
	return r.data[name], nil
}

func (r *memRemote) Merge(_ context.Context, name string, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.merges++
	if cur := r.data[name]; cur == nil || newer(data, cur, true) {
		r.data[name] = data
	}
	return nil
}

func (r *memRemote) counts() (loads, merges int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loads, r.merges
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

// TestSteadySuccessesAreCounted: the successes steady takes without
// gobreaker are counted all the same. With Failures 3, answers that fail
// twice, then succeed, over and over, never open the breaker (the
// success that ends a run of failures is counted at once), and 50
// successes after them add 50 requests and successes to the state.
func TestSteadySuccessesAreCounted(t *testing.T) {
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
		before := breakerCounts(t, s, "d")
		if before.TotalFailures != 40 || before.TotalSuccesses != 20 || before.Requests != 60 {
			t.Fatalf("counts %+v, want 40 failures and 20 successes of 60 requests", before)
		}
		enqueueN(t, s, "d", "ok", 50)
		time.Sleep(time.Second)
		after := breakerCounts(t, s, "d")
		if after.Requests != 110 || after.TotalSuccesses != 70 || after.TotalFailures != 40 || after.ConsecutiveFailures != 0 {
			t.Errorf("counts %+v after 50 more successes, want 110 requests, 70 successes, 40 failures", after)
		}
	})
}

// TestHealthyInstanceKeepsSharedBreakerClosed: two instances share a
// Remote. One fails alone, slowly (a 503 after 60ms: a path of its own
// that is broken); the other delivers fast. The healthy one's successes,
// counted into the shared state, outnumber the failing one's in the
// merges, so the shared breaker stays closed, as it did when every
// success went through gobreaker.
func TestHealthyInstanceKeepsSharedBreakerClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := newMemRemote()
		cfg := testConfig()
		cfg.Attempts = 1000
		cfg.Breaker = BreakerConfig{Failures: 5, Open: time.Hour}
		dests := func(workers int) []Destination {
			return []Destination{{Name: "d", URL: "http://d.test/", Workers: workers}}
		}
		failing, _ := newTestSender(t, newMemQueue(), cfg, dests(1), newFakeReceiver(answers(60*time.Millisecond, 503)), Options{Breakers: remote})
		healthy, _ := newTestSender(t, newMemQueue(), cfg, dests(2), newFakeReceiver(answers(5*time.Millisecond, 200)), Options{Breakers: remote})
		run(t, failing)
		run(t, healthy)
		enqueueN(t, healthy, "d", "h", 2500)
		enqueueN(t, failing, "d", "f", 1)
		for i := range 50 {
			time.Sleep(100 * time.Millisecond)
			for _, s := range []*Sender{failing, healthy} {
				if st, _ := s.BreakerState("d"); st != gobreaker.StateClosed {
					t.Fatalf("after %s the shared breaker is %s, want closed: one instance failing alone opened it", time.Duration(i+1)*100*time.Millisecond, st)
				}
			}
		}
	})
}

var _ http.RoundTripper = (*fakeReceiver)(nil)
