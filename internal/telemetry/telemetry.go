// Package telemetry holds hookgate's OpenTelemetry instruments: the
// receiver's results, the store's latency, the sender's deliveries and
// queues, and the scheduled reconcile runs; and the receiver's spans
// (StartSpan). They are exported through a
// Prometheus registry (Caddy's, new at each config load), so each load
// builds its own provider; names are exact (no suffixes added).
package telemetry

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookgate/hookgate/reconcile"
	"github.com/hookgate/hookgate/sender"
)

// Metrics holds the instruments of one config load.
type Metrics struct {
	provider        *sdkmetric.MeterProvider
	storeOpDuration metric.Float64Histogram
	// The receiver's results, counted on every request: see counts.
	verifyRequests, dedupeRequests, freshness counts
	sender                                    *senderMetrics
	reconcile                                 *reconcileMetrics
}

// New builds the instruments, exported through reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
		// Names as given: no unit or _total suffix added.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes),
	)
	if err != nil {
		return nil, err
	}
	m := &Metrics{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))}
	meter := m.provider.Meter("github.com/hookgate/hookgate")
	if err := m.verifyRequests.register(meter, "hookgate_verify_requests_total",
		"Webhook verifications by scheme and result."); err != nil {
		return nil, err
	}
	if err := m.dedupeRequests.register(meter, "hookgate_dedupe_requests_total",
		"Dedupe outcomes: forwarded, replayed, in_flight, mismatch, store_error, lease_expired, and the 400 and 413 reasons."); err != nil {
		return nil, err
	}
	if err := m.freshness.register(meter, "hookgate_freshness_total",
		"Freshness outcomes: applied, not_applied, superseded, too_old, entity_busy, store_error, and the 400 reasons."); err != nil {
		return nil, err
	}
	m.storeOpDuration, err = meter.Float64Histogram("hookgate_store_op_duration_seconds",
		metric.WithDescription("Latency of state store operations by backend and operation."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	if err != nil {
		return nil, err
	}
	if m.sender, err = newSenderMetrics(meter); err != nil {
		return nil, err
	}
	if m.reconcile, err = newReconcileMetrics(meter); err != nil {
		return nil, err
	}
	return m, nil
}

// Verified counts one webhook_verify result, and sets it as the
// handler's span's hookgate.result (SpanResult).
func (m *Metrics) Verified(span trace.Span, scheme, result string) {
	m.verifyRequests.add(scheme+"\x00"+result, func() attribute.Set {
		return attribute.NewSet(attribute.String("scheme", scheme), attribute.String("result", result))
	})
	SpanResult(span, result)
}

// DedupeResult counts one webhook_dedupe outcome, and sets it as the
// handler's span's hookgate.result.
func (m *Metrics) DedupeResult(span trace.Span, result string) {
	m.dedupeRequests.add(result, func() attribute.Set { return attribute.NewSet(attribute.String("result", result)) })
	SpanResult(span, result)
}

// FreshnessResult counts one webhook_freshness outcome, and sets it as
// the handler's span's hookgate.result.
func (m *Metrics) FreshnessResult(span trace.Span, result string) {
	m.freshness.add(result, func() attribute.Set { return attribute.NewSet(attribute.String("result", result)) })
	SpanResult(span, result)
}

// SpanResult sets a receiver handler's result (its metric's result label)
// as its span's hookgate.result attribute, when the span records.
func SpanResult(span trace.Span, result string) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hookgate.result", result))
	}
}

// counts is a counter of the receiver's results, counted on every
// request: one atomic count per label set (the labels are fixed codes and
// configured names, so the sets are few), each found by a map read and
// its attribute set built once, and read by the SDK when it collects (an
// observable counter). The SDK's own Add would look the attribute set up
// in its aggregation map, under a lock, for each request; what is
// exported is the same counter, the same series, from the first count of
// each on.
type counts struct {
	inst metric.Int64ObservableCounter
	m    sync.Map // label key -> *count
}

type count struct {
	n    atomic.Int64
	opts []metric.ObserveOption
}

func (c *counts) register(meter metric.Meter, name, description string) (err error) {
	c.inst, err = meter.Int64ObservableCounter(name, metric.WithDescription(description),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			c.m.Range(func(_, v any) bool {
				n := v.(*count)
				o.Observe(n.n.Load(), n.opts...)
				return true
			})
			return nil
		}))
	return err
}

// add counts one under key, whose attribute set attrs builds.
func (c *counts) add(key string, attrs func() attribute.Set) {
	v, ok := c.m.Load(key)
	if !ok {
		// A copy of key is kept, so that key itself does not escape: a
		// caller's key built by concatenation stays on its stack.
		v, _ = c.m.LoadOrStore(strings.Clone(key), &count{opts: []metric.ObserveOption{metric.WithAttributeSet(attrs())}})
	}
	v.(*count).n.Add(1)
}

