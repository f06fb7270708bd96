package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestQueueOfAnotherLayoutIsRefusedAtStart: the queue of a Redis store
// that records another layout version (the pre-release upgrade's "2") is
// refused when the app opens it, as the start of the gateway does; a
// Redis that does not answer then does not stop the start.
func TestQueueOfAnotherLayoutIsRefusedAtStart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Set(context.Background(), "old:q:layout", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := Open(Config{Backend: "redis", URLs: []string{srv.URL()}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	h := sender.History{Keep: time.Hour}
	if _, err := c.Queue("old", time.Hour, h); !errors.Is(err, redisqueue.ErrLayout) {
		t.Errorf("Queue of a store of layout 2 = %v, want ErrLayout", err)
	}
	if _, err := c.Queue("fresh", time.Hour, h); err != nil {
		t.Errorf("Queue of a fresh prefix: %v", err)
	}

	down, err := Open(Config{Backend: "redis", URLs: []string{"redis://127.0.0.1:1/0"}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = down.Destruct() })
	if _, err := down.Queue("old", time.Hour, h); err != nil {
		t.Errorf("Queue on a Redis that does not answer: %v, want the start to go on", err)
	}
}
