package sender_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

// countingQueue counts the scans and audit writes the DLQ makes, and
// fails Redrive when told to.
type countingQueue struct {
	sender.AuditedQueue
	scans, puts int
	failRedrive bool
}

func (q *countingQueue) Dead(ctx context.Context, dest, cursor string, limit int) ([]*sender.Meta, string, error) {
	q.scans++
	return q.AuditedQueue.Dead(ctx, dest, cursor, limit)
}

func (q *countingQueue) PutRedrive(ctx context.Context, r *sender.Redrive) error {
	q.puts++
	return q.AuditedQueue.PutRedrive(ctx, r)
}

func (q *countingQueue) Redrive(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error) {
	if q.failRedrive {
		return nil, errors.New("store down")
	}
	return q.AuditedQueue.Redrive(ctx, dest, ids, redriveID, now)
}

// deadLetters makes n dead letters d-0..d-(n-1) on destination d.
func deadLetters(t *testing.T, n int) *countingQueue {
	rcv := newReceiver(t, func(string, int) int { return 400 })
	q := &countingQueue{AuditedQueue: newQueue(t).(sender.AuditedQueue)}
	s, _ := sender.New(q, fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t), Header: http.Header{}}}, sender.Options{})
	cancel := start(t, s)
	for i := range n {
		enqueue(t, s, "d", fmt.Sprint("d-", i))
	}
	eventually(t, "all dead", func() bool {
		st, _ := q.Stats(t.Context(), "d", time.Now())
		return st.Dead == n
	})
	cancel()
	return q
}

// TestRedriveByIDReadsOnlyThoseIDs: a replay of one envelope reads it,
// not every dead letter; an ID that matches nothing writes no audit
// record and gets no redrive ID.
func TestRedriveByIDReadsOnlyThoseIDs(t *testing.T) {
	q := deadLetters(t, 20)
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)
	q.scans, q.puts = 0, 0
	r, err := dlq.Redrive(t.Context(), sender.Filter{Destination: "d", IDs: []string{"d-7", "d-7", "absent"}}, 5, "test", false)
	if err != nil || r.Matched != 1 || r.Moved != 1 || r.ID == "" || q.scans != 0 {
		t.Fatalf("redrive of d-7: %+v, %v, %d scans", r, err, q.scans)
	}
	q.puts = 0
	r, err = dlq.Redrive(t.Context(), sender.Filter{Destination: "d", IDs: []string{"absent"}}, 1, "test", false)
	if err != nil || r.ID != "" || r.Moved != 0 || q.puts != 0 {
		t.Fatalf("redrive of nothing: %+v, %v, %d records written", r, err, q.puts)
	}
	if n, more, err := dlq.Count(t.Context(), sender.Filter{}, 10); n != 10 || !more || err != nil {
		t.Fatalf("Count up to 10 of 19: %d %v %v", n, more, err)
	}
	if n, more, _ := dlq.Count(t.Context(), sender.Filter{}, 100); n != 19 || more {
		t.Fatalf("Count of 19: %d %v", n, more)
	}
	if g, total, more, err := dlq.Summary(t.Context(), sender.Filter{}, 10); err != nil || total != 10 || !more || len(g) != 1 || g[0].Count != 10 {
		t.Fatalf("Summary up to 10 of 19: %+v %d %v %v", g, total, more, err)
	}
	if g, total, more, _ := dlq.Summary(t.Context(), sender.Filter{}, 0); total != 19 || more || g[0].Count != 19 {
		t.Fatalf("Summary of all 19: %+v %d %v", g, total, more)
	}
}

// TestRedriveIsOnRecordBeforeItMoves: a redrive whose move fails is on
// record under its ID, and Progress of it is scoped.
func TestRedriveIsOnRecordBeforeItMoves(t *testing.T) {
	q := deadLetters(t, 3)
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)
	q.failRedrive = true
	r, err := dlq.Redrive(t.Context(), sender.Filter{Destination: "d"}, 2, "test", false)
	if err == nil || r.ID == "" {
		t.Fatalf("a failed move: %+v, %v; want an error and a redrive ID", r, err)
	}
	got, err := dlq.Progress(t.Context(), r.ID, sender.Scope{})
	if err != nil || got.Moved != 0 || got.By != "test" {
		t.Fatalf("record of the failed redrive: %+v, %v", got, err)
	}
	if _, err := dlq.Progress(t.Context(), r.ID, sender.Scope{Destination: "other"}); !errors.Is(err, sender.ErrNotFound) {
		t.Fatalf("Progress scoped to another destination: %v", err)
	}
	q.failRedrive = false
	r, err = dlq.Redrive(t.Context(), sender.Filter{Destination: "d"}, 2, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	got, err = dlq.Progress(t.Context(), r.ID, sender.Scope{Destination: "d"})
	if err != nil || got.Moved != 2 || len(got.Letters) != 2 || got.Letters[0].Outcome == "" {
		t.Fatalf("scoped progress: %+v, %v", got, err)
	}
}

