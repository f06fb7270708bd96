package sender_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// logLines keeps the message and attributes of each log line.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }

func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	line := map[string]any{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool {
		line[a.Key] = a.Value.Any()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	return nil
}

// take returns the lines logged since the last take.
func (l *logLines) take() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.lines
	l.lines = nil
	return got
}

// TestOpsPause: a subscriber's pause is kept under the subscriber's name
// alone, and the subscriber resumes only its own; an operator's resume
// is of any pause; each change is logged with who asked in full.
func TestOpsPause(t *testing.T) {
	q := newQueue(t)
	s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: "http://127.0.0.1:1/"}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := new(logLines)
	ops := sender.NewOps(s, nil, sender.OpsOptions{Logger: slog.New(logs)})
	const operator, subscriber = "admin api from 192.0.2.7:1", `subscriber:d user "ann" from 192.0.2.8`
	for i, step := range []struct {
		paused   bool
		by       string
		err      error
		state    string
		pausedBy string
	}{
		{true, operator, nil, "paused", operator},
		{false, subscriber, sender.ErrPausedByOther, "paused", operator},
		// A subscriber's pause of what is paused already changes nothing,
		// and logs nothing: else it would make the operator's pause its
		// own, to resume.
		{true, subscriber, nil, "paused", operator},
		{false, subscriber, sender.ErrPausedByOther, "paused", operator},
		{false, operator, nil, "active", ""},
		{true, subscriber, nil, "paused", "subscriber:d"},
		{false, subscriber, nil, "active", ""},
		{true, subscriber, nil, "paused", "subscriber:d"},
		{false, operator, nil, "active", ""},
	} {
		v, err := ops.SetPaused(t.Context(), "d", step.paused, step.by)
		if !errors.Is(err, step.err) {
			t.Fatalf("step %d: SetPaused(%v, %q) = %v, want %v", i, step.paused, step.by, err, step.err)
		}
		if err == nil && (v.State != step.state || v.PausedBy != step.pausedBy) {
			t.Errorf("step %d: answer %s by %q, want %s by %q", i, v.State, v.PausedBy, step.state, step.pausedBy)
		}
		st, _ := ops.Destination(t.Context(), "d")
		if st.State != step.state || st.PausedBy != step.pausedBy {
			t.Errorf("step %d: %s by %q, want %s by %q", i, st.State, st.PausedBy, step.state, step.pausedBy)
		}
		want := []map[string]any{{"msg": "destination paused", "level": "INFO", "destination": "d", "by": step.by}}
		if !step.paused {
			want[0]["msg"] = "destination resumed"
		}
		if err != nil || i == 2 {
			want = nil
		}
		if diff := cmp.Diff(want, logs.take()); diff != "" {
			t.Errorf("step %d: logged (-want +got):\n%s", i, diff)
		}
	}
	if _, err := ops.SetPaused(t.Context(), "other", true, operator); !errors.Is(err, sender.ErrUnknownDestination) {
		t.Errorf("pause of an unknown destination: %v", err)
	}
}

