package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe/freshness"
)

func acquire(mark int64, token string, now time.Time) freshness.Acquire {
	return freshness.Acquire{Mark: mark, Token: token, Lease: lease, Now: now}
}

func advance(mark int64, now time.Time) freshness.Finish {
	return freshness.Finish{Advance: true, Mark: mark, Retention: retention, Now: now}
}

func mustAcquire(t *testing.T, s freshness.EntityStore, entity string, a freshness.Acquire, want freshness.AcquireStatus) freshness.AcquireResult {
	t.Helper()
	res, err := s.AcquireEntity(t.Context(), entity, a)
	if err != nil {
		t.Fatalf("AcquireEntity(%q, mark %d): %v", entity, a.Mark, err)
	}
	if res.Status != want {
		t.Fatalf("AcquireEntity(%q, mark %d) = %+v, want status %d", entity, a.Mark, res, want)
	}
	return res
}

func mustFinish(t *testing.T, s freshness.EntityStore, entity, token string, f freshness.Finish) {
	t.Helper()
	if err := s.FinishEntity(t.Context(), entity, token, f); err != nil {
		t.Fatalf("FinishEntity(%q): %v", entity, err)
	}
}

func runEntities(t *testing.T, newStore NewStore) {
	t.Run("EntityWatermark", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		res := mustAcquire(t, s, "e", acquire(100, "a", t0), freshness.Acquired)
		if res.HasWatermark {
			t.Errorf("a new entity has watermark %d", res.Watermark)
		}
		busy := mustAcquire(t, s, "e", acquire(200, "b", t0.Add(time.Second)), freshness.Busy)
		if !busy.LeaseUntil.Equal(t0.Add(lease)) {
			t.Errorf("LeaseUntil = %v, want %v", busy.LeaseUntil, t0.Add(lease))
		}
		mustFinish(t, s, "e", "a", advance(100, t0.Add(time.Second)))

		res = mustAcquire(t, s, "e", acquire(99, "c", t0.Add(2*time.Second)), freshness.Superseded)
		if !res.HasWatermark || res.Watermark != 100 {
			t.Errorf("superseded answer = %+v, want watermark 100", res)
		}
		// An equal mark is applied.
		mustAcquire(t, s, "e", acquire(100, "d", t0.Add(2*time.Second)), freshness.Acquired)
		// Not applied upstream: the watermark stays.
		mustFinish(t, s, "e", "d", freshness.Finish{Advance: false, Mark: 100, Retention: retention, Now: t0.Add(2 * time.Second)})
		mustAcquire(t, s, "e", acquire(150, "f", t0.Add(3*time.Second)), freshness.Acquired)
		mustFinish(t, s, "e", "f", advance(150, t0.Add(3*time.Second)))
		mustAcquire(t, s, "e", acquire(149, "g", t0.Add(4*time.Second)), freshness.Superseded)
	})

	t.Run("EntityFencing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustAcquire(t, s, "e", acquire(300, "slow", t0), freshness.Acquired)
		later := t0.Add(lease)
		mustAcquire(t, s, "e", acquire(400, "next", later), freshness.Acquired) // the lease expired
		// The slow holder's late finish does not release the lease it lost...
		mustFinish(t, s, "e", "slow", advance(300, later))
		mustAcquire(t, s, "e", acquire(401, "x", later), freshness.Busy)
		// ...but the upstream applied its event: the watermark moved (a
		// max-register), so an older event is superseded even though the
		// next holder applies nothing.
		mustFinish(t, s, "e", "next", freshness.Finish{Advance: false, Mark: 400, Retention: retention, Now: later})
		res := mustAcquire(t, s, "e", acquire(299, "y", later), freshness.Superseded)
		if res.Watermark != 300 {
			t.Errorf("watermark = %d, want 300 from the late finish", res.Watermark)
		}
		mustAcquire(t, s, "e", acquire(400, "z", later), freshness.Acquired)
		mustFinish(t, s, "e", "z", advance(400, later))
		mustAcquire(t, s, "e", acquire(399, "w", later), freshness.Superseded)
	})

	t.Run("EntityLateFinishNeverMovesDown", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustAcquire(t, s, "e", acquire(300, "slow", t0), freshness.Acquired)
		later := t0.Add(lease)
		mustAcquire(t, s, "e", acquire(400, "next", later), freshness.Acquired)
		mustFinish(t, s, "e", "next", advance(400, later))
		mustFinish(t, s, "e", "slow", advance(300, later)) // late, and older
		res := mustAcquire(t, s, "e", acquire(399, "y", later), freshness.Superseded)
		if res.Watermark != 400 {
			t.Errorf("watermark = %d, want 400", res.Watermark)
		}
		// A retried finish changes nothing more.
		mustFinish(t, s, "e", "next", advance(400, later))
		mustAcquire(t, s, "e", acquire(400, "z", later), freshness.Acquired)
	})

	t.Run("EntityFinishOfAForgottenEntity", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// The entity's state is gone (evicted, expired): the applied
		// event's watermark is still written.
		mustFinish(t, s, "gone", "tok", advance(800, t0))
		mustAcquire(t, s, "gone", acquire(799, "a", t0), freshness.Superseded)
	})

	t.Run("EntityWatermarkNeverMovesDown", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustAcquire(t, s, "e", acquire(500, "a", t0), freshness.Acquired)
		mustFinish(t, s, "e", "a", advance(500, t0))
		mustAcquire(t, s, "e", acquire(600, "b", t0), freshness.Acquired)
		mustFinish(t, s, "e", "b", advance(450, t0)) // a caller passing a lower mark
		res := mustAcquire(t, s, "e", acquire(499, "c", t0), freshness.Superseded)
		if res.Watermark != 500 {
			t.Errorf("watermark = %d, want 500", res.Watermark)
		}
	})

	t.Run("EntityWatermarkRetention", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustAcquire(t, s, "e", acquire(700, "a", t0), freshness.Acquired)
		mustFinish(t, s, "e", "a", advance(700, t0))
		mustAcquire(t, s, "e", acquire(1, "b", t0.Add(retention-time.Second)), freshness.Superseded)
		res := mustAcquire(t, s, "e", acquire(1, "b", t0.Add(retention)), freshness.Acquired)
		if res.HasWatermark {
			t.Errorf("an expired watermark was reported: %+v", res)
		}
		mustFinish(t, s, "e", "b", advance(1, t0.Add(retention)))
		mustAcquire(t, s, "e", acquire(0, "c", t0.Add(retention)), freshness.Superseded)
	})

	t.Run("EntityConcurrentAcquireHasOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 30
		var wg sync.WaitGroup
		got := make([]freshness.AcquireStatus, n)
		for i := range n {
			wg.Go(func() {
				res, err := s.AcquireEntity(t.Context(), "hot", acquire(int64(i), fmt.Sprint("tok", i), t0))
				if err != nil {
					t.Error(err)
				}
				got[i] = res.Status
			})
		}
		wg.Wait()
		acquired := 0
		for _, st := range got {
			if st == freshness.Acquired {
				acquired++
			}
		}
		if acquired != 1 {
			t.Errorf("%d acquired the entity at once, want 1", acquired)
		}
	})

	t.Run("GetEntity", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if st, err := s.GetEntity(t.Context(), "none", t0); err != nil || st.HasWatermark || !st.LeaseUntil.IsZero() {
			t.Errorf("an unknown entity = %+v, %v", st, err)
		}
		mustAcquire(t, s, "e", acquire(900, "a", t0), freshness.Acquired)
		if st, _ := s.GetEntity(t.Context(), "e", t0); !st.LeaseUntil.Equal(t0.Add(lease)) || st.HasWatermark {
			t.Errorf("while held = %+v, want the lease until %v", st, t0.Add(lease))
		}
		mustFinish(t, s, "e", "a", advance(900, t0))
		st, err := s.GetEntity(t.Context(), "e", t0)
		if err != nil || !st.HasWatermark || st.Watermark != 900 || !st.LeaseUntil.IsZero() || !st.WatermarkExpires.Equal(t0.Add(retention)) {
			t.Errorf("after the event = %+v, %v; want watermark 900 until %v, no lease", st, err, t0.Add(retention))
		}
		if st, _ := s.GetEntity(t.Context(), "e", t0.Add(retention)); st.HasWatermark {
			t.Errorf("after the retention = %+v, want no watermark", st)
		}
	})

	t.Run("EntitiesAreIndependent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustAcquire(t, s, "a", acquire(10, "x", t0), freshness.Acquired)
		mustAcquire(t, s, "b", acquire(5, "y", t0), freshness.Acquired)
		mustFinish(t, s, "a", "x", advance(10, t0))
		mustAcquire(t, s, "b", acquire(5, "z", t0), freshness.Busy)
		mustAcquire(t, s, "a{b}", acquire(1, "w", t0), freshness.Acquired)
	})
}
