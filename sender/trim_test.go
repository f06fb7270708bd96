package sender

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// historyQueue is a memQueue whose one destination's history has a
// payload due at due (zero: nothing), trimmed by TrimHistory when due.
type historyQueue struct {
	*memQueue
	mu      sync.Mutex
	due     time.Time
	asks    int
	trimmed []time.Time
}

func (q *historyQueue) TrimHistory(_ context.Context, _ string, now time.Time) (time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.asks++
	if !q.due.IsZero() && !q.due.After(now) {
		q.trimmed = append(q.trimmed, now)
		q.due = time.Time{}
	}
	return q.due, nil
}

func (q *historyQueue) set(due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.due = due
}

func (q *historyQueue) seen() (asks int, trimmed []time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.asks, append([]time.Time(nil), q.trimmed...)
}

// TestTrimRunsWhenDueWithoutTraffic: a destination that went quiet has
// its payload trimmed at the payload's time, with nothing settling; with
// nothing due, its history is asked once a trimPoll.
func TestTrimRunsWhenDueWithoutTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &historyQueue{memQueue: newMemQueue()}
		start := time.Now()
		q.set(start.Add(2 * time.Second))
		s, _ := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/"}}, nil, Options{})
		run(t, s)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		asks, trimmed := q.seen()
		if len(trimmed) != 1 || !trimmed[0].Equal(start.Add(2*time.Second)) {
			t.Errorf("trimmed at %v, want once, at %v", trimmed, start.Add(2*time.Second))
		}
		// At the start, at the payload's time, then once a minute.
		if asks < 10 || asks > 13 {
			t.Errorf("the history was asked %d times in 10 quiet minutes, want about one a minute", asks)
		}
	})
}

// TestASettlementHereWakesTheTrim: after a settlement, the trim asks the
// destination again within trimAgain, and so trims what it added at its
// time, not at the next poll.
func TestASettlementHereWakesTheTrim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &historyQueue{memQueue: newMemQueue()}
		s, _ := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/"}}, nil, Options{})
		run(t, s)
		time.Sleep(5 * time.Second) // asked at the start: nothing due
		settled := time.Now()
		q.set(settled.Add(5 * time.Second))
		s.trimmed("d")
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if _, trimmed := q.seen(); len(trimmed) != 1 || !trimmed[0].Equal(settled.Add(5*time.Second)) {
			t.Errorf("trimmed at %v, want once, at %v (the payload's time)", trimmed, settled.Add(5*time.Second))
		}
	})
}

// failingHistory fails every TrimHistory.
type failingHistory struct {
	*memQueue
	mu    sync.Mutex
	calls int
}

func (q *failingHistory) TrimHistory(context.Context, string, time.Time) (time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	return time.Time{}, errors.New("store down")
}

// TestTrimFailuresAreRetriedAndLoggedSparingly: a store that fails the
// trim is asked again every trimAgain, and the failure logged once a
// minute with a count, not once a try.
func TestTrimFailuresAreRetriedAndLoggedSparingly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &failingHistory{memQueue: newMemQueue()}
		s, logs := newTestSender(t, q, testConfig(), []Destination{{Name: "d", URL: "http://d.test/"}}, nil, Options{})
		run(t, s)
		time.Sleep(150 * time.Second)
		synctest.Wait()
		q.mu.Lock()
		calls := q.calls
		q.mu.Unlock()
		if calls < 140 || calls > 152 {
			t.Errorf("asked %d times in 150s of failures, want one a second", calls)
		}
		if n := strings.Count(logs.String(), "trimming the delivery history"); n != 3 {
			t.Errorf("logged %d lines in 150s of failures, want 3 (one a minute):\n%s", n, logs.String())
		}
	})
}
