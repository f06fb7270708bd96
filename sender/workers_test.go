package sender

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
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
	// One worker: the attempts are made one after another.
	s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: srv.URL, Workers: 1}}, nil, Options{})
	// Enqueue refuses such an ID: this one was stored past the sender
	// (an older version, a hand-written record), straight into the queue.
	bad := "bad\r\nX-Evil: 1"
	now := time.Now()
	if _, err := q.Enqueue(t.Context(), &Envelope{ID: bad, Destination: "d", Payload: []byte(`{}`), CreatedAt: now, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok-1", "ok-2"} {
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
	if c, r := breakerCounts(t, s, "d"), breakerReport(s, "d"); c.TotalFailures != 0 || r.OK.IsZero() || !r.Failing.IsZero() {
		t.Errorf("breaker counts %+v, report %+v: want the deliveries' successes and no failure", c, r)
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

// slowAndFast answers slow.test after 1.5s and fast.test after 10ms.
func slowAndFast() *fakeReceiver {
	return newFakeReceiver(func(r *http.Request, _ string, _ int) (time.Duration, int, http.Header) {
		if r.URL.Host == "slow.test" {
			return 1500 * time.Millisecond, 200, nil
		}
		return 10 * time.Millisecond, 200, nil
	})
}

// fastWaited is the longest a fast.test envelope waited from its enqueue
// at enqueued to its delivery.
func fastWaited(t *testing.T, rcv *fakeReceiver, ids []string, enqueued time.Time) time.Duration {
	t.Helper()
	var worst time.Duration
	for _, id := range ids {
		at := rcv.answered(id)
		if len(at) != 1 {
			t.Fatalf("%s answered %d times, want once", id, len(at))
		}
		worst = max(worst, at[0].Sub(enqueued))
	}
	return worst
}

// TestSlowDestinationDoesNotStarveAnother: with 4 global workers, a
// destination whose receiver takes 1.5s, 40 events queued, delays a
// healthy destination's 40 events by less than a second: each destination
// runs half the global workers by default.
func TestSlowDestinationDoesNotStarveAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, rcv := newMemQueue(), slowAndFast()
		cfg := testConfig()
		cfg.Workers = 4
		s, _ := newTestSender(t, q, cfg, []Destination{{Name: "slow", URL: "http://slow.test/"}, {Name: "fast", URL: "http://fast.test/"}}, rcv, Options{})
		enqueueN(t, s, "slow", "s", 40)
		run(t, s)
		time.Sleep(100 * time.Millisecond) // the slow one holds what it may
		enqueued := time.Now()
		fast := enqueueN(t, s, "fast", "f", 40)
		time.Sleep(40 * time.Second)
		if worst := fastWaited(t, rcv, fast, enqueued); worst > time.Second {
			t.Errorf("the healthy destination's events waited up to %s, want at most 1s", worst)
		}
	})
}

// TestFreedSlotGoesToTheDestinationHoldingFewest: both destinations may
// use every global worker, and the slow one took them all first; each
// slot it frees goes to the healthy one, which holds none, so the healthy
// destination waits for one slow answer (1.5s), not for all of them.
func TestFreedSlotGoesToTheDestinationHoldingFewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, rcv := newMemQueue(), slowAndFast()
		cfg := testConfig()
		cfg.Workers = 4
		s, _ := newTestSender(t, q, cfg, []Destination{{Name: "slow", URL: "http://slow.test/", Workers: 4}, {Name: "fast", URL: "http://fast.test/", Workers: 4}}, rcv, Options{})
		enqueueN(t, s, "slow", "s", 40)
		run(t, s)
		time.Sleep(100 * time.Millisecond) // the slow one holds every slot
		enqueued := time.Now()
		fast := enqueueN(t, s, "fast", "f", 40)
		time.Sleep(40 * time.Second)
		if worst := fastWaited(t, rcv, fast, enqueued); worst > 2*time.Second {
			t.Errorf("the healthy destination's events waited up to %s, want at most 2s", worst)
		}
	})
}

// TestSlotsGoToTheFewest: a freed slot goes to the waiting destination
// that holds the fewest, the longest waiting among equals; a waiter that
// gives up holds nothing.
func TestSlotsGoToTheFewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl := newSlots(2)
		ctx := t.Context()
		for range 2 {
			if !sl.acquire(ctx, "a") {
				t.Fatal("free slots not taken")
			}
		}
		given := make(chan string, 2)
		wait := func(dest string) {
			go func() {
				if sl.acquire(ctx, dest) {
					given <- dest
				}
			}()
			synctest.Wait()
		}
		wait("a") // waits first, but a holds 2
		wait("b")
		gone, cancel := context.WithCancel(ctx)
		go sl.acquire(gone, "c")
		synctest.Wait()
		cancel()
		synctest.Wait()
		sl.release("a") // a holds 1, b 0: b's
		synctest.Wait()
		sl.release("b") // a holds 1, b 0, a waits: a's
		synctest.Wait()
		close(given)
		var order []string
		for d := range given {
			order = append(order, d)
		}
		if diff := cmp.Diff([]string{"b", "a"}, order); diff != "" {
			t.Errorf("slots went (-want +got):\n%s", diff)
		}
		if sl.held["c"] != 0 || len(sl.waiting) != 0 || sl.free != 0 || sl.held["a"] != 2 {
			t.Errorf("held %v, %d waiting, %d free; want a 2, none waiting or free", sl.held, len(sl.waiting), sl.free)
		}
	})
}

