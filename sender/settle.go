package sender

import (
	"context"
	"time"
)

// settleLoop settles outcomes in batches: it takes what has arrived while
// the previous batch was being written, so a busy destination costs one
// store round trip per batch, and an idle one adds no delay.
func (s *Sender) settleLoop(dest string, outcomes <-chan outcome) {
	batch := make([]Outcome, 0, 256)
	for o := range outcomes {
		batch = append(batch[:0], o.Outcome)
		deadline := o.deadline
	drain:
		for len(batch) < cap(batch) {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break drain
				}
				batch = append(batch, o.Outcome)
				deadline = later(deadline, o.deadline)
			default:
				break drain
			}
		}
		s.settle(dest, batch, deadline)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// settle writes a batch, retrying a store failure until the batch's last
// lease would have ended anyway (deadline, by this instance's clock).
func (s *Sender) settle(dest string, batch []Outcome, deadline time.Time) {
	backoff := 50 * time.Millisecond
	for {
		skipped, err := s.queue.Settle(context.Background(), dest, batch, s.now())
		if err != nil {
			s.obs.StoreError(dest, "settle")
		}
		if err == nil {
			if skipped > 0 {
				s.logger.Warn("outcomes skipped: their lease had expired and the envelopes were leased again", "destination", dest, "skipped", skipped)
			}
			s.trimmed(dest)
			if released(s.set.Load().byName[dest], batch) {
				s.Wake(dest)
			}
			return
		}
		if !time.Now().Add(backoff).Before(deadline) {
			s.logger.Error("settling outcomes failed until their leases ended: they will be delivered again", "destination", dest, "outcomes", len(batch), "error", err)
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// released reports whether batch settled an ordered head for good, which
// makes the next of its entity due at once: the lease loop, maybe idle
// and asleep until its next poll, looks again now.
func released(d *destination, batch []Outcome) bool {
	if d == nil || !d.Ordering.ByEntity {
		return false
	}
	for _, o := range batch {
		if o.Kind == Delivered || o.Kind == Dead {
			return true
		}
	}
	return false
}
