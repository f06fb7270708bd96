package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNextSlot(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		now   string
		every time.Duration
		last  string
		want  string
	}{
		{"2026-11-30T12:07:10Z", 15 * time.Minute, "", "2026-11-30T12:15:00Z"},
		{"2026-11-30T12:15:00Z", 15 * time.Minute, "", "2026-11-30T12:30:00Z"},
		// Counted from the Unix epoch, not Go's year 1: 7m periods start
		// at multiples of 420 Unix seconds.
		{"2026-11-30T12:07:10Z", 7 * time.Minute, "", time.Unix((at("2026-11-30T12:07:10Z").Unix()/420+1)*420, 0).UTC().Format(time.RFC3339)},
		// The clock stepped back after the 12:15 run: no slot twice.
		{"2026-11-30T12:14:59.9Z", 15 * time.Minute, "2026-11-30T12:15:00Z", "2026-11-30T12:30:00Z"},
	} {
		var last time.Time
		if c.last != "" {
			last = at(c.last)
		}
		got := nextSlot(at(c.now), c.every, last)
		if !got.Equal(at(c.want)) {
			t.Errorf("nextSlot(%s, %s, %q) = %s, want %s", c.now, c.every, c.last, got.UTC(), c.want)
		}
		if got.Unix()%int64(c.every/time.Second) != 0 {
			t.Errorf("nextSlot(%s, %s) = %s is not a multiple of the period in Unix time", c.now, c.every, got)
		}
	}
}

// lockFunc is a Locker.
type lockFunc func(ctx context.Context, job string, slot time.Time, lease time.Duration) (bool, error)

func (f lockFunc) Lock(ctx context.Context, job string, slot time.Time, lease time.Duration) (bool, error) {
	return f(ctx, job, slot, lease)
}

// observerFake records what an Observer is told, one line each.
type observerFake struct {
	mu     sync.Mutex
	events []string
}

func (o *observerFake) add(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf(format, a...))
}

func (o *observerFake) Scheduled(job string, every time.Duration) {
	o.add("scheduled %s every %s", job, every)
}
func (o *observerFake) Ran(job string, took time.Duration) { o.add("ran %s in %s", job, took) }
func (o *observerFake) Found(job string, slot time.Time, r *Report) {
	o.add("found %s %s: %d missing, %d mismatched, %d orphaned", job, slot.UTC().Format("15:04"), r.Drift[Missing], r.Drift[Mismatched], r.Drift[Orphaned])
}
func (o *observerFake) Ended(job string, result Result) { o.add("ended %s %s", job, result) }

func (o *observerFake) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

// logBuffer holds JSON log lines, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the records logged, each without its time.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func newLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// sourceAt is a Source that records when it is read.
type sourceAt struct {
	rows
	mu   sync.Mutex
	read []time.Time
}

func (s *sourceAt) Rows(ctx context.Context) iter.Seq2[Row, error] {
	s.mu.Lock()
	s.read = append(s.read, time.Now())
	s.mu.Unlock()
	return s.rows.Rows(ctx)
}

