package queuetest

// The operations an operator runs on an ordinary day (a rename and its
// move, a purge, a redrive followed to its end), each against what the
// Queue contract promises; part of Run. They came from a hostile review
// of issue 17's queues, each a failing test first.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// runOperations runs them.
func runOperations(t *testing.T, newQueue NewQueue) {
	// Move: an ID that to delivered within the retention is held by to:
	// it is not written again (the receiver would get it a second time),
	// and the enqueue still answers it as a duplicate.
	t.Run("MoveDoesNotResendAnIDDeliveredInTo", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("new", "m1", t0), queued)
		l := mustLease(t, q, "new", 1, t0)
		mustSettle(t, q, "new", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: l[0].LeaseUntil}}, t0, 0)
		// The same event, enqueued under the old name before the rename.
		mustEnqueue(t, q, env("old", "m1", t0), queued)
		moved, kept, err := q.Move(t.Context(), "old", "new", t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Move = %d moved, %d kept", moved, kept)
		if got := mustLease(t, q, "new", 10, t0.Add(time.Minute)); len(got) != 0 {
			t.Errorf("after Move, new leases %v again: an ID it had delivered is delivered a second time", ids(got))
		}
		mustEnqueue(t, q, env("new", "m1", t0.Add(time.Minute)), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
	})

	// Move keeps redrive IDs; the letters' outcomes are then counted in
	// to, and a redrive's counts summed over every destination show them.
	t.Run("RedriveCountsFollowAMovedLetter", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		deadLetters(t, q, "old", 1) // l-000
		at := t0.Add(time.Minute)
		if moved, err := q.Redrive(t.Context(), "old", []string{"l-000"}, "rd_1", at); err != nil || len(moved) != 1 {
			t.Fatalf("Redrive = %v, %v", moved, err)
		}
		if moved, _, err := q.Move(t.Context(), "old", "new", at); err != nil || moved != 1 {
			t.Fatalf("Move = %d, %v", moved, err)
		}
		l := mustLease(t, q, "new", 1, at)
		if len(l) != 1 || l[0].RedriveID != "rd_1" {
			t.Fatalf("leased %v", l)
		}
		mustSettle(t, q, "new", []sender.Outcome{{Kind: sender.Delivered, ID: "l-000", LeaseUntil: l[0].LeaseUntil}}, at, 0)
		var sum sender.RedriveCounts
		names, _ := q.Destinations(t.Context())
		for _, d := range names {
			c, err := q.RedriveCounts(t.Context(), d, "rd_1")
			if err != nil {
				t.Fatal(err)
			}
			sum.Moved += c.Moved
			sum.Delivered += c.Delivered
			sum.DeadAgain += c.DeadAgain
			sum.Superseded += c.Superseded
		}
		if sum.Delivered != 1 {
			t.Errorf("rd_1 summed over %v = %+v; want its one letter delivered", names, sum)
		}
	})

	// The rename runbook: move the orphan, then purge it. A redrive made
	// under the old name keeps its progress: the counts moved with the
	// letters.
	t.Run("ProgressSurvivesPurgeOfAMovedOrphan", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention).(sender.AuditedQueue)
		deadLetters(t, q, "old", 2) // l-000, l-001
		at := t0.Add(time.Minute)
		now := func() time.Time { return at }
		before := sender.NewSettled(q, names("old"), 0, now)
		r, err := before.Redrive(t.Context(), sender.Filter{IDs: []string{"l-000"}}, 1, "op", false)
		if err != nil || r.Moved != 1 {
			t.Fatalf("Redrive = %+v, %v", r, err)
		}
		l := mustLease(t, q, "old", 1, at)
		mustSettle(t, q, "old", []sender.Outcome{{Kind: sender.Delivered, ID: "l-000", LeaseUntil: l[0].LeaseUntil}}, at, 0)
		if p, err := before.Progress(t.Context(), r.ID, sender.Scope{}); err != nil || p.Delivered != 1 || p.Pending != 0 {
			t.Fatalf("Progress before the rename = %+v, %v", p, err)
		}
		// Renamed old -> new: move, then purge the orphan.
		if _, _, err := q.Move(t.Context(), "old", "new", at); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Drop(t.Context(), "old"); err != nil {
			t.Fatal(err)
		}
		after := sender.NewSettled(q, names("new"), 0, now)
		p, err := after.Progress(t.Context(), r.ID, sender.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Delivered != 1 || p.Pending != 0 {
			t.Errorf("Progress after move+purge = delivered %d, pending %d; want 1 delivered, 0 pending", p.Delivered, p.Pending)
		}
	})

	// A letter that died again and was then purged is never reported
	// delivered by Progress's letter list: its counts say dead again.
	t.Run("ProgressDoesNotCallAPurgedLetterDelivered", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention).(sender.AuditedQueue)
		deadLetters(t, q, "d", 1)
		at := t0.Add(time.Minute)
		dlq := sender.NewSettled(q, names("d"), 0, func() time.Time { return at })
		r, err := dlq.Redrive(t.Context(), sender.Filter{}, 1, "op", false)
		if err != nil || r.Moved != 1 {
			t.Fatalf("Redrive = %+v, %v", r, err)
		}
		l := mustLease(t, q, "d", 1, at)
		again := *l[0].Envelope
		again.DeadAt = at
		again.Log = append(again.Log, sender.Attempt{At: at, Status: 400, RedriveID: r.ID})
		mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Dead, ID: again.ID, LeaseUntil: l[0].LeaseUntil, Envelope: &again}}, at, 0)
		if r, err := dlq.Purge(t.Context(), sender.Filter{}, sender.PurgeOptions{Limit: 1, All: true}); err != nil || r.Removed != 1 {
			t.Fatalf("Purge = %+v, %v", r, err)
		}
		p, err := dlq.Progress(t.Context(), r.ID, sender.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		if p.DeadAgain != 1 || p.Letters[0].Outcome == "delivered" {
			t.Errorf("Progress = dead_again %d, letter outcome %q; a purged letter that was never delivered is reported delivered", p.DeadAgain, p.Letters[0].Outcome)
		}
	})

	// Settled.List pages across configured destinations and orphans, with
	// names and IDs holding the cursor's separators: each letter once.
	t.Run("DLQListPagesAcrossDestinationsOnce", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention).(sender.AuditedQueue)
		dests := []string{"b|1", "a b", "100%:x"}
		want := map[string]bool{}
		for i, d := range dests {
			var os []sender.Outcome
			for j := range 3 + i {
				id := fmt.Sprintf("id|%d:%d%%2F", i, j)
				mustEnqueue(t, q, env(d, id, t0), queued)
			}
			for _, x := range mustLease(t, q, d, 10, t0) {
				e := *x.Envelope
				e.DeadAt = t0.Add(time.Duration(len(x.ID)%2) * time.Millisecond)
				os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
				want[d+" "+e.ID] = true
			}
			mustSettle(t, q, d, os, t0, 0)
		}
		// "100%:x" is an orphan.
		dlq := sender.NewSettled(q, names(dests[:2]...), 0, func() time.Time { return t0 })
		for limit := 1; limit <= 4; limit++ {
			got := map[string]int{}
			cursor := ""
			for pages := 0; ; pages++ {
				page, next, err := dlq.List(t.Context(), sender.Filter{}, limit, cursor)
				if err != nil {
					t.Fatalf("limit %d, cursor %q: %v", limit, cursor, err)
				}
				for _, m := range page {
					got[m.Destination+" "+m.ID]++
				}
				if next == "" || pages > 50 {
					break
				}
				cursor = next
			}
			for k := range want {
				if got[k] != 1 {
					t.Errorf("limit %d: %q listed %d times", limit, k, got[k])
				}
			}
			if len(got) != len(want) {
				t.Errorf("limit %d: listed %d letters, want %d", limit, len(got), len(want))
			}
		}
	})

	// Redrive rewrites the record in place (Redis: at fixed offsets):
	// only the redrive ID and the next time may change, whatever the
	// lengths of the old and new redrive IDs.
	t.Run("RedriveRewritesOnlyTheRedriveIDAndNextTime", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		e := env("d", "m1", t0)
		e.ContentType, e.TraceState, e.Entity = "application/cloudevents+json", "k=v", "entity-with-a-longer-name"
		mustEnqueue(t, q, e, queued)
		for i, rid := range []string{"r", "rd_0123456789abcdef0123", "x", "rd_0123456789abcdef"} {
			l := mustLease(t, q, "d", 1, t0)
			dead := *l[0].Envelope
			dead.DeadAt, dead.LastStatus, dead.LastError, dead.Class = t0.Add(time.Duration(i)*time.Second), 400+i, fmt.Sprint("err ", i), sender.ClassHTTP4xx
			dead.Log = append(dead.Log, sender.Attempt{At: t0, Status: 400 + i, RedriveID: dead.RedriveID})
			mustSettle(t, q, "d", []sender.Outcome{{Kind: sender.Dead, ID: "m1", LeaseUntil: l[0].LeaseUntil, Envelope: &dead}}, t0, 0)
			before, _ := q.Metas(t.Context(), "d", []string{"m1"})
			if moved, err := q.Redrive(t.Context(), "d", []string{"m1"}, rid, t0); err != nil || len(moved) != 1 {
				t.Fatalf("Redrive(%q) = %v, %v", rid, moved, err)
			}
			after, err := q.Metas(t.Context(), "d", []string{"m1"})
			if err != nil || len(after) != 1 || len(before) != 1 {
				t.Fatalf("Metas = %v, %v", after, err)
			}
			b, a := *before[0], *after[0]
			if a.RedriveID != rid || !a.NextAt.Equal(t0) {
				t.Errorf("after Redrive(%q): redrive %q next %v", rid, a.RedriveID, a.NextAt)
			}
			b.RedriveID, b.NextAt, b.State, b.DeadAt = a.RedriveID, a.NextAt, a.State, a.DeadAt
			if b != a {
				t.Errorf("Redrive(%q) changed the record:\n before %+v\n after  %+v", rid, b, a)
			}
		}
	})

	// Move leaves a live lease alone: to does not deliver it while the
	// attempt is in flight, and the holder's settlement counts.
	t.Run("MoveLeavesALiveLeaseAlone", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		mustEnqueue(t, q, env("old", "m1", t0), queued)
		held := mustLease(t, q, "old", 1, t0) // in flight on an instance that still has "old"
		if _, _, err := q.Move(t.Context(), "old", "new", t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, q, "new", 1, t0.Add(time.Second)); len(got) != 0 {
			t.Errorf("new leased %v while old's lease on it is live: a second delivery in flight", ids(got))
		}
		if n, _ := q.Settle(t.Context(), "old", []sender.Outcome{{Kind: sender.Delivered, ID: "m1", LeaseUntil: held[0].LeaseUntil}}, t0.Add(2*time.Second)); n != 0 {
			t.Errorf("the holder's settlement after the Move was skipped")
		}
	})

	// Move: queued ones are due at the move's now, a retry scheduled for
	// later included.
	t.Run("MovedQueuedEnvelopesAreDueNow", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		e := env("old", "m1", t0)
		e.NextAt = t0.Add(time.Hour)
		mustEnqueue(t, q, e, queued)
		at := t0.Add(time.Minute)
		if moved, _, err := q.Move(t.Context(), "old", "new", at); err != nil || moved != 1 {
			t.Fatalf("Move = %d, %v", moved, err)
		}
		if got := mustLease(t, q, "new", 1, at); len(got) != 1 {
			t.Errorf("a moved queued envelope is not due at the move's now")
		}
	})

	// Stats (counters on bolt) must agree with what the store holds,
	// after any sequence of operations.
	t.Run("StatsAgreeWithTheEnvelopesAfterRandomOperations", func(t *testing.T) {
		t.Parallel()
		seeds := 3
		if n, err := strconv.Atoi(os.Getenv("REVIEW_SEEDS")); err == nil {
			seeds = n
		}
		for seed := range seeds {
			randomOperations(t, newQueue(t, retention), uint64(seed))
		}
	})
}

