package queuetest

// Enqueue, lease, settle and pause: the hot path every envelope takes,
// with its fencing, its idempotence and its retention.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookgate/hookgate/sender"
)

// runLease runs them.
func runLease(t *testing.T, newQueue NewQueue) {
	t.Run("EnqueueIsIdempotent", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		e := env("d", "m1", t0)
		mustEnqueue(t, q, e, queued)
		mustEnqueue(t, q, e, sender.EnqueueResult{State: sender.StateQueued, Duplicate: true})
		other := env("d", "m1", t0)
		other.Payload = []byte(`{"other":true}`)
		mustEnqueue(t, q, other, sender.EnqueueResult{State: sender.StateQueued, Duplicate: true, Mismatch: true})
		// IDs are per destination.
		mustEnqueue(t, q, env("e", "m1", t0), queued)

		got, state, err := q.Get(t.Context(), "d", "m1")
		if err != nil || state != sender.StateQueued {
			t.Fatalf("Get = %v, %v", state, err)
		}
		if diff := cmp.Diff(e, got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("stored envelope (-want +got):\n%s", diff)
		}
		if _, _, err := q.Get(t.Context(), "d", "absent"); !errors.Is(err, sender.ErrNotFound) {
			t.Errorf("Get(absent) err = %v, want ErrNotFound", err)
		}
	})

	t.Run("DueAnswersWhatLeaseWouldLease", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("now", "m1", t0), queued)
		later := env("later", "m1", t0)
		later.NextAt = t0.Add(time.Hour)
		mustEnqueue(t, q, later, queued)
		mustEnqueue(t, q, env("paused", "m1", t0), queued)
		if err := q.SetPaused(t.Context(), "paused", true, "operator"); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, q, env("leased", "m1", t0), queued)
		mustLease(t, q, "leased", 1, t0)
		all := []string{"now", "later", "paused", "leased", "never"}
		due := func(at time.Time) []string {
			t.Helper()
			got, err := q.Due(t.Context(), all, at)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if diff := cmp.Diff([]string{"now"}, due(t0)); diff != "" {
			t.Errorf("due at t0 (-want +got):\n%s", diff)
		}
		// An hour on: the retry is due, and the lease expired.
		if diff := cmp.Diff([]string{"now", "later", "leased"}, due(t0.Add(time.Hour+lease))); diff != "" {
			t.Errorf("due an hour on (-want +got):\n%s", diff)
		}
		if got, err := q.Due(t.Context(), nil, t0); err != nil || len(got) != 0 {
			t.Errorf("Due(none) = %v, %v", got, err)
		}
	})

	t.Run("LeaseBatchOldestFirst", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		for i := 4; i >= 0; i-- { // enqueued in time order, as they are
			mustEnqueue(t, q, env("d", fmt.Sprint("m", i), t0.Add(time.Duration(4-i)*time.Second)), queued)
		}
		later := env("d", "later", t0)
		later.NextAt = t0.Add(time.Hour) // a delayed delivery
		mustEnqueue(t, q, later, queued)
		got := mustLease(t, q, "d", 3, t0.Add(5*time.Second))
		if diff := cmp.Diff([]string{"m4", "m3", "m2"}, ids(got)); diff != "" {
			t.Errorf("first batch (-want +got):\n%s", diff)
		}
		got = mustLease(t, q, "d", 10, t0.Add(5*time.Second))
		if diff := cmp.Diff([]string{"m1", "m0"}, ids(got)); diff != "" {
			t.Errorf("second batch (-want +got):\n%s", diff)
		}
		if got := mustLease(t, q, "d", 10, t0.Add(5*time.Second)); len(got) != 0 {
			t.Errorf("nothing due, leased %v", ids(got))
		}
		_, state, _ := q.Get(t.Context(), "d", "m0")
		if state != sender.StateLeased {
			t.Errorf("state of a leased envelope = %s", state)
		}
		mustEnqueue(t, q, env("d", "m0", t0), sender.EnqueueResult{State: sender.StateLeased, Duplicate: true})
		if !got[0].LeaseUntil.IsZero() && got[0].LeaseUntil.Before(t0) {
			t.Errorf("bad lease %v", got[0].LeaseUntil)
		}
	})

	t.Run("SettleDeliveredRemembersTheID", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("d", "m1", t0), queued)
		l := mustLease(t, q, "d", 1, t0)
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: l[0].LeaseUntil}}, t0, 0)
		if _, st, err := q.Get(t.Context(), "d", "m1"); err != nil || st != sender.StateDelivered {
			t.Errorf("Get of a delivered envelope = %s, %v; want it delivered, from the history", st, err)
		}
		if got := mustLease(t, q, "d", 10, t0); len(got) != 0 {
			t.Errorf("a delivered envelope is leased again: %v", ids(got))
		}
		again := env("d", "m1", t0.Add(time.Minute))
		mustEnqueue(t, q, again, sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
		again.Payload = []byte("other")
		mustEnqueue(t, q, again, sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: true})
		// A delivered ID reads as delivered, with its fingerprint and
		// when it was delivered: what a fan-out compares and dates.
		ms, err := q.Metas(t.Context(), "d", []string{"m1"})
		if err != nil || len(ms) != 1 {
			t.Fatalf("Metas = %v, %v", ms, err)
		}
		if m := ms[0]; m.ID != "m1" || m.State != sender.StateDelivered || !m.SettledAt.Equal(t0) ||
			m.Fingerprint != sender.PayloadFingerprint(env("d", "m1", t0).Payload) {
			t.Errorf("Metas of a delivered ID = %+v", m)
		}
		// After the retention the ID is forgotten: a new envelope.
		mustEnqueue(t, q, env("d", "m1", t0.Add(retention+time.Second)), queued)
	})

	t.Run("FirstSeenKeepsTheFirstTime", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		got, err := q.FirstSeen(t.Context(), []string{"a", "b"}, t0)
		if err != nil || !got["a"].Equal(t0) || !got["b"].Equal(t0) || len(got) != 2 {
			t.Fatalf("FirstSeen = %v, %v", got, err)
		}
		later := t0.Add(time.Hour)
		got, err = q.FirstSeen(t.Context(), []string{"b", "c"}, later)
		if err != nil || !got["b"].Equal(t0) || !got["c"].Equal(later) || len(got) != 2 {
			t.Fatalf("FirstSeen again = %v, %v; want b at the first time, c now", got, err)
		}
		// A destination dropped is new when it comes back.
		if _, err := q.Drop(t.Context(), "b"); err != nil {
			t.Fatal(err)
		}
		if got, err = q.FirstSeen(t.Context(), []string{"b"}, later); err != nil || !got["b"].Equal(later) {
			t.Errorf("FirstSeen after Drop = %v, %v; want now", got, err)
		}
	})

	t.Run("RetryAndDead", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("d", "m1", t0), queued)
		mustEnqueue(t, q, env("d", "m2", t0), queued)
		l := mustLease(t, q, "d", 2, t0)
		retry, dead := *l[0].Envelope, *l[1].Envelope
		retry.Attempts, retry.NextAt, retry.LastStatus, retry.Class = 1, t0.Add(10*time.Second), 503, sender.ClassHTTP5xx
		retry.Log = []sender.Attempt{{At: t0, Status: 503, Error: "503 Service Unavailable", Latency: 12 * time.Millisecond}}
		dead.Attempts, dead.DeadAt, dead.LastStatus, dead.Class = 1, t0.Add(time.Second), 400, sender.ClassHTTP4xx
		mustSettle(t, q, "d", []sender.Outcome{
			{Kind: sender.Retry, ID: retry.ID, LeaseUntil: l[0].LeaseUntil, Envelope: &retry},
			{Kind: sender.Dead, ID: dead.ID, LeaseUntil: l[1].LeaseUntil, Envelope: &dead},
		}, t0, 0)
		if got := mustLease(t, q, "d", 10, t0.Add(9*time.Second)); len(got) != 0 {
			t.Fatalf("leased %v before the retry is due", ids(got))
		}
		got := mustLease(t, q, "d", 10, t0.Add(10*time.Second))
		if len(got) != 1 || got[0].ID != retry.ID {
			t.Fatalf("leased %v, want the retry", ids(got))
		}
		if diff := cmp.Diff(retry.Log, got[0].Log, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" || got[0].Attempts != 1 {
			t.Errorf("the retry lost its log or attempts (-want +got):\n%s", diff)
		}
		d, state, err := q.Get(t.Context(), "d", dead.ID)
		if err != nil || state != sender.StateDead || d.LastStatus != 400 || d.Class != sender.ClassHTTP4xx {
			t.Errorf("dead letter = %+v %s %v", d, state, err)
		}
		mustEnqueue(t, q, env("d", "m2", t0), sender.EnqueueResult{State: sender.StateDead, Duplicate: true})
		st, err := q.Stats(t.Context(), "d", t0.Add(10*time.Second))
		if err != nil || st.Dead != 1 || st.Leased != 1 || st.Queued != 0 || !st.OldestDead.Equal(t0.Add(time.Second)) {
			t.Errorf("Stats = %+v, %v", st, err)
		}
	})

	t.Run("ExpiredLeaseIsLeasedAgainAndFenced", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("d", "m1", t0), queued)
		first := mustLease(t, q, "d", 1, t0)
		if got := mustLease(t, q, "d", 1, t0.Add(lease-time.Second)); len(got) != 0 {
			t.Fatalf("leased again within the lease: %v", ids(got))
		}
		second := mustLease(t, q, "d", 1, t0.Add(lease))
		if len(second) != 1 {
			t.Fatalf("an expired lease was not leased again")
		}
		// The crashed worker's late settlement is skipped.
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: first[0].LeaseUntil}}, t0.Add(lease), 1)
		if _, state, _ := q.Get(t.Context(), "d", "m1"); state != sender.StateLeased {
			t.Fatalf("state after a fenced settlement = %s, want leased", state)
		}
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: second[0].LeaseUntil}}, t0.Add(lease), 0)
	})

	t.Run("ReleaseMakesItDueNow", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("d", "m1", t0), queued)
		l := mustLease(t, q, "d", 1, t0)
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Release, ID: "m1", LeaseUntil: l[0].LeaseUntil}}, t0.Add(time.Second), 0)
		if got := mustLease(t, q, "d", 1, t0.Add(time.Second)); len(got) != 1 || got[0].Attempts != 0 {
			t.Fatalf("a released envelope: %v", got)
		}
	})

	t.Run("PausedLeasesNothing", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		if err := q.SetPaused(t.Context(), "d", true, "operator"); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, q, env("d", "m1", t0), sender.EnqueueResult{State: sender.StatePaused})
		if got := mustLease(t, q, "d", 10, t0); len(got) != 0 {
			t.Fatalf("a paused destination leased %v", ids(got))
		}
		st, _ := q.Stats(t.Context(), "d", t0.Add(time.Minute))
		if !st.Paused || st.PausedBy != "operator" || st.Queued != 1 || st.OldestReady != time.Minute {
			t.Errorf("Stats while paused = %+v", st)
		}
		if paused, by, err := q.Paused(t.Context(), "d"); err != nil || !paused || by != "operator" {
			t.Errorf("Paused = %v, %q, %v; want true, operator", paused, by, err)
		}
		if err := q.SetPaused(t.Context(), "d", false, ""); err != nil {
			t.Fatal(err)
		}
		if paused, by, err := q.Paused(t.Context(), "d"); err != nil || paused || by != "" {
			t.Errorf("Paused after resume = %v, %q, %v", paused, by, err)
		}
		if paused, _, err := q.Paused(t.Context(), "never-seen"); err != nil || paused {
			t.Errorf("Paused(unknown destination) = %v, %v", paused, err)
		}
		if got := mustLease(t, q, "d", 10, t0); len(got) != 1 {
			t.Fatalf("after resume leased %v, want the kept envelope", ids(got))
		}
	})

	t.Run("ConcurrentLeasesHaveOneWinnerEach", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		const n = 200
		for i := range n {
			mustEnqueue(t, q, env("d", fmt.Sprint("m", i), t0), queued)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for {
					got, err := q.Lease(t.Context(), "d", 7, t0, lease)
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, l := range got {
						seen[l.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("%d envelopes leased, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("%s leased %d times", id, c)
			}
		}
	})

	t.Run("ASubscriberResumesOnlyItsOwnPause", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		sub := sender.SubscriberPause("d")
		if err := q.SetPaused(t.Context(), "d", true, "admin api from 10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if err := q.SetPaused(t.Context(), "d", false, sub); !errors.Is(err, sender.ErrPausedByOther) {
			t.Fatalf("the subscriber resumed the operator's pause: %v", err)
		}
		if paused, by, _ := q.Paused(t.Context(), "d"); !paused || by != "admin api from 10.0.0.1" {
			t.Fatalf("after a refused resume: %v %q; want the operator's pause kept", paused, by)
		}
		if err := q.SetPaused(t.Context(), "d", false, ""); err != nil {
			t.Fatal(err)
		}
		if err := q.SetPaused(t.Context(), "d", true, sub); err != nil {
			t.Fatal(err)
		}
		if err := q.SetPaused(t.Context(), "d", false, sub); err != nil {
			t.Fatalf("the subscriber's resume of its own pause: %v", err)
		}
		if paused, _, _ := q.Paused(t.Context(), "d"); paused {
			t.Fatal("still paused after the subscriber resumed its own pause")
		}
		if err := q.SetPaused(t.Context(), "d", false, sub); err != nil {
			t.Errorf("a resume of a destination that is not paused: %v", err)
		}
	})

	t.Run("DestinationsAreIsolated", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("a", "m1", t0), queued)
		mustEnqueue(t, q, env("a{b}", "m1", t0), queued)
		if err := q.SetPaused(t.Context(), "a", true, "operator"); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, q, "a{b}", 10, t0); len(got) != 1 {
			t.Fatalf("another destination's pause held back %v", got)
		}
	})

	t.Run("RecordsCarryWhatAScanNeeds", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		e := env("d", "m1", t0)
		e.ContentType = "application/cloudevents+json"
		mustEnqueue(t, q, e, queued)
		mustEnqueue(t, q, env("d", "m2", t0), queued)
		l := mustLease(t, q, "d", 1, t0)
		dead := *l[0].Envelope
		dead.Attempts, dead.DeadAt, dead.LastStatus, dead.LastError, dead.Class = 1, t0.Add(time.Second), 400, "Bad Request: no", sender.ClassHTTP4xx
		dead.Log = []sender.Attempt{{At: t0, Status: 400, Error: "Bad Request: no", Latency: time.Millisecond}}
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Dead, ID: "m1", LeaseUntil: l[0].LeaseUntil, Envelope: &dead}}, t0, 0)

		got, err := q.Metas(t.Context(), "d", []string{"m2", "absent", "m1"})
		if err != nil {
			t.Fatal(err)
		}
		want := []*sender.Meta{
			{ID: "m2", Destination: "d", EventType: "reservation.confirmed", Entity: "r-1", EventTime: t0.Add(-time.Second),
				CreatedAt: t0, NextAt: t0, TraceParent: e.TraceParent, Size: len(e.Payload), Fingerprint: sender.PayloadFingerprint(env("d", "m2", t0).Payload), State: sender.StateQueued},
			{ID: "m1", Destination: "d", EventType: "reservation.confirmed", Entity: "r-1", ContentType: "application/cloudevents+json",
				EventTime: t0.Add(-time.Second), CreatedAt: t0, NextAt: t0, DeadAt: t0.Add(time.Second), Tried: 1, LastStatus: 400,
				LastError: "Bad Request: no", Class: sender.ClassHTTP4xx, TraceParent: e.TraceParent, Size: len(e.Payload),
				Fingerprint: sender.PayloadFingerprint(e.Payload), State: sender.StateDead},
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("Metas (-want +got):\n%s", diff)
		}
		page, _, err := q.Dead(t.Context(), "d", "", 10)
		if err != nil || len(page) != 1 {
			t.Fatalf("Dead = %v, %v", page, err)
		}
		if diff := cmp.Diff(want[1], page[0], cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("Dead's record (-want +got):\n%s", diff)
		}
		full, _, err := q.Get(t.Context(), "d", "m1")
		if err != nil || full.ContentType != "application/cloudevents+json" || string(full.Payload) != string(e.Payload) {
			t.Errorf("Get = %+v, %v", full, err)
		}
	})

	t.Run("RetentionKeepsANewerDelivery", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		deliver := func(at time.Time) {
			t.Helper()
			mustEnqueue(t, q, env("d", "m1", at), queued)
			l := mustLease(t, q, "d", 1, at)
			mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: l[0].LeaseUntil}}, at, 0)
		}
		deliver(t0)
		// Past the retention the ID is new again, and delivered again;
		// trimming the first delivery must not forget the second.
		second := t0.Add(retention + time.Second)
		deliver(second)
		mustEnqueue(t, q, env("d", "m1", second.Add(time.Second)), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
	})
}
