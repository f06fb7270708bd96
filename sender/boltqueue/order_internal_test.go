package boltqueue

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
)

var orderT0 = time.UnixMilli(1_800_000_000_000)

// orderedQueue is a queue whose destinations d and e are ordered by
// entity, and the leases taken of it.
type orderedQueue struct {
	t      *testing.T
	db     *bolt.DB
	q      *Queue
	leases map[string]sender.Leased
}

func newOrderedQueue(t *testing.T, db *bolt.DB, hold bool) *orderedQueue {
	t.Helper()
	q, err := New(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"d", "e"} {
		q.Order(dest, sender.Ordering{ByEntity: true, Hold: hold})
	}
	return &orderedQueue{t: t, db: db, q: q, leases: map[string]sender.Leased{}}
}

// enqueue enqueues each "<entity>/<n>" ID to dest, with that entity.
func (o *orderedQueue) enqueue(dest string, ids ...string) {
	o.t.Helper()
	for _, id := range ids {
		ent, _, _ := strings.Cut(id, "/")
		e := &sender.Envelope{ID: id, Destination: dest, Entity: ent, CreatedAt: orderT0, NextAt: orderT0, Payload: []byte(`"` + id + `"`)}
		if _, err := o.q.Enqueue(o.t.Context(), e); err != nil {
			o.t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
}

// lease leases up to 10 of dest at now, and checks they are want, in any
// order.
func (o *orderedQueue) lease(dest string, now time.Time, want ...string) {
	o.t.Helper()
	got, err := o.q.Lease(o.t.Context(), dest, 10, now, time.Minute)
	if err != nil {
		o.t.Fatalf("Lease(%s): %v", dest, err)
	}
	var ids []string
	for _, l := range got {
		o.leases[l.ID] = l
		ids = append(ids, l.ID)
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		o.t.Fatalf("Lease(%s) at %s = %v, want %v", dest, now.Sub(orderT0), ids, want)
	}
}

// settle settles the leases of ids in dest with kind, at now.
func (o *orderedQueue) settle(dest string, now time.Time, kind sender.OutcomeKind, ids ...string) {
	o.t.Helper()
	var os []sender.Outcome
	for _, id := range ids {
		l := o.leases[id]
		delete(o.leases, id)
		e := *l.Envelope
		e.Log = append(slices.Clone(e.Log), sender.Attempt{At: now, Status: 500})
		e.DeadAt = now
		os = append(os, sender.Outcome{Kind: kind, ID: id, LeaseUntil: l.LeaseUntil, Envelope: &e})
	}
	if skipped, err := o.q.Settle(o.t.Context(), dest, os, now); err != nil || skipped != 0 {
		o.t.Fatalf("Settle(%s, %v) = %d skipped, %v", dest, ids, skipped, err)
	}
}

// drain leases dest's envelopes one at a time, delivering each, and
// checks they come in the order want.
func (o *orderedQueue) drain(dest string, now time.Time, want ...string) {
	o.t.Helper()
	for _, id := range want {
		o.lease(dest, now, id)
		o.settle(dest, now, sender.Delivered, id)
	}
	o.lease(dest, now)
}

// deliverAll leases and delivers dest's envelopes until none is due, and
// answers each entity's in the order delivered, checking that no entity
// has two leased at once.
func (o *orderedQueue) deliverAll(dest string, now time.Time) map[string][]string {
	o.t.Helper()
	out := map[string][]string{}
	for {
		got, err := o.q.Lease(o.t.Context(), dest, 10, now, time.Minute)
		if err != nil {
			o.t.Fatal(err)
		}
		if len(got) == 0 {
			return out
		}
		seen := map[string]bool{}
		var os []sender.Outcome
		for _, l := range got {
			if seen[l.Entity] {
				o.t.Fatalf("two envelopes of %s leased at once: %v", l.Entity, got)
			}
			seen[l.Entity] = true
			out[l.Entity] = append(out[l.Entity], l.ID)
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: l.ID, LeaseUntil: l.LeaseUntil})
		}
		if _, err := o.q.Settle(o.t.Context(), dest, os, now); err != nil {
			o.t.Fatal(err)
		}
	}
}

func (o *orderedQueue) stats(dest string) sender.Stats {
	o.t.Helper()
	st, err := o.q.Stats(o.t.Context(), dest, orderT0)
	if err != nil {
		o.t.Fatal(err)
	}
	return st
}

