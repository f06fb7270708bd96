package sender_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// TestPurgeIsBoundedAndSaid: a dry run removes nothing; an empty filter
// removes nothing unless All says so, and All takes no filter; a purge
// removes at most its limit (1 to max_redrive), the oldest first, and a
// filter of IDs is bounded by them.
func TestPurgeIsBoundedAndSaid(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := deadAt(t, 6, base)
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 100, nil)
	left := func() int {
		t.Helper()
		n, _, err := dlq.Count(t.Context(), sender.Filter{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		f    sender.Filter
		o    sender.PurgeOptions
		want error
	}{
		{"no filter", sender.Filter{}, sender.PurgeOptions{Limit: 10}, sender.ErrNoFilter},
		{"no filter, a dry run", sender.Filter{}, sender.PurgeOptions{Limit: 10, DryRun: true}, sender.ErrNoFilter},
		{"all with a filter", sender.Filter{Destination: "d"}, sender.PurgeOptions{Limit: 10, All: true}, sender.ErrBadFilter},
		{"no limit", sender.Filter{Destination: "d"}, sender.PurgeOptions{}, sender.ErrBadLimit},
		{"a negative limit", sender.Filter{Destination: "d"}, sender.PurgeOptions{Limit: -1}, sender.ErrBadLimit},
		{"over max_redrive", sender.Filter{Destination: "d"}, sender.PurgeOptions{Limit: 101}, sender.ErrBadLimit},
		{"IDs, over max_redrive", sender.Filter{IDs: []string{"d-0000"}}, sender.PurgeOptions{Limit: 101}, sender.ErrBadLimit},
	} {
		if r, err := dlq.Purge(t.Context(), tc.f, tc.o); !errors.Is(err, tc.want) || r.Removed != 0 {
			t.Errorf("%s: %+v, %v; want %v", tc.name, r, err, tc.want)
		}
	}
	if n := left(); n != 6 {
		t.Fatalf("%d dead letters left after refused purges; want 6", n)
	}

	r, err := dlq.Purge(t.Context(), sender.Filter{}, sender.PurgeOptions{All: true, DryRun: true})
	if err != nil || r != (sender.PurgeResult{Matched: 6}) || left() != 6 {
		t.Fatalf("dry run: %+v, %v, %d left; want 6 matched, none removed", r, err, left())
	}
	r, err = dlq.Purge(t.Context(), sender.Filter{Destination: "d"}, sender.PurgeOptions{Limit: 2})
	if err != nil || r != (sender.PurgeResult{Matched: 6, Removed: 2}) {
		t.Fatalf("limit 2: %+v, %v", r, err)
	}
	page, _, err := dlq.List(t.Context(), sender.Filter{}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{"d-0002", "d-0003", "d-0004", "d-0005"}, ids); diff != "" {
		t.Errorf("left after a purge of the 2 oldest (-want +got):\n%s", diff)
	}
	r, err = dlq.Purge(t.Context(), sender.Filter{IDs: []string{"d-0003", "d-0000"}}, sender.PurgeOptions{})
	if err != nil || r != (sender.PurgeResult{Matched: 1, Removed: 1}) {
		t.Errorf("by ID, no limit: %+v, %v", r, err)
	}
	r, err = dlq.Purge(t.Context(), sender.Filter{}, sender.PurgeOptions{All: true, Limit: 100})
	if err != nil || r != (sender.PurgeResult{Matched: 3, Removed: 3}) || left() != 0 {
		t.Errorf("all: %+v, %v, %d left", r, err, left())
	}
}
