package queuetest

// The delivery history (issue 19): what settled stays findable for
// History.Keep, its payload for History.Payload; resend sends it again.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// historian is a queue that keeps a history: both queues are.
type historian interface {
	sender.Queue
	KeepHistory(sender.History)
}

func withHistory(t *testing.T, newQueue NewQueue, h sender.History) sender.Queue {
	t.Helper()
	q, ok := newQueue(t, retention).(historian)
	if !ok {
		t.Fatal("the queue has no KeepHistory")
	}
	q.KeepHistory(h)
	return q
}

// settle leases what is due at now (want: exactly ids, in that order)
// and settles each with kind, its log grown by one attempt of status.
func settle(t *testing.T, q sender.Queue, dest string, now time.Time, kind sender.OutcomeKind, status int, want ...string) {
	t.Helper()
	l := mustLease(t, q, dest, len(want), now)
	if got := ids(l); !slices.Equal(got, want) {
		t.Fatalf("leased %v, want %v", got, want)
	}
	var os []sender.Outcome
	for _, x := range l {
		e := *x.Envelope
		e.Attempts++
		e.Log = append(slices.Clone(e.Log), sender.Attempt{At: now, Status: status, Latency: 12 * time.Millisecond, RedriveID: e.RedriveID})
		e.LastStatus = status
		if kind == sender.Dead {
			e.DeadAt, e.Class = now, sender.ClassHTTP4xx
		}
		os = append(os, sender.Outcome{Kind: kind, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
	}
	mustSettle(t, q, dest, os, now, 0)
}

func mustHistory(t *testing.T, q sender.Queue, dest string, f sender.HistoryFilter, cursor string, limit int) ([]*sender.Meta, string) {
	t.Helper()
	got, next, err := q.History(t.Context(), dest, f, cursor, limit)
	if err != nil {
		t.Fatalf("History(%+v, %q, %d): %v", f, cursor, limit, err)
	}
	return got, next
}

// walk pages through the whole history with limit, answering the IDs.
func walk(t *testing.T, q sender.Queue, dest string, f sender.HistoryFilter, limit int, between func(page int)) []string {
	t.Helper()
	var out []string
	cursor := ""
	for page := 0; ; page++ {
		got, next := mustHistory(t, q, dest, f, cursor, limit)
		if len(got) > limit {
			t.Fatalf("a page of %d, over the limit %d", len(got), limit)
		}
		for _, m := range got {
			out = append(out, m.ID)
		}
		if next == "" {
			return out
		}
		if page > 1000 {
			t.Fatal("the walk does not end")
		}
		cursor = next
		if between != nil {
			between(page)
		}
	}
}

func runHistory(t *testing.T, newQueue NewQueue) {
	t.Run("HistoryKeepsWhatSettled", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: retention})
		for i, id := range []string{"h1", "h2", "h3"} {
			mustEnqueue(t, q, env("d", id, t0.Add(time.Duration(i)*time.Millisecond)), queued)
		}
		settle(t, q, "d", t0.Add(time.Second), sender.Delivered, 200, "h1", "h2")
		settle(t, q, "d", t0.Add(2*time.Second), sender.Dead, 400, "h3")
		got, next := mustHistory(t, q, "d", sender.HistoryFilter{}, "", 10)
		if next != "" {
			t.Errorf("next = %q after the whole history", next)
		}
		type row struct {
			ID         string
			State      sender.State
			SettledAt  time.Time
			Tried      int
			LastStatus int
			EventType  string
		}
		var rows []row
		for _, m := range got {
			rows = append(rows, row{m.ID, m.State, m.SettledAt, m.Tried, m.LastStatus, m.EventType})
		}
		want := []row{
			{"h3", sender.StateDead, t0.Add(2 * time.Second), 1, 400, "reservation.confirmed"},
			{"h2", sender.StateDelivered, t0.Add(time.Second), 1, 200, "reservation.confirmed"},
			{"h1", sender.StateDelivered, t0.Add(time.Second), 1, 200, "reservation.confirmed"},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("History, newest first (-want +got):\n%s", diff)
		}
		for _, m := range got {
			if !strings.HasPrefix(m.HistoryID, fmt.Sprintf("%d-", m.SettledAt.UnixMilli())) {
				t.Errorf("%s's HistoryID %q is not <settled ms>-<sequence>", m.ID, m.HistoryID)
			}
		}
		// A cursor is an entry's position: the page after h2 is h1.
		if after, _ := mustHistory(t, q, "d", sender.HistoryFilter{}, got[1].HistoryID, 10); len(after) != 1 || after[0].ID != "h1" {
			t.Errorf("History after h2's position = %v", after)
		}
		// A delivered envelope is read whole: record, log, payload.
		e, st, err := q.Get(t.Context(), "d", "h1")
		if err != nil || st != sender.StateDelivered {
			t.Fatalf("Get(h1) = %v, %v", st, err)
		}
		if string(e.Payload) != string(env("d", "h1", t0).Payload) || e.PayloadExpired || len(e.Log) != 1 || e.Log[0].Status != 200 || e.Log[0].Latency != 12*time.Millisecond {
			t.Errorf("Get(h1) = payload %q (expired %v), log %+v", e.Payload, e.PayloadExpired, e.Log)
		}
		// The ID stays a duplicate while the history keeps it.
		mustEnqueue(t, q, env("d", "h1", t0.Add(time.Minute)), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
	})

	t.Run("HistoryFilters", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention})
		for i := range 6 {
			e := env("d", fmt.Sprintf("f%d", i), t0)
			e.Entity = fmt.Sprintf("r-%d", i%2)
			if i >= 3 {
				e.EventType = "seat.released"
			}
			mustEnqueue(t, q, e, queued)
		}
		settle(t, q, "d", t0.Add(time.Second), sender.Delivered, 204, "f0", "f1", "f2", "f3")
		settle(t, q, "d", t0.Add(time.Minute), sender.Dead, 410, "f4", "f5")
		for _, tc := range []struct {
			f    sender.HistoryFilter
			want []string
		}{
			{sender.HistoryFilter{ID: "f2"}, []string{"f2"}},
			{sender.HistoryFilter{ID: "nope"}, nil},
			{sender.HistoryFilter{Entity: "r-1"}, []string{"f5", "f3", "f1"}},
			{sender.HistoryFilter{EventType: "seat.released"}, []string{"f5", "f4", "f3"}},
			{sender.HistoryFilter{State: sender.StateDead}, []string{"f5", "f4"}},
			{sender.HistoryFilter{Since: t0.Add(30 * time.Second)}, []string{"f5", "f4"}},
			{sender.HistoryFilter{Until: t0.Add(30 * time.Second), Entity: "r-0"}, []string{"f2", "f0"}},
		} {
			if got := walk(t, q, "d", tc.f, 2, nil); !slices.Equal(got, tc.want) {
				t.Errorf("History(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		}
	})

	t.Run("HistoryPagingIsStableWhileEnvelopesSettle", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention})
		var want []string
		for i := range 25 {
			id := fmt.Sprintf("p%02d", i)
			mustEnqueue(t, q, env("d", id, t0), queued)
			settle(t, q, "d", t0.Add(time.Duration(i)*time.Millisecond), sender.Delivered, 200, id)
			want = append([]string{id}, want...)
		}
		// Many settle in the same millisecond too.
		var same []string
		for i := range 5 {
			id := fmt.Sprintf("s%d", i)
			mustEnqueue(t, q, env("d", id, t0), queued)
			same = append(same, id)
		}
		settle(t, q, "d", t0.Add(25*time.Millisecond), sender.Delivered, 200, same...)
		for _, id := range same {
			want = append([]string{id}, want...)
		}
		want = append(want[:0:0], want...)
		got := walk(t, q, "d", sender.HistoryFilter{}, 4, func(page int) {
			// Between pages, more settle: newer than the walk's start.
			id := fmt.Sprintf("n%02d", page)
			mustEnqueue(t, q, env("d", id, t0), queued)
			settle(t, q, "d", t0.Add(time.Second+time.Duration(page)*time.Millisecond), sender.Delivered, 200, id)
		})
		// The same-millisecond ones come in some order of the store's.
		if len(got) != len(want) || !slices.Equal(got[5:], want[5:]) || !sameSet(got[:5], want[:5]) {
			t.Errorf("a walk while others settle = %v,\nwant %v", got, want)
		}
	})

	t.Run("HistoryPayloadExpiresRecordStays", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: time.Minute})
		mustEnqueue(t, q, env("d", "x1", t0), queued)
		settle(t, q, "d", t0, sender.Delivered, 200, "x1")
		// Settling later trims what expired.
		mustEnqueue(t, q, env("d", "x2", t0), queued)
		settle(t, q, "d", t0.Add(2*time.Minute), sender.Delivered, 200, "x2")
		e, st, err := q.Get(t.Context(), "d", "x1")
		if err != nil || st != sender.StateDelivered || !e.PayloadExpired || e.Payload != nil || len(e.Log) != 1 {
			t.Fatalf("Get(x1) after its payload's time = %+v, %v, %v", e, st, err)
		}
		if moved, err := q.Resend(t.Context(), "d", []string{"x1"}, "rs-1", t0.Add(3*time.Minute)); err != nil || len(moved) != 0 {
			t.Errorf("Resend of an expired payload = %v, %v; want nothing moved", moved, err)
		}
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); !slices.Equal(got, []string{"x2", "x1"}) {
			t.Errorf("History = %v", got)
		}
	})

	t.Run("HistoryEndsAfterKeep", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: time.Hour})
		mustEnqueue(t, q, env("d", "k1", t0), queued)
		settle(t, q, "d", t0, sender.Delivered, 200, "k1")
		mustEnqueue(t, q, env("d", "k2", t0), queued)
		settle(t, q, "d", t0.Add(2*time.Hour), sender.Delivered, 200, "k2")
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); !slices.Equal(got, []string{"k2"}) {
			t.Errorf("History after k1's time = %v, want [k2]", got)
		}
		if _, _, err := q.Get(t.Context(), "d", "k1"); err == nil {
			t.Error("k1 is still read after its time")
		}
		// Its ID is new again.
		mustEnqueue(t, q, env("d", "k1", t0.Add(3*time.Hour)), queued)
	})

	t.Run("ResendSendsAgainUnderItsOwnID", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: retention})
		for _, id := range []string{"r1", "r2", "r3"} {
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		settle(t, q, "d", t0, sender.Delivered, 200, "r1", "r2")
		settle(t, q, "d", t0, sender.Dead, 400, "r3")
		mustEnqueue(t, q, env("d", "r4", t0), queued) // queued: skipped
		now := t0.Add(time.Hour)
		moved, err := q.Resend(t.Context(), "d", []string{"r1", "r3", "r4", "nope"}, "rs-1", now)
		if err != nil || !slices.Equal(moved, []string{"r1", "r3"}) {
			t.Fatalf("Resend = %v, %v; want [r1 r3]", moved, err)
		}
		l := mustLease(t, q, "d", 10, now)
		slices.SortFunc(l, func(a, b sender.Leased) int { return strings.Compare(a.ID, b.ID) })
		if got := ids(l); !slices.Equal(got, []string{"r1", "r3", "r4"}) {
			t.Fatalf("leased %v after the resend", got)
		}
		r1 := l[0]
		if r1.RedriveID != "rs-1" || r1.Attempts != 0 || len(r1.Log) != 1 || string(r1.Payload) != string(env("d", "r1", t0).Payload) {
			t.Errorf("resent r1 = redrive %q, attempts %d, log %+v, payload %q", r1.RedriveID, r1.Attempts, r1.Log, r1.Payload)
		}
		var os []sender.Outcome
		for _, x := range l {
			e := *x.Envelope
			e.Log = append(slices.Clone(e.Log), sender.Attempt{At: now, Status: 200, RedriveID: e.RedriveID})
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
		}
		mustSettle(t, q, "d", os, now, 0)
		if c, err := q.RedriveCounts(t.Context(), "d", "rs-1"); err != nil || c.Moved != 2 || c.Delivered != 2 {
			t.Errorf("RedriveCounts(rs-1) = %+v, %v; want 2 moved, 2 delivered", c, err)
		}
		// Settled twice, listed once, as it settled last.
		got, _ := mustHistory(t, q, "d", sender.HistoryFilter{}, "", 10)
		var states []string
		for _, m := range got {
			states = append(states, m.ID+":"+string(m.State))
		}
		slices.Sort(states)
		if want := []string{"r1:delivered", "r2:delivered", "r3:delivered", "r4:delivered"}; !slices.Equal(states, want) {
			t.Errorf("History after the resend = %v, want %v", states, want)
		}
		e, _, err := q.Get(t.Context(), "d", "r1")
		if err != nil || len(e.Log) != 2 || e.RedriveID != "rs-1" {
			t.Errorf("Get(r1) after its resend: log %+v, redrive %q, %v", e.Log, e.RedriveID, err)
		}
	})

	t.Run("HistoryCountedInStats", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: time.Hour, Payload: time.Hour})
		history := func(when string, want int) {
			t.Helper()
			st, err := q.Stats(t.Context(), "d", t0)
			if err != nil || st.History != want {
				t.Errorf("%s: Stats.History = %d, %v; want %d", when, st.History, err, want)
			}
		}
		history("before anything settled", 0)
		for _, id := range []string{"c1", "c2", "c3"} {
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		settle(t, q, "d", t0, sender.Delivered, 200, "c1", "c2")
		settle(t, q, "d", t0, sender.Dead, 400, "c3")
		history("after three settled", 3)
		now := t0.Add(time.Minute)
		if moved, err := q.Resend(t.Context(), "d", []string{"c1"}, "rs-1", now); err != nil || len(moved) != 1 {
			t.Fatalf("Resend = %v, %v", moved, err)
		}
		settle(t, q, "d", now, sender.Delivered, 200, "c1")
		history("after one settled again", 3)
		mustEnqueue(t, q, env("d", "c4", t0), queued)
		settle(t, q, "d", t0.Add(2*time.Hour), sender.Delivered, 200, "c4")
		history("after the others' time", 1)
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// clock is a test's settable time, for History.Now.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *clock) set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = at
}

