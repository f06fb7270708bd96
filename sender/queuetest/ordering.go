package queuetest

// Ordered delivery (sender.Ordering): one envelope at a time per
// (destination, entity), in enqueue order, through every operation that
// moves an envelope.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// ordered is a queue with one destination "d" ordered by entity, and the
// leases taken of it.
type ordered struct {
	t      *testing.T
	q      sender.Queue
	leases map[string]sender.Leased
}

func newOrdered(t *testing.T, newQueue NewQueue, hold bool) *ordered {
	q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: retention}) // a resend needs the payload
	q.Order("d", sender.Ordering{ByEntity: true, Hold: hold})
	return &ordered{t: t, q: q, leases: map[string]sender.Leased{}}
}

// enqueue enqueues each "<entity>/<n>" ID with that entity ("-/<n>": none).
func (o *ordered) enqueue(at time.Time, ids ...string) {
	o.t.Helper()
	for _, id := range ids {
		e := env("d", id, at)
		e.Entity = entityOf(id)
		if _, err := o.q.Enqueue(o.t.Context(), e); err != nil {
			o.t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
}

func entityOf(id string) string {
	for i := range len(id) {
		if id[i] == '/' {
			if id[:i] == "-" {
				return ""
			}
			return id[:i]
		}
	}
	return ""
}

// lease leases up to n, and checks they are want, in any order.
func (o *ordered) lease(now time.Time, n int, want ...string) {
	o.t.Helper()
	got := mustLease(o.t, o.q, "d", n, now)
	for _, l := range got {
		o.leases[l.ID] = l
	}
	g := ids(got)
	slices.Sort(g)
	slices.Sort(want)
	if !slices.Equal(g, want) {
		o.t.Fatalf("at %s leased %v, want %v", now.Sub(t0), g, want)
	}
}

// settle settles id's lease with kind, at now; a retry is due at now+after.
func (o *ordered) settle(now time.Time, kind sender.OutcomeKind, id string, after time.Duration) {
	o.t.Helper()
	l, ok := o.leases[id]
	if !ok {
		o.t.Fatalf("settle(%s): not leased", id)
	}
	delete(o.leases, id)
	e := *l.Envelope
	e.Attempts++
	e.Log = append(slices.Clone(e.Log), sender.Attempt{At: now, Status: 500, Error: "500 Internal Server Error"})
	switch kind {
	case sender.Retry:
		e.NextAt = now.Add(after)
	case sender.Dead:
		e.DeadAt, e.LastStatus, e.Class = now, 400, sender.ClassHTTP4xx
	}
	mustSettle(o.t, o.q, "d", []sender.Outcome{{Kind: kind, ID: id, LeaseUntil: l.LeaseUntil, Envelope: &e}}, now, 0)
}

func (o *ordered) stats(now time.Time) sender.Stats {
	o.t.Helper()
	st, err := o.q.Stats(o.t.Context(), "d", now)
	if err != nil {
		o.t.Fatal(err)
	}
	return st
}

func (o *ordered) state(id string) sender.State {
	o.t.Helper()
	_, st, err := o.q.Get(o.t.Context(), "d", id)
	if err != nil {
		o.t.Fatalf("Get(%s): %v", id, err)
	}
	return st
}

// runOrdering runs them.
func runOrdering(t *testing.T, newQueue NewQueue) {
	t.Run("OrderedOneAtATimePerEntity", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "b/1", "a/3", "-/1", "-/2", "b/2")
		o.lease(t0, 10, "a/1", "b/1", "-/1", "-/2")
		if st := o.stats(t0); st.Queued != 3 || st.Waiting != 3 || st.Leased != 4 {
			t.Errorf("Stats = %+v, want 3 queued, all 3 waiting, 4 leased", st)
		}
		if st := o.state("a/2"); st != sender.StateQueued {
			t.Errorf("a waiting envelope's state = %s", st)
		}
		// A duplicate of a waiting envelope is a duplicate.
		e := env("d", "a/2", t0)
		e.Entity = "a"
		mustEnqueue(t, o.q, e, sender.EnqueueResult{State: sender.StateQueued, Duplicate: true})
		o.lease(t0, 10)
		o.settle(t0, sender.Delivered, "a/1", 0)
		o.settle(t0, sender.Delivered, "-/1", 0)
		o.lease(t0, 10, "a/2")
		o.settle(t0, sender.Delivered, "b/1", 0)
		o.settle(t0, sender.Delivered, "a/2", 0)
		o.lease(t0, 10, "a/3", "b/2")
		if st := o.stats(t0); st.Waiting != 0 || st.Queued != 0 {
			t.Errorf("Stats = %+v, want none waiting", st)
		}
	})

	t.Run("OrderedHeadIsRetriedReleasedAndLeasedAgain", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2")
		o.lease(t0, 10, "a/1")
		// A lease that expires (a worker killed mid-attempt) gives the
		// same head, never the next.
		delete(o.leases, "a/1")
		o.lease(t0.Add(lease), 10, "a/1")
		o.settle(t0.Add(lease), sender.Retry, "a/1", time.Minute)
		o.lease(t0.Add(lease+time.Second), 10)
		o.lease(t0.Add(lease+time.Minute), 10, "a/1")
		o.settle(t0.Add(lease+time.Minute), sender.Release, "a/1", 0)
		o.lease(t0.Add(lease+time.Minute), 10, "a/1")
		o.settle(t0.Add(lease+time.Minute), sender.Delivered, "a/1", 0)
		o.lease(t0.Add(lease+time.Minute), 10, "a/2")
	})

	t.Run("OrderedNextIsDueAtItsOwnTime", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1")
		later := env("d", "a/2", t0)
		later.Entity, later.NextAt = "a", t0.Add(time.Hour)
		mustEnqueue(t, o.q, later, queued)
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Delivered, "a/1", 0)
		o.lease(t0.Add(time.Minute), 10)
		o.lease(t0.Add(time.Hour), 10, "a/2")
	})

	t.Run("OrderedDeadSkipLetsTheNextGo", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "a/3")
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Dead, "a/1", 0)
		if st := o.stats(t0); st.Held != 0 || st.Waiting != 1 || st.Dead != 1 {
			t.Errorf("Stats = %+v", st)
		}
		o.lease(t0, 10, "a/2")
		// A redriven letter that is not the head joins the back.
		moved, err := o.q.Redrive(t.Context(), "d", []string{"a/1"}, "rd-1", t0)
		if err != nil || len(moved) != 1 {
			t.Fatalf("Redrive = %v, %v", moved, err)
		}
		if st := o.stats(t0); st.Waiting != 2 {
			t.Errorf("Stats after the redrive = %+v, want 2 waiting", st)
		}
		o.settle(t0, sender.Delivered, "a/2", 0)
		o.lease(t0, 10, "a/3")
		o.settle(t0, sender.Delivered, "a/3", 0)
		o.lease(t0, 10, "a/1")
	})

	t.Run("OrderedDeadHoldWaitsForTheRedrive", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, true)
		o.enqueue(t0, "a/1", "a/2", "a/3", "b/1")
		o.lease(t0, 10, "a/1", "b/1")
		o.settle(t0, sender.Dead, "a/1", 0)
		o.lease(t0, 10)
		if st := o.stats(t0); st.Held != 1 || st.Waiting != 2 || st.Dead != 1 || st.Queued != 2 {
			t.Errorf("Stats = %+v, want 1 held, 2 waiting and queued, 1 dead", st)
		}
		// Pending lists them as held behind the letter.
		p, err := o.q.Pending(t.Context(), "d", sender.PendingFilter{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range p {
			got = append(got, fmt.Sprintf("%s %s behind=%q held=%v", m.ID, m.State, m.Behind, m.Held))
		}
		want := []string{"b/1 leased behind=\"\" held=false", "a/2 queued behind=\"a/1\" held=true", "a/3 queued behind=\"a/1\" held=true"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Pending (-want +got):\n%s", diff)
		}
		// The redriven head goes first.
		if moved, err := o.q.Redrive(t.Context(), "d", []string{"a/1"}, "rd-1", t0); err != nil || len(moved) != 1 {
			t.Fatalf("Redrive = %v, %v", moved, err)
		}
		if st := o.stats(t0); st.Held != 0 || st.Waiting != 2 {
			t.Errorf("Stats after the redrive = %+v, want none held, 2 waiting", st)
		}
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Delivered, "a/1", 0)
		o.lease(t0, 10, "a/2")
	})

	t.Run("OrderedDeadHoldReleasedByPurgeAndRetention", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, true)
		o.enqueue(t0, "a/1", "a/2", "a/3", "b/1")
		o.lease(t0, 10, "a/1", "b/1")
		o.settle(t0, sender.Dead, "a/1", 0)
		if n, err := o.q.Purge(t.Context(), "d", []string{"a/1"}); err != nil || n != 1 {
			t.Fatalf("Purge = %d, %v", n, err)
		}
		if st := o.stats(t0); st.Held != 0 || st.Waiting != 1 {
			t.Errorf("Stats after the purge = %+v, want none held, 1 waiting", st)
		}
		o.lease(t0, 10, "a/2")
		o.settle(t0, sender.Dead, "a/2", 0)
		o.lease(t0, 10)
		// The retention forgets the held letter (a settle trims it): the
		// entity goes on.
		later := t0.Add(retention + time.Minute)
		o.settle(later, sender.Delivered, "b/1", 0)
		o.lease(later, 10, "a/3")
		if st := o.stats(later); st.Held != 0 || st.Dead != 0 {
			t.Errorf("Stats after the retention = %+v", st)
		}
	})

	t.Run("OrderedDeadHoldReleasedByRetentionWhenQuiet", func(t *testing.T) {
		t.Parallel()
		// Nothing settles: the trim alone forgets the held letter.
		o := newOrdered(t, newQueue, true)
		o.enqueue(t0, "a/1", "a/2")
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Dead, "a/1", 0)
		next, err := o.q.TrimHistory(t.Context(), "d", t0.Add(time.Minute))
		if err != nil || next.IsZero() || next.After(t0.Add(retention)) {
			t.Fatalf("TrimHistory = %v, %v; want the dead letter due by %v", next, err, t0.Add(retention))
		}
		later := t0.Add(retention + time.Minute)
		if _, err := o.q.TrimHistory(t.Context(), "d", later); err != nil {
			t.Fatal(err)
		}
		o.lease(later, 10, "a/2")
		if st := o.stats(later); st.Held != 0 || st.Dead != 0 || st.Waiting != 0 {
			t.Errorf("Stats after the trim = %+v, want nothing held, dead or waiting", st)
		}
	})

	t.Run("OrderedResendGoesToTheBack", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "a/3")
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Delivered, "a/1", 0)
		if moved, err := o.q.Resend(t.Context(), "d", []string{"a/1"}, "rs-1", t0); err != nil || len(moved) != 1 {
			t.Fatalf("Resend = %v, %v", moved, err)
		}
		for _, id := range []string{"a/2", "a/3", "a/1"} {
			o.lease(t0, 10, id)
			o.settle(t0, sender.Delivered, id, 0)
		}
		o.lease(t0, 10)
	})

	t.Run("OrderedPausedAndTurnedOff", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		if err := o.q.SetPaused(t.Context(), "d", true, "operator"); err != nil {
			t.Fatal(err)
		}
		e := env("d", "a/1", t0)
		e.Entity = "a"
		mustEnqueue(t, o.q, e, sender.EnqueueResult{State: sender.StatePaused})
		e = env("d", "a/2", t0)
		e.Entity = "a"
		mustEnqueue(t, o.q, e, sender.EnqueueResult{State: sender.StatePaused})
		o.lease(t0, 10)
		if err := o.q.SetPaused(t.Context(), "d", false, ""); err != nil {
			t.Fatal(err)
		}
		// Turned off, the waiting one still waits for its head; new
		// ones are not ordered.
		o.q.Order("d", sender.Ordering{})
		o.enqueue(t0, "a/3")
		o.lease(t0, 10, "a/1", "a/3")
		o.settle(t0, sender.Delivered, "a/1", 0)
		o.lease(t0, 10, "a/2")
	})

	t.Run("OrderedMoveAndDrop", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "a/3", "b/1", "b/2")
		o.q.Order("d", sender.Ordering{}) // an orphan: no longer configured
		o.q.Order("e", sender.Ordering{ByEntity: true})
		moved, kept, err := o.q.Move(t.Context(), "d", "e", t0)
		if err != nil || moved != 5 || kept != 0 {
			t.Fatalf("Move = %d, %d, %v; want all 5 moved", moved, kept, err)
		}
		if st := o.stats(t0); st != (sender.Stats{}) {
			t.Errorf("Stats of the source after the move = %+v", st)
		}
		for _, want := range [][]string{{"a/1", "b/1"}, {"a/2", "b/2"}, {"a/3"}} {
			got := mustLease(t, o.q, "e", 10, t0)
			g := ids(got)
			slices.Sort(g)
			if !slices.Equal(g, want) {
				t.Fatalf("leased %v from the destination moved to, want %v", g, want)
			}
			var os []sender.Outcome
			for _, l := range got {
				os = append(os, sender.Outcome{Kind: sender.Delivered, ID: l.ID, LeaseUntil: l.LeaseUntil})
			}
			mustSettle(t, o.q, "e", os, t0, 0)
		}
		// Drop forgets waiting envelopes too: their IDs are new again.
		o2 := newOrdered(t, newQueue, true)
		o2.enqueue(t0, "a/1", "a/2")
		if n, err := o2.q.Drop(t.Context(), "d"); err != nil || n != 2 {
			t.Fatalf("Drop = %d, %v; want 2", n, err)
		}
		if st := o2.stats(t0); st != (sender.Stats{}) {
			t.Errorf("Stats after Drop = %+v", st)
		}
		o2.enqueue(t0, "a/2", "a/1")
		o2.lease(t0, 10, "a/2")
	})

	t.Run("OrderedMoveCarriesAnEntityWithItsHead", func(t *testing.T) {
		t.Parallel()
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "a/3", "b/1", "b/2")
		o.lease(t0, 1, "a/1")                     // by an instance that is gone: its lease ends
		o.lease(t0.Add(20*time.Second), 1, "b/1") // live at the move
		o.q.Order("d", sender.Ordering{})
		o.q.Order("e", sender.Ordering{ByEntity: true})
		at := t0.Add(40 * time.Second)
		// a's head goes first, the rest behind it; b stays whole behind
		// its live lease, or b/2 would overtake b/1.
		moved, kept, err := o.q.Move(t.Context(), "d", "e", at)
		if err != nil || moved != 3 || kept != 2 {
			t.Fatalf("Move = %d, %d, %v; want a's 3 moved, b's 2 kept", moved, kept, err)
		}
		for _, want := range []string{"a/1", "a/2", "a/3"} {
			got := mustLease(t, o.q, "e", 10, at)
			if g := ids(got); !slices.Equal(g, []string{want}) {
				t.Fatalf("leased %v from the destination moved to, want %s alone", g, want)
			}
			mustSettle(t, o.q, "e", []sender.Outcome{{Kind: sender.Delivered, ID: want, LeaseUntil: got[0].LeaseUntil}}, at, 0)
		}
		// b/1's holder delivers it; then b/2 moves too.
		mustSettle(t, o.q, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "b/1", LeaseUntil: o.leases["b/1"].LeaseUntil}}, at, 0)
		if moved, kept, err := o.q.Move(t.Context(), "d", "e", at); err != nil || moved != 1 || kept != 0 {
			t.Fatalf("a second Move = %d, %d, %v; want b/2 moved", moved, kept, err)
		}
		if got := ids(mustLease(t, o.q, "e", 10, at)); !slices.Equal(got, []string{"b/2"}) {
			t.Errorf("leased %v, want b/2", got)
		}
	})

	t.Run("OrderedMoveKeepsAnEntityBehindAKeptHead", func(t *testing.T) {
		t.Parallel()
		// to delivered a/1 with another payload: d's a/1 stays, counted
		// kept, and so do a/2 and a/3 behind it; b goes.
		o := newOrdered(t, newQueue, false)
		o.enqueue(t0, "a/1", "a/2", "a/3", "b/1", "b/2")
		o.q.Order("e", sender.Ordering{ByEntity: true})
		other := env("e", "a/1", t0)
		other.Entity, other.Payload = "a", []byte(`{"other":true}`)
		mustEnqueue(t, o.q, other, queued)
		got := mustLease(t, o.q, "e", 10, t0)
		mustSettle(t, o.q, "e", []sender.Outcome{{Kind: sender.Delivered, ID: "a/1", LeaseUntil: got[0].LeaseUntil}}, t0, 0)
		o.q.Order("d", sender.Ordering{})
		moved, kept, err := o.q.Move(t.Context(), "d", "e", t0)
		if err != nil || moved != 2 || kept != 3 {
			t.Fatalf("Move = %d, %d, %v; want b's 2 moved, a's 3 kept", moved, kept, err)
		}
		if g := ids(mustLease(t, o.q, "e", 10, t0)); !slices.Equal(g, []string{"b/1"}) {
			t.Errorf("leased %v in e, want b/1 alone: a/2 must not overtake d's a/1", g)
		}
	})

	t.Run("OrderedEachDestinationOnItsOwn", func(t *testing.T) {
		t.Parallel()
		// A fan-out writes the same ID and entity to each destination:
		// each orders its own, and one's held head holds no other's.
		o := newOrdered(t, newQueue, true)
		o.q.Order("e", sender.Ordering{ByEntity: true, Hold: true})
		o.enqueue(t0, "a/1", "a/2")
		for _, id := range []string{"a/1", "a/2"} {
			e := env("e", id, t0)
			e.Entity = "a"
			if _, err := o.q.Enqueue(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		o.lease(t0, 10, "a/1")
		o.settle(t0, sender.Dead, "a/1", 0) // d's a is held
		got := mustLease(t, o.q, "e", 10, t0)
		if g := ids(got); !slices.Equal(g, []string{"a/1"}) {
			t.Fatalf("leased %v from e, want its own head a/1", g)
		}
		mustSettle(t, o.q, "e", []sender.Outcome{{Kind: sender.Delivered, ID: "a/1", LeaseUntil: got[0].LeaseUntil}}, t0, 0)
		if g := ids(mustLease(t, o.q, "e", 10, t0)); !slices.Equal(g, []string{"a/2"}) {
			t.Errorf("leased %v from e after its head's delivery, want a/2", g)
		}
		if st := o.stats(t0); st.Held != 1 || st.Waiting != 1 {
			t.Errorf("d's Stats = %+v, want a held, a/2 waiting", st)
		}
	})

	t.Run("OrderedRandomized", func(t *testing.T) {
		t.Parallel()
		for seed := range uint64(4) {
			for _, hold := range []bool{false, true} {
				orderedModel(t, newQueue, seed, hold)
			}
		}
	})
}

// orderedModel drives an ordered destination at random (enqueues,
// leases, deliveries, retries, deaths, releases, expired leases,
// redrives and purges of the dead) and checks, at every step, that no
// entity has two envelopes leased, and at the end, that each entity's
// deliveries follow its enqueue order, each delivered once but for
// envelopes redriven (which go again where they were put).
func orderedModel(t *testing.T, newQueue NewQueue, seed uint64, hold bool) {
	o := newOrdered(t, newQueue, hold)
	rnd := rand.New(rand.NewPCG(seed, 33))
	now := t0
	next := map[string]int{}
	order := map[string][]string{} // per entity: enqueue order, a redrive appended (skip) or where it was (hold)
	delivered := map[string][]string{}
	var dead []string
	for step := range 400 {
		switch r := rnd.IntN(10); {
		case r < 3:
			ent := string(rune('a' + rnd.IntN(4)))
			next[ent]++
			id := fmt.Sprintf("%s/%d", ent, next[ent])
			o.enqueue(now, id)
			order[ent] = append(order[ent], id)
		case r < 5:
			got := mustLease(t, o.q, "d", 1+rnd.IntN(3), now)
			for _, l := range got {
				o.leases[l.ID] = l
			}
			seen := map[string]string{}
			for id := range o.leases {
				if other, ok := seen[entityOf(id)]; ok {
					t.Fatalf("seed %d step %d: %s and %s of one entity leased at once", seed, step, other, id)
				}
				seen[entityOf(id)] = id
			}
		case r < 8 && len(o.leases) > 0:
			id := slices.Sorted(maps.Keys(o.leases))[rnd.IntN(len(o.leases))]
			switch k := rnd.IntN(10); {
			case k < 5:
				o.settle(now, sender.Delivered, id, 0)
				delivered[entityOf(id)] = append(delivered[entityOf(id)], id)
			case k < 7:
				o.settle(now, sender.Retry, id, time.Duration(rnd.IntN(3))*time.Second)
			case k < 8:
				o.settle(now, sender.Release, id, 0)
			case k < 9:
				o.settle(now, sender.Dead, id, 0)
				dead = append(dead, id)
				if !hold {
					order[entityOf(id)] = slices.DeleteFunc(order[entityOf(id)], func(s string) bool { return s == id })
				}
			default:
				// The worker is killed: its lease expires.
				delete(o.leases, id)
				now = now.Add(lease)
				for other := range o.leases {
					delete(o.leases, other) // they expired too
				}
			}
		case r < 9 && len(dead) > 0:
			i := rnd.IntN(len(dead))
			id := dead[i]
			dead = slices.Delete(dead, i, i+1)
			if rnd.IntN(2) == 0 {
				if _, err := o.q.Redrive(t.Context(), "d", []string{id}, fmt.Sprint("rd-", step), now); err != nil {
					t.Fatal(err)
				}
				if !hold {
					order[entityOf(id)] = append(order[entityOf(id)], id)
				}
			} else {
				if _, err := o.q.Purge(t.Context(), "d", []string{id}); err != nil {
					t.Fatal(err)
				}
				if hold {
					order[entityOf(id)] = slices.DeleteFunc(order[entityOf(id)], func(s string) bool { return s == id })
				}
			}
		default:
			now = now.Add(time.Second)
		}
	}
	for ent, got := range delivered {
		// Deliveries follow order, which lists each envelope where it
		// stood when it was delivered.
		want := slices.DeleteFunc(slices.Clone(order[ent]), func(id string) bool { return !slices.Contains(got, id) })
		if !slices.Equal(got, want) {
			t.Errorf("seed %d hold %v: entity %s delivered %v, want %v", seed, hold, ent, got, want)
		}
	}
}
