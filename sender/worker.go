package sender

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// job is a leased envelope, and its lease's end by this instance's
// clock: the lease end the store gives (LeaseUntil) is by the store's
// clock and only its fencing token, never compared with time here. The
// local end is taken conservatively, from just before the Lease call.
type job struct {
	Leased
	deadline time.Time
}

// outcome is an Outcome to settle, and its lease's local end.
type outcome struct {
	Outcome
	deadline time.Time
}

// runDestination leases and delivers one destination's envelopes. Its
// workers (the destination's cap) take leased envelopes from a prefetch
// buffer as large as their number; the loop refills it in batches once
// half of it is free, so a busy destination costs one lease round trip per
// batch. It holds at most twice its workers' worth of leases waiting or
// in flight, and, beside them, the leases of attempts made whose outcomes
// wait for their settle to be written: a crash loses those outcomes, and
// their envelopes are delivered again once their leases end.
//
// Lease deadlines and refresh intervals are measured on this process's
// clock (time.Now); Options.Now dates what is stored.
func (s *Sender) runDestination(ctx context.Context, d *destination) {
	s.breaker(d) // shared before its state is read
	outcomes := make(chan outcome, 2*d.workers+s.cfg.Batch)
	var settled sync.WaitGroup
	settled.Go(func() { s.settleLoop(d.Name, outcomes) })
	workers := d.prefetch(s.cfg)
	ready := make(chan job, workers)
	room := make(chan struct{}, 1) // a worker took from ready
	var out atomic.Int64           // leased and not yet settled: in ready, or being delivered
	var pool sync.WaitGroup
	for range workers {
		pool.Go(func() {
			for j := range ready {
				select {
				case room <- struct{}{}:
				default:
				}
				outcomes <- outcome{s.work(ctx, d, j), j.deadline}
				out.Add(-1)
			}
		})
	}
	defer func() {
		close(ready) // the workers release what is left in it
		pool.Wait()
		close(outcomes)
		settled.Wait()
	}()

	idle := 10 * time.Millisecond
	for ctx.Err() == nil {
		if d.pause.get() {
			// Nothing is leased while paused. A resume through this
			// sender wakes d; one made elsewhere is read from the store.
			// Paused with nothing out, the loop ends: a resume here
			// wakes d, one made elsewhere the scan finds.
			s.refreshPause(ctx, d)
			if d.pause.get() && out.Load() == 0 && d.park() {
				return
			}
			s.wait(ctx, d, min(s.cfg.Poll, pauseRefresh))
			continue
		}
		if out.Load() > 0 {
			// A pause made elsewhere holds what is leased here.
			s.refreshPause(ctx, d)
		}
		want := max(1, cap(ready)/2)
		switch d.state() {
		case gobreaker.StateOpen:
			// Nothing is leased while the breaker is open: no attempt is
			// made and none charged.
			s.wait(ctx, d, breakerRefresh)
			continue
		case gobreaker.StateHalfOpen:
			// Trials only: lease that many once nothing else is out.
			if out.Load() > 0 {
				s.wait(ctx, d, 10*time.Millisecond)
				continue
			}
			want = min(s.cfg.Breaker.HalfOpen, cap(ready))
		}
		free := cap(ready) - len(ready)
		if free < want {
			t := time.NewTimer(min(breakerRefresh, pauseRefresh)) // and look at the breaker and the pause again
			select {
			case <-room:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		n := min(free, s.cfg.Batch)
		if d.state() == gobreaker.StateHalfOpen {
			n = min(n, s.cfg.Breaker.HalfOpen)
		}
		deadline := time.Now().Add(s.cfg.Lease)
		leased, err := s.queue.Lease(context.WithoutCancel(ctx), d.Name, n, s.now(), s.cfg.Lease)
		if err != nil {
			s.logger.Error("leasing envelopes", "destination", d.Name, "leased", len(leased), "error", err)
			s.obs.StoreError(d.Name, "lease")
			if len(leased) == 0 {
				s.wait(ctx, d, time.Second)
				continue
			}
			// What was leased beside the error (an entry set aside, say)
			// is delivered.
		}
		if len(leased) == 0 {
			if idle >= s.cfg.Poll && out.Load() == 0 && d.park() {
				return // idle: an enqueue or the scan starts it again
			}
			s.wait(ctx, d, idle)
			idle = min(2*idle, s.cfg.Poll)
			continue
		}
		idle = 10 * time.Millisecond
		out.Add(int64(len(leased))) // counted before a worker can take one
		for _, l := range leased {
			ready <- job{l, deadline} // there is room: only this loop fills it
		}
	}
}

// work makes what it can of one leased envelope: it is released
// unattempted when the sender stops, the destination is paused, or no slot
// comes in time; else deliver has it.
func (s *Sender) work(ctx context.Context, d *destination, j job) Outcome {
	release := Outcome{Kind: Release, ID: j.ID, LeaseUntil: j.LeaseUntil}
	if ctx.Err() != nil || d.pause.get() || !s.takeSlot(ctx, d, s.latestStart(j)) {
		return release
	}
	defer s.slots.release(d.Name)
	return s.deliver(ctx, d, j)
}

// latestStart is the latest j's attempt may start: its timeout and the
// settle margin must fit in its lease.
func (s *Sender) latestStart(j job) time.Time {
	return j.deadline.Add(-s.cfg.Timeout - settleMargin(s.cfg.Lease))
}

// takeSlot takes a global worker slot, and a token of d's rate while it
// holds the slot, so that no more than the rate is ever sent, even when
// slots were scarce. A worker waiting for the rate gives its slot back
// meanwhile: it holds nothing the other destinations need. False when ctx
// ends first, or when the attempt could not start by latest: then no
// token is taken. A rate that would make it wait past latest is waited for
// until latest, and no further: the lease is released then, not at once,
// so that it is not leased again and again meanwhile.
func (s *Sender) takeSlot(ctx context.Context, d *destination, latest time.Time) bool {
	for {
		if time.Now().After(latest) || !s.slots.acquire(ctx, d.Name) {
			return false
		}
		if time.Now().After(latest) {
			s.slots.release(d.Name)
			return false
		}
		if d.limiter == nil {
			return true
		}
		r := d.limiter.Reserve()
		wait := r.Delay()
		if wait == 0 {
			return true
		}
		r.Cancel()
		s.slots.release(d.Name)
		t := time.NewTimer(min(wait, time.Until(latest)+time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// slots is the global cap on deliveries in flight, shared fairly: a freed
// slot goes to the waiting destination that holds the fewest (the longest
// waiting among equals), so that a slow destination cannot keep every slot
// from the others.
type slots struct {
	mu      sync.Mutex
	free    int
	held    map[string]int // slots each destination holds
	waiting []*slotWaiter  // in arrival order
}

type slotWaiter struct {
	dest  string
	given chan struct{} // closed when the slot is handed over
}

func newSlots(n int) *slots { return &slots{free: n, held: map[string]int{}} }

// acquire takes a slot for dest, waiting for one; false when ctx ends
// first.
func (sl *slots) acquire(ctx context.Context, dest string) bool {
	sl.mu.Lock()
	if sl.free > 0 { // then no one waits: a freed slot is handed over
		sl.free--
		sl.held[dest]++
		sl.mu.Unlock()
		return true
	}
	w := &slotWaiter{dest: dest, given: make(chan struct{})}
	sl.waiting = append(sl.waiting, w)
	sl.mu.Unlock()
	select {
	case <-w.given:
		return true
	case <-ctx.Done():
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	select {
	case <-w.given: // handed over meanwhile: pass it on
		sl.releaseLocked(dest)
	default:
		sl.waiting = slices.DeleteFunc(sl.waiting, func(o *slotWaiter) bool { return o == w })
	}
	return false
}

// release gives back a slot of dest.
func (sl *slots) release(dest string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.releaseLocked(dest)
}

func (sl *slots) releaseLocked(dest string) {
	sl.held[dest]--
	if len(sl.waiting) == 0 {
		sl.free++
		return
	}
	next := 0
	for i, w := range sl.waiting {
		if sl.held[w.dest] < sl.held[sl.waiting[next].dest] {
			next = i
		}
	}
	w := sl.waiting[next]
	sl.waiting = slices.Delete(sl.waiting, next, next+1)
	sl.held[w.dest]++
	close(w.given)
}

// prefetch is how many workers a destination runs, and how many leased
// envelopes it holds ready for them: its workers, and for a rate-limited
// one no more than it attempts in a third of the time an envelope may
// wait for its attempt (its lease less the timeout and the settle margin),
// so that what it holds (workers waiting for the rate, and the buffer) is
// attempted in two thirds of that time.
func (d *destination) prefetch(cfg Config) int {
	n := d.workers
	if d.limiter != nil {
		room := cfg.Lease - cfg.Timeout - settleMargin(cfg.Lease)
		n = min(n, max(1, int(float64(d.limiter.Limit())*room.Seconds()/3)))
	}
	return n
}

// wait sleeps up to d, or until ctx ends or an enqueue wakes d.
func (s *Sender) wait(ctx context.Context, dst *destination, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-dst.wake:
	}
}

// pauseFlag is a destination's pause as this instance knows it: set at
// once by this instance (a 410, SetPaused), and read from the store
// (refreshPause) to see what other instances did. A read never undoes a
// change made here after it began, nor one still being written.
type pauseFlag struct {
	mu      sync.Mutex
	paused  bool
	version uint64    // bumped by every change made here
	writing int       // changes made here, being written to the store
	read    time.Time // when the store was last read
}

func (p *pauseFlag) get() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// hold sets the flag at once, for a change about to be written to the
// store, and says what it was. Call written when the write is done.
func (p *pauseFlag) hold(paused bool) (was bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was, p.paused = p.paused, paused
	p.version++
	p.writing++
	return was
}

// written ends a hold; revert puts back the value it found (the write
// failed).
func (p *pauseFlag) written(revert, was bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing--
	p.version++
	if revert {
		p.paused = was
	}
}

// refreshPause reads d's pause from the store, unless it did less than
// pauseRefresh ago.
func (s *Sender) refreshPause(ctx context.Context, d *destination) {
	p := d.pause
	p.mu.Lock()
	if time.Since(p.read) < pauseRefresh || p.writing > 0 {
		p.mu.Unlock()
		return
	}
	p.read = time.Now()
	v := p.version
	p.mu.Unlock()
	paused, _, err := s.queue.Paused(context.WithoutCancel(ctx), d.Name)
	if err != nil {
		s.logger.Error("reading whether a destination is paused", "destination", d.Name, "error", err)
		s.obs.StoreError(d.Name, "paused")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.version == v && p.writing == 0 {
		p.paused = paused
	}
}

// SetPaused pauses or resumes dest, for this instance at once (no attempt
// starts here once it returns) and in the store, for every instance (the
// others see it within about pauseRefresh while they hold leases). A
// pause records by, who made it; a resume with a by resumes only a pause
// that by made (ErrPausedByOther), one without resumes any. A resume wakes
// the destination's workers.
func (s *Sender) SetPaused(ctx context.Context, dest string, paused bool, by string) error {
	d, ok := s.dest(dest)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownDestination, dest)
	}
	if !paused && by != "" {
		// A resume only of by's pause: the flag waits for the store's yes.
		if err := s.queue.SetPaused(ctx, dest, false, by); err != nil {
			return err
		}
		d.pause.written(false, d.pause.hold(false))
		s.Wake(dest)
		return nil
	}
	was := d.pause.hold(paused)
	err := s.queue.SetPaused(ctx, dest, paused, by)
	d.pause.written(err != nil, was)
	if err != nil {
		return err
	}
	if !paused {
		s.Wake(dest)
	}
	return nil
}