// TestScheduleRunsEachSlot: a schedule runs at the start of each slot
// when its Locker grants the slot, skips a slot another instance holds,
// and counts a claim that fails as an error; each is logged and
// observed, and the loop ends with its context.
func TestScheduleRunsEachSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // the bubble's clock: 2000-01-01T00:00:00Z
		truth := &sourceAt{rows: rows{{Key: "a", State: "confirmed", Version: 1, UpdatedAt: start.Add(-time.Hour)}}}
		job := &Job{Name: "enrollments", Expect: expect, Sources: func() (Source, Source, error) { return truth, rows{}, nil }}
		var claims []string
		answers := []error{nil, errors.New("another instance"), errors.New("store down")}
		locker := lockFunc(func(_ context.Context, job string, slot time.Time, lease time.Duration) (bool, error) {
			claims = append(claims, fmt.Sprintf("%s %s for %s", job, slot.UTC().Format("15:04"), lease))
			a := answers[0]
			answers = answers[1:]
			if a != nil && a.Error() == "another instance" {
				return false, nil
			}
			return a == nil, a
		})
		var logs logBuffer
		obs := new(observerFake)
		s := &Schedule{Job: job, Every: 15 * time.Minute, Locker: locker, Logger: newLogger(&logs), Observer: obs}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(45*time.Minute + time.Second)
		synctest.Wait()
		cancel()
		<-done

		if diff := cmp.Diff([]string{"enrollments 00:15 for 15m0s", "enrollments 00:30 for 15m0s", "enrollments 00:45 for 15m0s"}, claims); diff != "" {
			t.Errorf("claims (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Time{start.Add(15 * time.Minute)}, truth.read); diff != "" {
			t.Errorf("the truth read at (-want +got):\n%s", diff)
		}
		want := []string{
			"scheduled enrollments every 15m0s",
			"ran enrollments in 0s",
			"found enrollments 00:15: 1 missing, 0 mismatched, 0 orphaned",
			"ended enrollments drift",
			"ended enrollments skipped",
			"ended enrollments error",
		}
		if diff := cmp.Diff(want, obs.get()); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		slot := func(m string) string { return start.Add(mustDuration(t, m)).Format(time.RFC3339) }
		wantLogs := []map[string]any{
			{"level": "WARN", "msg": "reconcile found drift", "job": "enrollments", "slot": slot("15m"),
				"truth": 1.0, "receiver": 0.0, "missing": 1.0, "mismatched": 0.0, "orphaned": 0.0, "took": 0.0},
			{"level": "DEBUG", "msg": "reconcile: another instance runs this slot", "job": "enrollments", "slot": slot("30m")},
			{"level": "ERROR", "msg": "reconcile: claiming the slot", "job": "enrollments", "slot": slot("45m"), "error": "store down"},
		}
		if diff := cmp.Diff(wantLogs, logs.lines(t)); diff != "" {
			t.Errorf("logs (-want +got):\n%s", diff)
		}
	})
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestScheduleRunLogs: a clean run logs its counts at info level; a run
// with repairs adds theirs, and warns of the keys it could not repair.
func TestScheduleRunLogs(t *testing.T) {
	for name, c := range map[string]struct {
		truth  []string // key=state, updated an hour before the run
		repair bool
		want   []map[string]any
		result string
	}{
		"clean": {
			truth: []string{"a=pending"},
			want: []map[string]any{{"level": "INFO", "msg": "reconcile clean", "job": "j", "slot": "2000-01-01T00:01:00Z",
				"truth": 1.0, "receiver": 0.0, "missing": 0.0, "mismatched": 0.0, "orphaned": 0.0, "took": 0.0}},
			result: "ended j clean",
		},
		"clean, with repairs": {
			truth: nil, repair: true,
			want: []map[string]any{{"level": "INFO", "msg": "reconcile clean", "job": "j", "slot": "2000-01-01T00:01:00Z",
				"truth": 0.0, "receiver": 0.0, "missing": 0.0, "mismatched": 0.0, "orphaned": 0.0, "took": 0.0,
				"repaired": 0.0, "already_repaired": 0.0, "unrepairable": 0.0}},
			result: "ended j clean",
		},
		"drift, repaired in part": {
			truth: []string{"a=confirmed", "b c=confirmed"}, repair: true,
			want: []map[string]any{
				{"level": "WARN", "msg": "reconcile: keys that cannot make a valid delivery ID (1 to 1024 bytes of visible ASCII) were not repaired",
					"job": "j", "slot": "2000-01-01T00:01:00Z", "unrepairable": 1.0, "keys": []any{"b c"}},
				{"level": "WARN", "msg": "reconcile found drift", "job": "j", "slot": "2000-01-01T00:01:00Z",
					"truth": 2.0, "receiver": 0.0, "missing": 2.0, "mismatched": 0.0, "orphaned": 0.0, "took": 0.0,
					"repaired": 1.0, "already_repaired": 0.0, "unrepairable": 1.0},
			},
			result: "ended j drift",
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var truth rows
				for _, kv := range c.truth {
					k, v, _ := strings.Cut(kv, "=")
					truth = append(truth, Row{Key: k, State: v, Version: 1, UpdatedAt: time.Now().Add(-time.Hour)})
				}
				job := &Job{Name: "j", Expect: expect, Sources: func() (Source, Source, error) { return truth, rows{}, nil }}
				var logs logBuffer
				obs := new(observerFake)
				door := &doorFake{queued: map[string]string{}}
				s := &Schedule{Job: job, Every: time.Minute, Logger: newLogger(&logs), Observer: obs,
					Locker: lockFunc(func(context.Context, string, time.Time, time.Duration) (bool, error) { return true, nil })}
				if c.repair {
					s.Enqueuer = door
				}
				s.runSlot(t.Context(), time.Now().Add(time.Minute))
				if diff := cmp.Diff(c.want, logs.lines(t)); diff != "" {
					t.Errorf("logs (-want +got):\n%s", diff)
				}
				if got := obs.get(); got[len(got)-1] != c.result {
					t.Errorf("observed %q, want it to end with %q", got, c.result)
				}
			})
		})
	}
}

// TestScheduledRunBoundedByPeriod: a run whose source hangs fails at the
// end of its period, naming the bound; its duration is observed.
func TestScheduledRunBoundedByPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		job := &Job{Name: "j", Expect: expect, Sources: func() (Source, Source, error) { return hanging{}, rows{}, nil }}
		var logs logBuffer
		obs := new(observerFake)
		s := &Schedule{Job: job, Every: time.Minute, Logger: newLogger(&logs), Observer: obs,
			Locker: lockFunc(func(context.Context, string, time.Time, time.Duration) (bool, error) { return true, nil })}
		s.runSlot(t.Context(), time.Now())
		if diff := cmp.Diff([]string{"ran j in 1m0s", "ended j error"}, obs.get()); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		lines := logs.lines(t)
		if len(lines) != 1 || lines[0]["msg"] != "reconcile run failed" ||
			!strings.Contains(fmt.Sprint(lines[0]["error"]), "the reconcile run timed out: it took longer than 1m0s (the job's period, every)") {
			t.Errorf("logs: %v", lines)
		}
	})
}

// hanging is a Source that yields nothing until its context ends.
type hanging struct{}

func (hanging) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		<-ctx.Done()
		yield(Row{}, ctx.Err())
	}
}