// TestGoneHoldsAtOnce: a receiver answering 410 to 40 events with 8
// workers: only the attempts already in flight meet the 410 (each dead,
// class gone); every other envelope stays queued, paused, without an
// attempt, and the pause is logged once. Resumed by another instance, the
// rest are delivered once each.
func TestGoneHoldsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		rcv := newFakeReceiver(answers(100*time.Millisecond, 410))
		s, logs := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://gone.test/", Workers: 8}}, rcv, Options{})
		ids := enqueueN(t, s, "d", "g", 40)
		run(t, s)
		time.Sleep(5 * time.Second)
		st, _ := q.Stats(t.Context(), "d", time.Now())
		if attempts := rcv.total(); attempts > 8 || st.Dead != attempts {
			t.Errorf("%d attempts, %d dead; want at most the 8 in flight, each dead", attempts, st.Dead)
		}
		if !st.Paused || st.PausedBy != PausedByGone || st.Queued != 40-st.Dead || st.Leased != 0 {
			t.Errorf("stats %+v; want paused by gone, the rest queued", st)
		}
		if n := strings.Count(logs.String(), "answered 410"); n != 1 {
			t.Errorf("the pause logged %d times, want once:\n%s", n, logs)
		}

		rcv.setAnswer(answers(10*time.Millisecond, 200))
		if err := q.SetPaused(t.Context(), "d", false, ""); err != nil { // another instance resumes
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		for _, id := range ids {
			_, state, _ := q.Get(t.Context(), "d", id)
			if n := rcv.count(id); n != 1 || (state != StateDead && !q.isDelivered(id)) {
				t.Errorf("%s: %d attempts, state %q; want one, delivered or dead", id, n, state)
			}
		}
	})
}

// TestPauseHoldsLeasedEnvelopes: a pause made while envelopes are leased
// (by an operator through this sender, or on another instance) holds them
// before their attempt: only the attempts in flight finish; the rest stay
// queued, and are delivered once each after the resume.
func TestPauseHoldsLeasedEnvelopes(t *testing.T) {
	for _, tt := range []struct {
		name      string
		setPaused func(s *Sender, q *memQueue, paused bool) error
	}{
		{"operator", func(s *Sender, _ *memQueue, paused bool) error {
			return s.SetPaused(context.Background(), "d", paused, "admin")
		}},
		{"another instance", func(_ *Sender, q *memQueue, paused bool) error {
			return q.SetPaused(context.Background(), "d", paused, "admin")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newMemQueue()
				rcv := newFakeReceiver(answers(time.Second, 200))
				s, _ := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/", Workers: 8}}, rcv, Options{})
				ids := enqueueN(t, s, "d", "p", 40)
				run(t, s)
				time.Sleep(500 * time.Millisecond) // 8 in flight, 8 more leased
				if err := tt.setPaused(s, q, true); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second)
				st, _ := q.Stats(t.Context(), "d", time.Now())
				if rcv.total() != 8 || st.Queued != 32 || st.Leased != 0 || !st.Paused {
					t.Errorf("%d attempts, stats %+v; want the 8 in flight, 32 queued and paused", rcv.total(), st)
				}
				if err := tt.setPaused(s, q, false); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Second)
				for _, id := range ids {
					if n := rcv.count(id); n != 1 || !q.isDelivered(id) {
						t.Errorf("%s: %d attempts, delivered %v; want once", id, n, q.isDelivered(id))
					}
				}
			})
		})
	}
}

// TestLeaseErrorKeepsWhatWasLeased: a Lease that answers envelopes and an
// error (an entry set aside) delivers those envelopes now, not after
// their lease has expired.
func TestLeaseErrorKeepsWhatWasLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		q.leaseErr = errors.New("setting aside 1 envelope that does not decode")
		rcv := newFakeReceiver(answers(10*time.Millisecond, 200))
		s, _ := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{})
		ids := enqueueN(t, s, "d", "l", 3)
		run(t, s)
		time.Sleep(time.Second) // the lease is 10s
		for _, id := range ids {
			if !q.isDelivered(id) || rcv.count(id) != 1 {
				t.Errorf("%s: delivered %v after %d attempts; want delivered once within a second", id, q.isDelivered(id), rcv.count(id))
			}
		}
	})
}

