package caddymodule

import (
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/internal/outage"
)

// storeLog logs the store failures a receiver handler meets as the store
// logs an outage (internal/outage): the first failure of a run at once,
// then at most one line a minute with the count of failures since the
// last, and the run's end once. Without it, every request rejected during
// an outage logged a line of its own.
type storeLog struct {
	logger *zap.Logger
	what   string // the handler's store: "dedupe" or "freshness"
	run    *outage.Tracker
}

func newStoreLog(logger *zap.Logger, what string, now func() time.Time) *storeLog {
	return &storeLog{logger: logger, what: what, run: outage.New(now)}
}

// failed logs err, a failure of the store, when a line is due; fields say
// which request met it.
func (l *storeLog) failed(err error, fields ...zap.Field) {
	line, ok := l.run.Failed()
	switch {
	case !ok:
	case line.First:
		l.logger.Error(l.what+" store failed; until it answers, further failures are logged once a minute with their count",
			append(fields, zap.Error(err))...)
	default:
		l.logger.Error(l.what+" store still failing",
			append(fields, zap.Int("failures", line.Failures), zap.String("down_for", line.DownFor.String()), zap.Error(err))...)
	}
}

// answered records a request the store answered: the end of a run of
// failures, if one was on. It costs an atomic load otherwise.
func (l *storeLog) answered() {
	if line, ok := l.run.Recovered(); ok {
		l.logger.Info(l.what+" store answers again",
			zap.Int("failures", line.Failures), zap.String("down_for", line.DownFor.String()))
	}
}
