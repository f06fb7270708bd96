package sender_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// TestApply: destinations added while the sender runs deliver, one whose
// Rev changes delivers to its new URL, one removed stops (its envelopes
// stay in the store, an orphan's), and one refused changes nothing.
func TestApply(t *testing.T) {
	one := newReceiver(t, func(string, int) int { return 200 })
	two := newReceiver(t, func(id string, _ int) int {
		if id == "msg_dead" {
			return 400 // kept as a dead letter: the removed destination's orphan
		}
		return 200
	})
	q := newQueue(t)
	static := sender.Destination{Name: "static", URL: one.URL, Signer: signer(t)}
	s, err := sender.New(q, fast, []sender.Destination{static}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)

	added := sender.Destination{Name: "added", URL: one.URL, Signer: signer(t), Rev: "1", Events: []string{"seat.*"}}
	if err := s.Apply([]sender.Destination{static, added}); err != nil {
		t.Fatal(err)
	}
	if got := s.Destinations(); !slices.Equal(got, []string{"static", "added"}) {
		t.Fatalf("Destinations() = %v", got)
	}
	if got := s.Subscribers("seat.released", ""); !slices.Equal(got, []string{"added"}) {
		t.Fatalf("Subscribers(seat.released) = %v", got)
	}
	enqueue(t, s, "added", "msg_1")
	eventually(t, "the added destination delivers", func() bool { return one.total.Load() == 1 })

	moved := added
	moved.URL, moved.Rev = two.URL, "2"
	if err := s.Apply([]sender.Destination{static, moved}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, "added", "msg_2")
	eventually(t, "the updated destination delivers to its new URL", func() bool { return two.total.Load() == 1 })

	enqueue(t, s, "added", "msg_dead")
	eventually(t, "a dead letter", func() bool { return two.total.Load() == 2 })
	eventually(t, "it is settled", func() bool {
		st, err := s.Status(t.Context(), "added")
		return err == nil && st.Depth["dead"] == 1
	})

	if err := s.Apply([]sender.Destination{static, moved, {Name: "bad", URL: "ftp://x"}}); err == nil {
		t.Fatal("Apply took a destination with an ftp:// URL")
	}
	if got := s.Destinations(); !slices.Equal(got, []string{"static", "added"}) {
		t.Fatalf("after a refused Apply, Destinations() = %v", got)
	}

	if err := s.Apply([]sender.Destination{static}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(t.Context(), &sender.Envelope{ID: "msg_3", Destination: "added", Payload: []byte(`{}`)}); !errors.Is(err, sender.ErrUnknownDestination) {
		t.Fatalf("Enqueue to a removed destination: %v, want ErrUnknownDestination", err)
	}
	orphans, err := s.Orphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].Name != "added" {
		t.Fatalf("Orphans() = %+v, want the removed destination", orphans)
	}
	enqueue(t, s, "static", "msg_4")
	eventually(t, "the static destination still delivers", func() bool { return one.total.Load() == 2 })
}

// TestIdleDestinationsHoldNoGoroutine: a thousand destinations, idle,
// hold no goroutine once their loops park; one with work (enqueued
// through the sender, or straight into the store as another instance
// would) has its loop started, by the enqueue or by the scan.
func TestIdleDestinationsHoldNoGoroutine(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	var dests []sender.Destination
	for i := range 1000 {
		dests = append(dests, sender.Destination{Name: fmt.Sprintf("d%04d", i), URL: rcv.URL, Signer: signer(t)})
	}
	base := runtime.NumGoroutine()
	s, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	enqueue(t, s, "d0007", "msg_1")
	eventually(t, "delivered", func() bool { return rcv.total.Load() == 1 })
	// The sender's own few (the scan, the breakers' merge, the trim),
	// none per destination, once the loop of d0007 parks.
	eventually(t, "the loops park", func() bool { return runtime.NumGoroutine() < base+20 })

	// Enqueued by another instance: the scan finds it.
	if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: "msg_2", Destination: "d0999", Payload: []byte(`{"id":"msg_2"}`),
		CreatedAt: time.Now(), NextAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the scan starts the destination's loop", func() bool { return rcv.total.Load() == 2 })
}

// TestPausedLoopParksAndResumesElsewhere: a paused destination's loop
// parks; a resume made by another instance (another sender on the same
// store) is found by the scan, and the envelope kept meanwhile delivered.
func TestPausedLoopParksAndResumesElsewhere(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := newQueue(t)
	dests := []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t)}}
	s, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	if err := s.SetPaused(t.Context(), "d", true, "operator"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, "d", "msg_1")
	other, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetPaused(t.Context(), "d", false, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivered after the resume made elsewhere", func() bool { return rcv.total.Load() == 1 })
}

// heldEnqueue is a queue whose Enqueue, once written, waits for hold
// (having said so on entered), and whose Due finds nothing: the scan
// cannot rescue an envelope a wake-up missed.
type heldEnqueue struct {
	sender.Queue
	entered, hold chan struct{}
}

func (q heldEnqueue) Due(context.Context, []string, time.Time) ([]string, error) { return nil, nil }

func (q heldEnqueue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	r, err := q.Queue.Enqueue(ctx, e)
	close(q.entered)
	<-q.hold
	return r, err
}

// TestWakeUpFollowsTheReplacement: an enqueue whose destination Apply
// replaces while it is being written wakes the version that took its
// place, so the envelope is delivered without the scan.
func TestWakeUpFollowsTheReplacement(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return 200 })
	q := heldEnqueue{newQueue(t), make(chan struct{}), make(chan struct{})}
	d := sender.Destination{Name: "x", URL: rcv.URL, Signer: signer(t), Rev: "1"}
	s, err := sender.New(q, fast, []sender.Destination{d}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	done := make(chan struct{})
	go func() { enqueue(t, s, "x", "m1"); close(done) }()
	<-q.entered
	d.Rev = "2"
	if err := s.Apply([]sender.Destination{d}); err != nil {
		t.Fatal(err)
	}
	close(q.hold)
	<-done
	eventually(t, "delivered by the replacement", func() bool { return rcv.total.Load() == 1 })
}