// TestDeadLetterKeepsWhatTheReceiverSaid: the start of a failed answer's
// body is kept with the attempt, on one line, bounded.
func TestDeadLetterKeepsWhatTheReceiverSaid(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(422)
		_, _ = fmt.Fprint(w, "rejected:\n\tschema <b>seat</b> missing\x00"+strings.Repeat("é", 300))
	}))
	t.Cleanup(rcv.Close)
	e := deadLetterOf(t, rcv.URL, "m")
	want := "Unprocessable Entity: rejected: schema <b>seat</b> missing é"
	if !strings.HasPrefix(e.LastError, want) || !utf8.ValidString(e.LastError) || len(e.LastError) > 240 || e.Log[0].Error != e.LastError {
		t.Fatalf("last error %q (%d bytes); want it to start %q, valid UTF-8, bounded", e.LastError, len(e.LastError), want)
	}
}

// deadAt makes n dead letters on destination d of a queue without fsync,
// through the queue's own calls: letter i dead at base plus i minutes.
func deadAt(t *testing.T, n int, base time.Time) sender.AuditedQueue {
	t.Helper()
	db := bolttest.Open(t, &bolt.Options{NoSync: true})
	q, err := boltqueue.New(db, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := &sender.Envelope{ID: fmt.Sprintf("d-%04d", i), Destination: "d", CreatedAt: base, NextAt: base, Payload: []byte(`{}`)}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	for done := 0; done < n; {
		leased, err := q.Lease(t.Context(), "d", 200, base, time.Hour)
		if err != nil || len(leased) == 0 {
			t.Fatalf("lease: %d, %v", len(leased), err)
		}
		outs := make([]sender.Outcome, len(leased))
		for j, l := range leased {
			var i int
			if _, err := fmt.Sscanf(l.ID, "d-%d", &i); err != nil {
				t.Fatalf("letter %s: %v", l.ID, err)
			}
			dead := *l.Envelope
			dead.Attempts, dead.Class, dead.LastStatus = 1, sender.ClassHTTP4xx, 400
			dead.DeadAt = base.Add(time.Duration(i) * time.Minute)
			outs[j] = sender.Outcome{Kind: sender.Dead, ID: l.ID, LeaseUntil: l.LeaseUntil, Envelope: &dead}
		}
		if _, err := q.Settle(t.Context(), "d", outs, base); err != nil {
			t.Fatal(err)
		}
		done += len(leased)
	}
	return q
}

// TestRedriveActsBeyondOnePage: a redrive reads past the first page of
// dead letters, and moves what the filter matches up to its limit,
// whatever page it is on; the time range selects by dead-letter time.
func TestRedriveActsBeyondOnePage(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 1300 // more than two pages of the scan
	q := deadAt(t, n, base)
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)

	r, err := dlq.Redrive(t.Context(), sender.Filter{Destination: "d"}, 5000, "test", true)
	if err != nil || r.Matched != n || r.Moved != 0 {
		t.Fatalf("dry run of all: %+v, %v; want %d matched, none moved", r, err, n)
	}
	// Letters 1100..1199: on the third page.
	window := sender.Filter{Destination: "d", Since: base.Add(1100 * time.Minute), Until: base.Add(1200 * time.Minute)}
	if r, err := dlq.Redrive(t.Context(), window, 5000, "test", true); err != nil || r.Matched != 100 {
		t.Fatalf("dry run of the window: %+v, %v; want 100 matched", r, err)
	}
	r, err = dlq.Redrive(t.Context(), window, 60, "test", false)
	if err != nil || r.Matched != 100 || r.Moved != 60 {
		t.Fatalf("redrive of 60 in the window: %+v, %v", r, err)
	}
	for _, l := range r.Letters {
		var i int
		if _, err := fmt.Sscanf(l.ID, "d-%d", &i); err != nil {
			t.Fatalf("letter %s: %v", l.ID, err)
		}
		if i < 1100 || i >= 1200 {
			t.Errorf("moved %s, outside the window", l.ID)
		}
	}
	st, _ := q.Stats(t.Context(), "d", base)
	if st.Dead != n-60 || st.Queued != 60 {
		t.Errorf("after the redrive: %d dead, %d queued; want %d and 60", st.Dead, st.Queued, n-60)
	}
	// A limit larger than one page moves that many.
	r, err = dlq.Redrive(t.Context(), sender.Filter{Destination: "d"}, 1000, "test", false)
	if err != nil || r.Moved != 1000 {
		t.Fatalf("redrive of 1000: moved %d, %v", r.Moved, err)
	}
}

