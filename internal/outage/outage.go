// Package outage tells of a run of failures without flooding the log: the
// first failure at once, then at most one line a period with the count of
// failures since the last line, and the end of the run once. The store
// tells of Redis refusing connections so, and the receiver's handlers of
// requests their store failed.
package outage

import (
	"sync"
	"sync/atomic"
	"time"
)

// Every is how often a run that lasts is told again.
const Every = time.Minute

// Tracker follows one run of failures at a time. It is safe for
// concurrent use; Recovered costs one atomic load while nothing fails.
type Tracker struct {
	now  func() time.Time
	down atomic.Bool

	mu       sync.Mutex
	since    time.Time // when the run began
	logged   time.Time // when its last line was due
	failures int       // since the last line
}

// New returns a Tracker reading time from now.
func New(now func() time.Time) *Tracker { return &Tracker{now: now} }

// Line is what a line about a run says.
type Line struct {
	// First is whether the line tells of the run's first failure.
	First bool
	// Failures counts the failures since the last line, not told by it.
	Failures int
	// DownFor is how long the run has lasted.
	DownFor time.Duration
}

// Failed records a failure. It returns the line to log and true when one
// is due: at the run's first failure, and then when Every has passed since
// the last line.
func (t *Tracker) Failed() (Line, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.down.Load() {
		t.down.Store(true)
		t.since, t.logged, t.failures = now, now, 0
		return Line{First: true}, true
	}
	t.failures++
	if now.Sub(t.logged) < Every {
		return Line{}, false
	}
	l := Line{Failures: t.failures, DownFor: now.Sub(t.since).Round(time.Second)}
	t.logged, t.failures = now, 0
	return l, true
}

// Recovered records a success. It returns the line to log and true when
// it ends a run: Failures are those since the run's last line.
func (t *Tracker) Recovered() (Line, bool) {
	if !t.down.Load() {
		return Line{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.down.Load() {
		return Line{}, false // another success ended it first
	}
	t.down.Store(false)
	return Line{Failures: t.failures, DownFor: t.now().Sub(t.since).Round(time.Second)}, true
}

// Down reports whether a run of failures is on.
func (t *Tracker) Down() bool { return t.down.Load() }
