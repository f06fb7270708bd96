package redisqueue_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// replQueues are two Queues on one prefix: waiting waits for n replicas
// within timeout (w), plain waits for none.
type replQueues struct {
	waiting, plain *redisqueue.Queue
	w              *replicas.Waiter
	prefix         string
}

func newReplQueues(rdb redis.UniversalClient, n int, timeout time.Duration) replQueues {
	p := redistest.Prefix("repl")
	w := replicas.New(rdb, n, timeout, slog.New(slog.DiscardHandler))
	q := replQueues{
		waiting: redisqueue.New(rdb, p, time.Hour).WithCallerClock(),
		plain:   redisqueue.New(rdb, p, time.Hour).WithCallerClock(),
		w:       w,
		prefix:  p,
	}
	q.waiting.WaitForReplicas(w)
	return q
}

var replT0 = time.UnixMilli(1_800_000_000_000)

func envelope(id string) *sender.Envelope {
	return &sender.Envelope{ID: id, Destination: "d", CreatedAt: replT0, NextAt: replT0, Payload: []byte("{}")}
}

// replCounts is Counts with every op, those of some as given.
func replCounts(some map[string]int64) map[string]int64 {
	m := map[string]int64{}
	for _, op := range replicas.Ops {
		m[op.Name] = some[op.Name]
	}
	return m
}

// settleRedrivePurge leases a, b, c and d, settles a delivered and the
// others dead, then redrives b, resends c and purges d, all through the
// waiting queue: none of these fails, short or not.
func settleRedrivePurge(t *testing.T, q replQueues) {
	t.Helper()
	ctx := t.Context()
	leased, err := q.plain.Lease(ctx, "d", 10, replT0, time.Minute)
	if err != nil || len(leased) != 4 {
		t.Fatalf("Lease = %d envelopes, %v; want 4", len(leased), err)
	}
	var outs []sender.Outcome
	for _, l := range leased {
		o := sender.Outcome{Kind: sender.Dead, ID: l.ID, LeaseUntil: l.LeaseUntil, Envelope: l.Envelope}
		l.DeadAt = replT0
		if l.ID == "a" {
			o.Kind = sender.Delivered
		}
		outs = append(outs, o)
	}
	if skipped, err := q.waiting.Settle(ctx, "d", outs, replT0); err != nil || skipped != 0 {
		t.Errorf("Settle = %d skipped, %v; want 0, nil", skipped, err)
	}
	now := replT0.Add(time.Second)
	if moved, err := q.waiting.Redrive(ctx, "d", []string{"b"}, "rd-1", now); err != nil || !slices.Equal(moved, []string{"b"}) {
		t.Errorf("Redrive = %v, %v; want [b], nil", moved, err)
	}
	if moved, err := q.waiting.Resend(ctx, "d", []string{"c"}, "rs-1", now); err != nil || !slices.Equal(moved, []string{"c"}) {
		t.Errorf("Resend = %v, %v; want [c], nil", moved, err)
	}
	if n, err := q.waiting.Purge(ctx, "d", []string{"d"}); err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want 1, nil", n, err)
	}
	st, err := q.plain.Stats(ctx, "d", now)
	if err != nil || st.Queued != 2 || st.Dead != 0 || st.Leased != 0 {
		t.Errorf("Stats = %+v, %v; want b and c queued, nothing dead or leased", st, err)
	}
}

