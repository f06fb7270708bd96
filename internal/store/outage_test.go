package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// logLines is a slog handler's output, safe for the goroutines of a
// go-redis client.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

func TestOutageLogsOnceAMinute(t *testing.T) {
	var logs logLines
	now := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	o := newOutage(slog.New(slog.NewTextHandler(&logs, nil)), []string{"127.0.0.1:6379"}, func() time.Time { return now })
	refused := errors.New("connection refused")

	o.connected() // no outage: nothing to say
	// A failure every 0.7s, as go-redis's retries make them, for 2.5 minutes.
	for range 214 {
		o.failed(refused)
		now = now.Add(700 * time.Millisecond)
	}
	o.connected()
	o.connected()
	got := logs.lines()
	want := []string{
		`level=WARN msg="store: Redis does not answer; until it does, webhooks get 503 store_unavailable and the sender waits"`,
		`level=WARN msg="store: Redis still does not answer" backend=redis addrs=[127.0.0.1:6379] answered=false failures=86 down_for=1m0s`,
		`level=WARN msg="store: Redis still does not answer" backend=redis addrs=[127.0.0.1:6379] answered=false failures=86 down_for=2m0s`,
		`level=INFO msg="store: Redis answers now" backend=redis addrs=[127.0.0.1:6379] answered=true failures=41 down_for=2m30s`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("line %d:\n%s\nwant it to contain\n%s", i, got[i], want[i])
		}
	}
}

// TestOutageAtStart: an outage before Redis ever answered says so.
func TestOutageAtStart(t *testing.T) {
	var logs logLines
	o := newOutage(slog.New(slog.NewTextHandler(&logs, nil)), []string{"127.0.0.1:6379"}, time.Now)
	o.failed(errors.New("connection refused"))
	o.failed(errors.New("connection refused"))
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], `msg="store: Redis does not answer at start;`) {
		t.Errorf("logged:\n%s\nwant one line, at start", strings.Join(got, "\n"))
	}
}

// TestOutageOfARealRedis: a Redis that stops makes one warning however
// many requests fail, and one line when it is back.
func TestOutageOfARealRedis(t *testing.T) {
	srv := redistest.Start(t)
	var logs logLines
	c, err := Open(Config{Backend: "redis", URLs: []string{srv.URL()}}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	ping := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return c.rdb.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for range 20 {
		if ping() == nil {
			t.Fatal("ping answered with Redis stopped")
		}
	}
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for ping() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no answer 10s after the restart")
		}
	}
	all := strings.Join(logs.lines(), "\n")
	if n := strings.Count(all, "Redis does not answer;"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, all)
	}
	if n := strings.Count(all, "Redis answers now"); n != 1 {
		t.Errorf("%d lines saying Redis answers again, want 1:\n%s", n, all)
	}
}
