// Package reconcile compares the source of truth (reservations, say) with
// a receiver's state (enrollments) and reports the drift between them:
// keys the receiver misses, keys it holds in another state than the truth
// implies, and keys it holds that the truth does not know. Both sides
// stream their rows in key order, so the comparison is one merge in
// constant memory, whatever their size.
//
// A Job's Run is one run, the command's and a scheduled one's alike: the
// comparison and, through an Enqueuer (the admin API's door or the
// sender's), the repair events of one Repairer. RunReport is the report
// the command prints. A Schedule runs a job at the start of every slot,
// one instance at a time through a Locker (StoreLocker: a claim in the
// dedupe store the instances share). It imports no Caddy.
package reconcile

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// Row is one key's state on one side.
type Row struct {
	Key       string
	State     string
	Version   int64
	UpdatedAt time.Time
}

// Source streams rows in ascending key order (byte order).
type Source interface {
	Rows(ctx context.Context) iter.Seq2[Row, error]
}

// None, as an expected receiver state, means the receiver must not hold
// the key.
const None = "none"

// Kind is a kind of drift.
type Kind string

// The drift kinds.
const (
	Missing    Kind = "missing"    // the truth implies a receiver state; the receiver lacks the key
	Mismatched Kind = "mismatched" // the receiver holds another state than implied (any, where none is)
	Orphaned   Kind = "orphaned"   // the receiver holds a key the truth lacks
)

// Drift is one key's difference.
type Drift struct {
	Kind  Kind
	Key   string
	Truth *Row // nil for orphaned
	// Receiver is nil for missing.
	Receiver *Row
}

// Config tunes a comparison.
type Config struct {
	// Expect maps a truth state to the receiver state it implies (None:
	// the receiver must not hold the key). A truth state it does not name
	// implies nothing: such keys are compared for orphans only.
	Expect map[string]string
	// Grace leaves out rows of either side updated less than this before
	// Now: their events may still be in flight. They are counted in
	// Compared.
	Grace time.Duration
	// Now is the comparison's time. Default time.Now().
	Now time.Time
	// Samples is how many drifts of each kind the report keeps. Default 20.
	Samples int
	// Progress, if set, sees the report so far after every ProgressEvery
	// rows read (both sides together; default 10,000).
	Progress      func(*Report)
	ProgressEvery int
}

// Report is a comparison's outcome.
type Report struct {
	Compared struct {
		Truth    int `json:"truth"`
		Receiver int `json:"receiver"`
	} `json:"compared"`
	Drift   map[Kind]int `json:"drift"`
	Samples []Drift      `json:"-"`
}

// Total is the number of drifts found.
func (r *Report) Total() int { return r.Drift[Missing] + r.Drift[Mismatched] + r.Drift[Orphaned] }

// ErrOrder means a source yielded its keys out of order.
type ErrOrder struct {
	Side       string
	Prev, Next string
}

func (e *ErrOrder) Error() string {
	return fmt.Sprintf("%s source is not in key order: %q came after %q", e.Side, e.Next, e.Prev)
}

// Compare merges the two streams and calls found for every drift, in key
// order (repairs are made from it); an error from found stops it. It
// reads each source once, holding one row of each at a time.
func Compare(ctx context.Context, truth, receiver Source, cfg Config, found func(Drift) error) (*Report, error) {
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	if cfg.Samples == 0 {
		cfg.Samples = 20
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 10_000
	}
	r := &Report{Drift: map[Kind]int{Missing: 0, Mismatched: 0, Orphaned: 0}}
	nextT, stopT := iter.Pull2(truth.Rows(ctx))
	defer stopT()
	nextR, stopR := iter.Pull2(receiver.Rows(ctx))
	defer stopR()

	read := func(next func() (Row, error, bool), side string, prev *string, count *int) (*Row, error) {
		row, err, ok := next()
		if !ok {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s source: %w", side, err)
		}
		if *count > 0 && row.Key <= *prev {
			return nil, &ErrOrder{Side: side, Prev: *prev, Next: row.Key}
		}
		*prev = row.Key
		*count++
		if cfg.Progress != nil && (r.Compared.Truth+r.Compared.Receiver)%cfg.ProgressEvery == 0 {
			cfg.Progress(r)
		}
		return &row, nil
	}
	var lastT, lastR string
	t, err := read(nextT, "truth", &lastT, &r.Compared.Truth)
	if err != nil {
		return r, err
	}
	rc, err := read(nextR, "receiver", &lastR, &r.Compared.Receiver)
	if err != nil {
		return r, err
	}
	recent := func(row *Row) bool { return row != nil && cfg.Now.Sub(row.UpdatedAt) < cfg.Grace }
	report := func(d Drift) error {
		if recent(d.Truth) || recent(d.Receiver) {
			return nil
		}
		r.Drift[d.Kind]++
		n := 0
		for _, s := range r.Samples {
			if s.Kind == d.Kind {
				n++
			}
		}
		if n < cfg.Samples {
			r.Samples = append(r.Samples, d)
		}
		if found != nil {
			return found(d)
		}
		return nil
	}
	for t != nil || rc != nil {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		switch {
		case rc == nil || (t != nil && t.Key < rc.Key): // in truth only
			if want := cfg.Expect[t.State]; want != "" && want != None {
				if err := report(Drift{Kind: Missing, Key: t.Key, Truth: t}); err != nil {
					return r, err
				}
			}
			if t, err = read(nextT, "truth", &lastT, &r.Compared.Truth); err != nil {
				return r, err
			}
		case t == nil || rc.Key < t.Key: // in the receiver only
			if err := report(Drift{Kind: Orphaned, Key: rc.Key, Receiver: rc}); err != nil {
				return r, err
			}
			if rc, err = read(nextR, "receiver", &lastR, &r.Compared.Receiver); err != nil {
				return r, err
			}
		default: // both
			if want := cfg.Expect[t.State]; want != "" && rc.State != want {
				if err := report(Drift{Kind: Mismatched, Key: t.Key, Truth: t, Receiver: rc}); err != nil {
					return r, err
				}
			}
			if t, err = read(nextT, "truth", &lastT, &r.Compared.Truth); err != nil {
				return r, err
			}
			if rc, err = read(nextR, "receiver", &lastR, &r.Compared.Receiver); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}
