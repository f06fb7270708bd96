// Package zaplog writes the logs of hookgate's domain packages (slog) and
// of go-redis through Caddy's zap logger, so that every line of the
// gateway reads as one of Caddy's own: JSON, named, leveled.
package zaplog

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// Slog adapts l for the domain packages' slog, so that a line reads as
// one of l's own: under l's name, and without the stack trace zapslog adds
// to every error by default (Caddy's logs carry none unless configured
// to).
func Slog(l *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(l.Core(), zapslog.WithName(l.Name()), zapslog.AddStacktraceAt(slog.Level(math.MaxInt))))
}

// Redis is go-redis's own logger (redis.SetLogger): its lines go to the
// logger Logger returns at each line, as warnings, instead of plain text
// on stderr. Its failed dials are left out: the store logs an outage, once
// a minute at most.
type Redis struct {
	Logger func() *zap.Logger
}

// Printf logs one of go-redis's lines.
func (r Redis) Printf(_ context.Context, format string, v ...any) {
	if strings.HasPrefix(format, "redis: connection pool: failed to dial") {
		return
	}
	r.Logger().Warn(fmt.Sprintf(format, v...))
}