// failingQueue fails its reads of records when told to, and cancels a
// context when the audit record is first written (a client that leaves
// once the redrive is on record).
type failingQueue struct {
	sender.AuditedQueue
	failReads  bool
	leave      context.CancelFunc
	metasCalls int
	metasIDs   int
}

func (q *failingQueue) Metas(ctx context.Context, dest string, ids []string) ([]*sender.Meta, error) {
	q.metasCalls++
	q.metasIDs += len(ids)
	if q.failReads {
		return nil, errors.New("store down")
	}
	return q.AuditedQueue.Metas(ctx, dest, ids)
}

func (q *failingQueue) Dead(ctx context.Context, dest, cursor string, limit int) ([]*sender.Meta, string, error) {
	if q.failReads {
		return nil, "", errors.New("store down")
	}
	return q.AuditedQueue.Dead(ctx, dest, cursor, limit)
}

func (q *failingQueue) PutRedrive(ctx context.Context, r *sender.Redrive) error {
	if q.leave != nil {
		q.leave()
	}
	return q.AuditedQueue.PutRedrive(ctx, r)
}

func (q *failingQueue) Redrive(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // as a network store would
	}
	return q.AuditedQueue.Redrive(ctx, dest, ids, redriveID, now)
}

// TestRedriveNeverReportsAFailingStoreAsNothingToMove: a store that fails
// to read is an error, for a redrive by ID and by filter, never "moved 0".
func TestRedriveNeverReportsAFailingStoreAsNothingToMove(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := &failingQueue{AuditedQueue: deadAt(t, 5, base), failReads: true}
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)
	for _, f := range []sender.Filter{{Destination: "d", IDs: []string{"d-0001"}}, {Destination: "d"}} {
		r, err := dlq.Redrive(t.Context(), f, 5, "test", false)
		if err == nil {
			t.Errorf("redrive of %+v on a failing store = %+v, nil; want the store's error", f, r)
		}
	}
}

// TestRedriveRunsToItsEndWhenTheClientLeaves: once the audit record is
// written the move is detached from the request: the client leaving does
// not stop it, and the record ends with the true count moved.
func TestRedriveRunsToItsEndWhenTheClientLeaves(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithCancel(t.Context())
	q := &failingQueue{AuditedQueue: deadAt(t, 450, base), leave: cancel}
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)
	r, err := dlq.Redrive(ctx, sender.Filter{Destination: "d"}, 450, "test", false)
	if err != nil || r.Moved != 450 {
		t.Fatalf("redrive whose client left: %+v, %v; want all 450 moved", r, err)
	}
	q.leave = nil
	got, err := dlq.Progress(t.Context(), r.ID, sender.Scope{})
	if err != nil || got.Moved != 450 || got.Pending != 450 {
		t.Fatalf("the record: moved %d pending %d, %v; want 450 and 450", got.Moved, got.Pending, err)
	}
}

// TestRedriveLimitIsBounded: a limit past max_redrive, or not positive, is
// ErrBadLimit, before anything is read.
func TestRedriveLimitIsBounded(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := &failingQueue{AuditedQueue: deadAt(t, 3, base)}
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 100, nil)
	for _, limit := range []int{0, -1, 101, 1_000_000_000} {
		if r, err := dlq.Redrive(t.Context(), sender.Filter{}, limit, "test", false); !errors.Is(err, sender.ErrBadLimit) {
			t.Errorf("limit %d: %+v, %v; want ErrBadLimit", limit, r, err)
		}
	}
	if r, err := dlq.Redrive(t.Context(), sender.Filter{}, 100, "test", false); err != nil || r.Moved != 3 {
		t.Errorf("limit 100 = max_redrive: %+v, %v", r, err)
	}
	if sender.NewSettled(q, nil, 0, nil).MaxRedrive() != sender.DefaultMaxRedrive {
		t.Errorf("the default max_redrive is not %d", sender.DefaultMaxRedrive)
	}
}

