package boltqueue

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// TestOrderedModelWithMovesAndReopens drives an ordered destination at
// random, as the conformance suite's model does, and beyond it moves
// its envelopes back and forth between two ordered names (once every
// lease expired: nothing is kept) and opens the file again; it checks
// the file's ordering (checkOrderLayout) at every step, and at the end
// that each entity's deliveries followed its order.
func TestOrderedModelWithMovesAndReopens(t *testing.T) {
	for seed := range uint64(6) {
		for _, hold := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d,hold=%v", seed, hold), func(t *testing.T) {
				orderedModelWithMoves(t, seed, hold)
			})
		}
	}
}

func orderedModelWithMoves(t *testing.T, seed uint64, hold bool) {
	path := filepath.Join(t.TempDir(), "state.db")
	var o *orderedQueue
	open := func() {
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		o = newOrderedQueue(t, db, hold)
		o.q.history.Keep = 1000 * time.Hour // nothing is trimmed
		o.q.retention = 1000 * time.Hour
	}
	open()
	rnd := rand.New(rand.NewPCG(seed, 34))
	now := orderT0
	cur, other := "d", "e" // where every envelope is
	next := map[string]int{}
	order := map[string][]string{} // per entity, as in queuetest's model
	inPlace := map[string]bool{}   // dead letters that hold their place (hold)
	delivered := map[string][]string{}
	var dead []string
	for step := range 500 {
		op := ""
		switch r := rnd.IntN(12); {
		case r < 3:
			op = "enqueue"
			ent := string(rune('a' + rnd.IntN(4)))
			next[ent]++
			id := fmt.Sprintf("%s/%d", ent, next[ent])
			o.enqueue(cur, id)
			order[ent] = append(order[ent], id)
		case r < 5:
			op = "lease"
			got, err := o.q.Lease(t.Context(), cur, 1+rnd.IntN(3), now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range got {
				o.leases[l.ID] = l
			}
			seen := map[string]string{}
			for id := range o.leases {
				ent := o.leases[id].Entity
				if other, ok := seen[ent]; ok {
					t.Fatalf("step %d: %s and %s of one entity leased at once", step, other, id)
				}
				seen[ent] = id
			}
		case r < 8 && len(o.leases) > 0:
			id := slices.Sorted(maps.Keys(o.leases))[rnd.IntN(len(o.leases))]
			ent := o.leases[id].Entity
			switch k := rnd.IntN(9); {
			case k < 5:
				op = "deliver"
				o.settle(cur, now, sender.Delivered, id)
				delivered[ent] = append(delivered[ent], id)
			case k < 7:
				op = "retry"
				l := o.leases[id]
				delete(o.leases, id)
				e := *l.Envelope
				e.NextAt = now.Add(time.Duration(rnd.IntN(3)) * time.Second)
				if _, err := o.q.Settle(t.Context(), cur, []sender.Outcome{{Kind: sender.Retry, ID: id, LeaseUntil: l.LeaseUntil, Envelope: &e}}, now); err != nil {
					t.Fatal(err)
				}
			case k < 8:
				op = "release"
				o.settle(cur, now, sender.Release, id)
			default:
				op = "dead"
				o.settle(cur, now, sender.Dead, id)
				dead = append(dead, id)
				if hold {
					inPlace[id] = true
				} else {
					order[ent] = slices.DeleteFunc(order[ent], func(s string) bool { return s == id })
				}
			}
		case r < 9 && len(dead) > 0:
			i := rnd.IntN(len(dead))
			id := dead[i]
			dead = slices.Delete(dead, i, i+1)
			ent, _, _ := strings.Cut(id, "/")
			if rnd.IntN(2) == 0 {
				op = "redrive"
				if moved, err := o.q.Redrive(t.Context(), cur, []string{id}, fmt.Sprint("rd-", step), now); err != nil || len(moved) != 1 {
					t.Fatalf("step %d: Redrive(%s) = %v, %v", step, id, moved, err)
				}
				if !inPlace[id] {
					order[ent] = append(order[ent], id)
				}
			} else {
				op = "purge"
				if n, err := o.q.Purge(t.Context(), cur, []string{id}); err != nil || n != 1 {
					t.Fatalf("step %d: Purge(%s) = %d, %v", step, id, n, err)
				}
				order[ent] = slices.DeleteFunc(order[ent], func(s string) bool { return s == id })
			}
			delete(inPlace, id)
		case r < 10:
			op = "expire"
			now = now.Add(time.Minute)
			clear(o.leases)
			switch rnd.IntN(3) {
			case 0:
				op = "move"
				if _, kept, err := o.q.Move(t.Context(), cur, other, now); err != nil || kept != 0 {
					t.Fatalf("step %d: Move = %d kept, %v", step, kept, err)
				}
				cur, other = other, cur
				// A dead head held its place no more: redriven, it
				// joins the back.
				for id := range inPlace {
					ent, _, _ := strings.Cut(id, "/")
					order[ent] = slices.DeleteFunc(order[ent], func(s string) bool { return s == id })
				}
				clear(inPlace)
			case 1:
				op = "reopen"
				if err := o.db.Close(); err != nil {
					t.Fatal(err)
				}
				open()
			}
		default:
			op = "time"
			now = now.Add(time.Second)
		}
		checkOrderLayout(t, o.db, fmt.Sprintf("step %d (%s)", step, op))
	}
	for ent, got := range delivered {
		want := slices.DeleteFunc(slices.Clone(order[ent]), func(id string) bool { return !slices.Contains(got, id) })
		if !slices.Equal(got, want) {
			t.Errorf("entity %s delivered %v, want %v", ent, got, want)
		}
	}
}

// checkOrderLayout checks that each destination of db is consistent:
// its counts are its entries'; ord and ordi list the same places; in
// each entity the first is a head (due, leased or dead), the others
// wait; every waiting envelope is in an entity, and in no index.
func checkOrderLayout(t *testing.T, db *bolt.DB, at string) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(rootBucket).ForEachBucket(func(name []byte) error {
			d, err := destOf(tx, string(name))
			if err != nil || d == nil {
				return err
			}
			states := map[byte]int64{}
			if err := d.env.ForEach(func(k, v []byte) error {
				e, err := unmarshal(v)
				if err != nil {
					return err
				}
				states[e.state]++
				if ix := d.index(e.state); ix != nil && ix.Get(indexKey(e.score, string(k))) == nil {
					return fmt.Errorf("%s: %s has no index entry", name, k)
				}
				if ok, _ := d.ordered(false); e.state == 'w' && (!ok || d.ordi.Get(k) == nil) {
					return fmt.Errorf("%s: %s waits in no entity", name, k)
				}
				return nil
			}); err != nil {
				return err
			}
			for state, ix := range map[byte]*bolt.Bucket{'q': d.due, 'l': d.leased, 'x': d.dead} {
				if n := countKeys(ix); n != states[state] {
					return fmt.Errorf("%s: %d index entries of state %c, %d entries", name, n, state, states[state])
				}
			}
			var held int64
			if ok, _ := d.ordered(false); ok {
				var prev []byte
				if err := d.ord.ForEach(func(k, v []byte) error {
					if !bytes.Equal(d.ordi.Get(v), k) {
						return fmt.Errorf("%s: ordi does not point %s at its place", name, v)
					}
					e, ok, err := d.load(string(v))
					if !ok || err != nil {
						return fmt.Errorf("%s: %s is in an entity, its entry gone (%v)", name, v, err)
					}
					first := prev == nil || !bytes.Equal(prefixOf(prev), prefixOf(k))
					switch {
					case first && e.state == 'w':
						return fmt.Errorf("%s: %s heads its entity, and waits", name, v)
					case !first && e.state != 'w':
						return fmt.Errorf("%s: %s is behind its entity's head, in state %c", name, v, e.state)
					case first && e.state == 'x':
						held++
					}
					prev = k
					return nil
				}); err != nil {
					return err
				}
				if a, b := countKeys(d.ord), countKeys(d.ordi); a != b {
					return fmt.Errorf("%s: %d places in ord, %d in ordi", name, a, b)
				}
			}
			want := []int64{states['q'], states['l'], states['x'], states['w'], held}
			got := []int64{d.queued, d.leasedN, d.deadN, d.waitingN, d.heldN}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s: counts queued, leased, dead, waiting, held = %v, entries %v", name, got, want)
			}
			if v := d.b.Get(countsKey); len(v) == 48 && d.waitingN == 0 && d.heldN == 0 {
				return fmt.Errorf("%s: counts of 48 bytes with nothing waiting or held", name)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("%s: %v", at, err)
	}
}
