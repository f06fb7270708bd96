package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// Event is a corrective event: the truth row of a missing or mismatched
// key, under its deterministic delivery ID.
type Event struct {
	ID        string    // reconcile:<key>:<state>:<version>, also the payload's id
	Type      string    // the event type template with {state} replaced
	Entity    string    // the key
	EventTime time.Time // the truth row's updated_at
	// Payload is {"id","type","key","state","version","occurred_at"}.
	Payload []byte
}

// NewEvent is the corrective event for truth, a truth row: typ is the
// event type template, in which {state} is the truth state (default
// "{state}"). Its ID is a valid delivery ID, or the error wraps
// sender.ErrBadID and the key cannot be repaired.
func NewEvent(typ string, truth *Row) (Event, error) {
	id := fmt.Sprintf("reconcile:%s:%s:%d", truth.Key, truth.State, truth.Version)
	if err := sender.CheckID(id); err != nil {
		return Event{}, err
	}
	if typ == "" {
		typ = "{state}"
	}
	typ = strings.ReplaceAll(typ, "{state}", truth.State)
	payload, _ := json.Marshal(map[string]any{ // strings and an int64: it cannot fail
		"id": id, "type": typ, "key": truth.Key, "state": truth.State, "version": truth.Version,
		"occurred_at": truth.UpdatedAt.UTC().Format(time.RFC3339Nano),
	})
	return Event{ID: id, Type: typ, Entity: truth.Key, EventTime: truth.UpdatedAt, Payload: payload}, nil
}

// Outcome is what enqueueing a repair event came to.
type Outcome int

const (
	// Enqueued: the event is newly enqueued.
	Enqueued Outcome = iota
	// AlreadyEnqueued: an earlier run enqueued its delivery ID, with the
	// same payload, or with another one (the truth row's updated_at moved,
	// its version did not). Either way the key was repaired before.
	AlreadyEnqueued
)

// Enqueuer enqueues repair events: the gateway's admin API for the
// command, the sender in process for a scheduled run. An error wrapping
// sender.ErrBadID means the door refused the ID: the key is counted as
// unrepairable and the run goes on; any other error stops the run.
type Enqueuer interface {
	Enqueue(ctx context.Context, e Event) (Outcome, error)
}

// UnrepairableSample is a key whose repair event cannot be made, and why.
type UnrepairableSample struct {
	Key string
	Err error
}

// DefaultRepairLimit is how many repair events a run newly enqueues at
// most, unless told otherwise.
const DefaultRepairLimit = 1000

// Repairer makes the repairs of one run: for each missing or mismatched
// key, the truth row as an Event, enqueued through Enqueuer. The command
// and the scheduled run share it, so they count alike. Compare's found
// callback calls Repair for each drift. It is not safe for concurrent use.
type Repairer struct {
	Enqueuer Enqueuer
	// EventType is the event type template ({state}: the truth state).
	EventType string
	// Limit bounds the events newly enqueued. Default DefaultRepairLimit.
	Limit int
	// Samples bounds UnrepairableSamples. Default 20.
	Samples int

	// Repaired counts the events newly enqueued.
	Repaired int
	// Already counts the keys an earlier run repaired: their delivery ID
	// was enqueued before (with this payload or another). Not in Repaired.
	Already int
	// Unrepairable counts the keys that cannot make a valid delivery ID
	// (sender.CheckID): reported, never enqueued. Every missing or
	// mismatched key is checked, also past Limit.
	Unrepairable        int
	UnrepairableSamples []UnrepairableSample
}

// Repair repairs d if it is missing or mismatched (orphans are never
// repaired) and the limit allows it; an error stops the run.
func (r *Repairer) Repair(ctx context.Context, d Drift) error {
	if d.Kind == Orphaned || d.Truth == nil {
		return nil
	}
	limit := r.Limit
	if limit <= 0 {
		limit = DefaultRepairLimit
	}
	e, err := NewEvent(r.EventType, d.Truth)
	if err == nil {
		if r.Repaired >= limit {
			return nil
		}
		var out Outcome
		out, err = r.Enqueuer.Enqueue(ctx, e)
		switch {
		case err == nil && out == AlreadyEnqueued:
			r.Already++
			return nil
		case err == nil:
			r.Repaired++
			return nil
		}
	}
	if errors.Is(err, sender.ErrBadID) {
		r.unrepairable(d.Key, err)
		return nil
	}
	return fmt.Errorf("repairing %q: %w", d.Key, err)
}

func (r *Repairer) unrepairable(key string, err error) {
	r.Unrepairable++
	samples := r.Samples
	if samples <= 0 {
		samples = 20
	}
	if len(r.UnrepairableSamples) < samples {
		r.UnrepairableSamples = append(r.UnrepairableSamples, UnrepairableSample{Key: key, Err: err})
	}
}