// TestShortEnqueueIsRefused: on a lone master, and on a Cluster of
// masters without replicas, an enqueue no replica acknowledged is
// refused with ErrShortfall, though the master holds it (a retry of the
// same ID is a duplicate); a settle, redrive, resend and purge are
// counted, not refused.
func TestShortEnqueueIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	single := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	cluster := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: redistest.StartCluster(t), IsClusterMode: true})
	t.Cleanup(func() { _ = single.Close(); _ = cluster.Close() })
	for name, rdb := range map[string]redis.UniversalClient{"single": single, "cluster": cluster} {
		t.Run(name, func(t *testing.T) {
			q := newReplQueues(rdb, 1, 50*time.Millisecond)
			ctx := t.Context()
			if _, err := q.waiting.Enqueue(ctx, envelope("a")); !errors.Is(err, replicas.ErrShortfall) {
				t.Fatalf("Enqueue = %v, want ErrShortfall", err)
			}
			if res, err := q.plain.Enqueue(ctx, envelope("a")); err != nil || !res.Duplicate {
				t.Errorf("the retry's Enqueue = %+v, %v; want a duplicate: the refused one is on the master", res, err)
			}
			// A duplicate writes nothing, yet its 202 would vouch for
			// the original: its fence falls short too, and it is refused.
			if _, err := q.waiting.Enqueue(ctx, envelope("a")); !errors.Is(err, replicas.ErrShortfall) {
				t.Errorf("a duplicate's Enqueue = %v, want ErrShortfall", err)
			}
			for _, id := range []string{"b", "c", "d"} {
				if _, err := q.plain.Enqueue(ctx, envelope(id)); err != nil {
					t.Fatal(err)
				}
			}
			settleRedrivePurge(t, q)
			want := replCounts(map[string]int64{"enqueue": 2, "settle": 1, "redrive": 1, "resend": 1, "purge": 1})
			if diff := cmp.Diff(want, q.w.Counts()); diff != "" {
				t.Errorf("Counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWithReplicaQueueFallsShortOfNothing: on a master with a replica,
// every waiting write is acknowledged: no error, no shortfall.
func TestWithReplicaQueueFallsShortOfNothing(t *testing.T) {
	m, r := redistest.StartReplicated(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{m.Addr()}})
	replica := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = rdb.Close(); _ = replica.Close() })
	q := newReplQueues(rdb, 1, 5*time.Second)
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c", "d"} {
		if res, err := q.waiting.Enqueue(ctx, envelope(id)); err != nil || res.Duplicate {
			t.Fatalf("Enqueue %s = %+v, %v; want new, nil", id, res, err)
		}
		// The replica holds the envelope once its enqueue is answered.
		if ok, err := replica.HExists(ctx, q.prefix+":q:{d}:meta", id).Result(); err != nil || !ok {
			t.Errorf("the replica holds %s: %v, %v; want true", id, ok, err)
		}
	}
	// A duplicate is answered as one once its fence is acknowledged.
	if res, err := q.waiting.Enqueue(ctx, envelope("a")); err != nil || !res.Duplicate {
		t.Fatalf("a duplicate's Enqueue = %+v, %v; want a duplicate, nil", res, err)
	}
	settleRedrivePurge(t, q)
	if diff := cmp.Diff(replCounts(nil), q.w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestShortEnqueueRegistersItsDestination: an enqueue refused as short is
// on the master all the same, so when it is its destination's first
// envelope (another instance dropped the destination since this one
// registered it), its name goes back into the destinations SET before
// the refusal: its retry is a duplicate, never first again.
func TestShortEnqueueRegistersItsDestination(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = rdb.Close() })
	q := newReplQueues(rdb, 1, 50*time.Millisecond)
	ctx := t.Context()
	if _, err := q.waiting.Enqueue(ctx, envelope("a")); !errors.Is(err, replicas.ErrShortfall) {
		t.Fatalf("Enqueue = %v, want ErrShortfall", err)
	}
	// Another instance drops the destination: its keys and its name go.
	if _, err := q.plain.Drop(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if names, err := q.plain.Destinations(ctx); err != nil || len(names) != 0 {
		t.Fatalf("after the drop, Destinations = %v, %v; want none", names, err)
	}
	if _, err := q.waiting.Enqueue(ctx, envelope("b")); !errors.Is(err, replicas.ErrShortfall) {
		t.Fatalf("Enqueue = %v, want ErrShortfall", err)
	}
	if names, err := q.plain.Destinations(ctx); err != nil || len(names) != 1 || names[0] != "d" {
		t.Errorf("after a refused first enqueue, Destinations = %v, %v; want [d]: its envelope is on the master", names, err)
	}
}
