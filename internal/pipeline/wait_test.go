package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// replicated starts a master and a replica of it, and returns clients of
// both once the master reports the replica online. The master's client
// reads for longer than the BLPOP that holds a pipeline in flight.
func replicated(t *testing.T) (master, replica *redis.Client) {
	t.Helper()
	m, r := redistest.StartReplicated(t)
	master = redis.NewClient(&redis.Options{Addr: m.Addr(), ReadTimeout: 30 * time.Second})
	replica = redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = master.Close(); _ = replica.Close() })
	return master, replica
}

// waitFor is a SetWait function: WAIT n replicas for timeout.
func waitFor(n int, timeout time.Duration) func(context.Context) *redis.IntCmd {
	return func(ctx context.Context) *redis.IntCmd {
		return redis.NewIntCmd(ctx, "wait", n, timeout.Milliseconds())
	}
}

// hold keeps the Batcher's first pipeline in flight with a BLPOP (a read)
// until release is called, so that the calls made meanwhile queue and go
// in the next pipeline together.
func hold(t *testing.T, b *Batcher, master *redis.Client, key string) (release func()) {
	t.Helper()
	blpop := redis.NewStringSliceCmd(t.Context(), "blpop", key, 20)
	done := make(chan error, 1)
	go func() { done <- b.Do(t.Context(), blpop) }()
	// The BLPOP is in flight once the queue is empty again and the
	// master has a blocked client.
	waitUntil(t, "the BLPOP blocked", func() bool {
		in, err := master.Info(t.Context(), "clients").Result()
		return err == nil && strings.Contains(in, "blocked_clients:1") && queued(b) == 0
	})
	return func() {
		t.Helper()
		if err := master.LPush(t.Context(), key, "go").Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Errorf("the held BLPOP = %v", err)
		}
	}
}

func queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentWritesShareOneWait: writes queued together go in one
// pipeline ending with one WAIT, and each answers that the replica
// acknowledged it; the read pipeline before them carries no WAIT.
func TestConcurrentWritesShareOneWait(t *testing.T) {
	master, replica := replicated(t)
	b := New(master, 0)
	b.SetWait(waitFor(1, 5*time.Second))
	release := hold(t, b, master, "hold")

	const n = 50
	acked := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			acked[i], errs[i] = b.DoWrite(t.Context(), redis.NewStatusCmd(t.Context(), "set", fmt.Sprintf("k%d", i), "v"))
		})
	}
	waitUntil(t, "the writes queued", func() bool { return queued(b) == n })
	release()
	wg.Wait()

	for i := range n {
		if acked[i] != 1 || errs[i] != nil {
			t.Errorf("DoWrite %d = %d, %v; want 1, nil", i, acked[i], errs[i])
		}
	}
	// The writes were acknowledged by the replica: it holds them all.
	for i := range n {
		if got, err := replica.Get(t.Context(), fmt.Sprintf("k%d", i)).Result(); err != nil || got != "v" {
			t.Errorf("the replica's k%d = %q, %v; want v", i, got, err)
		}
	}
	// The BLPOP alone, then the n writes and one WAIT.
	if got, want := b.Stats(), (Stats{Pipelines: 2, Commands: 1 + n + 1}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// TestReadsCarryNoWait: a pipeline of Do calls only has no WAIT, even
// with SetWait; a pipeline that mixes reads and a write has one, and
// every call in it gets its answer.
func TestReadsCarryNoWait(t *testing.T) {
	master, _ := replicated(t)
	b := New(master, 0)
	b.SetWait(waitFor(1, 5*time.Second))
	ctx := t.Context()

	for i := range 3 {
		if err := b.Do(ctx, redis.NewStringCmd(ctx, "get", "r"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Stats(), (Stats{Pipelines: 3, Commands: 3}); got != want {
		t.Fatalf("after 3 reads Stats = %+v, want %+v (no WAIT)", got, want)
	}

	release := hold(t, b, master, "hold")
	var wg sync.WaitGroup
	get := redis.NewStringCmd(ctx, "get", "w")
	var readErr error
	wg.Go(func() { readErr = b.Do(ctx, get) })
	waitUntil(t, "the read queued", func() bool { return queued(b) == 1 })
	var acked int
	var writeErr error
	wg.Go(func() { acked, writeErr = b.DoWrite(ctx, redis.NewStatusCmd(ctx, "set", "w", "x")) })
	waitUntil(t, "the write queued", func() bool { return queued(b) == 2 })
	release()
	wg.Wait()
	if readErr != nil || get.Err() != redis.Nil || acked != 1 || writeErr != nil {
		t.Errorf("read = %v, GET %v (want nil, redis.Nil: it went first); write = %d, %v (want 1, nil)", readErr, get.Err(), acked, writeErr)
	}
	// 3 reads; the BLPOP; the read, the write and one WAIT.
	if got, want := b.Stats(), (Stats{Pipelines: 5, Commands: 3 + 1 + 3}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// TestWriteWithoutSetWait: without SetWait a write carries no WAIT and
// answers acked 0.
func TestWriteWithoutSetWait(t *testing.T) {
	master, _ := replicated(t)
	b := New(master, 0)
	ctx := t.Context()
	acked, err := b.DoWrite(ctx, redis.NewStatusCmd(ctx, "set", "a", "1"))
	if acked != 0 || err != nil {
		t.Errorf("DoWrite = %d, %v; want 0, nil", acked, err)
	}
	if got, want := b.Stats(), (Stats{Pipelines: 1, Commands: 1}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// TestLoneMasterAcknowledgesNone: on a master without a replica a write
// answers acked 0 once the WAIT's timeout passed, and no error: judging
// it is the caller's.
func TestLoneMasterAcknowledgesNone(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb, 0)
	b.SetWait(waitFor(1, 50*time.Millisecond))
	ctx := t.Context()
	start := time.Now()
	set := redis.NewStatusCmd(ctx, "set", "a", "1")
	acked, err := b.DoWrite(ctx, set)
	if acked != 0 || err != nil || set.Val() != "OK" {
		t.Errorf("DoWrite = %d, %v (SET %q); want 0, nil, OK", acked, err, set.Val())
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("DoWrite took %s, less than the WAIT's timeout: no WAIT?", took)
	}
}
