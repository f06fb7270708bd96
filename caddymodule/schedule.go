package caddymodule

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/hookgate/hookgate/reconcile"
)

// Scheduled reconcile runs (reconcile.Schedule): each job with `every`
// runs in the gateway at the start of every slot, one instance at a time
// under a claim in the state store (reconcile.StoreLocker).

// reconcileMetrics are the scheduled runs' instruments; they observe the
// runs as a reconcile.Observer.
type reconcileMetrics struct {
	drift    metric.Int64Gauge
	lastRun  metric.Float64Gauge
	duration metric.Float64Histogram
	runs     metric.Int64Counter
}

func newReconcileMetrics(meter metric.Meter) (*reconcileMetrics, error) {
	m := new(reconcileMetrics)
	var err error
	if m.drift, err = meter.Int64Gauge("hookgate_reconcile_drift",
		metric.WithDescription("Drift found by the last scheduled reconcile run, by job and kind (missing, mismatched, orphaned).")); err != nil {
		return nil, err
	}
	if m.lastRun, err = meter.Float64Gauge("hookgate_reconcile_last_run_timestamp_seconds",
		metric.WithDescription("Unix time of the period of the last scheduled reconcile run this instance completed, by job: with several instances, the drift gauge of the newest is current.")); err != nil {
		return nil, err
	}
	if m.duration, err = meter.Float64Histogram("hookgate_reconcile_duration_seconds",
		metric.WithDescription("Duration of scheduled reconcile runs by job."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)); err != nil {
		return nil, err
	}
	if m.runs, err = meter.Int64Counter("hookgate_reconcile_runs_total",
		metric.WithDescription("Scheduled reconcile runs by job and result: clean, drift, error, or skipped (another instance held the slot).")); err != nil {
		return nil, err
	}
	return m, nil
}

// Ran implements reconcile.Observer.
func (m *reconcileMetrics) Ran(job string, took time.Duration) {
	m.duration.Record(context.Background(), took.Seconds(), metric.WithAttributes(attribute.String("job", job)))
}

// Found implements reconcile.Observer.
func (m *reconcileMetrics) Found(job string, slot time.Time, r *reconcile.Report) {
	ctx, jobAttr := context.Background(), attribute.String("job", job)
	for _, k := range []reconcile.Kind{reconcile.Missing, reconcile.Mismatched, reconcile.Orphaned} {
		m.drift.Record(ctx, int64(r.Drift[k]), metric.WithAttributes(jobAttr, attribute.String("kind", string(k))))
	}
	m.lastRun.Record(ctx, float64(slot.Unix()), metric.WithAttributes(jobAttr))
}

// Ended implements reconcile.Observer.
func (m *reconcileMetrics) Ended(job string, result reconcile.Result) {
	m.runs.Add(context.Background(), 1, metric.WithAttributes(attribute.String("job", job), attribute.String("result", string(result))))
}

// startSchedules starts a loop per job with `every`.
func (a *App) startSchedules() {
	var schedules []*reconcile.Schedule
	for _, j := range a.Reconcile {
		if j.Every <= 0 {
			continue
		}
		s := &reconcile.Schedule{
			Job:      j.Job(),
			Every:    time.Duration(j.Every),
			Locker:   reconcile.StoreLocker{Store: a.store},
			Logger:   slogLogger(a.logger),
			Observer: a.metrics.reconcile,
		}
		if j.Repair != nil {
			s.Enqueuer = reconcile.SenderEnqueuer{Sender: a, Destination: j.Repair.Destination}
			s.Limit = j.Repair.Limit
		}
		schedules = append(schedules, s)
	}
	if len(schedules) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg := new(sync.WaitGroup)
	a.stopSchedules = func() { cancel(); wg.Wait() }
	for _, s := range schedules {
		wg.Go(func() { s.Run(ctx) })
	}
}

// slogLogger is l as a *slog.Logger, as Caddy's ctx.Slogger makes one:
// its name kept, no stack traces added.
func slogLogger(l *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(l.Core(), zapslog.WithName(l.Name()), zapslog.AddStacktraceAt(slog.Level(127))))
}
