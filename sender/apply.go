package sender

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// destSet is the destinations at one moment. Apply swaps it whole, so a
// reader (Enqueue, Publish, Status) sees one set, never half of a change.
type destSet struct {
	byName map[string]*destination
	order  []string
}

// dest is the destination called name now.
func (s *Sender) dest(name string) (*destination, bool) {
	d, ok := s.set.Load().byName[name]
	return d, ok
}

// Apply makes dests the sender's destinations, in their order: one new
// delivers from its first enqueue or scan, one gone is stopped (its
// deliveries in flight finish and settle; its envelopes stay in the
// store, an orphan's until a destination of its name comes back), and one
// whose Rev changed replaces the old, its breaker and pause kept, its
// loop going on at once if the old one was delivering. One whose name and
// Rev are unchanged is kept untouched. Nothing changes when dests is
// refused (CheckDestinations, a URL that does not parse).
//
// The destinations new to the store are recorded as seen now
// (Queue.FirstSeen): they receive the events published from now on, not
// earlier ones a publish again completes.
func (s *Sender) Apply(dests []Destination) error {
	if err := CheckDestinations(dests); err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	old := s.set.Load()
	if old == nil {
		old = &destSet{}
	}
	next := &destSet{byName: make(map[string]*destination, len(dests)), order: make([]string, 0, len(dests))}
	var added []string
	for _, d := range dests {
		prev, had := old.byName[d.Name]
		if had && prev.Rev == d.Rev {
			next.byName[d.Name] = prev
			next.order = append(next.order, d.Name)
			continue
		}
		ds, err := s.build(d, prev)
		if err != nil {
			return err
		}
		next.byName[d.Name] = ds
		next.order = append(next.order, d.Name)
		if !had {
			added = append(added, d.Name)
		}
	}
	s.set.Store(next)
	var restart []*destination
	for name, prev := range old.byName {
		cur, kept := next.byName[name]
		if cur == prev {
			continue
		}
		if prev.retire() && kept {
			restart = append(restart, cur) // it was delivering: the new version goes on at once
		}
		if !kept {
			s.shared.remove(name)
			s.queue.Order(name, Ordering{})
		}
	}
	for _, d := range restart {
		s.wakeUp(d)
	}
	if len(added) > 0 && old.byName != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.queue.FirstSeen(ctx, added, s.now()); err != nil {
			s.seen.Store(false) // the next Publish records them first
		}
	}
	return nil
}

// build is d's running state; prev, when d replaces it, gives its breaker
// and pause.
func (s *Sender) build(d Destination, prev *destination) (*destination, error) {
	u, err := url.Parse(d.URL)
	if err != nil {
		return nil, err // CheckDestinations parsed it
	}
	workers := d.Workers
	if workers <= 0 {
		workers = max(1, s.cfg.Workers/2)
	}
	workers = min(workers, s.cfg.Workers)
	ds := &destination{Destination: d, origin: u.Scheme + "://" + u.Host, shared: s.shared, workers: workers,
		wake: make(chan struct{}, 1), client: s.client}
	if d.Guard {
		ds.client = s.guard()
	}
	if _, err = http.NewRequest(http.MethodPost, d.URL, nil); err != nil { // its template is made at its first attempt
		return nil, fmt.Errorf("destination %q: %w", d.Name, ds.scrub(err))
	}
	if d.Rate > 0 {
		ds.limiter = rate.NewLimiter(d.Rate, max(d.Burst, 1))
	}
	if d.Ordering != (Ordering{}) || (prev != nil && prev.Ordering != (Ordering{})) {
		s.queue.Order(d.Name, d.Ordering) // unordered is every queue's default
	}
	if prev != nil {
		ds.brk, ds.pause, ds.told = prev.brk, prev.pause, prev.told
		return ds, nil
	}
	ds.brk, ds.pause, ds.told = new(breakerCell), new(pauseFlag), new(told)
	return ds, nil
}

// breakerCell holds a destination's breaker, made when its loop first
// runs (an idle destination has none: its state reads closed), and kept
// by the versions of it that Apply makes.
type breakerCell struct {
	once sync.Once
	b    *breaker
}