func mustTrim(t *testing.T, q sender.Queue, dest string, now time.Time) time.Time {
	t.Helper()
	next, err := q.TrimHistory(t.Context(), dest, now)
	if err != nil {
		t.Fatalf("TrimHistory(%s): %v", now, err)
	}
	return next
}

// runHistoryQuiet is the history of a destination that goes quiet (issue
// 29): its payloads and entries go at their time, with no settlement to
// trim them; an ID is a lookup wherever it is; a purged letter leaves.
func runHistoryQuiet(t *testing.T, newQueue NewQueue) {
	t.Run("HistoryPayloadPastItsTimeIsNeverShownOrResent", func(t *testing.T) {
		t.Parallel()
		c := &clock{at: t0}
		q := withHistory(t, newQueue, sender.History{Keep: time.Hour, Payload: time.Minute, Now: c.now})
		mustEnqueue(t, q, env("d", "x1", t0), queued)
		settle(t, q, "d", t0, sender.Delivered, 200, "x1")
		c.set(t0.Add(time.Minute))
		if e, _, err := q.Get(t.Context(), "d", "x1"); err != nil || e.PayloadExpired || len(e.Payload) == 0 {
			t.Fatalf("Get(x1) within its payload's time = %+v, %v", e, err)
		}
		// Nothing settles again: no trim has run, and still the payload
		// is past its time from then on.
		late := t0.Add(time.Minute + time.Millisecond)
		c.set(late)
		e, st, err := q.Get(t.Context(), "d", "x1")
		if err != nil || st != sender.StateDelivered || !e.PayloadExpired || e.Payload != nil || len(e.Log) != 1 {
			t.Fatalf("Get(x1) past its payload's time = %+v, %v, %v; want the record, its payload expired", e, st, err)
		}
		if moved, err := q.Resend(t.Context(), "d", []string{"x1"}, "rs-1", late); err != nil || len(moved) != 0 {
			t.Errorf("Resend past the payload's time = %v, %v; want nothing moved", moved, err)
		}
		if l := mustLease(t, q, "d", 10, late); len(l) != 0 {
			t.Errorf("leased %v after a resend of an expired payload", ids(l))
		}
	})

	t.Run("TrimHistoryRunsWhenDueWithoutTraffic", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: time.Hour, Payload: time.Minute})
		if next := mustTrim(t, q, "d", t0); !next.IsZero() {
			t.Errorf("TrimHistory of an empty history = %v, want nothing due", next)
		}
		mustEnqueue(t, q, env("d", "k1", t0), queued)
		mustEnqueue(t, q, env("d", "k2", t0), queued)
		settle(t, q, "d", t0, sender.Delivered, 200, "k1")
		settle(t, q, "d", t0.Add(10*time.Second), sender.Delivered, 200, "k2")
		// The soonest due is k1's payload, just past its minute.
		ms := time.Millisecond
		if next, want := mustTrim(t, q, "d", t0.Add(time.Second)), t0.Add(time.Minute+ms); !next.Equal(want) {
			t.Errorf("TrimHistory before anything is due = %v, want past k1's payload's time, %v", next, want)
		}
		// Then k2's payload; k1's entry stays.
		if next, want := mustTrim(t, q, "d", t0.Add(time.Minute+ms)), t0.Add(70*time.Second+ms); !next.Equal(want) {
			t.Errorf("TrimHistory past k1's payload's time = %v, want past k2's, %v", next, want)
		}
		e, _, err := q.Get(t.Context(), "d", "k1")
		if err != nil || !e.PayloadExpired || len(e.Log) != 1 {
			t.Fatalf("Get(k1) after the trim = %+v, %v", e, err)
		}
		if next, want := mustTrim(t, q, "d", t0.Add(70*time.Second+ms)), t0.Add(time.Hour+ms); !next.Equal(want) {
			t.Errorf("TrimHistory past k2's payload's time = %v, want past k1's entry's, %v", next, want)
		}
		// Past k1's keep, its entry goes.
		if next, want := mustTrim(t, q, "d", t0.Add(time.Hour+ms)), t0.Add(time.Hour+10*time.Second+ms); !next.Equal(want) {
			t.Errorf("TrimHistory past k1's keep = %v, want past k2's, %v", next, want)
		}
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); !slices.Equal(got, []string{"k2"}) {
			t.Errorf("History after k1's time = %v, want [k2]", got)
		}
		if st, err := q.Stats(t.Context(), "d", t0.Add(time.Hour)); err != nil || st.History != 1 {
			t.Errorf("Stats.History = %d, %v; want 1", st.History, err)
		}
		if _, _, err := q.Get(t.Context(), "d", "k1"); err == nil {
			t.Error("k1 is still read after its time")
		}
		if next := mustTrim(t, q, "d", t0.Add(2*time.Hour)); !next.IsZero() {
			t.Errorf("TrimHistory of a history trimmed empty = %v, want nothing due", next)
		}
	})

	t.Run("TrimHistoryTrimsABatchAndSaysMoreAreDue", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: time.Hour})
		var all []string
		for i := range 150 {
			id := fmt.Sprintf("b%03d", i)
			all = append(all, id)
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		settle(t, q, "d", t0, sender.Delivered, 200, all...)
		now := t0.Add(2 * time.Hour)
		calls := 0
		for {
			next := mustTrim(t, q, "d", now)
			if calls++; next.IsZero() {
				break
			}
			if next.After(now) {
				t.Fatalf("TrimHistory = %v with entries past their time left", next)
			}
			if calls > 10 {
				t.Fatal("the trim does not end")
			}
		}
		if calls != 2 { // a batch of 100, then the other 50
			t.Errorf("150 entries trimmed in %d calls, want 2 (batches of 100)", calls)
		}
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); len(got) != 0 {
			t.Errorf("History after the trims = %v", got)
		}
	})

	t.Run("HistoryLooksUpIDsWhereverTheyAre", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention})
		// The ones looked for settle first: older than the newest
		// thousand, where no walk of one call reaches.
		for _, id := range []string{"old-a", "old-b"} {
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		settle(t, q, "d", t0, sender.Delivered, 200, "old-a")
		settle(t, q, "d", t0.Add(time.Millisecond), sender.Dead, 400, "old-b")
		var rest []string
		for i := range 1200 {
			id := fmt.Sprintf("n%04d", i)
			rest = append(rest, id)
			mustEnqueue(t, q, env("d", id, t0), queued)
		}
		for chunk := range slices.Chunk(rest, 400) {
			settle(t, q, "d", t0.Add(time.Second), sender.Delivered, 200, chunk...)
		}
		for _, tc := range []struct {
			f    sender.HistoryFilter
			want []string
		}{
			{sender.HistoryFilter{ID: "old-a"}, []string{"old-a"}},
			{sender.HistoryFilter{ID: "old-a", State: sender.StateDead}, nil},
			{sender.HistoryFilter{IDs: []string{"old-a", "nope", "old-b", "n0007"}}, []string{"n0007", "old-b", "old-a"}},
			{sender.HistoryFilter{IDs: []string{"old-b", "old-a"}, Until: t0.Add(time.Millisecond)}, []string{"old-a"}},
			{sender.HistoryFilter{ID: "old-a", IDs: []string{"old-b", "old-a"}}, []string{"old-a"}},
			{sender.HistoryFilter{ID: "old-a", IDs: []string{"old-b"}}, nil},
		} {
			got, next := mustHistory(t, q, "d", tc.f, "", 10)
			var gotIDs []string
			for _, m := range got {
				gotIDs = append(gotIDs, m.ID)
			}
			if !slices.Equal(gotIDs, tc.want) || next != "" {
				t.Errorf("History(%+v) = %v, next %q; want %v in one call", tc.f, gotIDs, next, tc.want)
			}
		}
		// A lookup pages as a walk does.
		if got := walk(t, q, "d", sender.HistoryFilter{IDs: []string{"old-a", "old-b", "n0007"}}, 1, nil); !slices.Equal(got, []string{"n0007", "old-b", "old-a"}) {
			t.Errorf("a lookup paged by one = %v", got)
		}
	})

	t.Run("PurgedDeadLettersLeaveTheHistory", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention})
		deadLetters(t, q, "d", 2)
		if n, err := q.Purge(t.Context(), "d", []string{"l-000"}); err != nil || n != 1 {
			t.Fatalf("Purge = %d, %v", n, err)
		}
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); !slices.Equal(got, []string{"l-001"}) {
			t.Errorf("History after the purge = %v, want [l-001]", got)
		}
		if got, _ := mustHistory(t, q, "d", sender.HistoryFilter{ID: "l-000"}, "", 10); len(got) != 0 {
			t.Errorf("History by the purged ID = %v", got)
		}
		if st, err := q.Stats(t.Context(), "d", t0); err != nil || st.History != 1 {
			t.Errorf("Stats.History after the purge = %d, %v; want 1", st.History, err)
		}
	})

	// A dead letter trimmed by the retention leaves the history as a
	// purged one does, though the history keeps its entries longer: no row
	// whose detail is not found.
	t.Run("DeadLettersTrimmedByRetentionLeaveTheHistory", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: 3 * retention, Payload: 3 * retention})
		deadLetters(t, q, "d", 2)
		// The trim of the dead letters runs with a settlement past their
		// retention.
		late := t0.Add(retention + time.Hour)
		mustEnqueue(t, q, env("d", "late", late), queued)
		settle(t, q, "d", late, sender.Delivered, 200, "late")
		if st, err := q.Stats(t.Context(), "d", late); err != nil || st.Dead != 0 || st.History != 1 {
			t.Errorf("Stats past the retention = dead %d, history %d, %v; want 0, 1", st.Dead, st.History, err)
		}
		if got := walk(t, q, "d", sender.HistoryFilter{}, 10, nil); !slices.Equal(got, []string{"late"}) {
			t.Errorf("History past the dead letters' retention = %v, want [late]", got)
		}
		if got, _ := mustHistory(t, q, "d", sender.HistoryFilter{IDs: []string{"l-000", "l-001"}}, "", 10); len(got) != 0 {
			t.Errorf("History by the trimmed IDs = %v", got)
		}
		for _, id := range []string{"l-000", "l-001"} {
			if e, st, err := q.Get(t.Context(), "d", id); !errors.Is(err, sender.ErrNotFound) {
				t.Errorf("Get(%s) past its retention = %+v, %v, %v; want ErrNotFound", id, e, st, err)
			}
		}
		// Nothing of them is left for the history's trim.
		if next, want := mustTrim(t, q, "d", late), late.Add(3*retention+time.Millisecond); !next.Equal(want) {
			t.Errorf("TrimHistory = %v, want %v (the late delivery's payload and entry only)", next, want)
		}
	})
}
