// Package queuetest is the conformance suite every sender.Queue backend
// passes: idempotent enqueue, batched leases with expiry and fencing,
// settlement, pause, dead letters with redrive and purge, retention by the
// caller's clock, and one winner under concurrent leases.
package queuetest

import (
	"errors"
	"fmt"
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

// Run runs the suite.
func Run(t *testing.T, newQueue NewQueue) {
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
		if _, _, err := q.Get(t.Context(), "d", "m1"); !errors.Is(err, sender.ErrNotFound) {
			t.Errorf("a delivered envelope is still stored: %v", err)
		}
		again := env("d", "m1", t0.Add(time.Minute))
		mustEnqueue(t, q, again, sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
		again.Payload = []byte("other")
		mustEnqueue(t, q, again, sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: true})
		// After the retention the ID is forgotten: a new envelope.
		mustEnqueue(t, q, env("d", "m1", t0.Add(retention+time.Second)), queued)
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

	t.Run("DestinationsAreIsolated", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("a", "m1", t0), queued)
		mustEnqueue(t, q, env("a{b}", "m1", t0), queued)
		q.SetPaused(t.Context(), "a", true, "operator")
		if got := mustLease(t, q, "a{b}", 10, t0); len(got) != 1 {
			t.Fatalf("another destination's pause held back %v", got)
		}
	})
}
