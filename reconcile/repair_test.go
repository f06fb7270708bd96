package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// doorFake is an Enqueuer over a map, answering as the sender does: a
// known ID is a duplicate, whatever its payload.
type doorFake struct {
	queued map[string]string // id -> payload
	calls  []string
	err    error
}

func (f *doorFake) Enqueue(_ context.Context, e Event) (Outcome, error) {
	f.calls = append(f.calls, e.ID)
	if f.err != nil {
		return 0, f.err
	}
	if err := sender.CheckID(e.ID); err != nil {
		return 0, fmt.Errorf("the door refused it: %w", err)
	}
	if _, ok := f.queued[e.ID]; ok {
		return AlreadyEnqueued, nil
	}
	f.queued[e.ID] = string(e.Payload)
	return Enqueued, nil
}

// TestNewEvent: the event of a truth row, under its deterministic ID.
func TestNewEvent(t *testing.T) {
	e, err := NewEvent("reservation.{state}", &Row{Key: "r-1", State: "confirmed", Version: 3, UpdatedAt: old})
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		ID: "reconcile:r-1:confirmed:3", Type: "reservation.confirmed", Entity: "r-1", EventTime: old,
		Payload: []byte(`{"id":"reconcile:r-1:confirmed:3","key":"r-1","occurred_at":"2026-11-30T11:00:00Z","state":"confirmed","type":"reservation.confirmed","version":3}`),
	}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("NewEvent (-want +got):\n%s", diff)
	}
	if e, _ := NewEvent("", &Row{Key: "k", State: "s"}); e.Type != "s" {
		t.Errorf("the default type is the state: %q", e.Type)
	}
}

// TestRepairerUnrepairableKeys: a key that cannot make a valid delivery
// ID (a space, a control character, a non-ASCII byte, over 1024 bytes in
// all) is counted and sampled, never enqueued, and the run goes on; the
// other keys are repaired. Keys past the limit are still checked.
func TestRepairerUnrepairableKeys(t *testing.T) {
	long := "ff" + strings.Repeat("k", 1024-len("reconcile:ff:confirmed:1")+1)
	truth := rows{
		row("a", "confirmed"), row("b c", "confirmed"), row("d", "confirmed"), row("e\x00", "confirmed"),
		row(long, "confirmed"), row("f\u00e9", "confirmed"), row("g", "confirmed"), row("h i", "confirmed"),
	}
	door := &doorFake{queued: map[string]string{}}
	rep := &Repairer{Enqueuer: door, EventType: "reservation.{state}", Limit: 3}
	r, err := Compare(t.Context(), truth, rows{}, Config{Expect: expect, Now: now}, func(d Drift) error { return rep.Repair(t.Context(), d) })
	if err != nil {
		t.Fatal(err)
	}
	if r.Drift[Missing] != 8 {
		t.Errorf("missing = %d, want all 8 reported", r.Drift[Missing])
	}
	if diff := cmp.Diff([]string{"reconcile:a:confirmed:1", "reconcile:d:confirmed:1", "reconcile:g:confirmed:1"}, door.calls); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
	if rep.Repaired != 3 || rep.Already != 0 || rep.Unrepairable != 5 {
		t.Errorf("repaired %d, already %d, unrepairable %d; want 3, 0, 5", rep.Repaired, rep.Already, rep.Unrepairable)
	}
	var keys []string
	for _, s := range rep.UnrepairableSamples {
		keys = append(keys, s.Key)
		if !errors.Is(s.Err, sender.ErrBadID) {
			t.Errorf("%q: %v, want ErrBadID", s.Key, s.Err)
		}
	}
	if diff := cmp.Diff([]string{"b c", "e\x00", long, "f\u00e9", "h i"}, keys); diff != "" {
		t.Errorf("unrepairable samples (-want +got):\n%s", diff)
	}
}

// TestRepairerAlreadyRepaired: a repair enqueued before, with the same
// payload or another (the truth row's updated_at moved, its version did
// not), is already repaired: no error, not counted in Repaired, nor
// against the limit; the run compares every key after it.
func TestRepairerAlreadyRepaired(t *testing.T) {
	truth := rows{row("a", "confirmed"), row("b", "confirmed"), row("c", "confirmed")}
	door := &doorFake{queued: map[string]string{}}
	first := &Repairer{Enqueuer: door}
	if _, err := Compare(t.Context(), truth, rows{}, Config{Expect: expect, Now: now}, func(d Drift) error { return first.Repair(t.Context(), d) }); err != nil {
		t.Fatal(err)
	}
	if first.Repaired != 3 {
		t.Fatalf("first run repaired %d, want 3", first.Repaired)
	}
	moved := truth[0]
	moved.UpdatedAt = old.Add(time.Minute)
	truth = rows{moved, truth[1], truth[2], row("d", "confirmed")}
	again := &Repairer{Enqueuer: door, Limit: 1}
	r, err := Compare(t.Context(), truth, rows{}, Config{Expect: expect, Now: now}, func(d Drift) error { return again.Repair(t.Context(), d) })
	if err != nil {
		t.Fatalf("the second run: %v", err)
	}
	if r.Drift[Missing] != 4 || again.Repaired != 1 || again.Already != 3 {
		t.Errorf("second run: %d missing, repaired %d, already %d; want 4, 1 (d), 3", r.Drift[Missing], again.Repaired, again.Already)
	}
}

// TestRepairerStopsOnError: a door's error (other than a bad ID) stops
// the run, naming the key.
func TestRepairerStopsOnError(t *testing.T) {
	down := errors.New("connection refused")
	rep := &Repairer{Enqueuer: &doorFake{err: down}}
	_, err := Compare(t.Context(), rows{row("a", "confirmed"), row("b", "confirmed")}, rows{}, Config{Expect: expect, Now: now}, func(d Drift) error { return rep.Repair(t.Context(), d) })
	if !errors.Is(err, down) || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("err = %v, want the door's error for a", err)
	}
	// A door that refuses an ID the repairer took for valid: unrepairable.
	bad := &Repairer{Enqueuer: &doorFake{err: fmt.Errorf("400 bad_id: %w", sender.ErrBadID)}}
	if _, err := Compare(t.Context(), rows{row("a", "confirmed")}, rows{}, Config{Expect: expect, Now: now}, func(d Drift) error { return bad.Repair(t.Context(), d) }); err != nil || bad.Unrepairable != 1 {
		t.Errorf("a door's bad_id: err %v, unrepairable %d; want nil, 1", err, bad.Unrepairable)
	}
}
