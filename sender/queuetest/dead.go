package queuetest

// Dead letters: their pages, redrive and its counts, purge, and scans
// that read no payload.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// runDead runs them.
func runDead(t *testing.T, newQueue NewQueue) {
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
		dlq := sender.NewSettled(q.(sender.AuditedQueue), names("d"), 0, nil)
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