// TestAttemptsFitTheLocalLease: the store's lease end is by its own clock
// (behind, equal, or ahead of this one). Each attempt starts only when its
// timeout plus the settle margin fits in the lease as this instance's
// clock measures it from before the Lease call; an envelope that waited
// too long for the one worker (the one before it took 6.5s of a 7s
// timeout, of a 14s lease: 1.4s margin) is released and leased again,
// and each is delivered once.
func TestAttemptsFitTheLocalLease(t *testing.T) {
	for _, skew := range []time.Duration{-time.Minute, 0, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newMemQueue()
				q.skew = skew
				cfg := testConfig()
				cfg.Workers, cfg.Timeout, cfg.Lease = 1, 7*time.Second, 14*time.Second
				margin := settleMargin(cfg.Lease)
				if margin != 1400*time.Millisecond {
					t.Fatalf("margin %s, want 1.4s", margin)
				}
				rcv := newFakeReceiver(answers(6500*time.Millisecond, 200))
				rcv.onStart = func(id string) {
					q.mu.Lock()
					leased := q.leasedAt[id]
					q.mu.Unlock()
					if left := time.Until(leased.Add(cfg.Lease)); left < cfg.Timeout+margin {
						t.Errorf("%s attempted with %s of its lease left, want at least %s", id, left, cfg.Timeout+margin)
					}
				}
				s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{})
				ids := enqueueN(t, s, "d", "e", 3)
				run(t, s)
				time.Sleep(time.Minute)
				for _, id := range ids {
					if !q.isDelivered(id) || rcv.count(id) != 1 {
						t.Errorf("%s: delivered %v after %d attempts; want delivered once", id, q.isDelivered(id), rcv.count(id))
					}
				}
			})
		})
	}
}

// TestSettleRetriesUntilTheLocalLeaseEnds: the store's clock is 7s behind
// this one, and it fails to settle for 5s: the outcome is retried until
// the lease ends by this instance's clock (10s), so it lands, and the
// envelope is delivered once, not again when the lease runs out.
func TestSettleRetriesUntilTheLocalLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		q.skew = -7 * time.Second
		healed := time.Now().Add(5 * time.Second)
		q.settleErr = func() error {
			if time.Now().Before(healed) {
				return errors.New("store unavailable")
			}
			return nil
		}
		rcv := newFakeReceiver(answers(10*time.Millisecond, 200))
		s, _ := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{})
		enqueueN(t, s, "d", "s", 1)
		run(t, s)
		time.Sleep(30 * time.Second)
		if !q.isDelivered("s-0") || rcv.count("s-0") != 1 {
			t.Errorf("delivered %v after %d attempts; want settled once", q.isDelivered("s-0"), rcv.count("s-0"))
		}
	})
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
		s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: "http://d.test/"}}, rcv, Options{})
		enqueueN(t, s, "d", "busy", 1)
		run(t, s)
		time.Sleep(30 * time.Second)
		if !q.isDelivered("busy-0") || rcv.count("busy-0") != 4 {
			t.Errorf("delivered %v after %d attempts; want delivered at the 4th", q.isDelivered("busy-0"), rcv.count("busy-0"))
		}
		// Open for an hour once open: closed now means it never opened.
		if st, _ := s.BreakerState("d"); st != gobreaker.StateClosed {
			t.Errorf("breaker %v, want closed throughout", st)
		}
		if c, r := breakerCounts(t, s, "d"), breakerReport(s, "d"); c.TotalFailures != 0 || r.OK.IsZero() || !r.Failing.IsZero() {
			t.Errorf("breaker counts %+v, report %+v: want the delivery's success alone", c, r)
		}
	})
}

// TestOrderedEntityGoesOneAtATime: an ordered destination delivers an
// entity's events one at a time, in enqueue order, while another entity's
// go beside them; each settle wakes the lease loop, so the next of an
// entity goes at once rather than at the loop's next idle poll.
func TestOrderedEntityGoesOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		rcv := newFakeReceiver(answers(15*time.Millisecond, 200))
		cfg := testConfig()
		cfg.Poll = time.Hour // only a wake makes the loop look again soon
		s, _ := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: "http://d.test/", Ordering: Ordering{ByEntity: true}}}, rcv, Options{})
		var a, b []string
		for i := range 5 {
			for _, ent := range []string{"a", "b"} {
				id := ent + "-" + strconv.Itoa(i)
				if _, err := s.Enqueue(t.Context(), &Envelope{ID: id, Destination: "d", Entity: ent, Payload: []byte(`{}`)}); err != nil {
					t.Fatal(err)
				}
				if ent == "a" {
					a = append(a, id)
				} else {
					b = append(b, id)
				}
			}
		}
		run(t, s)
		// Five answers of 15ms each, in a row; an unwoken loop polls
		// after 10, then 20ms, and leases each next one 15ms late.
		time.Sleep(100 * time.Millisecond)
		for _, ids := range [][]string{a, b} {
			var prev time.Time
			for _, id := range ids {
				done := rcv.answered(id)
				if len(done) != 1 {
					t.Fatalf("%s answered %d times by now, want once", id, len(done))
				}
				if gap := done[0].Sub(prev); !prev.IsZero() && (gap < 15*time.Millisecond || gap >= 20*time.Millisecond) {
					t.Errorf("%s answered %s after the one before it; want 15ms: one at a time, in order, the next leased at once", id, gap)
				}
				prev = done[0]
			}
		}
	})
}
