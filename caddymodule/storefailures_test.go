package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/outage"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestStoreFailuresLoggedOnceAMinute: during a Redis outage, every
// request webhook_dedupe or webhook_freshness rejected logged a line (200
// requests gave 201 lines). The first failure is logged, then at most one
// line a minute with the count since the last, then the end of the run.
func TestStoreFailuresLoggedOnceAMinute(t *testing.T) {
	srv := redistest.Start(t)
	// No retries: each request meets the outage once, at once.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := redisstore.New(rdb, "storelog")
	metrics, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = metrics.Shutdown() })
	clock := &testClock{now: time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)}
	core, logs := observer.New(zap.InfoLevel)
	logger := zap.New(core)

	d, err := dedupe.New(st, dedupe.Config{ReplayCache: -1}, dedupe.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	dd := &Dedupe{deduper: d, now: clock.Now, metrics: metrics, logger: logger, storeLog: outage.NewLog(logger, "dedupe", clock.Now),
		OnStoreError: "reject", bufs: &sync.Pool{New: func() any { return new(bytes.Buffer) }}}
	fresh, err := freshness.New(st, freshness.Config{}, freshness.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	fr := &Freshness{Entity: "{test.entity}", Sequence: "{test.seq}", OnStale: "ack", EntityBusy: "reject",
		fresh: fresh, now: clock.Now, metrics: metrics, logger: logger, storeLog: outage.NewLog(logger, "freshness", clock.Now)}
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusOK)
		return nil
	})
	n := 0
	send := func(h caddyhttp.MiddlewareHandler) int {
		t.Helper()
		n++
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
		repl := caddy.NewReplacer()
		repl.Set("webhook.id", fmt.Sprintf("msg_%d", n))
		repl.Set("test.entity", "e")
		repl.Set("test.seq", n)
		req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl))
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, req, upstream); err != nil {
			t.Fatal(err)
		}
		return w.Code
	}

	for _, h := range []caddyhttp.MiddlewareHandler{dd, fr} {
		if code := send(h); code != http.StatusOK {
			t.Fatalf("before the outage: %d", code)
		}
	}
	srv.Stop()
	// 200 requests each, one every 0.7s: 139.3s of outage.
	for range 200 {
		for _, h := range []caddyhttp.MiddlewareHandler{dd, fr} {
			if code := send(h); code != http.StatusServiceUnavailable {
				t.Fatalf("during the outage: %d, want 503", code)
			}
		}
		clock.Add(700 * time.Millisecond)
	}
	srv.Restart()
	for ctx := t.Context(); rdb.Ping(ctx).Err() != nil; {
		if ctx.Err() != nil {
			t.Fatal("Redis did not come back")
		}
	}
	for _, h := range []caddyhttp.MiddlewareHandler{dd, fr} {
		if code := send(h); code != http.StatusOK {
			t.Fatalf("after the outage: %d", code)
		}
	}

	type line struct {
		Msg               string
		Failures, DownFor any
	}
	var got []line
	for _, e := range logs.All() {
		m := e.ContextMap()
		got = append(got, line{e.Message, m["failures"], m["down_for"]})
	}
	var want []line
	for _, what := range []string{"dedupe", "freshness"} {
		want = append(want,
			line{Msg: what + " store failed; until it answers, further failures are logged once a minute with their count"},
			line{what + " store still failing", int64(86), "1m0s"},
			line{what + " store still failing", int64(86), "2m0s"},
			line{what + " store answers again", int64(27), "2m20s"})
	}
	byHandler := func(ls []line) []line {
		var out []line
		for _, what := range []string{"dedupe", "freshness"} {
			for _, l := range ls {
				if strings.HasPrefix(l.Msg, what+" ") {
					out = append(out, l)
				}
			}
		}
		return out
	}
	if diff := cmp.Diff(want, byHandler(got)); diff != "" || len(got) != len(want) {
		t.Errorf("log lines (-want +got):\n%s\nall: %v", diff, got)
	}
}
