package freshness_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/dedupe/freshness"
)

// newStore returns a real embedded store on a temp file.
func newStore(t *testing.T) freshness.EntityStore {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.New(db, boltstore.Options{PurgeEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = db.Close() })
	return s
}

func newFreshness(t *testing.T, cfg freshness.Config) (*freshness.Freshness, freshness.EntityStore) {
	t.Helper()
	store := newStore(t)
	f, err := freshness.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, store
}

func TestFreshnessJudgesByEventTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := newFreshness(t, freshness.Config{MaxAge: time.Hour})
		now := time.Now()
		ctx := t.Context()

		j, err := f.Check(ctx, "r-1", freshness.TimeMark(now.Add(-5*time.Minute)))
		if err != nil || j.Result != freshness.ResultApplied {
			t.Fatalf("first event: %+v, %v", j, err)
		}
		if err := f.Done(ctx, "r-1", j.Token, freshness.TimeMark(now.Add(-5*time.Minute)), true); err != nil {
			t.Fatal(err)
		}
		if j, _ := f.Check(ctx, "r-1", freshness.TimeMark(now.Add(-10*time.Minute))); j.Result != freshness.ResultSuperseded {
			t.Errorf("older event: %+v, want superseded", j)
		}
		if j, _ := f.Check(ctx, "r-2", freshness.TimeMark(now.Add(-61*time.Minute))); j.Result != freshness.ResultTooOld {
			t.Errorf("event over max_age: %+v, want too_old", j)
		}
		if _, err := f.Check(ctx, "r-3", freshness.TimeMark(now.Add(5*time.Minute+time.Second))); !errors.Is(err, freshness.ErrEventInFuture) {
			t.Errorf("future event: %v, want ErrEventInFuture", err)
		}
		if j, _ := f.Check(ctx, "r-3", freshness.TimeMark(now.Add(5*time.Minute))); j.Result != freshness.ResultApplied {
			t.Errorf("event 5 minutes ahead: %+v, want applied", j)
		}
	})
}

func TestFreshnessWaitsForTheEntity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := newFreshness(t, freshness.Config{Wait: 5 * time.Second, Lease: 10 * time.Second})
		ctx := t.Context()
		base := time.Now().Add(-time.Minute)
		first, _ := f.Check(ctx, "r-1", freshness.TimeMark(base))
		got := make(chan freshness.Judgement)
		go func() {
			j, err := f.Check(ctx, "r-1", freshness.TimeMark(base.Add(-time.Second)))
			if err != nil {
				t.Error(err)
			}
			got <- j
		}()
		time.Sleep(time.Second)
		if err := f.Done(ctx, "r-1", first.Token, freshness.TimeMark(base), true); err != nil {
			t.Fatal(err)
		}
		if j := <-got; j.Result != freshness.ResultSuperseded {
			t.Errorf("waiter judged after the first applied: %+v, want superseded", j)
		}

		// Nobody finishes: the waiter gives up after Wait with the lease's remaining time.
		held, _ := f.Check(ctx, "r-2", freshness.TimeMark(base))
		start := time.Now()
		j, _ := f.Check(ctx, "r-2", freshness.TimeMark(base))
		if j.Result != freshness.ResultBusy || time.Since(start) != 5*time.Second {
			t.Fatalf("busy entity: %+v after %s; want entity_busy after 5s", j, time.Since(start))
		}
		if time.Until(j.LeaseUntil) <= 0 || held.Token == "" {
			t.Errorf("LeaseUntil %v is not ahead", j.LeaseUntil)
		}
	})
}

func TestFreshnessSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := newFreshness(t, freshness.Config{})
		ctx := t.Context()
		j, _ := f.Check(ctx, "r-1", freshness.SequenceMark(7))
		if err := f.Done(ctx, "r-1", j.Token, freshness.SequenceMark(7), true); err != nil {
			t.Fatal(err)
		}
		if j, _ := f.Check(ctx, "r-1", freshness.SequenceMark(6)); j.Result != freshness.ResultSuperseded {
			t.Errorf("seq 6 after 7: %+v", j)
		}
		// Sequences and times are separate watermarks.
		if j, _ := f.Check(ctx, "r-1", freshness.TimeMark(time.Unix(1, 0))); j.Result != freshness.ResultApplied {
			t.Errorf("event time on an entity with a sequence watermark: %+v", j)
		}
	})
}

