package sender

// The history's trim: what settled goes at its time (Queue.TrimHistory),
// whether or not anything settles, so that a destination gone quiet keeps
// no payload past history_payload and no entry past history.

import (
	"context"
	"maps"
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
	// Each destination's next ask and last ask, unix ms (a destination
	// not in it is asked now); its failures since its last logged one,
	// and when that was, only while it fails.
	type state struct{ next, asked int64 }
	type failure struct {
		n      int
		logged time.Time
	}
	states := map[string]state{}
	failing := map[string]failure{}
	for {
		now := s.now()
		wake := now.Add(trimPoll)
		names := s.Destinations()
		for _, d := range names {
			st := states[d]
			if at := time.UnixMilli(st.next); st.next != 0 && at.After(now) {
				wake = earlier(wake, at)
				continue
			}
			due, err := s.queue.TrimHistory(ctx, d, now)
			if ctx.Err() != nil {
				return
			}
			st.asked = now.UnixMilli()
			switch {
			case err != nil:
				// Logged once a trimPoll at most, with a count: an outage
				// fails it every trimAgain.
				s.obs.StoreError(d, "trim")
				f := failing[d]
				if f.n++; now.Sub(f.logged) >= trimPoll {
					s.logger.Error("trimming the delivery history", "destination", d, "failures", f.n, "error", err)
					f = failure{logged: now}
				}
				failing[d] = f
				due = now.Add(trimAgain)
			case due.IsZero() || due.After(now.Add(trimPoll)):
				delete(failing, d)
				due = now.Add(trimPoll)
			case !due.After(now):
				delete(failing, d)
				due = now // more are due: a batch at a time
			}
			st.next = due.UnixMilli()
			states[d] = st
			wake = earlier(wake, due)
		}
		if len(states) > len(names) { // destinations removed: forget them
			keep := make(map[string]bool, len(names))
			for _, d := range names {
				keep[d] = true
			}
			maps.DeleteFunc(states, func(d string, _ state) bool { return !keep[d] })
			maps.DeleteFunc(failing, func(d string, _ failure) bool { return !keep[d] })
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
				st := states[d]
				st.next = min(st.next, st.asked+trimAgain.Milliseconds())
				states[d] = st
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
