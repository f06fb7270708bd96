package store

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestPingFile: the embedded store answers while open, and not once
// closed.
func TestPingFile(t *testing.T) {
	c, err := Open(Config{Backend: "file", Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("open file: %v", err)
	}
	if err := c.Destruct(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()); err == nil {
		t.Error("closed file: Ping answered")
	}
}

// TestPingRedis: a node answers, then does not while stopped (within
// the caller's deadline), then does again once restarted; a Cluster
// answers while its masters do.
func TestPingRedis(t *testing.T) {
	srv := redistest.Start(t)
	c, err := Open(Config{Backend: "redis", URLs: []string{srv.URL()}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	ping := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return c.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("up: %v", err)
	}
	srv.Stop()
	start := time.Now()
	if err := ping(); err == nil {
		t.Fatal("stopped: Ping answered")
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("stopped: Ping took %s, past its 1s deadline", took)
	}
	srv.Restart()
	if err := ping(); err != nil {
		t.Errorf("restarted: %v", err)
	}

	cluster := redistest.StartCluster(t)
	var urls []string
	for _, a := range cluster {
		urls = append(urls, "redis://"+a)
	}
	cc, err := Open(Config{Backend: "redis", URLs: urls}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Destruct() })
	if err := cc.Ping(t.Context()); err != nil {
		t.Errorf("cluster: %v", err)
	}
}

// TestReadyWhenWritesFail: on a real Redis out of memory under
// noeviction, PING answers but every write is refused. Ready is nil while
// writes work, and writes nothing to know it (Redis's count of changes
// stays put, idle or after a claim); once a handler's write fails, Ready
// fails too, naming the refusal, and trying a write of its own at each
// call; once Redis takes writes again, Ready is nil at the next call, with
// no request needed, and writes nothing more.
func TestReadyWhenWritesFail(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	hist, err := noop.NewMeterProvider().Meter("t").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(Config{Backend: "redis", URLs: []string{srv.URL()}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	l := NewLazy(func() (*Conn, error) { return c, nil }, "ready", "redis", hist)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	changes := func() string { // Redis's count of writes since its last save
		t.Helper()
		info, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no rdb_changes_since_last_save in %q", info)
		return ""
	}
	claim := func(key string) error {
		_, err := l.Claim(ctx, key, dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: time.Now()})
		return err
	}
	ready := func(want string) {
		t.Helper()
		err := l.Ready(ctx)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Fatalf("Ready: %v; want %q", err, want)
		}
	}

	ready("")
	before := changes()
	for range 3 {
		ready("")
	}
	if err := claim("a"); err != nil {
		t.Fatal(err)
	}
	after := changes()
	ready("")
	if got := changes(); got != after || before == after {
		t.Fatalf("changes: %s idle, %s after a claim, %s after Ready; want Ready to write nothing", before, after, got)
	}

	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := claim("b"); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a claim on a Redis out of memory: %v; want OOM", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a Redis out of memory: %v", err)
	}
	ready("writes fail: redis claim: OOM command not allowed")
	ready("writes fail: redis claim: OOM command not allowed")

	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	ready("")
	recovered := changes()
	ready("")
	if got := changes(); got != recovered {
		t.Errorf("changes: %s after recovery, %s after Ready; want Ready to write nothing once writes work", recovered, got)
	}
}