// TestOpsRedriveAndPurge: a redrive that moves letters is counted and
// logged, one that moves none (a dry run) neither; a purge is logged with
// the IDs asked for.
func TestOpsRedriveAndPurge(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	q := deadAt(t, 3, base)
	s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: "http://127.0.0.1:1/"}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := new(logLines)
	var counted []sender.Letter
	ops := sender.NewOps(s, sender.NewSettled(q, s.Destinations, 0, nil), sender.OpsOptions{
		Logger:   slog.New(logs),
		Redriven: func(_ context.Context, l []sender.Letter) { counted = append(counted, l...) },
	})
	if rd, err := ops.Redrive(t.Context(), sender.Filter{Destination: "d"}, 2, "ann", true); err != nil || rd.Matched != 3 {
		t.Fatalf("dry run: %+v, %v", rd, err)
	}
	if got := logs.take(); len(got) != 0 || len(counted) != 0 {
		t.Fatalf("a dry run logged %v and counted %v", got, counted)
	}
	rd, err := ops.Redrive(t.Context(), sender.Filter{Destination: "d"}, 2, "ann", false)
	if err != nil || rd.Moved != 2 {
		t.Fatalf("redrive: %+v, %v", rd, err)
	}
	if diff := cmp.Diff(rd.Letters, counted); diff != "" {
		t.Errorf("letters counted (-want +got):\n%s", diff)
	}
	want := []map[string]any{{"msg": "redrive", "level": "INFO", "redrive_id": rd.ID, "matched": int64(3), "moved": int64(2), "by": "ann"}}
	if diff := cmp.Diff(want, logs.take()); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
	if r, err := ops.Purge(t.Context(), sender.Filter{Destination: "d"}, sender.PurgeOptions{Limit: 1, DryRun: true}, "bob"); err != nil || r.Matched != 1 || r.Removed != 0 {
		t.Fatalf("purge, a dry run: %+v, %v", r, err)
	}
	if got := logs.take(); len(got) != 0 {
		t.Fatalf("a purge's dry run logged %v", got)
	}
	r, err := ops.Purge(t.Context(), sender.Filter{Destination: "d", IDs: []string{"d-0000", "d-0001", "d-0002"}}, sender.PurgeOptions{}, "bob")
	if err != nil || r.Removed != 1 {
		t.Fatalf("purge: %+v, %v", r, err)
	}
	want = []map[string]any{{"msg": "dead letters purged", "level": "INFO", "matched": int64(1), "removed": int64(1), "limit": int64(0), "ids": []string{"d-0000", "d-0001", "d-0002"}, "by": "bob"}}
	if diff := cmp.Diff(want, logs.take()); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}

// TestOpsResendAndDelivery: a resend that moves envelopes is counted and
// logged as a redrive is, a dry run neither; a delivery is read by its
// destination, an unknown destination refused.
func TestOpsResendAndDelivery(t *testing.T) {
	q := settledQueue(t, 3, time.Now().Add(-time.Hour))
	dests := []sender.Destination{{Name: "a", URL: "http://127.0.0.1:1/"}, {Name: "b", URL: "http://127.0.0.1:1/"}, {Name: "c", URL: "http://127.0.0.1:1/"}}
	s, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := new(logLines)
	var counted []sender.Letter
	ops := sender.NewOps(s, sender.NewSettled(q, s.Destinations, 0, nil), sender.OpsOptions{
		Logger:   slog.New(logs),
		Redriven: func(_ context.Context, l []sender.Letter) { counted = append(counted, l...) },
	})
	e, state, err := ops.Delivery(t.Context(), "b", "b-001")
	if err != nil || state != sender.StateDelivered || string(e.Payload) != `{}` {
		t.Fatalf("Delivery = %+v, %s, %v", e, state, err)
	}
	if _, _, err := ops.Delivery(t.Context(), "nowhere", "b-001"); !errors.Is(err, sender.ErrUnknownDestination) {
		t.Errorf("Delivery of an unknown destination: %v, want ErrUnknownDestination", err)
	}
	page, _, err := ops.History(t.Context(), sender.HistoryQuery{Destination: "a"}, "", 10)
	if err != nil || len(page) != 3 {
		t.Fatalf("History = %d entries, %v; want 3", len(page), err)
	}
	if rd, err := ops.Resend(t.Context(), sender.HistoryQuery{Destination: "a"}, 2, "ann", true); err != nil || rd.Matched != 3 || rd.Moved != 0 {
		t.Fatalf("dry run: %+v, %v", rd, err)
	}
	if got := logs.take(); len(got) != 0 || len(counted) != 0 {
		t.Fatalf("a dry run logged %v and counted %v", got, counted)
	}
	rd, err := ops.Resend(t.Context(), sender.HistoryQuery{Destination: "a"}, 2, "ann", false)
	if err != nil || rd.Moved != 2 || rd.Kind != "resend" {
		t.Fatalf("resend: %+v, %v", rd, err)
	}
	if diff := cmp.Diff(rd.Letters, counted); diff != "" {
		t.Errorf("letters counted (-want +got):\n%s", diff)
	}
	want := []map[string]any{{"msg": "resend", "level": "INFO", "redrive_id": rd.ID, "matched": int64(2), "more": true, "moved": int64(2), "by": "ann"}}
	if diff := cmp.Diff(want, logs.take()); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}
