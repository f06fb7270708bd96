package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
