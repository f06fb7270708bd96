package queuetest

// Fan-out by event type (sender.Publish) on each queue: routing by glob,
// idempotence, a crash between the writes, a destination added later, and
// a client that hangs up mid-fan-out.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// fanDests subscribe as a platform's endpoints would.
var fanDests = []sender.Destination{
	{Name: "enrollment", URL: "http://127.0.0.1:1/e", Events: []string{"reservation.*", "seat.released"}},
	{Name: "billing", URL: "http://127.0.0.1:1/b", Events: []string{"reservation.confirmed"}},
	{Name: "audit", URL: "http://127.0.0.1:1/a", Events: []string{"*"}},
	{Name: "manual", URL: "http://127.0.0.1:1/m"}, // no events: explicit enqueues only
}

func newFanSender(t *testing.T, q sender.Queue, dests []sender.Destination, now time.Time) *sender.Sender {
	t.Helper()
	s, err := sender.New(q, sender.Config{}, dests, sender.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func event(id, typ string) *sender.Event {
	return &sender.Event{ID: id, EventType: typ, Entity: "r-1", Payload: []byte(`{"id":"` + id + `"}`), ContentType: "application/json"}
}

func deliveries(ds ...string) []sender.Delivery {
	out := []sender.Delivery{}
	for i := 0; i < len(ds); i += 2 {
		out = append(out, sender.Delivery{Destination: ds[i], State: sender.StateQueued, Duplicate: ds[i+1] == "dup"})
	}
	return out
}

// afterCrash is what a publish again of id answers after a publish that
// died after one write: the destination written to (whichever its
// concurrent writes reached first) holds it, the others get it.
func afterCrash(t *testing.T, q sender.Queue, id string) []sender.Delivery {
	t.Helper()
	var ds []string
	held := 0
	for _, d := range []string{"enrollment", "billing", "audit"} {
		dup := ""
		if _, _, err := q.Get(t.Context(), d, id); err == nil {
			dup, held = "dup", held+1
		}
		ds = append(ds, d, dup)
	}
	if held != 1 {
		t.Fatalf("after a crash after one write, %d destinations hold %s", held, id)
	}
	return deliveries(ds...)
}

func mustPublish(t *testing.T, s *sender.Sender, ev *sender.Event, want sender.PublishResult) {
	t.Helper()
	got, err := s.Publish(t.Context(), ev)
	if err != nil {
		t.Fatalf("Publish(%s): %v", ev.ID, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Publish(%s) (-want +got):\n%s", ev.ID, diff)
	}
}

// crashAfter is a queue that dies after n enqueues: the next one never
// reaches the store, as when the process is killed between two writes.
type crashAfter struct {
	sender.Queue
	n atomic.Int32
}

var errKilled = errors.New("killed between two writes")

func (c *crashAfter) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	if c.n.Add(-1) < 0 {
		return sender.EnqueueResult{}, errKilled
	}
	return c.Queue.Enqueue(ctx, e)
}

func runFanout(t *testing.T, newQueue NewQueue) {
	t.Run("MetasAcrossReadsOneIDEverywhere", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("queued", "e1", t0), queued)
		mustEnqueue(t, q, env("delivered", "e1", t0), queued)
		l := mustLease(t, q, "delivered", 1, t0)
		mustSettle(t, q, "delivered", []sender.Outcome{{Kind: sender.Delivered, ID: "e1", LeaseUntil: l[0].LeaseUntil}}, t0, 0)
		mustEnqueue(t, q, env("other", "e2", t0), queued)
		dests := []string{"queued", "none", "delivered", "other"}
		got, err := q.MetasAcross(t.Context(), dests, "e1")
		if err != nil || len(got) != len(dests) {
			t.Fatalf("MetasAcross = %v, %v", got, err)
		}
		for i, want := range []sender.State{sender.StateQueued, "", sender.StateDelivered, ""} {
			switch {
			case want == "" && got[i] != nil:
				t.Errorf("%s: %+v, want nothing", dests[i], got[i])
			case want != "" && (got[i] == nil || got[i].State != want || got[i].ID != "e1" || got[i].Destination != dests[i]):
				t.Errorf("%s: %+v, want e1 %s", dests[i], got[i], want)
			}
		}
	})

	t.Run("FanOutRoutesByGlob", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		s := newFanSender(t, q, fanDests, t0)
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "", "billing", "", "audit", "")})
		mustPublish(t, s, event("e2", "seat.released"), sender.PublishResult{Deliveries: deliveries("enrollment", "", "audit", "")})
		mustPublish(t, s, event("e3", "invoice.paid"), sender.PublishResult{Deliveries: deliveries("audit", "")})
		// The glob's * stops at a dot no more than a word does.
		mustPublish(t, s, event("e4", "reservation"), sender.PublishResult{Deliveries: deliveries("audit", "")})
		// Each destination holds its own envelope under the event's ID.
		for _, d := range []string{"enrollment", "billing", "audit"} {
			e, st, err := q.Get(t.Context(), d, "e1")
			if err != nil || st != sender.StateQueued || e.EventType != "reservation.confirmed" || e.Destination != d {
				t.Errorf("%s holds e1 as %+v, %s, %v", d, e, st, err)
			}
		}
		if _, _, err := q.Get(t.Context(), "manual", "e1"); !errors.Is(err, sender.ErrNotFound) {
			t.Errorf("manual, subscribed to nothing, holds e1: %v", err)
		}
	})

	t.Run("FanOutWithNoSubscriberIsUnrouted", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		s := newFanSender(t, q, fanDests[:2], t0)
		mustPublish(t, s, event("e1", "invoice.paid"), sender.PublishResult{Deliveries: []sender.Delivery{}})
		if _, err := s.Publish(t.Context(), event("e2", "")); !errors.Is(err, sender.ErrMissingEventType) {
			t.Errorf("an event without a type: %v, want ErrMissingEventType", err)
		}
		if _, err := s.Publish(t.Context(), event("bad id", "seat.released")); !errors.Is(err, sender.ErrBadID) {
			t.Errorf("a bad ID: %v, want ErrBadID", err)
		}
	})

	t.Run("FanOutAgainIsIdempotent", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		s := newFanSender(t, q, fanDests, t0)
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "", "billing", "", "audit", "")})
		// billing delivers its envelope meanwhile: still a duplicate.
		l := mustLease(t, q, "billing", 1, t0)
		mustSettle(t, q, "billing", []sender.Outcome{{Kind: sender.Delivered, ID: "e1", LeaseUntil: l[0].LeaseUntil}}, t0, 0)
		want := deliveries("enrollment", "dup", "billing", "dup", "audit", "dup")
		want[1].State = sender.StateDelivered
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: want})
		// The same ID with another body is refused, and writes nothing.
		other := event("e1", "reservation.confirmed")
		other.Payload = []byte(`{"other":true}`)
		mustPublish(t, s, other, sender.PublishResult{Mismatch: true})
		e, _, err := q.Get(t.Context(), "enrollment", "e1")
		if err != nil || string(e.Payload) != `{"id":"e1"}` {
			t.Errorf("enrollment's e1 after a mismatch: %q, %v", e.Payload, err)
		}
	})

	t.Run("FanOutCompletesWhatACrashCutShort", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		if _, err := q.FirstSeen(t.Context(), []string{"enrollment", "billing", "audit", "manual"}, t0.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		dying := &crashAfter{Queue: q}
		dying.n.Store(1)
		s := newFanSender(t, dying, fanDests, t0)
		if _, err := s.Publish(t.Context(), event("e1", "reservation.confirmed")); !errors.Is(err, errKilled) {
			t.Fatalf("Publish through a queue killed after one write: %v", err)
		}
		// A new process publishes the event again: the two deliveries the
		// crash cut short are made, the one written is not made twice.
		s = newFanSender(t, q, fanDests, t0.Add(time.Minute))
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: afterCrash(t, q, "e1")})
		for _, d := range []string{"enrollment", "billing", "audit"} {
			if got := mustLease(t, q, d, 10, t0.Add(time.Minute)); len(got) != 1 {
				t.Errorf("%s leases %v, want e1 once", d, ids(got))
			}
		}
	})

	t.Run("FanOutCompletesBeforeTheSenderRecordedItsDestinations", func(t *testing.T) {
		t.Parallel()
		// The first publish comes before Run has recorded when the store
		// first saw the destinations (a store that failed at start, a
		// sender used only to publish), and dies after one write: the
		// destinations are no later subscribers, and the next publish
		// completes the fan-out.
		q := newQueue(t, retention)
		dying := &crashAfter{Queue: q}
		dying.n.Store(1)
		s := newFanSender(t, dying, fanDests, t0)
		if _, err := s.Publish(t.Context(), event("e1", "reservation.confirmed")); !errors.Is(err, errKilled) {
			t.Fatalf("Publish through a queue killed after one write: %v", err)
		}
		s = newFanSender(t, q, fanDests, t0.Add(time.Minute))
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: afterCrash(t, q, "e1")})
	})

	t.Run("FanOutSkipsADestinationAddedLater", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		early := []sender.Destination{fanDests[0]}
		if _, err := q.FirstSeen(t.Context(), []string{"enrollment"}, t0); err != nil {
			t.Fatal(err)
		}
		s := newFanSender(t, q, early, t0)
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "")})
		// audit is configured a day later; the producer retries e1.
		later := t0.Add(24 * time.Hour)
		if _, err := q.FirstSeen(t.Context(), []string{"enrollment", "audit"}, later); err != nil {
			t.Fatal(err)
		}
		s = newFanSender(t, q, []sender.Destination{fanDests[0], fanDests[2]}, later)
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "dup")})
		// A new event reaches both.
		mustPublish(t, s, event("e2", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "", "audit", "")})
	})

	t.Run("FanOutIsJudgedByTheEventsCreation", func(t *testing.T) {
		t.Parallel()
		// e1 is published to enrollment alone; audit is configured ten
		// minutes later, and enrollment delivers e1 ten minutes after
		// that: audit came after e1 was created, though before it was
		// delivered, and a publish again does not reach it.
		q := newQueue(t, retention)
		if _, err := q.FirstSeen(t.Context(), []string{"enrollment"}, t0); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, newFanSender(t, q, []sender.Destination{fanDests[0]}, t0), event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: deliveries("enrollment", "")})
		added := t0.Add(10 * time.Minute)
		if _, err := q.FirstSeen(t.Context(), []string{"enrollment", "audit"}, added); err != nil {
			t.Fatal(err)
		}
		delivered := added.Add(10 * time.Minute)
		l := mustLease(t, q, "enrollment", 1, delivered)
		mustSettle(t, q, "enrollment", []sender.Outcome{{Kind: sender.Delivered, ID: "e1", LeaseUntil: l[0].LeaseUntil}}, delivered, 0)
		s := newFanSender(t, q, []sender.Destination{fanDests[0], fanDests[2]}, delivered.Add(time.Minute))
		want := deliveries("enrollment", "dup")
		want[0].State = sender.StateDelivered
		mustPublish(t, s, event("e1", "reservation.confirmed"), sender.PublishResult{Deliveries: want})
		if _, _, err := q.Get(t.Context(), "audit", "e1"); !errors.Is(err, sender.ErrNotFound) {
			t.Errorf("audit, added after e1 was created, holds it: %v", err)
		}
	})

	t.Run("FanOutOutlivesTheClient", func(t *testing.T) {
		t.Parallel()
		// The client hangs up after the fan-out's first write: the
		// fan-out goes on to every subscriber all the same, and its
		// envelopes carry one creation time, the event's.
		q := newQueue(t, retention)
		ctx, hangUp := context.WithCancel(t.Context())
		defer hangUp()
		s := newFanSender(t, &hangsUp{Queue: q, after: hangUp}, fanDests, t0)
		got, err := s.Publish(ctx, event("e1", "reservation.confirmed"))
		if err != nil {
			t.Fatalf("Publish with the client gone after the first write: %v", err)
		}
		if diff := cmp.Diff(sender.PublishResult{Deliveries: deliveries("enrollment", "", "billing", "", "audit", "")}, got); diff != "" {
			t.Errorf("Publish (-want +got):\n%s", diff)
		}
		for _, d := range []string{"enrollment", "billing", "audit"} {
			if e, _, err := q.Get(t.Context(), d, "e1"); err != nil || !e.CreatedAt.Equal(t0) {
				t.Errorf("%s holds e1 created at %v (%v), want %v", d, e, err, t0)
			}
		}
	})
}

// hangsUp is a queue whose client hangs up (after) once the first
// envelope is written, and that refuses a call whose context is done, as
// a store's client does.
type hangsUp struct {
	sender.Queue
	after func()
}

func (h *hangsUp) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return sender.EnqueueResult{}, err
	}
	defer h.after()
	return h.Queue.Enqueue(ctx, e)
}
