package queuetest

// Renames. Move carries the history (issue 29, item 6): what settled
// under the old name is found, shown, resent, trimmed and purged under
// the new one; an orphan is listed, moved and dropped.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

func runMove(t *testing.T, newQueue NewQueue) {
	t.Run("MoveCarriesTheHistory", func(t *testing.T) {
		t.Parallel()
		h := sender.History{Keep: retention, Payload: 30 * time.Minute}
		q := withHistory(t, newQueue, h)
		deliverAt := func(dest, id string, at time.Time, payload string) {
			t.Helper()
			e := env(dest, id, at)
			e.Payload = []byte(payload)
			mustEnqueue(t, q, e, queued)
			settle(t, q, dest, at, sender.Delivered, 200, id)
		}
		// The new name's history holds an entry older than all of the old
		// name's, and one newer: the merge keeps time order.
		deliverAt("new", "c", t0.Add(-time.Minute), `"c"`)
		deliverAt("old", "a", t0, `"a"`)
		mustEnqueue(t, q, env("old", "b", t0), queued)
		settle(t, q, "old", t0.Add(time.Second), sender.Dead, 400, "b")
		deliverAt("new", "d", t0.Add(2*time.Second), `"d"`)
		// The same ID in both: the newer entry stays, wherever it was.
		deliverAt("new", "s", t0.Add(3*time.Second), `"s new, older"`)
		deliverAt("old", "s", t0.Add(4*time.Second), `"s old, newer"`)
		deliverAt("old", "n", t0.Add(4500*time.Millisecond), `"n old, older"`)
		deliverAt("new", "n", t0.Add(5*time.Second), `"n new, newer"`)

		now := t0.Add(10 * time.Second)
		if _, _, err := q.Move(t.Context(), "old", "new", now); err != nil {
			t.Fatalf("Move: %v", err)
		}
		got, _ := mustHistory(t, q, "new", sender.HistoryFilter{}, "", 100)
		var listed []string
		for _, m := range got {
			listed = append(listed, m.ID)
			if m.ID == "a" && !m.SettledAt.Equal(t0) {
				t.Errorf("a settled at %v under the new name, want %v (as it did)", m.SettledAt, t0)
			}
		}
		if want := []string{"n", "s", "d", "b", "a", "c"}; !slices.Equal(listed, want) {
			t.Errorf("History(new) after the Move = %v, want %v", listed, want)
		}
		if got, _ := mustHistory(t, q, "old", sender.HistoryFilter{}, "", 100); len(got) != 0 {
			t.Errorf("History(old) after the Move = %d entries, want none", len(got))
		}
		if st, _ := q.Stats(t.Context(), "new", now); st.History != 6 {
			t.Errorf("Stats(new).History = %d, want 6", st.History)
		}
		for id, want := range map[string]string{"a": `"a"`, "s": `"s old, newer"`, "n": `"n new, newer"`} {
			e, state, err := q.Get(t.Context(), "new", id)
			if err != nil || state != sender.StateDelivered || string(e.Payload) != want {
				t.Errorf("Get(new, %s) = %v, %q, %v; want delivered with %s", id, state, payloadOf(e), err, want)
			}
		}
		mustEnqueue(t, q, env("new", "a", now), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: true})

		// A purge of the old name leaves them.
		if _, err := q.Drop(t.Context(), "old"); err != nil {
			t.Fatalf("Drop(old): %v", err)
		}
		if got, _ := mustHistory(t, q, "new", sender.HistoryFilter{ID: "a"}, "", 10); len(got) != 1 {
			t.Errorf("History(new, id a) after Drop(old) = %d entries, want 1", len(got))
		}
		// Resent under the new name, while its payload is kept.
		if moved, err := q.Resend(t.Context(), "new", []string{"a"}, "rs-1", now); err != nil || !slices.Equal(moved, []string{"a"}) {
			t.Fatalf("Resend(new, a) = %v, %v; want a", moved, err)
		}
		settle(t, q, "new", now, sender.Delivered, 200, "a")
		// Trimmed under the new name: past its time the payload is gone.
		later := t0.Add(h.Payload + time.Minute)
		deliverAt("new", "e", later, `"e"`)
		if e, _, err := q.Get(t.Context(), "new", "s"); err != nil || !e.PayloadExpired {
			t.Errorf("Get(new, s) past history_payload = %q, %v; want its payload expired", payloadOf(e), err)
		}
	})

	t.Run("MoveCarriesAHistoryLongerThanAPage", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention})
		const n = 450
		for i := range n {
			e := env("old", fmt.Sprintf("h-%03d", i), t0)
			mustEnqueue(t, q, e, queued)
		}
		l := mustLease(t, q, "old", n, t0)
		var os []sender.Outcome
		for _, x := range l {
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: x.ID, LeaseUntil: x.LeaseUntil})
		}
		mustSettle(t, q, "old", os, t0, 0)
		if _, _, err := q.Move(t.Context(), "old", "new", t0.Add(time.Second)); err != nil {
			t.Fatalf("Move: %v", err)
		}
		if st, _ := q.Stats(t.Context(), "new", t0); st.History != n {
			t.Errorf("Stats(new).History = %d, want %d", st.History, n)
		}
		for i := range n {
			mustEnqueue(t, q, env("new", fmt.Sprintf("h-%03d", i), t0.Add(time.Minute)), sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true})
		}
	})

	t.Run("MoveGoesOnPastABatchThatStays", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, retention)
		// 500 envelopes whose IDs the new name holds with another payload
		// stay; the 100 after them (in ID order) must go all the same.
		const kept, moved = 500, 100
		for i := range kept {
			id := fmt.Sprintf("k-%03d", i)
			mustEnqueue(t, q, env("old", id, t0), queued)
			other := env("new", id, t0)
			other.Payload = []byte(`"another"`)
			mustEnqueue(t, q, other, queued)
		}
		for i := range moved {
			mustEnqueue(t, q, env("old", fmt.Sprintf("m-%03d", i), t0), queued)
		}
		gotMoved, gotKept, err := q.Move(t.Context(), "old", "new", t0)
		if err != nil || gotMoved != moved || gotKept != kept {
			t.Fatalf("Move = %d moved, %d kept, %v; want %d, %d", gotMoved, gotKept, err, moved, kept)
		}
		if st, _ := q.Stats(t.Context(), "new", t0); st.Queued != kept+moved {
			t.Errorf("Stats(new).Queued = %d, want %d", st.Queued, kept+moved)
		}
		if st, _ := q.Stats(t.Context(), "old", t0); st.Queued != kept {
			t.Errorf("Stats(old).Queued = %d, want the %d that stay", st.Queued, kept)
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
}

func payloadOf(e *sender.Envelope) string {
	if e == nil {
		return ""
	}
	return string(e.Payload)
}