// StoreOpDuration is the histogram of the store's operations, by backend
// and operation (store.Lazy records into it).
func (m *Metrics) StoreOpDuration() metric.Float64Histogram { return m.storeOpDuration }

// Shutdown stops the provider.
func (m *Metrics) Shutdown() error {
	return m.provider.Shutdown(context.Background())
}

// senderMetrics are the sender's instruments.
type senderMetrics struct {
	deliveries  metric.Int64Counter
	attempts    metric.Int64Counter
	attemptDur  metric.Float64Histogram
	deliveryAge metric.Float64Histogram
	timeToDLQ   metric.Float64Histogram
	enqueued    metric.Int64Counter
	storeErrors metric.Int64Counter
	redriven    metric.Int64Counter
	disabled    metric.Int64Counter
	attrs       sync.Map // label set -> metric.MeasurementOption
}

func newSenderMetrics(meter metric.Meter) (*senderMetrics, error) {
	m := new(senderMetrics)
	var err error
	seconds := metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
	if m.deliveries, err = meter.Int64Counter("hookgate_sender_deliveries_total",
		metric.WithDescription("Envelopes settled for good, by destination and outcome (delivered, dead).")); err != nil {
		return nil, err
	}
	if m.attempts, err = meter.Int64Counter("hookgate_sender_attempts_total",
		metric.WithDescription("Delivery attempts by destination and result (2xx, transient, permanent).")); err != nil {
		return nil, err
	}
	if m.attemptDur, err = meter.Float64Histogram("hookgate_sender_attempt_duration_seconds",
		metric.WithDescription("Latency of delivery attempts by destination."), metric.WithUnit("s"), seconds); err != nil {
		return nil, err
	}
	if m.deliveryAge, err = meter.Float64Histogram("hookgate_sender_delivery_age_seconds",
		metric.WithDescription("Time from enqueue to successful delivery, by destination."), metric.WithUnit("s"), seconds); err != nil {
		return nil, err
	}
	if m.timeToDLQ, err = meter.Float64Histogram("hookgate_sender_time_to_dlq_seconds",
		metric.WithDescription("Time from the first failed attempt to the dead letter, by destination."), metric.WithUnit("s"), seconds); err != nil {
		return nil, err
	}
	if m.storeErrors, err = meter.Int64Counter("hookgate_sender_store_errors_total",
		metric.WithDescription("Failed queue operations by destination and op (lease, settle).")); err != nil {
		return nil, err
	}
	if m.redriven, err = meter.Int64Counter("hookgate_sender_redriven_total",
		metric.WithDescription("Dead letters moved back to the queue by a redrive, by destination.")); err != nil {
		return nil, err
	}
	if m.disabled, err = meter.Int64Counter("hookgate_sender_disabled_total",
		metric.WithDescription("Destinations disabled, by destination and reason (failing: disable_after; gone: a 410).")); err != nil {
		return nil, err
	}
	if m.enqueued, err = meter.Int64Counter("hookgate_sender_enqueued_total",
		metric.WithDescription("Enqueues by destination and result (queued, duplicate; unrouted, with destination \"\", for an event no destination subscribes to).")); err != nil {
		return nil, err
	}
	return m, nil
}

// labels returns the measurement option of a label set, built once.
func (m *senderMetrics) labels(kv ...string) metric.MeasurementOption {
	key := strings.Join(kv, "\x00")
	if v, ok := m.attrs.Load(key); ok {
		return v.(metric.MeasurementOption)
	}
	var as []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		as = append(as, attribute.String(kv[i], kv[i+1]))
	}
	v, _ := m.attrs.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(as...)))
	return v.(metric.MeasurementOption)
}

// ZeroDestinations starts each destination's counters at 0, so that every series a
// rule or panel divides by exists from the start: a destination that never
// dead-lettered still has deliveries_total{outcome="dead"}, and its error
// ratio is 0, not absent.
func (m *Metrics) ZeroDestinations(dests []string) {
	m.sender.zero(dests)
}

func (m *senderMetrics) zero(dests []string) {
	ctx := context.Background()
	for _, d := range dests {
		for _, outcome := range []string{"delivered", "dead"} {
			m.deliveries.Add(ctx, 0, m.labels("destination", d, "outcome", outcome))
		}
		for _, result := range []string{"2xx", "transient", "permanent"} {
			m.attempts.Add(ctx, 0, m.labels("destination", d, "result", result))
		}
		for _, result := range []string{"queued", "duplicate"} {
			m.enqueued.Add(ctx, 0, m.labels("destination", d, "result", result))
		}
		m.redriven.Add(ctx, 0, m.labels("destination", d))
		for _, reason := range []string{"failing", "gone"} {
			m.disabled.Add(ctx, 0, m.labels("destination", d, "reason", reason))
		}
	}
}

