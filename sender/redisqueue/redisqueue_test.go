package redisqueue_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/queuetest"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

func TestConformanceSingleNode(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewUniversalClient(suiteOptions([]string{srv.Addr()}, false))
	t.Cleanup(func() { _ = rdb.Close() })
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, redistest.Prefix("test"), retention).WithCallerClock()
	})
}

// suiteOptions are the conformance suite's client options: no read or
// write deadline and no retry. On a loaded machine a call may take longer
// than go-redis's default 5 s; the client then retried it, and a retried
// script is not the same call: a Lease whose answer timed out had leased
// the whole batch, and its retry found nothing due (issue 29, item 22:
// ScansReadNoPayload's "List = []"). The suite asserts what the queue
// does, not how fast the machine is.
func suiteOptions(addrs []string, cluster bool) *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: addrs, IsClusterMode: cluster, ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1}
}

// TestConformanceCluster runs the suite against a real three-master
// Cluster: every script must touch one slot.
func TestConformanceCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewUniversalClient(suiteOptions(addrs, true))
	t.Cleanup(func() { _ = rdb.Close() })
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, redistest.Prefix("test"), retention).WithCallerClock()
	})
}

// TestCorruptEntryIsSetAside: an entry that does not decode is set aside
// (counted as corrupt), never leased, and does not stop its destination.
func TestCorruptEntryIsSetAside(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, id := range []string{"a", "b"} {
		if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	// Damage "a": an unknown format version of its record.
	if err := rdb.HSet(t.Context(), p+":q:{d}:meta", "a", "\xff2345678junkjunkjunkjunk").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := q.Lease(t.Context(), "d", 10, t0, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("Lease = %v, %v; want b alone", got, err)
	}
	st, _ := q.Stats(t.Context(), "d", t0)
	if st.Corrupt != 1 || st.Queued != 0 || st.Leased != 1 {
		t.Errorf("Stats = %+v, want 1 corrupt, 1 leased, none queued", st)
	}
	if got, _ := q.Lease(t.Context(), "d", 10, t0.Add(2*time.Minute), time.Minute); len(got) != 1 || got[0].ID != "b" {
		t.Errorf("after b's lease expired = %v, want b again, never a", got)
	}
}

// TestLeasesAreJudgedByRedisClock: an instance whose clock runs an hour
// ahead cannot take over a live lease; the lease ends by Redis's clock.
func TestLeasesAreJudgedByRedisClock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	honest, ahead := redisqueue.New(rdb, p, time.Hour), redisqueue.New(rdb, p, time.Hour)
	now := time.Now()
	if _, err := honest.Enqueue(t.Context(), &sender.Envelope{ID: "a", Destination: "d", CreatedAt: now, NextAt: now, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	first, err := honest.Lease(t.Context(), "d", 1, now, lease)
	if err != nil || len(first) != 1 {
		t.Fatalf("Lease = %v, %v", first, err)
	}
	if got, err := ahead.Lease(t.Context(), "d", 1, now.Add(time.Hour), lease); err != nil || len(got) != 0 {
		t.Fatalf("an instance an hour ahead leased %v (%v) while the lease is live", got, err)
	}
	time.Sleep(3 * lease) // past the lease by any clock
	again, err := ahead.Lease(t.Context(), "d", 1, now.Add(time.Hour), lease)
	if err != nil || len(again) != 1 {
		t.Fatalf("after the lease ended by Redis's clock: %v, %v", again, err)
	}
	if !again[0].LeaseUntil.After(first[0].LeaseUntil) {
		t.Errorf("the new lease ends %v, not after the first %v", again[0].LeaseUntil, first[0].LeaseUntil)
	}
}
