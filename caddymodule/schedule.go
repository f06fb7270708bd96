package caddymodule

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/reconcile"
)

// Scheduled reconcile runs. A job with `every` runs in each gateway at the
// start of every slot (Unix time truncated to the period); the first
// instance to claim the slot in the state store runs it, the others skip
// it. The claim is a dedupe claim under a key no webhook can use, leased
// for the period: an instance that dies mid-run leaves the slot to expire,
// and the next slot runs again. A run is bounded by its period, as the
// command's by --timeout: one that outlasts it fails, so it never outlives
// its claim nor runs beside the next slot's run.

// reconcileMetrics are the scheduled runs' instruments.
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

// startSchedules starts a loop per job with `every`.
func (a *App) startSchedules() {
	var jobs []*ReconcileJob
	for _, j := range a.Reconcile {
		if j.Every > 0 {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg := new(sync.WaitGroup)
	a.stopSchedules = func() { cancel(); wg.Wait() }
	for _, j := range jobs {
		wg.Go(func() { a.schedule(ctx, j, time.Now, sleepUntil) })
	}
}

// sleepUntil waits until t or ctx's end, reporting whether t came.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// schedule runs j at the start of each slot until ctx ends.
func (a *App) schedule(ctx context.Context, j *ReconcileJob, now func() time.Time, sleep func(context.Context, time.Time) bool) {
	var last time.Time
	for {
		slot := nextSlot(now(), time.Duration(j.Every), last)
		if !sleep(ctx, slot) {
			return
		}
		a.runScheduled(ctx, j, slot)
		last = slot
	}
}

// nextSlot is the start of the period after now, periods counted from the
// Unix epoch, and after last (a clock stepped back repeats no slot).
func nextSlot(now time.Time, every time.Duration, last time.Time) time.Time {
	slot := time.Unix(0, (now.UnixNano()/int64(every)+1)*int64(every))
	if !last.IsZero() && !slot.After(last) {
		slot = last.Add(every)
	}
	return slot
}

// runScheduled runs j for slot if this instance claims the slot.
func (a *App) runScheduled(ctx context.Context, j *ReconcileJob, slot time.Time) {
	log := a.logger.With(zap.String("job", j.Name), zap.Time("slot", slot))
	jobAttr := attribute.String("job", j.Name)
	count := func(result string) {
		a.metrics.reconcile.runs.Add(ctx, 1, metric.WithAttributes(jobAttr, attribute.String("result", result)))
	}
	key := fmt.Sprintf("\x00reconcile/%s/%d", j.Name, slot.Unix())
	res, err := a.store.Claim(ctx, key, dedupe.Claim{
		Fingerprint: dedupe.FingerprintOf([]byte(j.Name)),
		Token:       rand.Text(), // unique: a claim by the same token is a retry, and wins
		Lease:       time.Duration(j.Every),
		Retention:   2 * time.Duration(j.Every),
		Now:         time.Now(),
	})
	if err != nil {
		log.Error("reconcile: claiming the slot", zap.Error(err))
		count("error")
		return
	}
	if res.Status != dedupe.Claimed {
		log.Debug("reconcile: another instance runs this slot")
		count("skipped")
		return
	}
	opts := reconcile.RunOptions{Timeout: time.Duration(j.Every), Bound: "the job's period, every"}
	if j.Repair != nil {
		opts.Enqueuer = reconcile.SenderEnqueuer{Sender: a, Destination: j.Repair.Destination}
		opts.Limit = j.Repair.Limit
	}
	start := time.Now()
	r, rep, err := j.job().Run(ctx, opts)
	a.metrics.reconcile.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(jobAttr))
	if err != nil {
		log.Error("reconcile run failed", zap.Error(err))
		count("error")
		return
	}
	for _, k := range []reconcile.Kind{reconcile.Missing, reconcile.Mismatched, reconcile.Orphaned} {
		a.metrics.reconcile.drift.Record(ctx, int64(r.Drift[k]), metric.WithAttributes(jobAttr, attribute.String("kind", string(k))))
	}
	a.metrics.reconcile.lastRun.Record(ctx, float64(slot.Unix()), metric.WithAttributes(jobAttr))
	fields := []zap.Field{
		zap.Int("truth", r.Compared.Truth), zap.Int("receiver", r.Compared.Receiver),
		zap.Int("missing", r.Drift[reconcile.Missing]), zap.Int("mismatched", r.Drift[reconcile.Mismatched]),
		zap.Int("orphaned", r.Drift[reconcile.Orphaned]),
		zap.Duration("took", time.Since(start)),
	}
	if rep != nil {
		fields = append(fields, zap.Int("repaired", rep.Repaired), zap.Int("already_repaired", rep.Already), zap.Int("unrepairable", rep.Unrepairable))
		if rep.Unrepairable > 0 {
			keys := make([]string, len(rep.UnrepairableSamples))
			for i, s := range rep.UnrepairableSamples {
				keys[i] = s.Key
			}
			log.Warn("reconcile: keys that cannot make a valid delivery ID (1 to 1024 bytes of visible ASCII) were not repaired",
				zap.Int("unrepairable", rep.Unrepairable), zap.Strings("keys", keys))
		}
	}
	if r.Total() > 0 {
		log.Warn("reconcile found drift", fields...)
		count("drift")
		return
	}
	log.Info("reconcile clean", fields...)
	count("clean")
}