// randomOperations runs a random sequence of every operation on two
// destinations, and checks after each step that Stats agrees with the
// states Metas reads.
func randomOperations(t *testing.T, q sender.Queue, seed uint64) {
	{
		rng := rand.New(rand.NewPCG(seed, 2))
		dests := []string{"a", "b"}
		var all []string
		for i := range 40 {
			all = append(all, fmt.Sprintf("m%02d", i))
		}
		now := t0
		held := map[string][]sender.Leased{}
		check := func(step int, op string) {
			t.Helper()
			for _, d := range dests {
				st, err := q.Stats(t.Context(), d, now)
				if err != nil {
					t.Fatal(err)
				}
				metas, err := q.Metas(t.Context(), d, all)
				if err != nil {
					t.Fatal(err)
				}
				var qd, ls, dd int
				for _, m := range metas {
					switch m.State {
					case sender.StateQueued, sender.StatePaused:
						qd++
					case sender.StateLeased:
						ls++
					case sender.StateDead:
						dd++
					}
				}
				if st.Queued != qd || st.Leased != ls || st.Dead != dd {
					t.Fatalf("seed %d step %d (%s): %s Stats %d/%d/%d queued/leased/dead, the envelopes %d/%d/%d", seed, step, op, d, st.Queued, st.Leased, st.Dead, qd, ls, dd)
				}
			}
		}
		for step := range 600 {
			d := dests[rng.IntN(2)]
			var op string
			switch rng.IntN(10) {
			case 0, 1:
				op = "enqueue"
				e := env(d, all[rng.IntN(len(all))], now)
				if _, err := q.Enqueue(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			case 2:
				op = "lease"
				l, err := q.Lease(t.Context(), d, 1+rng.IntN(4), now, lease)
				if err != nil {
					t.Fatal(err)
				}
				held[d] = append(held[d], l...)
			case 3, 4:
				op = "settle"
				var os []sender.Outcome
				for _, x := range held[d] {
					e := *x.Envelope
					o := sender.Outcome{ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e}
					switch rng.IntN(4) {
					case 0:
						o.Kind = sender.Delivered
					case 1:
						o.Kind, e.NextAt = sender.Retry, now.Add(time.Duration(rng.IntN(3))*time.Second)
						e.Log = append(e.Log, sender.Attempt{At: now, Status: 503})
					case 2:
						o.Kind, e.DeadAt = sender.Dead, now
						e.Log = append(e.Log, sender.Attempt{At: now, Status: 400})
					default:
						o.Kind = sender.Release
					}
					os = append(os, o)
				}
				held[d] = nil
				if _, err := q.Settle(t.Context(), d, os, now); err != nil {
					t.Fatal(err)
				}
			case 5:
				op = "redrive"
				if _, err := q.Redrive(t.Context(), d, slices.Clone(all[:rng.IntN(len(all))]), fmt.Sprint("rd_", step), now); err != nil {
					t.Fatal(err)
				}
			case 6:
				op = "purge"
				if _, err := q.Purge(t.Context(), d, all[rng.IntN(len(all)):]); err != nil {
					t.Fatal(err)
				}
			case 7:
				op = "move"
				if _, _, err := q.Move(t.Context(), d, dests[1-slices.Index(dests, d)], now); err != nil {
					t.Fatal(err)
				}
				held = map[string][]sender.Leased{}
			case 9:
				if rng.IntN(4) == 0 {
					op = "drop"
					if _, err := q.Drop(t.Context(), d); err != nil {
						t.Fatal(err)
					}
					held[d] = nil
				}
			case 8:
				op = "time"
				now = now.Add(time.Duration(rng.IntN(40)) * time.Second)
				if rng.IntN(20) == 0 {
					now = now.Add(retention)
				}
			}
			check(step, op)
		}
	}
}

// names lists the configured destinations for NewSettled.
func names(dests ...string) func() []string {
	return func() []string { return dests }
}
