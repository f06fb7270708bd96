package store

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
)

// TestLateScriptNotResent: a Lease script that ran but answered after the
// read timeout (the server blocked meanwhile) was sent again by go-redis's
// retry, so the envelopes the first run leased were stranded, unseen,
// until their lease expired, and the call succeeded. Now a script is sent
// once: the call fails (the worker counts the error and tries again), and
// Redis ran it once.
func TestLateScriptNotResent(t *testing.T) {
	srv := redistest.StartWith(t, "--enable-debug-command", "yes")
	q, now := fourDue(t, srv.URL())
	ctx := t.Context()
	if _, err := q.Lease(ctx, "warm", 1, now, time.Minute); err != nil { // the script is loaded: one EVALSHA from here
		t.Fatal(err)
	}
	other := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = other.Close() })
	slept := make(chan error, 1)
	go func() { slept <- other.Do(ctx, "DEBUG", "SLEEP", "3").Err() }()
	time.Sleep(200 * time.Millisecond) // the server sleeps

	leased, err := q.Lease(ctx, "d", 2, now, time.Minute)
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	st, serr := q.Stats(ctx, "d", time.Now())
	if serr != nil {
		t.Fatal(serr)
	}
	if st.Leased != 2 || err == nil {
		t.Errorf("Lease of 2 while the server slept past the read timeout: %d returned, error %v; Redis holds %d leased (%d stranded), want the error and 2 leased (the script ran once)",
			len(leased), err, st.Leased, st.Leased-len(leased))
	}
}

// busy runs a script that holds the server for d: nothing else runs
// meanwhile (short of lua-time-limit, 5s), as under DEBUG SLEEP, which a
// Cluster node of redistest does not allow.
var busy = redis.NewScript(`
local t0 = redis.call('TIME')
local start = t0[1] * 1000000 + t0[2]
repeat
	local t = redis.call('TIME')
until (t[1] * 1000000 + t[2]) - start > tonumber(ARGV[1])
return 1`)

// TestLateScriptNotResentCluster: the Cluster client has a retry loop of
// its own (MaxRedirects), which resent a script whose reply timed out;
// it sends it once too.
func TestLateScriptNotResentCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	var urls []string
	for _, a := range addrs {
		urls = append(urls, "redis://"+a)
	}
	q, now := fourDue(t, urls...)
	ctx := t.Context()
	warm, err := q.Lease(ctx, "d", 1, now, time.Minute) // the script is loaded on d's node
	if err != nil || len(warm) != 1 {
		t.Fatal(warm, err)
	}
	slept := make(chan error, len(addrs))
	for _, a := range addrs { // the node that holds d among them
		node := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { _ = node.Close() })
		go func() { slept <- busy.Run(ctx, node, nil, 3_000_000).Err() }()
	}
	time.Sleep(200 * time.Millisecond)

	leased, err := q.Lease(ctx, "d", 2, now, time.Minute)
	for range addrs {
		if err := <-slept; err != nil {
			t.Fatal(err)
		}
	}
	st, serr := q.Stats(ctx, "d", time.Now())
	if serr != nil {
		t.Fatal(serr)
	}
	if st.Leased -= len(warm); st.Leased != 2 || err == nil {
		t.Errorf("Lease of 2 while the node was busy past the read timeout: %d returned, error %v; Redis holds %d leased (%d stranded), want the error and 2 leased (the script ran once)",
			len(leased), err, st.Leased, st.Leased-len(leased))
	}
}

// fourDue opens the sender's queue on the Redis at urls, holding four
// envelopes for destination d, due at the now it returns.
func fourDue(t *testing.T, urls ...string) (sender.AuditedQueue, time.Time) {
	t.Helper()
	c, err := Open(Config{Backend: "redis", URLs: urls}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	q, err := c.Queue("late", time.Hour, sender.History{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 4 {
		e := &sender.Envelope{ID: fmt.Sprintf("evt_%d", i), Destination: "d", Payload: []byte(`{}`), CreatedAt: now, NextAt: now}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	return q, now
}
