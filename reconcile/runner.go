package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultGrace is a job's grace unless it says otherwise.
const DefaultGrace = 2 * time.Minute

// Job is a reconcile job: the two sides, what a truth state implies, and
// the type of its repair events.
type Job struct {
	Name string
	// Sources returns the two sides for one run; an error fails the run.
	// It is called at each run, so a gateway can read the sources'
	// placeholders ({env.*}) when the job runs.
	Sources func() (truth, receiver Source, err error)
	// Expect maps a truth state to the receiver state it implies (None:
	// the receiver must not hold the key).
	Expect map[string]string
	// Grace leaves out rows updated within it. Default DefaultGrace.
	Grace time.Duration
	// EventType is the repair events' type template ({state}: the truth
	// state). Default "{state}".
	EventType string
}

// ErrRunTimeout is the cause of a run stopped at its time limit.
var ErrRunTimeout = errors.New("the reconcile run timed out")

// RunOptions tune one run of a job.
type RunOptions struct {
	// Timeout bounds the whole run: both sources and the repairs. Bound
	// names what set it, for the error (--timeout, or the period).
	Timeout time.Duration
	Bound   string
	// Enqueuer, if set, repairs the missing and mismatched keys, at most
	// Limit newly enqueued (default DefaultRepairLimit).
	Enqueuer Enqueuer
	Limit    int
	// Progress, if set, sees the report so far every 10,000 rows.
	Progress func(*Report)
}

// Run is one run of the job, the command's and a scheduled one's alike:
// the comparison and, with an Enqueuer, the repairs, through one Repairer
// (returned, nil without repairs), all within o.Timeout.
func (j *Job) Run(ctx context.Context, o RunOptions) (*Report, *Repairer, error) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.Timeout, ErrRunTimeout)
		defer cancel()
	}
	var rep *Repairer
	var found func(Drift) error
	if o.Enqueuer != nil {
		rep = &Repairer{Enqueuer: o.Enqueuer, EventType: j.EventType, Limit: o.Limit}
		found = func(d Drift) error { return rep.Repair(ctx, d) }
	}
	r, err := j.compare(ctx, found, o.Progress)
	if err != nil && errors.Is(context.Cause(ctx), ErrRunTimeout) {
		err = fmt.Errorf("%w: it took longer than %s (%s)", ErrRunTimeout, o.Timeout, o.Bound)
		if r != nil {
			err = fmt.Errorf("%w and stopped after %d truth and %d receiver rows", err, r.Compared.Truth, r.Compared.Receiver)
		}
	}
	return r, rep, err
}

// compare runs the job's comparison; found, if set, sees each drift, and
// progress, if set, the report so far every 10,000 rows.
func (j *Job) compare(ctx context.Context, found func(Drift) error, progress func(*Report)) (*Report, error) {
	truth, recv, err := j.Sources()
	if err != nil {
		return nil, err
	}
	grace := j.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	return Compare(ctx, truth, recv, Config{Expect: j.Expect, Grace: grace, Progress: progress}, found)
}