// breaker is d's breaker, made and shared (sharedStore) at its first call.
func (s *Sender) breaker(d *destination) *breaker {
	d.brk.once.Do(func() {
		name, open := d.Name, s.cfg.Breaker.Open
		d.brk.b = newBreaker(name, s.cfg.Breaker, func(from, to gobreaker.State) {
			s.logger.Info("destination breaker", "destination", name, "from", from.String(), "to", to.String())
			if to != gobreaker.StateHalfOpen {
				s.shared.transition(name, to == gobreaker.StateOpen, time.Now().Add(open))
			}
		})
		s.shared.add(name, d.brk.b)
	})
	return d.brk.b
}

// A destination's loop runs only while it has work: an enqueue through
// this sender, a Wake, or the scan (Queue.Due, every Poll) starts it, and
// it ends once idle (park). An idle destination holds no goroutine and
// costs its store nothing but its share of the scan's one read.

// loop is a destination's delivery loop's state, under its own lock: a
// wake-up either finds the loop running (and wakes it) or starts one, and
// a loop parks only when no wake-up is pending, so none is lost.
type loop struct {
	mu      sync.Mutex
	running bool
	retired bool               // replaced or removed (Apply): never started again
	stop    context.CancelFunc // the running loop's
	gen     uint64             // counts the loops started
}

// wakeUp makes d look for due envelopes now: its loop, woken, or started.
func (s *Sender) wakeUp(d *destination) {
	d.loop.mu.Lock()
	defer d.loop.mu.Unlock()
	if d.loop.running {
		select {
		case d.wake <- struct{}{}:
		default:
		}
		return
	}
	if d.loop.retired {
		// Replaced meanwhile (Apply): the version that took its place
		// is woken instead.
		if cur, ok := s.dest(d.Name); ok && cur != d {
			go s.wakeUp(cur) // not under d's lock
		}
		return
	}
	s.run.Lock()
	defer s.run.Unlock()
	if s.run.ctx == nil {
		return // Run has not started, or has stopped
	}
	ctx, stop := context.WithCancel(s.run.ctx)
	d.loop.running, d.loop.stop = true, stop
	d.loop.gen++
	gen := d.loop.gen
	s.run.runners.Go(func() {
		defer func() {
			stop()
			d.loop.mu.Lock()
			if d.loop.gen == gen {
				d.loop.running, d.loop.stop = false, nil
			}
			d.loop.mu.Unlock()
		}()
		s.runDestination(ctx, d)
	})
}

// park ends d's loop unless a wake-up is pending.
func (d *destination) park() bool {
	d.loop.mu.Lock()
	defer d.loop.mu.Unlock()
	if len(d.wake) > 0 || d.loop.retired {
		return false // (a retired loop ends by its context)
	}
	d.loop.running, d.loop.stop = false, nil
	return true
}

// retire stops d's loop for good (Apply replaced or removed it): what it
// holds in flight finishes and settles. It reports whether it was running.
func (d *destination) retire() bool {
	d.loop.mu.Lock()
	defer d.loop.mu.Unlock()
	d.loop.retired = true
	if d.loop.stop != nil {
		d.loop.stop()
	}
	return d.loop.running
}

// running reports whether d's loop runs.
func (d *destination) running() bool {
	d.loop.mu.Lock()
	defer d.loop.mu.Unlock()
	return d.loop.running
}

// scanBatch bounds the destinations one Queue.Due call asks of.
const scanBatch = 1000

// scan starts, every Poll until ctx ends, the loop of each destination
// whose loop does not run and that has envelopes to lease: enqueued by
// another instance, a retry come due, a lease expired, a resume made
// elsewhere. A scan that takes long (many destinations on a remote
// store) waits nine times its own length before the next, so that it
// takes a tenth of the store's time at most. A failure is logged once
// while it lasts.
func (s *Sender) scan(ctx context.Context) {
	failing := false
	for {
		began := time.Now()
		set := s.set.Load()
		var idle []string
		for _, name := range set.order {
			if !set.byName[name].running() {
				idle = append(idle, name)
			}
		}
		var err error
		for len(idle) > 0 && ctx.Err() == nil {
			batch := idle[:min(scanBatch, len(idle))]
			idle = idle[len(batch):]
			due, berr := s.queue.Due(ctx, batch, s.now()) // what it read, beside what it could not
			for _, name := range due {
				s.wakeUp(set.byName[name])
			}
			err = cmp.Or(err, berr)
		}
		if err != nil && !failing && ctx.Err() == nil {
			s.logger.Error("looking for due envelopes failed: idle destinations wait for the store", "error", err)
		}
		failing = err != nil
		t := time.NewTimer(max(s.cfg.Poll, 9*time.Since(began)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
