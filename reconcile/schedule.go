package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Scheduled runs. A job with a period runs in each gateway at the start
// of every slot (Unix time truncated to the period); the first instance
// to claim the slot through the Locker runs it, the others skip it. A run
// is bounded by its period, as the command's by --timeout: one that
// outlasts it fails, so it never outlives its claim nor runs beside the
// next slot's run.

// Result is how a slot of a scheduled job ended on one instance.
type Result string

// The results.
const (
	ResultClean   Result = "clean"   // the run found no drift
	ResultDrift   Result = "drift"   // the run found drift (repaired or not)
	ResultError   Result = "error"   // the claim or the run failed
	ResultSkipped Result = "skipped" // another instance held the slot
)

// Observer is told what the scheduled runs do, for metrics.
type Observer interface {
	// Scheduled is a schedule of job, with its period, starting: the
	// alerts compare the last run's time with it.
	Scheduled(job string, every time.Duration)
	// Ran is a run of job, failed or not, that took took.
	Ran(job string, took time.Duration)
	// Found is what a completed run of job for slot found.
	Found(job string, slot time.Time, r *Report)
	// Ended is how a slot of job ended on this instance.
	Ended(job string, result Result)
}

// Schedule runs a job at the start of every slot, one instance at a time.
type Schedule struct {
	Job *Job
	// Every is the period: slots start at its multiples in Unix time.
	Every time.Duration
	// Enqueuer, if set, repairs the missing and mismatched keys, at most
	// Limit newly enqueued per run (default DefaultRepairLimit).
	Enqueuer Enqueuer
	Limit    int
	// Locker lets one instance run each slot.
	Locker Locker
	// Logger logs each slot. Default slog.Default().
	Logger *slog.Logger
	// Observer, if set, is told of each slot.
	Observer Observer
}

// Start runs each schedule on a goroutine of its own; stop ends them and
// waits for them (a run under way is cancelled).
func Start(schedules []*Schedule) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range schedules {
		wg.Go(func() { s.Run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

// Run runs the job at the start of each slot until ctx ends.
func (s *Schedule) Run(ctx context.Context) {
	if s.Observer != nil {
		s.Observer.Scheduled(s.Job.Name, s.Every)
	}
	var last time.Time
	for {
		slot := nextSlot(time.Now(), s.Every, last)
		if !sleepUntil(ctx, slot) {
			return
		}
		s.runSlot(ctx, slot)
		last = slot
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

// nextSlot is the start of the period after now, periods counted from the
// Unix epoch, and after last (a clock stepped back repeats no slot).
func nextSlot(now time.Time, every time.Duration, last time.Time) time.Time {
	slot := time.Unix(0, (now.UnixNano()/int64(every)+1)*int64(every))
	if !last.IsZero() && !slot.After(last) {
		slot = last.Add(every)
	}
	return slot
}

// runSlot runs the job for slot if this instance claims the slot.
func (s *Schedule) runSlot(ctx context.Context, slot time.Time) {
	name := s.Job.Name
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	log := logger.With(slog.String("job", name), slog.Time("slot", slot))
	obs := s.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	held, err := s.Locker.Lock(ctx, name, slot, s.Every)
	if err != nil {
		log.Error("reconcile: claiming the slot", slog.Any("error", err))
		obs.Ended(name, ResultError)
		return
	}
	if !held {
		log.Debug("reconcile: another instance runs this slot")
		obs.Ended(name, ResultSkipped)
		return
	}
	start := time.Now()
	r, rep, err := s.Job.Run(ctx, RunOptions{Timeout: s.Every, Bound: "the job's period, every", Enqueuer: s.Enqueuer, Limit: s.Limit})
	obs.Ran(name, time.Since(start))
	if err != nil {
		log.Error("reconcile run failed", slog.Any("error", err))
		obs.Ended(name, ResultError)
		return
	}
	obs.Found(name, slot, r)
	attrs := []any{
		slog.Int("truth", r.Compared.Truth), slog.Int("receiver", r.Compared.Receiver),
		slog.Int("missing", r.Drift[Missing]), slog.Int("mismatched", r.Drift[Mismatched]),
		slog.Int("orphaned", r.Drift[Orphaned]),
		slog.Duration("took", time.Since(start)),
	}
	if rep != nil {
		attrs = append(attrs, slog.Int("repaired", rep.Repaired), slog.Int("already_repaired", rep.Already), slog.Int("unrepairable", rep.Unrepairable))
		if rep.Unrepairable > 0 {
			keys := make([]string, len(rep.UnrepairableSamples))
			for i, s := range rep.UnrepairableSamples {
				keys[i] = s.Key
			}
			log.Warn("reconcile: keys that cannot make a valid delivery ID (1 to 1024 bytes of visible ASCII) were not repaired",
				slog.Int("unrepairable", rep.Unrepairable), slog.Any("keys", keys))
		}
	}
	if r.Total() > 0 {
		log.Warn("reconcile found drift", attrs...)
		obs.Ended(name, ResultDrift)
		return
	}
	log.Info("reconcile clean", attrs...)
	obs.Ended(name, ResultClean)
}

type nopObserver struct{}

func (nopObserver) Scheduled(string, time.Duration)  {}
func (nopObserver) Ran(string, time.Duration)        {}
func (nopObserver) Found(string, time.Time, *Report) {}
func (nopObserver) Ended(string, Result)             {}