// SenderObserver observes the sender's deliveries.
func (m *Metrics) SenderObserver() sender.Observer { return observer{m.sender} }

type observer struct{ m *senderMetrics }

func (o observer) Attempt(dest, result string, latency time.Duration) {
	ctx := context.Background()
	o.m.attempts.Add(ctx, 1, o.m.labels("destination", dest, "result", result))
	o.m.attemptDur.Record(ctx, latency.Seconds(), o.m.labels("destination", dest))
}

func (o observer) Delivered(dest string, age time.Duration) {
	ctx := context.Background()
	o.m.deliveries.Add(ctx, 1, o.m.labels("destination", dest, "outcome", "delivered"))
	o.m.deliveryAge.Record(ctx, age.Seconds(), o.m.labels("destination", dest))
}

func (o observer) Dead(dest string, quarantined time.Duration) {
	ctx := context.Background()
	o.m.deliveries.Add(ctx, 1, o.m.labels("destination", dest, "outcome", "dead"))
	o.m.timeToDLQ.Record(ctx, quarantined.Seconds(), o.m.labels("destination", dest))
}

func (o observer) Disabled(dest, reason string) {
	o.m.disabled.Add(context.Background(), 1, o.m.labels("destination", dest, "reason", reason))
}

func (o observer) StoreError(dest, op string) {
	o.m.storeErrors.Add(context.Background(), 1, o.m.labels("destination", dest, "op", op))
}

// Redriven counts the dead letters a redrive moved.
func (m *Metrics) Redriven(ctx context.Context, letters []sender.Letter) {
	for _, l := range letters {
		m.sender.redriven.Add(ctx, 1, m.sender.labels("destination", l.Destination))
	}
}

// Enqueued counts an enqueue.
func (o observer) Enqueued(dest, result string) {
	o.m.enqueued.Add(context.Background(), 1, o.m.labels("destination", dest, "result", result))
}

// ObserveReplicationShortfalls registers
// hookgate_store_replication_shortfalls_total{op}, read from counts at
// each scrape: the writes that fewer replicas than min_replicas
// acknowledged in time, by operation (nothing while counts is nil).
func (m *Metrics) ObserveReplicationShortfalls(counts func() map[string]int64) error {
	meter := m.provider.Meter("github.com/hookgate/hookgate")
	_, err := meter.Int64ObservableCounter("hookgate_store_replication_shortfalls_total",
		metric.WithDescription("Redis writes that fewer replicas than min_replicas acknowledged in time, by operation: an enqueue or claim answered 503, or a record, settle, watermark, redrive, resend or purge already done."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for op, n := range counts() {
				o.Observe(n, metric.WithAttributes(attribute.String("op", op)))
			}
			return nil
		}))
	return err
}