// lostAcquireStore takes an entity lease, then reports a failure, as a
// store whose reply was lost (a stalled Redis past the caller's deadline)
// would.
type lostAcquireStore struct {
	freshness.EntityStore
	lose bool
}

func (s *lostAcquireStore) AcquireEntity(ctx context.Context, key string, a freshness.Acquire) (freshness.AcquireResult, error) {
	res, err := s.EntityStore.AcquireEntity(ctx, key, a)
	if s.lose {
		s.lose = false
		return freshness.AcquireResult{}, errors.New("i/o timeout")
	}
	return res, err
}

// TestLostEntityLeaseIsReleased: a lease taken although Check failed is
// let go, so the entity's next event is judged at once, not answered
// entity_busy until the lease ends; the watermark does not move.
func TestLostEntityLeaseIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lostAcquireStore{EntityStore: newStore(t), lose: true}
		f, err := freshness.New(store, freshness.Config{Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Check(t.Context(), "r-1", freshness.SequenceMark(5)); err == nil {
			t.Fatal("Check with a lost reply succeeded")
		}
		time.Sleep(time.Second)
		j, err := f.Check(t.Context(), "r-1", freshness.SequenceMark(4))
		if err != nil || j.Result != freshness.ResultApplied {
			t.Fatalf("the next event a second later = %+v, %v; want applied (the lost lease let go, the watermark unmoved)", j, err)
		}
		synctest.Wait()
	})
}

// failingFinishStore refuses the first fails FinishEntity calls, as a
// store that refuses writes for a while.
type failingFinishStore struct {
	freshness.EntityStore
	fails int
	calls int
}

func (s *failingFinishStore) FinishEntity(ctx context.Context, key, token string, f freshness.Finish) error {
	s.calls++
	if s.calls <= s.fails {
		return errors.New("READONLY You can't write against a read only replica")
	}
	return s.EntityStore.FinishEntity(ctx, key, token, f)
}

// TestWatermarkWriteIsRetried: the upstream applied the event, and the
// store refuses the watermark's write for a while: it is retried until it
// lands (within the lease), so an older event is then superseded.
func TestWatermarkWriteIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingFinishStore{EntityStore: newStore(t), fails: 5}
		f, err := freshness.New(store, freshness.Config{Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		j, err := f.Check(t.Context(), "r-1", freshness.SequenceMark(5))
		if err != nil || j.Result != freshness.ResultApplied {
			t.Fatalf("first event: %+v, %v", j, err)
		}
		ctx, cancel := context.WithDeadline(t.Context(), j.LeaseUntil)
		defer cancel()
		if err := f.Done(ctx, "r-1", j.Token, freshness.SequenceMark(5), true); err != nil {
			t.Fatalf("Done with the store refusing 5 writes: %v", err)
		}
		if store.calls != 6 {
			t.Errorf("FinishEntity called %d times, want 6 (5 refused, then written)", store.calls)
		}
		if j, err := f.Check(t.Context(), "r-1", freshness.SequenceMark(4)); err != nil || j.Result != freshness.ResultSuperseded {
			t.Errorf("an older event after: %+v, %v; want superseded", j, err)
		}
	})
}

func TestParseSequence(t *testing.T) {
	for in, ok := range map[string]bool{"0": true, "42": true, "9007199254740991": true, "9007199254740992": false, "-1": false, "1.5": false, "": false, "07": true} {
		if _, err := freshness.ParseSequence(in); (err == nil) != ok {
			t.Errorf("ParseSequence(%q): err = %v, want ok=%v", in, err, ok)
		}
	}
}
