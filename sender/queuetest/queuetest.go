// Package queuetest is the conformance suite every sender.Queue backend
// passes: idempotent enqueue, batched leases with expiry and fencing,
// settlement, pause, dead letters with redrive and purge, retention by the
// caller's clock, and one winner under concurrent leases.
package queuetest

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookgate/hookgate/sender"
)

// NewQueue returns a queue for one test, isolated from every other test's
// (its own key prefix or file), keeping delivered IDs and dead letters for
// retention, and cleans it up with t.Cleanup.
type NewQueue func(t *testing.T, retention time.Duration) sender.Queue

var (
	t0        = time.UnixMilli(1_800_000_000_000)
	lease     = 30 * time.Second
	retention = time.Hour
)

func env(dest, id string, at time.Time) *sender.Envelope {
	return &sender.Envelope{
		ID: id, Destination: dest, EventType: "reservation.confirmed", Entity: "r-1",
		EventTime: at.Add(-time.Second), CreatedAt: at, NextAt: at,
		Payload:     []byte(`{"id":"` + id + `","binary":"` + "\x00\xff" + `"}`),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func mustEnqueue(t *testing.T, q sender.Queue, e *sender.Envelope, want sender.EnqueueResult) {
	t.Helper()
	got, err := q.Enqueue(t.Context(), e)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", e.ID, err)
	}
	if got != want {
		t.Fatalf("Enqueue(%s) = %+v, want %+v", e.ID, got, want)
	}
}

func mustLease(t *testing.T, q sender.Queue, dest string, n int, now time.Time) []sender.Leased {
	t.Helper()
	got, err := q.Lease(t.Context(), dest, n, now, lease)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return got
}

func ids(ls []sender.Leased) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func mustSettle(t *testing.T, q sender.Queue, dest string, os []sender.Outcome, now time.Time, wantSkipped int) {
	t.Helper()
	n, err := q.Settle(t.Context(), dest, os, now)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if n != wantSkipped {
		t.Fatalf("Settle skipped %d, want %d", n, wantSkipped)
	}
}

var queued = sender.EnqueueResult{State: sender.StateQueued}

// deadLetters makes n dead letters l-000.. of dest, each with one failed
// attempt, dead at t0; it answers their IDs.
func deadLetters(t *testing.T, q sender.Queue, dest string, n int) []string {
	t.Helper()
	var all []string
	for i := range n {
		id := fmt.Sprintf("l-%03d", i)
		all = append(all, id)
		mustEnqueue(t, q, env(dest, id, t0), queued)
	}
	l := mustLease(t, q, dest, n, t0)
	var os []sender.Outcome
	for _, x := range l {
		e := *x.Envelope
		e.Attempts, e.DeadAt, e.LastStatus, e.Class = 1, t0, 400, sender.ClassHTTP4xx
		e.Log = []sender.Attempt{{At: t0, Status: 400, Error: "Bad Request"}}
		os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
	}
	mustSettle(t, q, dest, os, t0, 0)
	return all
}

// Run runs the suite.
func Run(t *testing.T, newQueue NewQueue) {
	runOperations(t, newQueue)
	runFanout(t, newQueue)
	runHistory(t, newQueue)
	runMove(t, newQueue)
	runHistoryQuiet(t, newQueue)

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
			m.Fingerprint != sender.Fingerprint(env("d", "m1", t0).Payload) {
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

	t.Run("DeadLettersPageRedriveAndPurge", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		const n = 25
		for i := range n {
			mustEnqueue(t, q, env("d", fmt.Sprintf("m%02d", i), t0), queued)
		}
		l := mustLease(t, q, "d", n, t0)
		var os []sender.Outcome
		for i, le := range l {
			e := *le.Envelope
			e.Attempts, e.DeadAt, e.Class = 1, t0.Add(time.Duration(i%3)*time.Millisecond), sender.ClassHTTP4xx
			e.Log = []sender.Attempt{{At: t0, Status: 400}}
			os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: le.LeaseUntil, Envelope: &e})
		}
		mustSettle(t, q, "d", os, t0, 0)

		var all []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, next, err := q.Dead(t.Context(), "d", cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				all = append(all, e.ID)
			}
			if next == "" {
				break
			}
			if pages > n {
				t.Fatal("paging does not end")
			}
			cursor = next
		}
		sorted := slices.Clone(all)
		slices.Sort(sorted)
		if len(all) != n || len(slices.Compact(sorted)) != n {
			t.Fatalf("paged through %d dead letters (%v), want each of %d once", len(all), all, n)
		}

		moved, err := q.Redrive(t.Context(), "d", []string{"m00", "m01", "absent", "m00"}, "rd_1", t0.Add(time.Minute))
		if err != nil || !slices.Equal(moved, []string{"m00", "m01"}) {
			t.Fatalf("Redrive = %v, %v; want m00 and m01", moved, err)
		}
		got := mustLease(t, q, "d", 10, t0.Add(time.Minute))
		if len(got) != 2 {
			t.Fatalf("leased %v after the redrive, want the 2 redriven", ids(got))
		}
		for _, e := range got {
			if e.RedriveID != "rd_1" || e.Attempts != 0 || len(e.Log) != 1 {
				t.Errorf("redriven %s: redrive %q attempts %d log %d; want rd_1, 0, the prior attempt kept", e.ID, e.RedriveID, e.Attempts, len(e.Log))
			}
			mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: e.ID, LeaseUntil: e.LeaseUntil}}, t0.Add(time.Minute), 0)
		}
		removed, err := q.Purge(t.Context(), "d", []string{"m02", "m03", "m00"})
		if err != nil || removed != 2 {
			t.Fatalf("Purge = %d, %v; want 2 (m00 is no longer dead)", removed, err)
		}
		st, _ := q.Stats(t.Context(), "d", t0.Add(time.Minute))
		if st.Dead != n-4 {
			t.Errorf("%d dead letters left, want %d", st.Dead, n-4)
		}
		// Dead letters are kept for the retention, then trimmed.
		mustEnqueue(t, q, env("d", "late", t0.Add(retention+time.Hour)), queued)
		late := mustLease(t, q, "d", 1, t0.Add(retention+time.Hour))
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "late", LeaseUntil: late[0].LeaseUntil}}, t0.Add(retention+time.Hour), 0)
		if st, _ := q.Stats(t.Context(), "d", t0.Add(retention+time.Hour)); st.Dead != 0 {
			t.Errorf("%d dead letters past the retention, want 0", st.Dead)
		}
	})

	t.Run("DeadLettersOfOneMillisecondPageByteWise", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		ids := []string{"B1", "a1", "Z9", "b0"} // byte order: B1 Z9 a1 b0
		for _, id := range ids {
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		l := mustLease(t, q, "d", 4, t0)
		var os []sender.Outcome
		for _, le := range l {
			e := *le.Envelope
			e.DeadAt = t0 // the same millisecond
			os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: le.LeaseUntil, Envelope: &e})
		}
		mustSettle(t, q, "d", os, t0, 0)
		var got []string
		cursor := ""
		for range 5 {
			page, next, err := q.Dead(t.Context(), "d", cursor, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				got = append(got, e.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if diff := cmp.Diff([]string{"B1", "Z9", "a1", "b0"}, got); diff != "" {
			t.Errorf("paged one at a time (-want +got):\n%s", diff)
		}
		if _, _, err := q.Dead(t.Context(), "d", "junk", 1); !errors.Is(err, sender.ErrBadFilter) {
			t.Errorf("a bad cursor: err = %v, want ErrBadFilter", err)
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
				CreatedAt: t0, NextAt: t0, TraceParent: e.TraceParent, Size: len(e.Payload), Fingerprint: sender.Fingerprint(env("d", "m2", t0).Payload), State: sender.StateQueued},
			{ID: "m1", Destination: "d", EventType: "reservation.confirmed", Entity: "r-1", ContentType: "application/cloudevents+json",
				EventTime: t0.Add(-time.Second), CreatedAt: t0, NextAt: t0, DeadAt: t0.Add(time.Second), Tried: 1, LastStatus: 400,
				LastError: "Bad Request: no", Class: sender.ClassHTTP4xx, TraceParent: e.TraceParent, Size: len(e.Payload),
				Fingerprint: sender.Fingerprint(e.Payload), State: sender.StateDead},
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

	t.Run("ConcurrentRedrivesMoveEachLetterOnce", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		const n = 300
		all := deadLetters(t, q, "d", n)
		// Two redrives of overlapping halves, at once, in batches.
		var wg sync.WaitGroup
		moved := make([][]string, 2)
		for r := range 2 {
			wg.Go(func() {
				mine := all[r*n/3 : r*n/3+2*n/3]
				for chunk := range slices.Chunk(mine, 50) {
					got, err := q.Redrive(t.Context(), "d", chunk, fmt.Sprint("rd_", r), t0.Add(time.Minute))
					if err != nil {
						t.Error(err)
						return
					}
					moved[r] = append(moved[r], got...)
				}
			})
		}
		wg.Wait()
		count := map[string]int{}
		for _, m := range moved {
			for _, id := range m {
				count[id]++
			}
		}
		for _, id := range all {
			if count[id] != 1 {
				t.Fatalf("%s moved %d times, want once", id, count[id])
			}
		}
		for r := range 2 {
			c, err := q.RedriveCounts(t.Context(), "d", fmt.Sprint("rd_", r))
			if err != nil || c.Moved != len(moved[r]) {
				t.Errorf("rd_%d counts %+v, %v; want %d moved", r, c, err, len(moved[r]))
			}
		}
		// Every letter is due once, with its attempt log whole.
		got := mustLease(t, q, "d", 2*n, t0.Add(time.Minute))
		if len(got) != n {
			t.Fatalf("leased %d after the redrives, want %d", len(got), n)
		}
		for _, l := range got {
			if len(l.Log) != 1 || l.Attempts != 0 || (l.RedriveID != "rd_0" && l.RedriveID != "rd_1") {
				t.Fatalf("%s: log %d attempts %d redrive %q; want the one prior attempt, 0, a redrive", l.ID, len(l.Log), l.Attempts, l.RedriveID)
			}
		}
	})

	t.Run("RedriveCountsFollowTheLetters", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		deadLetters(t, q, "d", 3) // l-000 .. l-002
		at := t0.Add(time.Minute)
		if moved, err := q.Redrive(t.Context(), "d", []string{"l-000", "l-001", "l-002"}, "rd_1", at); err != nil || len(moved) != 3 {
			t.Fatalf("Redrive = %v, %v", moved, err)
		}
		l := mustLease(t, q, "d", 3, at)
		byID := map[string]sender.Leased{}
		for _, x := range l {
			byID[x.ID] = x
		}
		again := *byID["l-001"].Envelope
		again.Attempts, again.DeadAt = 1, at
		again.Log = append(again.Log, sender.Attempt{At: at, Status: 400, RedriveID: "rd_1"})
		mustSettle(t, q, "d", []sender.Outcome{
			{Kind: sender.Delivered, ID: "l-000", LeaseUntil: byID["l-000"].LeaseUntil},
			{Kind: sender.Dead, ID: "l-001", LeaseUntil: byID["l-001"].LeaseUntil, Envelope: &again},
		}, at, 0)
		want := sender.RedriveCounts{Moved: 3, Delivered: 1, DeadAgain: 1}
		if c, err := q.RedriveCounts(t.Context(), "d", "rd_1"); err != nil || c != want {
			t.Errorf("rd_1 = %+v, %v; want %+v", c, err, want)
		}
		// A later redrive takes the letter that died again: superseded in
		// the first one's counts.
		if moved, err := q.Redrive(t.Context(), "d", []string{"l-001"}, "rd_2", at.Add(time.Minute)); err != nil || len(moved) != 1 {
			t.Fatalf("second Redrive = %v, %v", moved, err)
		}
		want = sender.RedriveCounts{Moved: 3, Delivered: 1, Superseded: 1}
		if c, _ := q.RedriveCounts(t.Context(), "d", "rd_1"); c != want {
			t.Errorf("rd_1 after rd_2 = %+v, want %+v", c, want)
		}
		if c, _ := q.RedriveCounts(t.Context(), "d", "rd_2"); c != (sender.RedriveCounts{Moved: 1}) {
			t.Errorf("rd_2 = %+v, want 1 moved", c)
		}
		if c, _ := q.RedriveCounts(t.Context(), "d", "rd_unknown"); c != (sender.RedriveCounts{}) {
			t.Errorf("an unknown redrive = %+v, want zeros", c)
		}
		// Counts are kept for the retention, then trimmed by a settlement.
		late := at.Add(retention + 2*time.Minute)
		mustEnqueue(t, q, env("d", "late", late), queued)
		l = mustLease(t, q, "d", 10, late)
		var os []sender.Outcome
		for _, x := range l {
			os = append(os, sender.Outcome{Kind: sender.Release, ID: x.ID, LeaseUntil: x.LeaseUntil})
		}
		mustSettle(t, q, "d", os, late, 0)
		for _, rd := range []string{"rd_1", "rd_2"} {
			if c, _ := q.RedriveCounts(t.Context(), "d", rd); c != (sender.RedriveCounts{}) {
				t.Errorf("%s past the retention = %+v, want trimmed", rd, c)
			}
		}
	})

	t.Run("OrphansAreListedMovedAndDropped", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		deadLetters(t, q, "old", 2) // l-000, l-001 dead
		mustEnqueue(t, q, env("old", "sent", t0), queued)
		sent := mustLease(t, q, "old", 1, t0)
		mustSettle(t, q, "old", []sender.Outcome{{Kind: sender.Delivered, ID: "sent", LeaseUntil: sent[0].LeaseUntil}}, t0, 0)
		mustEnqueue(t, q, env("old", "q1", t0), queued)
		mustEnqueue(t, q, env("old", "q2", t0), queued)
		mustEnqueue(t, q, env("old", "q3", t0), queued)
		mustLease(t, q, "old", 1, t0) // q1 leased by an instance that is gone
		mustEnqueue(t, q, env("new", "n1", t0), queued)
		clash := env("new", "q3", t0)
		clash.Payload = []byte("another payload under the same ID")
		mustEnqueue(t, q, clash, queued)
		same := env("new", "q2", t0) // the same envelope: a move cut short
		mustEnqueue(t, q, same, queued)

		names, err := q.Destinations(t.Context())
		if err != nil || !slices.Equal(names, []string{"new", "old"}) {
			t.Fatalf("Destinations = %v, %v", names, err)
		}
		moved, kept, err := q.Move(t.Context(), "old", "new", t0.Add(time.Minute))
		if err != nil || moved != 4 || kept != 1 {
			t.Fatalf("Move = %d moved, %d kept, %v; want 4 (q1, q2, two dead) and 1 (q3)", moved, kept, err)
		}
		st, _ := q.Stats(t.Context(), "old", t0.Add(time.Minute))
		if st.Queued+st.Leased != 1 || st.Dead != 0 {
			t.Errorf("old after the move = %+v, want q3 alone", st)
		}
		st, _ = q.Stats(t.Context(), "new", t0.Add(time.Minute))
		if st.Queued != 4 || st.Dead != 2 || st.Leased != 0 {
			t.Errorf("new after the move = %+v, want 4 queued (n1, q1, q2, q3) and 2 dead", st)
		}
		d, state, err := q.Get(t.Context(), "new", "l-000")
		if err != nil || state != sender.StateDead || len(d.Log) != 1 || d.Destination != "new" || d.DeadAt.IsZero() {
			t.Errorf("a moved dead letter = %+v %s %v", d, state, err)
		}
		if got, _, err := q.Get(t.Context(), "new", "q3"); err != nil || string(got.Payload) != string(clash.Payload) {
			t.Errorf("the clashing ID in new was overwritten: %v %v", got, err)
		}
		if moved, kept, err := q.Move(t.Context(), "old", "new", t0.Add(time.Minute)); err != nil || moved != 0 || kept != 1 {
			t.Errorf("a second Move = %d, %d, %v; want 0 moved, 1 kept", moved, kept, err)
		}
		// What was delivered under the old name is remembered under the
		// new one: the enqueue stays idempotent.
		mustEnqueue(t, q, env("new", "sent", t0.Add(time.Minute)), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
		other := env("new", "sent", t0.Add(time.Minute))
		other.Payload = []byte("another")
		mustEnqueue(t, q, other, sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: true})
		n, err := q.Drop(t.Context(), "old")
		if err != nil || n != 1 {
			t.Errorf("Drop = %d, %v; want 1 (q3)", n, err)
		}
		if names, _ := q.Destinations(t.Context()); !slices.Equal(names, []string{"new"}) {
			t.Errorf("Destinations after Drop = %v", names)
		}
		if st, _ := q.Stats(t.Context(), "old", t0); st != (sender.Stats{}) {
			t.Errorf("Stats of a dropped destination = %+v", st)
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

	t.Run("ScansReadNoPayload", func(t *testing.T) {
		// Not parallel: it counts the bytes this process allocates, so it
		// runs while the parallel subtests wait for the serial ones.
		q := newQueue(t, retention)
		const n, size = 32, 1 << 20
		big := make([]byte, size)
		for i := range n {
			e := env("d", fmt.Sprintf("big-%02d", i), t0)
			e.Payload = big
			mustEnqueue(t, q, e, queued)
		}
		l := mustLease(t, q, "d", n, t0)
		if len(l) != n {
			t.Fatalf("Lease = %d envelopes, want %d", len(l), n)
		}
		var os []sender.Outcome
		for _, x := range l {
			e := *x.Envelope
			e.Attempts, e.DeadAt, e.Class = 1, t0, sender.ClassHTTP4xx
			e.Log = []sender.Attempt{{At: t0, Status: 400}}
			os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
		}
		mustSettle(t, q, "d", os, t0, 0)
		dlq := sender.NewDLQ(q.(sender.AuditedQueue), []string{"d"}, 0, nil)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if page, _, err := dlq.List(t.Context(), sender.Filter{}, 1, ""); err != nil || len(page) != 1 {
			t.Fatalf("List = %v, %v", page, err)
		}
		if _, total, _, err := dlq.Summary(t.Context(), sender.Filter{}, 0); err != nil || total != n {
			t.Fatalf("Summary = %d, %v", total, err)
		}
		if r, err := dlq.Redrive(t.Context(), sender.Filter{}, n, "test", true); err != nil || r.Matched != n {
			t.Fatalf("dry-run Redrive = %+v, %v", r, err)
		}
		runtime.ReadMemStats(&after)
		// Reading one payload would allocate 1 MiB; these read 32 records.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/2 {
			t.Errorf("listing, summarising and counting %d dead letters of 1 MiB allocated %d bytes: payloads were read", n, alloc)
		}
	})
}
