package sender

import (
	"context"
	"slices"
	"sync"
	"time"
)

// memQueue is a Queue in memory, for the workers' tests: it leases by the
// store's own clock (this process's clock shifted by skew, as Redis TIME
// may be), and lets a test make Lease and Settle fail. It keeps copies of
// envelopes, so the sender never shares one with it. It has what the
// workers use; the rest of Queue (dead letters, redrives) is the embedded
// nil interface, which panics if called.
type memQueue struct {
	Queue
	skew time.Duration // the store's clock, less the local one

	mu        sync.Mutex
	envs      map[string]*Envelope // by ID: queued, leased or dead
	state     map[string]State
	until     map[string]time.Time // leased: the lease end, by the store's clock
	leasedAt  map[string]time.Time // leased: when, by the local clock
	delivered map[string]bool
	paused    bool
	pausedBy  string
	// ordering is each destination's Order; seq numbers the enqueues, so
	// that an ordered entity's head is its unsettled envelope of least seq.
	ordering map[string]Ordering
	seq      map[string]int
	// leaseErr, when set, is returned by the next Lease beside what it
	// leased (an entry set aside, say), then cleared.
	leaseErr error
	// settleErr, when set, fails each Settle that it answers an error for.
	settleErr func() error
	settles   int
	pauseOps  int // SetPaused calls
}

func newMemQueue() *memQueue {
	return &memQueue{envs: map[string]*Envelope{}, state: map[string]State{}, until: map[string]time.Time{},
		leasedAt: map[string]time.Time{}, delivered: map[string]bool{},
		ordering: map[string]Ordering{}, seq: map[string]int{}}
}

func (q *memQueue) storeNow() time.Time { return time.Now().Add(q.skew) }

func copyOf(e *Envelope) *Envelope {
	c := *e
	c.Log = slices.Clone(e.Log)
	return &c
}

func (q *memQueue) Enqueue(_ context.Context, e *Envelope) (EnqueueResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.delivered[e.ID] {
		return EnqueueResult{State: StateDelivered, Duplicate: true}, nil
	}
	if st, ok := q.state[e.ID]; ok {
		return EnqueueResult{State: st, Duplicate: true}, nil
	}
	q.envs[e.ID], q.state[e.ID] = copyOf(e), StateQueued
	q.seq[e.ID] = len(q.seq)
	if q.paused {
		return EnqueueResult{State: StatePaused}, nil
	}
	return EnqueueResult{State: StateQueued}, nil
}

func (q *memQueue) Lease(_ context.Context, dest string, n int, now time.Time, lease time.Duration) ([]Leased, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, st := range q.state {
		if st == StateLeased && !q.until[id].After(q.storeNow()) {
			q.state[id] = StateQueued
		}
	}
	err := q.leaseErr
	q.leaseErr = nil
	if q.paused {
		return nil, err
	}
	var due []*Envelope
	for id, st := range q.state {
		if e := q.envs[id]; st == StateQueued && e.Destination == dest && !e.NextAt.After(now) && !q.behind(e) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *Envelope) int { return a.NextAt.Compare(b.NextAt) })
	var out []Leased
	for _, e := range due[:min(n, len(due))] {
		until := q.storeNow().Add(lease)
		q.state[e.ID], q.until[e.ID], q.leasedAt[e.ID] = StateLeased, until, time.Now()
		out = append(out, Leased{Envelope: copyOf(e), LeaseUntil: until})
	}
	return out, err
}

func (q *memQueue) Due(_ context.Context, dests []string, now time.Time) ([]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused {
		return nil, nil
	}
	var out []string
	for _, dest := range dests {
		for id, st := range q.state {
			e := q.envs[id]
			if e.Destination != dest {
				continue
			}
			if (st == StateLeased && !q.until[id].After(q.storeNow())) || (st == StateQueued && !e.NextAt.After(now) && !q.behind(e)) {
				out = append(out, dest)
				break
			}
		}
	}
	return out, nil
}

func (q *memQueue) Settle(_ context.Context, dest string, outcomes []Outcome, now time.Time) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.settles++
	if q.settleErr != nil {
		if err := q.settleErr(); err != nil {
			return 0, err
		}
	}
	skipped := 0
	for _, o := range outcomes {
		if q.state[o.ID] != StateLeased || !q.until[o.ID].Equal(o.LeaseUntil) || !q.until[o.ID].After(q.storeNow()) {
			skipped++
			continue
		}
		delete(q.until, o.ID)
		switch o.Kind {
		case Delivered:
			delete(q.envs, o.ID)
			delete(q.state, o.ID)
			q.delivered[o.ID] = true
		case Retry:
			q.envs[o.ID], q.state[o.ID] = copyOf(o.Envelope), StateQueued
		case Dead:
			q.envs[o.ID], q.state[o.ID] = copyOf(o.Envelope), StateDead
		case Release:
			q.state[o.ID] = StateQueued
		}
	}
	return skipped, nil
}

func (q *memQueue) SetPaused(_ context.Context, dest string, paused bool, by string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pauseOps++
	q.paused, q.pausedBy = paused, by
	if !paused {
		q.pausedBy = ""
	}
	return nil
}

func (q *memQueue) Paused(context.Context, string) (bool, string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.paused, q.pausedBy, nil
}

func (q *memQueue) Stats(_ context.Context, dest string, now time.Time) (Stats, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := Stats{Paused: q.paused, PausedBy: q.pausedBy}
	for id, s := range q.state {
		if q.envs[id].Destination != dest {
			continue
		}
		switch s {
		case StateQueued:
			st.Queued++
		case StateLeased:
			st.Leased++
		case StateDead:
			st.Dead++
		}
	}
	return st, nil
}

func (q *memQueue) Get(_ context.Context, dest, id string) (*Envelope, State, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.delivered[id] {
		return nil, StateDelivered, nil
	}
	e, ok := q.envs[id]
	if !ok || e.Destination != dest {
		return nil, "", ErrNotFound
	}
	return copyOf(e), q.state[id], nil
}

// FirstSeen records nothing: no test of this package fans out. Run calls
// it at start.
func (q *memQueue) FirstSeen(_ context.Context, dests []string, now time.Time) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, d := range dests {
		out[d] = now
	}
	return out, nil
}

// Order implements Queue: a simpler model than the stores' (the setting
// at lease time decides), enough for the workers' tests.
func (q *memQueue) Order(dest string, o Ordering) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ordering[dest] = o
}

// behind reports whether e waits behind an earlier unsettled envelope of
// its entity (a dead one counts under Hold).
func (q *memQueue) behind(e *Envelope) bool {
	o := q.ordering[e.Destination]
	if !o.ByEntity || e.Entity == "" {
		return false
	}
	for id, st := range q.state {
		f := q.envs[id]
		if f.Destination == e.Destination && f.Entity == e.Entity && q.seq[id] < q.seq[e.ID] && (st != StateDead || o.Hold) {
			return true
		}
	}
	return false
}

// isDelivered reports whether id was settled as delivered.
func (q *memQueue) isDelivered(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.delivered[id]
}

var _ Queue = (*memQueue)(nil)

// TrimHistory: a memQueue keeps no history.
func (q *memQueue) TrimHistory(context.Context, string, time.Time) (time.Time, error) {
	return time.Time{}, nil
}
