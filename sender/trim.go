package sender

// The history's trim: what settled goes at its time (Queue.TrimHistory),
// whether or not anything settles, so that a destination gone quiet keeps
// no payload past history_payload and no entry past history.

import (
	"context"
	"time"
)

// trimPoll is the longest the trim goes without asking a destination's
// history when its next is due: other instances settle there too.
// trimAgain is the soonest it asks one again after a settlement here, and
// after a store error.
const (
	trimPoll  = time.Minute
	trimAgain = time.Second
)

// trimmed tells the trim that dest settled here: what it added may be
// due before anything the trim knew of.
func (s *Sender) trimmed(dest string) {
	s.trimMu.Lock()
	s.trimStale[dest] = true
	s.trimMu.Unlock()
	select {
	case s.trimWake <- struct{}{}:
	default:
	}
}

// trimHistory trims each configured destination's history when its next
// entry or payload is due, as the queue says, until ctx ends; it asks a
// destination at least every trimPoll, and again (at most every
// trimAgain) after one settles here. Asking writes nothing unless
// something is due.
func (s *Sender) trimHistory(ctx context.Context) {
	next := map[string]time.Time{}   // when to ask each destination again
	asked := map[string]time.Time{}  // when it was last asked
	logged := map[string]time.Time{} // when its last failure was logged
	failed := map[string]int{}       // its failures since
	for {
		now := s.now()
		wake := now.Add(trimPoll)
		for _, d := range s.Destinations() {
			if at, ok := next[d]; ok && at.After(now) {
				wake = earlier(wake, at)
				continue
			}
			due, err := s.queue.TrimHistory(ctx, d, now)
			if ctx.Err() != nil {
				return
			}
			asked[d] = now
			switch {
			case err != nil:
				// Logged once a trimPoll at most, with a count: an outage
				// fails it every trimAgain.
				s.obs.StoreError(d, "trim")
				if failed[d]++; now.Sub(logged[d]) >= trimPoll {
					s.logger.Error("trimming the delivery history", "destination", d, "failures", failed[d], "error", err)
					logged[d], failed[d] = now, 0
				}
				due = now.Add(trimAgain)
			case due.IsZero() || due.After(now.Add(trimPoll)):
				due = now.Add(trimPoll)
			case !due.After(now):
				due = now // more are due: a batch at a time
			}
			next[d] = due
			wake = earlier(wake, due)
		}
		if !wake.After(now) {
			continue
		}
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.trimWake:
			t.Stop()
			s.trimMu.Lock()
			for d := range s.trimStale {
				next[d] = earlier(next[d], asked[d].Add(trimAgain))
			}
			clear(s.trimStale)
			s.trimMu.Unlock()
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
