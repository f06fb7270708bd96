package queuetest

// The envelopes not yet settled: in flight, due now, and retries
// scheduled later, in that order.

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// runPending runs them.
func runPending(t *testing.T, newQueue NewQueue) {
	t.Run("PendingListsLeasedThenDueThenRetries", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		for _, id := range []string{"m1", "m2", "m3", "m4", "m5", "m6"} {
			e := env("p", id, t0)
			if id == "m6" {
				e.EventType, e.Entity = "reservation.cancelled", "r-6"
			}
			mustEnqueue(t, q, e, queued)
		}
		l := mustLease(t, q, "p", 4, t0)
		if got := ids(l); !cmp.Equal(got, []string{"m1", "m2", "m3", "m4"}) {
			t.Fatalf("leased %v, want m1 to m4", got)
		}
		retry, delivered, dead := *l[1].Envelope, *l[2].Envelope, *l[3].Envelope
		retry.Attempts, retry.NextAt, retry.LastStatus, retry.Class = 1, t0.Add(10*time.Second), 503, sender.ClassHTTP5xx
		retry.Log = []sender.Attempt{{At: t0, Status: 503, Error: "503 Service Unavailable"}}
		delivered.Log = []sender.Attempt{{At: t0, Status: 200}}
		dead.Attempts, dead.DeadAt, dead.LastStatus, dead.Class = 1, t0, 400, sender.ClassHTTP4xx
		dead.Log = []sender.Attempt{{At: t0, Status: 400}}
		mustSettle(t, q, "p", []sender.Outcome{
			{Kind: sender.Retry, ID: retry.ID, LeaseUntil: l[1].LeaseUntil, Envelope: &retry},
			{Kind: sender.Delivered, ID: delivered.ID, LeaseUntil: l[2].LeaseUntil, Envelope: &delivered},
			{Kind: sender.Dead, ID: dead.ID, LeaseUntil: l[3].LeaseUntil, Envelope: &dead},
		}, t0, 0)

		type row struct {
			ID         string
			State      sender.State
			Tried      int
			LastStatus int
			EventType  string
		}
		rows := func(ms []*sender.Meta) []row {
			var out []row
			for _, m := range ms {
				out = append(out, row{m.ID, m.State, m.Tried, m.LastStatus, m.EventType})
			}
			return out
		}
		got, err := q.Pending(t.Context(), "p", sender.PendingFilter{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		want := []row{
			{"m1", sender.StateLeased, 0, 0, "reservation.confirmed"},
			{"m5", sender.StateQueued, 0, 0, "reservation.confirmed"},
			{"m6", sender.StateQueued, 0, 0, "reservation.cancelled"},
			{"m2", sender.StateQueued, 1, 503, "reservation.confirmed"},
		}
		if diff := cmp.Diff(want, rows(got)); diff != "" {
			t.Fatalf("Pending (-want +got):\n%s", diff)
		}
		if !got[0].NextAt.Equal(l[0].LeaseUntil.Truncate(time.Millisecond)) {
			t.Errorf("the leased one's NextAt = %v, want its lease end %v", got[0].NextAt, l[0].LeaseUntil)
		}
		if !got[3].NextAt.Equal(t0.Add(10 * time.Second)) {
			t.Errorf("the retry's NextAt = %v, want %v", got[3].NextAt, t0.Add(10*time.Second))
		}
		if got[1].Destination != "p" || !got[1].CreatedAt.Equal(t0) || got[1].Size == 0 {
			t.Errorf("a queued record = %+v, want its destination, created at and size", got[1])
		}

		got, err = q.Pending(t.Context(), "p", sender.PendingFilter{}, 2)
		if err != nil || len(got) != 2 || got[0].ID != "m1" || got[1].ID != "m5" {
			t.Fatalf("Pending limit 2 = %v, %v; want m1 and m5", rows(got), err)
		}
		got, err = q.Pending(t.Context(), "p", sender.PendingFilter{EventType: "reservation.cancelled"}, 2)
		if err != nil || len(got) != 1 || got[0].ID != "m6" {
			t.Fatalf("Pending of reservation.cancelled = %v, %v; want m6", rows(got), err)
		}
		got, err = q.Pending(t.Context(), "p", sender.PendingFilter{Entity: "r-1"}, 2)
		if err != nil || len(got) != 2 || got[0].ID != "m1" || got[1].ID != "m5" {
			t.Fatalf("Pending of entity r-1, limit 2 = %v, %v; want m1 and m5", rows(got), err)
		}
		got, err = q.Pending(t.Context(), "nowhere", sender.PendingFilter{}, 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("Pending of an unknown destination = %v, %v; want none", rows(got), err)
		}

		// Once each settles, none is listed.
		l = mustLease(t, q, "p", 10, t0.Add(10*time.Second))
		var os []sender.Outcome
		for _, x := range l {
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: x.ID, LeaseUntil: x.LeaseUntil, Envelope: x.Envelope})
		}
		mustSettle(t, q, "p", os, t0.Add(10*time.Second), 0)
		got, err = q.Pending(t.Context(), "p", sender.PendingFilter{}, 10)
		if err != nil || len(got) != 1 || got[0].ID != "m1" {
			t.Fatalf("Pending after the others settled = %v, %v; want m1 alone, still leased", rows(got), err)
		}
	})

	t.Run("PendingPastOneSlice", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		// More than a store reads in one slice, one in the last
		// matching the filter.
		const n = 600
		for i := range n {
			e := env("p", fmt.Sprintf("e%03d", i), t0)
			if i == n-1 {
				e.Entity = "the-last"
			}
			mustEnqueue(t, q, e, queued)
		}
		got, err := q.Pending(t.Context(), "p", sender.PendingFilter{Entity: "the-last"}, 10)
		if err != nil || len(got) != 1 || got[0].Entity != "the-last" {
			t.Fatalf("Pending of the last = %d entries, %v; want the last alone", len(got), err)
		}
		got, err = q.Pending(t.Context(), "p", sender.PendingFilter{}, n)
		if err != nil || len(got) != n {
			t.Fatalf("Pending of all = %d entries, %v; want %d", len(got), err, n)
		}
	})
}
