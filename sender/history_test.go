package sender_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

// settledQueue is a queue whose destinations a, b and c each delivered
// n envelopes: destination d's envelope i settled at base plus 3i+k
// seconds (k its index), so that the three interleave.
func settledQueue(t *testing.T, n int, base time.Time) sender.AuditedQueue {
	t.Helper()
	db := bolttest.Open(t, &bolt.Options{NoSync: true})
	q, err := boltqueue.New(db, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q.KeepHistory(sender.History{Keep: 24 * time.Hour, Payload: 24 * time.Hour})
	for i := range n {
		for k, d := range []string{"a", "b", "c"} {
			at := base.Add(time.Duration(3*i+k) * time.Second)
			e := &sender.Envelope{ID: fmt.Sprintf("%s-%03d", d, i), Destination: d, EventType: "seat.released",
				Entity: fmt.Sprintf("seat:%d", i%2), CreatedAt: at, NextAt: at, Payload: []byte(`{}`)}
			if _, err := q.Enqueue(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			l, err := q.Lease(t.Context(), d, 1, at, time.Hour)
			if err != nil || len(l) != 1 {
				t.Fatalf("lease: %v, %v", l, err)
			}
			e = l[0].Envelope
			e.Log = append(e.Log, sender.Attempt{At: at, Status: 200})
			if _, err := q.Settle(t.Context(), d, []sender.Outcome{{Kind: sender.Delivered, ID: e.ID, LeaseUntil: l[0].LeaseUntil, Envelope: e}}, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	return q
}

// TestHistoryMergesDestinationsNewestFirst: one walk over three
// destinations lists every entry once, newest first, whatever the page
// size, and a query narrows it.
func TestHistoryMergesDestinationsNewestFirst(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	q := settledQueue(t, 20, base)
	s := sender.NewSettled(q, func() []string { return []string{"a", "b", "c"} }, 100, nil)
	var want []string
	for i := 19; i >= 0; i-- {
		want = append(want, fmt.Sprintf("c-%03d", i), fmt.Sprintf("b-%03d", i), fmt.Sprintf("a-%03d", i))
	}
	for _, limit := range []int{1, 4, 7, 100} {
		var got []string
		cursor := ""
		for range 200 {
			page, next, err := s.History(t.Context(), sender.HistoryQuery{}, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page {
				got = append(got, m.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("a walk by %d = %v,\nwant %v", limit, got, want)
		}
	}
	page, _, err := s.History(t.Context(), sender.HistoryQuery{Destination: "b", Entity: "seat:1", Until: base.Add(30 * time.Second)}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page {
		got = append(got, m.ID)
	}
	if want := []string{"b-009", "b-007", "b-005", "b-003", "b-001"}; !slices.Equal(got, want) {
		t.Errorf("b's seat:1 before 30s = %v, want %v", got, want)
	}
	if _, _, err := s.History(t.Context(), sender.HistoryQuery{}, "not a cursor", 10); err == nil {
		t.Error("a cursor History did not give is accepted")
	}
}

// TestResendIsABoundedAuditedRedrive: a dry run moves nothing; a resend
// moves at most its limit, under one redrive ID on record, and its
// progress follows them.
func TestResendIsABoundedAuditedRedrive(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	q := settledQueue(t, 5, base)
	s := sender.NewSettled(q, func() []string { return []string{"a", "b", "c"} }, 100, func() time.Time { return base.Add(time.Hour) })
	query := sender.HistoryQuery{Destination: "a"}
	r, err := s.Resend(t.Context(), query, 3, "test", true)
	if err != nil || r.Matched != 5 || r.Moved != 0 || r.ID != "" {
		t.Fatalf("dry run = %+v, %v", r, err)
	}
	if _, err := s.Resend(t.Context(), query, 101, "test", false); err == nil {
		t.Error("a resend over max_redrive is accepted")
	}
	r, err = s.Resend(t.Context(), query, 3, "test", false)
	if err != nil || r.Moved != 3 || r.ID == "" || r.Kind != "resend" {
		t.Fatalf("resend = %+v, %v", r, err)
	}
	st, err := q.Stats(t.Context(), "a", base.Add(time.Hour))
	if err != nil || st.Queued != 3 {
		t.Errorf("a after the resend: %+v, %v; want 3 queued", st, err)
	}
	p, err := s.Progress(t.Context(), r.ID, sender.Scope{})
	if err != nil || p.Moved != 3 || p.Pending != 3 || p.Kind != "resend" || p.Resend == nil || p.Resend.Destination != "a" {
		t.Errorf("progress = %+v, %v", p, err)
	}
}

func TestNewHistory(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	for _, tc := range []struct {
		name            string
		retention, keep time.Duration
		payload         *time.Duration
		want            sender.History
		wantErr         bool
	}{
		{name: "defaults", want: sender.History{Keep: sender.DefaultRetention, Payload: 24 * time.Hour}},
		{name: "the retention", retention: 48 * time.Hour, want: sender.History{Keep: 48 * time.Hour, Payload: 24 * time.Hour}},
		{name: "a short history bounds the default payload", retention: 48 * time.Hour, keep: time.Hour, want: sender.History{Keep: time.Hour, Payload: time.Hour}},
		{name: "no payload", keep: time.Hour, payload: d(0), want: sender.History{Keep: time.Hour}},
		{name: "a payload", keep: 2 * time.Hour, payload: d(time.Hour), want: sender.History{Keep: 2 * time.Hour, Payload: time.Hour}},
		{name: "a payload longer than the history", keep: time.Hour, payload: d(2 * time.Hour), wantErr: true},
		{name: "a negative payload", payload: d(-time.Second), wantErr: true},
		{name: "a negative history", keep: -time.Second, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sender.NewHistory(tc.retention, tc.keep, tc.payload)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewHistory: error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (got.Keep != tc.want.Keep || got.Payload != tc.want.Payload || got.Now != nil) {
				t.Errorf("NewHistory = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// historyReader counts the entries History answers, and its calls.
type historyReader struct {
	sender.AuditedQueue
	mu          sync.Mutex
	read, calls int
}

func (q *historyReader) History(ctx context.Context, dest string, f sender.HistoryFilter, cursor string, limit int) ([]*sender.Meta, string, error) {
	page, next, err := q.AuditedQueue.History(ctx, dest, f, cursor, limit)
	q.mu.Lock()
	q.read += len(page)
	q.calls++
	q.mu.Unlock()
	return page, next, err
}

func (q *historyReader) take() (read, calls int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	read, calls = q.read, q.calls
	q.read, q.calls = 0, 0
	return read, calls
}

// TestHistoryReadsAboutWhatItLists: a walk merged over three
// destinations reads each a slice at a time, not a page of each per page
// listed (issue 29: it read up to three times what it listed).
func TestHistoryReadsAboutWhatItLists(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	q := &historyReader{AuditedQueue: settledQueue(t, 100, base)}
	s := sender.NewSettled(q, func() []string { return []string{"a", "b", "c"} }, 100, nil)
	listed, pages := 0, 0
	for cursor := ""; ; pages++ {
		page, next, err := s.History(t.Context(), sender.HistoryQuery{}, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		listed += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	read, _ := q.take()
	if listed != 300 || read > 2*listed {
		t.Errorf("a walk by 10 listed %d and read %d entries, want 300 read at most twice", listed, read)
	}
}

// TestResendReadsWhatItSends: a resend reads about what it may send, not
// the whole match, and says that more match; a dry run counts up to the
// most one resend may send.
func TestResendReadsWhatItSends(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	q := &historyReader{AuditedQueue: settledQueue(t, 200, base)}
	s := sender.NewSettled(q, func() []string { return []string{"a", "b", "c"} }, 100, func() time.Time { return base.Add(time.Hour) })
	r, err := s.Resend(t.Context(), sender.HistoryQuery{}, 5, "test", false)
	if err != nil || r.Matched != 5 || !r.More || r.Moved != 5 {
		t.Fatalf("resend of 5 = %+v, %v; want 5 matched, more, 5 moved", r, err)
	}
	if read, _ := q.take(); read > 5+3*2+3 {
		t.Errorf("a resend of 5 read %d entries of 600", read)
	}
	r, err = s.Resend(t.Context(), sender.HistoryQuery{}, 5, "test", true)
	if err != nil || r.Matched != 100 || !r.More || r.Moved != 0 {
		t.Fatalf("dry run = %+v, %v; want 100 (max_redrive) matched and more", r, err)
	}
	if read, _ := q.take(); read > 2*100+3 {
		t.Errorf("a dry run up to 100 read %d entries of 600", read)
	}
	// Counted to its end, it says no more.
	if r, err = s.Resend(t.Context(), sender.HistoryQuery{Destination: "a", Since: base.Add(586 * time.Second)}, 5, "test", true); err != nil || r.Matched != 4 || r.More {
		t.Errorf("dry run of the last 4 of a = %+v, %v; want 4, no more", r, err)
	}
}

// TestResendByIDsLooksThemUp: a resend's IDs are looked up, whatever the
// history's length: no walk.
func TestResendByIDsLooksThemUp(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	q := &historyReader{AuditedQueue: settledQueue(t, 200, base)}
	s := sender.NewSettled(q, func() []string { return []string{"a", "b", "c"} }, 100, func() time.Time { return base.Add(time.Hour) })
	r, err := s.Resend(t.Context(), sender.HistoryQuery{IDs: []string{"a-003", "c-150", "nope"}}, 10, "test", false)
	if err != nil || r.Matched != 2 || r.More || r.Moved != 2 {
		t.Fatalf("resend by IDs = %+v, %v; want 2 matched and moved", r, err)
	}
	if read, _ := q.take(); read != 2 {
		t.Errorf("a resend of 3 IDs read %d entries, want the 2 found", read)
	}
}

// TestHistoryScansOnWhileNothingMatches: a search whose match is older
// than what one store call looks at is found on the first page, not
// answered "none" with a cursor (issue 29).
func TestHistoryScansOnWhileNothingMatches(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	db := bolttest.Open(t, &bolt.Options{NoSync: true})
	q, err := boltqueue.New(db, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q.KeepHistory(sender.History{Keep: 24 * time.Hour})
	for i := range 3000 {
		e := &sender.Envelope{ID: fmt.Sprintf("e%04d", i), Destination: "a", EventType: "seat.released", Entity: "busy",
			CreatedAt: base, NextAt: base, Payload: []byte(`{}`)}
		if i == 0 {
			e.Entity = "quiet"
		}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		at := base.Add(time.Duration(i) * time.Second)
		l, err := q.Lease(t.Context(), "a", 500, at, time.Hour)
		if err != nil || len(l) != 500 {
			t.Fatalf("lease: %d, %v", len(l), err)
		}
		var os []sender.Outcome
		for _, x := range l {
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: x.ID, LeaseUntil: x.LeaseUntil, Envelope: x.Envelope})
		}
		if _, err := q.Settle(t.Context(), "a", os, at); err != nil {
			t.Fatal(err)
		}
	}
	s := sender.NewSettled(q, func() []string { return []string{"a", "b"} }, 100, nil)
	page, next, err := s.History(t.Context(), sender.HistoryQuery{Entity: "quiet"}, "", 50)
	if err != nil || len(page) != 1 || page[0].ID != "e0000" || next != "" {
		t.Errorf("History(entity quiet) = %d entries, next %q, %v; want e0000, the end", len(page), next, err)
	}
}
