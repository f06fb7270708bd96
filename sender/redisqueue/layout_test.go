package redisqueue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestAnotherLayoutIsRefused: a store whose queue is in another layout
// (one recorded, or destinations and none recorded) is refused by
// CheckLayout, as at start, and by the first write when Redis could not
// be asked at start, with an error naming the version and the way out;
// nothing of it is read or written. A store without a queue is given
// the current version.
func TestAnotherLayoutIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		name    string
		prepare func(p string)
		version string
	}{
		{"recorded by the upgrade of an earlier version", func(p string) { rdb.Set(ctx, p+":q:layout", "2", 0) }, `"2"`},
		{"none recorded", func(p string) { rdb.SAdd(ctx, p+":q:dests", "d") }, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := redistest.Prefix("test")
			tc.prepare(p)
			q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, redisqueue.ErrLayout) {
					t.Fatalf("%s = %v, want ErrLayout", what, err)
				}
				for _, want := range []string{`"` + p + `"`, "layout version " + tc.version, "reads version " + redisqueue.LayoutVersion, "fresh store"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: the error %q does not say %q", what, err, want)
					}
				}
			}
			check("CheckLayout", q.CheckLayout(ctx))
			_, err := q.Enqueue(ctx, &sender.Envelope{ID: "a", Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")})
			check("Enqueue", err)
			_, err = q.Lease(ctx, "d", 10, t0, time.Minute)
			check("Lease", err)
			if n, _ := rdb.Exists(ctx, p+":q:{d}:meta", p+":q:{d}:body").Result(); n != 0 {
				t.Errorf("the refused store was written: %d keys", n)
			}
		})
	}

	t.Run("fresh", func(t *testing.T) {
		p := redistest.Prefix("test")
		q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
		if _, err := q.Enqueue(ctx, &sender.Envelope{ID: "a", Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatalf("Enqueue on a fresh store: %v", err)
		}
		if v, _ := rdb.Get(ctx, p+":q:layout").Result(); v != redisqueue.LayoutVersion {
			t.Errorf("the recorded version = %q, want %q", v, redisqueue.LayoutVersion)
		}
		again := redisqueue.New(rdb, p, time.Hour)
		if err := again.CheckLayout(ctx); err != nil {
			t.Errorf("CheckLayout of the store it wrote: %v", err)
		}
	})
}
