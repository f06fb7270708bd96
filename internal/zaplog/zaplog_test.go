package zaplog

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestSlogLoggerKeepsTheZapLog: the scheduled runs log through slog; an
// entry reaches Caddy's log as the zap logger wrote it: the logger's
// name, the level, the fields encoded as zap encodes them, and no stack
// trace.
func TestSlogLoggerKeepsTheZapLog(t *testing.T) {
	var buf strings.Builder
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "" // the two entries' times differ
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&buf), zapcore.DebugLevel)).Named("hookgate")
	slot := time.Date(2026, 11, 30, 12, 15, 0, 0, time.UTC)
	err := errors.New("store down")
	logger.With(zap.String("job", "j"), zap.Time("slot", slot)).Error("reconcile run failed",
		zap.Error(err), zap.Int("truth", 3), zap.Duration("took", 1500*time.Millisecond), zap.Strings("keys", []string{"a b"}))
	Slog(logger).With(slog.String("job", "j"), slog.Time("slot", slot)).Error("reconcile run failed",
		slog.Any("error", err), slog.Int("truth", 3), slog.Duration("took", 1500*time.Millisecond), slog.Any("keys", []string{"a b"}))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	if diff := cmp.Diff(lines[0], lines[1]); diff != "" {
		t.Errorf("zap (-) and slog (+) lines differ:\n%s", diff)
	}
	if !strings.Contains(lines[1], `"logger":"hookgate"`) || strings.Contains(lines[1], "stacktrace") {
		t.Errorf("the slog line: %s", lines[1])
	}
}

// TestRedis: go-redis's lines are warnings of the logger, but for its
// failed dials, which the store logs as an outage.
func TestRedis(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	r := Redis{Logger: func() *zap.Logger { return zap.New(core).Named("redis") }}
	r.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 3, errors.New("refused"))
	r.Printf(context.Background(), "redis: %s: %d", "sentinel", 7)
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.LoggerName+" "+e.Level.String()+" "+e.Message)
	}
	if diff := cmp.Diff([]string{"redis warn redis: sentinel: 7"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