// ObserveQueues registers the gauges read from s's queue at each scrape:
// depth by state, oldest ready age, history entries, breaker state, and
// what ordered destinations hold waiting; of the destinations named
// (the Caddyfile's), and the orphans. Those made through the admin API
// have none: a platform's thousands of customers' endpoints would be
// thousands of series, each read from the store at every scrape; their
// status answers the same (GET /hookgate/destinations/<name>).
func (m *Metrics) ObserveQueues(s *sender.Sender, named []string) error {
	meter := m.provider.Meter("github.com/hookgate/hookgate")
	depth, err := meter.Int64ObservableGauge("hookgate_sender_queue_depth",
		metric.WithDescription("Envelopes by destination and state (queued, leased, paused, dead, corrupt)."))
	if err != nil {
		return err
	}
	oldest, err := meter.Float64ObservableGauge("hookgate_sender_oldest_ready_age_seconds",
		metric.WithDescription("Age of the oldest envelope due for delivery, by destination."), metric.WithUnit("s"))
	if err != nil {
		return err
	}
	oldestDead, err := meter.Float64ObservableGauge("hookgate_sender_dlq_oldest_age_seconds",
		metric.WithDescription("Age of the oldest dead letter, by destination; 0 when there is none."), metric.WithUnit("s"))
	if err != nil {
		return err
	}
	history, err := meter.Int64ObservableGauge("hookgate_sender_history_entries",
		metric.WithDescription("Delivered and dead envelopes the history keeps, by destination: approximate, read from a counter."))
	if err != nil {
		return err
	}
	breaker, err := meter.Int64ObservableGauge("hookgate_sender_breaker_state",
		metric.WithDescription("Destination breaker state: 0 closed, 1 half-open, 2 open."))
	if err != nil {
		return err
	}
	waiting, err := meter.Int64ObservableGauge("hookgate_sender_ordered_waiting",
		metric.WithDescription("Envelopes that wait behind their entity's head, by destination (ordering entity); counted in the queued or paused depth too."))
	if err != nil {
		return err
	}
	held, err := meter.Int64ObservableGauge("hookgate_sender_ordered_held",
		metric.WithDescription("Entities held behind a dead head until it is redriven, resent, purged or trimmed, by destination (on_dead hold)."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		dests := slices.Clone(named)
		if orphans, err := s.Orphans(ctx); err == nil {
			for _, o := range orphans {
				dests = append(dests, o.Name)
			}
		}
		for _, dest := range dests {
			st, err := s.Queue().Stats(ctx, dest, time.Now())
			if err != nil {
				continue // a scrape while the store is down shows no depth
			}
			queued, paused := st.Queued, 0
			if _, configured := s.BreakerState(dest); st.Paused && configured { // an orphan is orphaned, not paused
				queued, paused = 0, st.Queued
			}
			for state, n := range map[string]int{"queued": queued, "leased": st.Leased, "paused": paused, "dead": st.Dead, "corrupt": st.Corrupt} {
				o.ObserveInt64(depth, int64(n), metric.WithAttributes(attribute.String("destination", dest), attribute.String("state", state)))
			}
			o.ObserveFloat64(oldest, st.OldestReady.Seconds(), metric.WithAttributes(attribute.String("destination", dest)))
			deadAge := 0.0
			if !st.OldestDead.IsZero() {
				deadAge = time.Since(st.OldestDead).Seconds()
			}
			o.ObserveFloat64(oldestDead, deadAge, metric.WithAttributes(attribute.String("destination", dest)))
			o.ObserveInt64(history, int64(st.History), metric.WithAttributes(attribute.String("destination", dest)))
			o.ObserveInt64(waiting, int64(st.Waiting), metric.WithAttributes(attribute.String("destination", dest)))
			o.ObserveInt64(held, int64(st.Held), metric.WithAttributes(attribute.String("destination", dest)))
			if bs, ok := s.BreakerState(dest); ok { // an orphan has none
				o.ObserveInt64(breaker, breakerValue(bs), metric.WithAttributes(attribute.String("destination", dest)))
			}
		}
		return nil
	}, depth, oldest, oldestDead, history, breaker, waiting, held)
	return err
}

// breakerValue maps a breaker state to the gauge's value.
func breakerValue(s gobreaker.State) int64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// Reconcile observes the scheduled reconcile runs.
func (m *Metrics) Reconcile() reconcile.Observer { return m.reconcile }

// reconcileMetrics are the scheduled runs' instruments; they observe the
// runs as a reconcile.Observer.
type reconcileMetrics struct {
	drift    metric.Int64Gauge
	lastRun  metric.Float64Gauge
	period   metric.Float64Gauge
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
	if m.period, err = meter.Float64Gauge("hookgate_reconcile_period_seconds",
		metric.WithDescription("The period of each scheduled reconcile job (its every), by job: an alert compares the last run's time with twice it.")); err != nil {
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

// Scheduled implements reconcile.Observer: the job's period, and its run
// counters at 0, so that the first failed run is an increase.
func (m *reconcileMetrics) Scheduled(job string, every time.Duration) {
	ctx, jobAttr := context.Background(), attribute.String("job", job)
	m.period.Record(ctx, every.Seconds(), metric.WithAttributes(jobAttr))
	for _, r := range []reconcile.Result{reconcile.ResultClean, reconcile.ResultDrift, reconcile.ResultError, reconcile.ResultSkipped} {
		m.runs.Add(ctx, 0, metric.WithAttributes(jobAttr, attribute.String("result", string(r))))
	}
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

// StartSpan starts a child span of ctx's with hookgate's tracer from the
// span's provider: Caddy does not set a global provider, its tracing
// handler puts the span in the context. Without tracing (no span in
// ctx, so its provider is the no-op one) it returns ctx and its no-op span
// as they are: a no-op child would record nothing either, and would cost
// a context and a request copy per handler.
func StartSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return StartChildSpan(ctx, trace.SpanFromContext(ctx), name, opts...)
}

// StartChildSpan is StartSpan where the caller has ctx's span at hand.
func StartChildSpan(ctx context.Context, parent trace.Span, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !parent.SpanContext().IsValid() && !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer("github.com/hookgate/hookgate").Start(ctx, name, opts...)
}