// pending lists dest's pending envelopes as "<id> <state> behind=<head>".
func (o *orderedQueue) pending(dest string) []string {
	o.t.Helper()
	p, err := o.q.Pending(o.t.Context(), dest, sender.PendingFilter{}, 100)
	if err != nil {
		o.t.Fatal(err)
	}
	var out []string
	for _, m := range p {
		out = append(out, fmt.Sprintf("%s %s behind=%s", m.ID, m.State, m.Behind))
	}
	return out
}

// TestMoveKeepsAnEntityBehindALiveLease: an entity whose head is leased,
// the lease live, stays in the destination moved from, the head (for
// its holder to settle) and those waiting behind it (moved, they would
// overtake it); the next Move, once it settled, carries them in order.
func TestMoveKeepsAnEntityBehindALiveLease(t *testing.T) {
	o := newOrderedQueue(t, bolttest.Open(t, nil), false)
	o.enqueue("d", "a/1", "a/2", "a/3", "b/1", "b/2", "-/1")
	o.lease("d", orderT0, "a/1", "b/1", "-/1")
	o.settle("d", orderT0, sender.Delivered, "b/1", "-/1")
	moved, kept, err := o.q.Move(t.Context(), "d", "e", orderT0)
	if err != nil || moved != 1 || kept != 3 {
		t.Fatalf("Move = %d moved, %d kept, %v; want b/2 moved, a/1 (leased) and a/2, a/3 kept", moved, kept, err)
	}
	if st := o.stats("d"); st.Leased != 1 || st.Queued != 2 || st.Waiting != 2 {
		t.Errorf("Stats(d) = %+v, want a/1 leased, a/2 and a/3 waiting", st)
	}
	o.drain("e", orderT0, "b/2")
	o.settle("d", orderT0, sender.Delivered, "a/1")
	if moved, kept, err := o.q.Move(t.Context(), "d", "e", orderT0); err != nil || moved != 2 || kept != 0 {
		t.Fatalf("the second Move = %d moved, %d kept, %v; want a/2 and a/3 moved", moved, kept, err)
	}
	if st := o.stats("d"); st != (sender.Stats{}) {
		t.Errorf("Stats(d) after the second Move = %+v, want none", st)
	}
	o.drain("e", orderT0, "a/2", "a/3")
}

// TestMoveCarriesAnEntityInOrderAcrossBatches: an entity longer than a
// Move's transaction is carried in its order (not its IDs'), and joins
// its entity in an ordered destination behind what it holds of it. A
// Move cut short between two transactions leaves both destinations
// whole: the rest of the entity waits behind a head, and the Move done
// again carries it on.
func TestMoveCarriesAnEntityInOrderAcrossBatches(t *testing.T) {
	defer func(n int) { moveBatch = n }(moveBatch)
	moveBatch = 2
	o := newOrderedQueue(t, bolttest.Open(t, nil), false)
	// IDs whose byte order is not the enqueue order.
	order := []string{"a/5", "a/1", "a/4", "a/9", "a/2", "a/8", "a/3"}
	o.enqueue("d", order...)
	o.enqueue("d", "b/2", "b/1")
	o.enqueue("e", "a/0")

	write, writes := o.q.write, 0
	o.q.write = func(fn func(*bolt.Tx) error) error {
		if writes++; writes == 3 {
			return errors.New("cut short")
		}
		return write(fn)
	}
	if _, _, err := o.q.Move(t.Context(), "d", "e", orderT0); err == nil {
		t.Fatal("Move cut short answered no error")
	}
	o.q.write = write
	// Two transactions of two moved a/5, a/1, a/4 and a/9.
	want := []string{"a/2 queued behind=", "b/2 queued behind=", "a/8 queued behind=a/2", "a/3 queued behind=a/2", "b/1 queued behind=b/2"}
	if got := o.pending("d"); !slices.Equal(got, want) {
		t.Errorf("Pending(d) after the Move cut short = %q, want %q", got, want)
	}
	if st := o.stats("d"); st.Queued != 5 || st.Waiting != 3 {
		t.Errorf("Stats(d) after the Move cut short = %+v, want 5 queued, 3 waiting", st)
	}
	moved, kept, err := o.q.Move(t.Context(), "d", "e", orderT0)
	if err != nil || moved != 5 || kept != 0 {
		t.Fatalf("the Move done again = %d moved, %d kept, %v; want 5 moved", moved, kept, err)
	}
	if st := o.stats("d"); st != (sender.Stats{}) {
		t.Errorf("Stats(d) after the Move = %+v, want none", st)
	}
	if st := o.stats("e"); st.Queued != 10 || st.Waiting != 8 {
		t.Errorf("Stats(e) after the Move = %+v, want 10 queued, 8 waiting", st)
	}
	got := o.deliverAll("e", orderT0)
	if want := append([]string{"a/0"}, order...); !slices.Equal(got["a"], want) {
		t.Errorf("e delivered a's envelopes in the order %v, want %v", got["a"], want)
	}
	if want := []string{"b/2", "b/1"}; !slices.Equal(got["b"], want) {
		t.Errorf("e delivered b's envelopes in the order %v, want %v", got["b"], want)
	}
}

