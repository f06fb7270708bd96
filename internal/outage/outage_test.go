package outage

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTracker: a failure every 0.7s for 2.5 minutes is told at once,
// then once a minute with the count since, then its end once.
func TestTracker(t *testing.T) {
	now := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	tr := New(func() time.Time { return now })
	var got []Line
	if _, ok := tr.Recovered(); ok {
		t.Error("a success with no run on ended one")
	}
	for range 214 {
		if l, ok := tr.Failed(); ok {
			got = append(got, l)
		}
		now = now.Add(700 * time.Millisecond)
	}
	if !tr.Down() {
		t.Error("Down() = false during the run")
	}
	for range 2 {
		if l, ok := tr.Recovered(); ok {
			got = append(got, l)
		}
	}
	want := []Line{
		{First: true},
		{Failures: 86, DownFor: time.Minute},
		{Failures: 86, DownFor: 2 * time.Minute},
		{Failures: 41, DownFor: 2*time.Minute + 30*time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if tr.Down() {
		t.Error("Down() = true after the run ended")
	}
	// A new run is told at once again.
	if l, ok := tr.Failed(); !ok || !l.First {
		t.Errorf("a failure after the run: %+v, %v; want a first line", l, ok)
	}
}

// TestTrackerConcurrent: many goroutines failing at one instant get one
// line between them, and one of many successes ends the run.
func TestTrackerConcurrent(t *testing.T) {
	now := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	tr := New(func() time.Time { return now })
	var mu sync.Mutex
	lines := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, ok := tr.Failed(); ok {
				mu.Lock()
				lines++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for range 50 {
		wg.Go(func() {
			if l, ok := tr.Recovered(); ok {
				mu.Lock()
				lines++
				if l.Failures != 49 {
					t.Errorf("the end of the run counts %d failures, want 49", l.Failures)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if lines != 2 {
		t.Errorf("%d lines, want 2: the first failure and the end", lines)
	}
}