// TestProgressReadsCountsNotLetters: the progress of a large redrive is
// read from the queue's counts; only the first letters' outcomes are
// read, for a page to show; a letter a later redrive moved again is
// superseded, never pending.
func TestProgressReadsCountsNotLetters(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := &failingQueue{AuditedQueue: deadAt(t, 600, base)}
	dlq := sender.NewSettled(q, func() []string { return []string{"d"} }, 0, nil)
	first, err := dlq.Redrive(t.Context(), sender.Filter{Destination: "d"}, 600, "test", false)
	if err != nil || first.Moved != 600 {
		t.Fatalf("redrive: %+v, %v", first, err)
	}
	// Two of them die again; one of those is moved by a second redrive.
	leased, err := q.Lease(t.Context(), "d", 2, time.Now(), time.Minute)
	if err != nil || len(leased) != 2 {
		t.Fatalf("lease: %v, %v", leased, err)
	}
	var outs []sender.Outcome
	for _, l := range leased {
		e := *l.Envelope
		e.Attempts, e.DeadAt = 1, base.Add(time.Hour)
		e.Log = append(e.Log, sender.Attempt{At: base, Status: 400, RedriveID: first.ID})
		outs = append(outs, sender.Outcome{Kind: sender.Dead, ID: l.ID, LeaseUntil: l.LeaseUntil, Envelope: &e})
	}
	if _, err := q.Settle(t.Context(), "d", outs, base); err != nil {
		t.Fatal(err)
	}
	second, err := dlq.Redrive(t.Context(), sender.Filter{Destination: "d", IDs: []string{leased[0].ID}}, 1, "test", false)
	if err != nil || second.Moved != 1 {
		t.Fatalf("second redrive: %+v, %v", second, err)
	}
	q.metasCalls, q.metasIDs = 0, 0
	got, err := dlq.Progress(t.Context(), first.ID, sender.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Moved != 600 || got.DeadAgain != 1 || got.Superseded != 1 || got.Pending != 598 || got.Delivered != 0 {
		t.Errorf("progress = moved %d dead_again %d superseded %d pending %d delivered %d; want 600 1 1 598 0",
			got.Moved, got.DeadAgain, got.Superseded, got.Pending, got.Delivered)
	}
	if q.metasIDs > 100 {
		t.Errorf("progress read %d letters' records, want at most a page (100)", q.metasIDs)
	}
	outcomes := map[string]string{}
	for _, l := range got.Letters[:100] {
		outcomes[l.ID] = l.Outcome
	}
	if outcomes[leased[0].ID] != "superseded" || outcomes[leased[1].ID] != "dead_again" {
		t.Errorf("the shown outcomes of %s and %s: %q, %q; want superseded, dead_again",
			leased[0].ID, leased[1].ID, outcomes[leased[0].ID], outcomes[leased[1].ID])
	}
}

// TestRedriveOfAnOrphansLettersIsRefused: a redrive whose filter matches
// dead letters of a destination no longer configured is refused, naming
// it, whether the filter names it, matches it by class or by ID; one that
// matches only configured destinations' letters goes ahead.
func TestRedriveOfAnOrphansLettersIsRefused(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := deadAt(t, 3, base) // on "d"
	e := &sender.Envelope{ID: "live-1", Destination: "live", CreatedAt: base, NextAt: base, Payload: []byte(`{}`)}
	if _, err := q.Enqueue(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	l, err := q.Lease(t.Context(), "live", 1, base, time.Hour)
	if err != nil || len(l) != 1 {
		t.Fatal(l, err)
	}
	dead := *l[0].Envelope
	dead.Attempts, dead.Class, dead.DeadAt = 1, sender.ClassHTTP5xx, base
	if _, err := q.Settle(t.Context(), "live", []sender.Outcome{{Kind: sender.Dead, ID: "live-1", LeaseUntil: l[0].LeaseUntil, Envelope: &dead}}, base); err != nil {
		t.Fatal(err)
	}
	dlq := sender.NewSettled(q, func() []string { return []string{"live"} }, 0, nil) // "d" is an orphan now
	for _, f := range []sender.Filter{{Destination: "d"}, {Class: "http_4xx"}, {IDs: []string{"d-0001"}}, {}} {
		if r, err := dlq.Redrive(t.Context(), f, 5, "test", true); !errors.Is(err, sender.ErrOrphaned) || !strings.Contains(err.Error(), "d") {
			t.Errorf("redrive of %+v: %+v, %v; want ErrOrphaned naming d", f, r, err)
		}
	}
	if r, err := dlq.Redrive(t.Context(), sender.Filter{Class: "http_5xx"}, 5, "test", false); err != nil || r.Moved != 1 {
		t.Errorf("redrive of the configured destination's class: %+v, %v", r, err)
	}
}