// TestOrderSurvivesAReopen: the order, the waiting, a held entity and
// the counts are in the file: a process that opens it again (after a
// crash: the lease it held expires) goes on where it stood.
func TestOrderSurvivesAReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *orderedQueue {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return newOrderedQueue(t, db, true)
	}
	o := open()
	o.enqueue("d", "a/1", "a/2", "a/3", "b/1", "b/2")
	o.lease("d", orderT0, "a/1", "b/1")
	o.settle("d", orderT0, sender.Dead, "a/1")
	if err := o.db.Close(); err != nil {
		t.Fatal(err)
	}

	o = open()
	if st := o.stats("d"); st.Held != 1 || st.Waiting != 3 || st.Dead != 1 || st.Leased != 1 || st.Queued != 3 {
		t.Errorf("Stats after the reopen = %+v, want a held, a/2, a/3 and b/2 waiting, a/1 dead, b/1 leased", st)
	}
	later := orderT0.Add(time.Minute) // b/1's lease expired
	o.lease("d", later, "b/1")
	o.settle("d", later, sender.Delivered, "b/1")
	if moved, err := o.q.Redrive(t.Context(), "d", []string{"a/1"}, "rd-1", later); err != nil || len(moved) != 1 {
		t.Fatalf("Redrive = %v, %v", moved, err)
	}
	o.lease("d", later, "a/1", "b/2")
	o.settle("d", later, sender.Delivered, "b/2")
	o.settle("d", later, sender.Delivered, "a/1")
	o.drain("d", later, "a/2", "a/3")
	if st := o.stats("d"); st.Queued != 0 || st.Waiting != 0 || st.Held != 0 {
		t.Errorf("Stats at the end = %+v, want none queued, waiting or held", st)
	}
}

// TestCorruptHeadLetsTheNextGo: a head whose record does not decode is
// set aside when leased, and the next of its entity is due.
func TestCorruptHeadLetsTheNextGo(t *testing.T) {
	o := newOrderedQueue(t, bolttest.Open(t, nil), false)
	o.enqueue("d", "a/1", "a/2", "a/3")
	err := o.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(rootBucket).Bucket([]byte("d")).Bucket(metaB)
		v := append([]byte(nil), meta.Get([]byte("a/1"))...)
		v[0] = 0xff // an unknown format version
		return meta.Put([]byte("a/1"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	o.lease("d", orderT0)
	if st := o.stats("d"); st.Corrupt != 1 || st.Queued != 2 || st.Waiting != 1 {
		t.Errorf("Stats = %+v, want a/1 corrupt, a/2 due, a/3 waiting", st)
	}
	o.drain("d", orderT0, "a/2", "a/3")
}

// TestAnEntityOverTheCapIsNotOrdered: an entity over sender.MaxEntityLen
// (one stored before the cap: sender.Enqueue refuses it) does not fit an
// ord key; its envelopes are not ordered, rather than refused.
func TestAnEntityOverTheCapIsNotOrdered(t *testing.T) {
	o := newOrderedQueue(t, bolttest.Open(t, nil), false)
	long := strings.Repeat("x", sender.MaxEntityLen+1)
	o.enqueue("d", long+"/1", long+"/2")
	if st := o.stats("d"); st.Queued != 2 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, want 2 queued, none waiting", st)
	}
	o.lease("d", orderT0, long+"/1", long+"/2")
}
