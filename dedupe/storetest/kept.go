package storetest

import (
	"fmt"
	"sync"
	"testing"
)

// runKept: a value kept is the first writer's, for good: a second Keep
// of another value returns the first, concurrent Keeps of different
// values all return one of them, and Kept reads it (nil before).
func runKept(t *testing.T, newStore NewStore) {
	t.Run("KeepFirstWriterWins", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		if v, err := s.Kept(ctx, "asana:/hooks"); err != nil || v != nil {
			t.Fatalf("Kept before any Keep = %q, %v; want nil", v, err)
		}
		if v, err := s.Keep(ctx, "asana:/hooks", []byte("first")); err != nil || string(v) != "first" {
			t.Fatalf("first Keep = %q, %v; want first", v, err)
		}
		if v, err := s.Keep(ctx, "asana:/hooks", []byte("second")); err != nil || string(v) != "first" {
			t.Errorf("second Keep = %q, %v; want the first's value", v, err)
		}
		if v, err := s.Keep(ctx, "asana:/hooks", []byte("first")); err != nil || string(v) != "first" {
			t.Errorf("the same Keep again = %q, %v; want first", v, err)
		}
		if v, err := s.Kept(ctx, "asana:/hooks"); err != nil || string(v) != "first" {
			t.Errorf("Kept = %q, %v; want first", v, err)
		}
		if v, err := s.Kept(ctx, "asana:/other"); err != nil || v != nil {
			t.Errorf("Kept of another key = %q, %v; want nil", v, err)
		}
	})

	t.Run("KeepConcurrentOneWins", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		const n = 16
		got := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				v, err := s.Keep(ctx, "k", fmt.Appendf(nil, "value-%d", i))
				if err != nil {
					t.Error(err)
				}
				got[i] = string(v)
			})
		}
		wg.Wait()
		kept, err := s.Kept(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != string(kept) {
				t.Errorf("Keep %d returned %q, but %q is kept", i, v, kept)
			}
		}
	})
}
