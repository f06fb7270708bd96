// Package outage tells of a run of failures without flooding the log: the
// first failure at once, then at most one line a period with the count of
// failures since the last line, and the end of the run once. The store
// tells of Redis refusing connections so, and the receiver's handlers of
// requests their store failed (Log).
package outage

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
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

// Log logs the store failures a receiver handler meets as the store logs
// an outage: the first failure of a run at once, then at most one line a
// minute with the count of failures since the last, and the run's end
// once. Without it, every request rejected during an outage logged a line
// of its own.
type Log struct {
	logger *zap.Logger
	what   string // the handler's store: "dedupe" or "freshness"
	run    *Tracker
}

// NewLog returns a Log of the failures of what's store ("dedupe",
// "freshness"), to logger, reading time from now.
func NewLog(logger *zap.Logger, what string, now func() time.Time) *Log {
	return &Log{logger: logger, what: what, run: New(now)}
}

// Failed logs err, a failure of the store, when a line is due; fields say
// which request met it.
func (l *Log) Failed(err error, fields ...zap.Field) {
	line, ok := l.run.Failed()
	switch {
	case !ok:
	case line.First:
		l.logger.Error(l.what+" store failed; until it answers, further failures are logged once a minute with their count",
			append(fields, zap.Error(err))...)
	default:
		l.logger.Error(l.what+" store still failing",
			append(fields, zap.Int("failures", line.Failures), zap.String("down_for", line.DownFor.String()), zap.Error(err))...)
	}
}

// Answered records a request the store answered: the end of a run of
// failures, if one was on. It costs an atomic load otherwise.
func (l *Log) Answered() {
	if line, ok := l.run.Recovered(); ok {
		l.logger.Info(l.what+" store answers again",
			zap.Int("failures", line.Failures), zap.String("down_for", line.DownFor.String()))
	}
}
