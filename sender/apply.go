package sender

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

// Apply makes dests the sender's destinations, in their order: one new is
// started, one gone is stopped (its deliveries in flight finish and
// settle; its envelopes stay in the store, an orphan's until a
// destination of its name comes back), and one whose Rev changed is
// restarted with its breaker and pause kept. One whose name and Rev are
// unchanged keeps running untouched. Nothing changes when dests is
// refused (CheckDestinations, a URL that does not parse).
//
// The destinations new to the store are recorded as seen now
// (Queue.FirstSeen): they receive the events published from now on, not
// earlier ones a publish again completes.
func (s *Sender) Apply(dests []Destination) error {
	if err := CheckDestinations(dests); err != nil {
		return err
	}
	s.run.Lock()
	defer s.run.Unlock()
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
	for name, prev := range old.byName {
		if cur := next.byName[name]; cur == prev {
			continue
		}
		if prev.stop != nil {
			prev.stop() // it finishes what it holds, beside the new loop if any
		}
		if _, ok := next.byName[name]; !ok {
			s.shared.remove(name)
			s.queue.Order(name, Ordering{})
		}
	}
	for _, name := range next.order {
		if d := next.byName[name]; d.stop == nil {
			s.startLocked(d)
		}
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
	if ds.request, err = http.NewRequest(http.MethodPost, d.URL, nil); err != nil {
		return nil, fmt.Errorf("destination %q: %w", d.Name, ds.scrub(err))
	}
	if d.Rate > 0 {
		ds.limiter = rate.NewLimiter(d.Rate, max(d.Burst, 1))
	}
	s.queue.Order(d.Name, d.Ordering)
	if prev != nil {
		ds.breaker, ds.pause = prev.breaker, prev.pause
		return ds, nil
	}
	name := d.Name
	open := s.cfg.Breaker.Open
	ds.breaker = newBreaker(name, s.cfg.Breaker, func(from, to gobreaker.State) {
		s.logger.Info("destination breaker", "destination", name, "from", from.String(), "to", to.String())
		if to != gobreaker.StateHalfOpen {
			s.shared.transition(name, to == gobreaker.StateOpen, time.Now().Add(open))
		}
	})
	ds.pause = new(pauseFlag)
	s.shared.add(name, ds.breaker)
	return ds, nil
}

// startLocked starts d's delivery loop when Run runs. Call with s.run
// held.
func (s *Sender) startLocked(d *destination) {
	if s.run.ctx == nil {
		return
	}
	ctx, stop := context.WithCancel(s.run.ctx)
	d.stop = stop
	s.run.runners.Go(func() {
		defer stop()
		s.runDestination(ctx, d)
	})
}
