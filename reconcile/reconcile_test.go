package reconcile

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rows is a Source over a slice (pure logic: the PostgreSQL and HTTP
// sources have their own tests against real servers).
type rows []Row

func (rs rows) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for _, r := range rs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

var (
	now    = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	old    = now.Add(-time.Hour)
	expect = map[string]string{"confirmed": "active", "expired": None}
)

func row(key, state string) Row { return Row{Key: key, State: state, Version: 1, UpdatedAt: old} }

func kinds(r *Report) []string {
	var out []string
	for _, d := range r.Samples {
		out = append(out, string(d.Kind)+":"+d.Key)
	}
	return out
}

func TestCompareFindsEachKind(t *testing.T) {
	truth := rows{row("a", "confirmed"), row("b", "confirmed"), row("c", "expired"), row("d", "expired"), row("e", "pending"), row("g", "confirmed")}
	recv := rows{row("a", "active"), row("b", "cancelled"), row("c", "active"), row("f", "active"), row("g", "active")}
	var found []string
	r, err := Compare(t.Context(), truth, recv, Config{Expect: expect, Now: now}, func(d Drift) error {
		found = append(found, string(d.Kind)+":"+d.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// a: as expected; b: another state; c: held where none is implied;
	// d: expired and absent, as expected; e: no expectation; f: orphan.
	want := []string{"mismatched:b", "mismatched:c", "orphaned:f"}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("drifts found (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, kinds(r)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if r.Compared.Truth != 6 || r.Compared.Receiver != 5 || r.Drift[Missing] != 0 || r.Drift[Mismatched] != 2 || r.Drift[Orphaned] != 1 {
		t.Errorf("report = %+v", r)
	}
	r, _ = Compare(t.Context(), rows{row("a", "confirmed"), row("z", "confirmed")}, rows{row("a", "active")}, Config{Expect: expect, Now: now}, nil)
	if r.Drift[Missing] != 1 || kinds(r)[0] != "missing:z" {
		t.Errorf("a key the receiver lacks: %+v", kinds(r))
	}
}

func TestGraceLeavesOutRecentRows(t *testing.T) {
	recent := Row{Key: "b", State: "confirmed", UpdatedAt: now.Add(-30 * time.Second)}
	recentRecv := Row{Key: "c", State: "active", UpdatedAt: now.Add(-10 * time.Second)}
	truth := rows{row("a", "confirmed"), recent}
	recv := rows{recentRecv}
	r, err := Compare(t.Context(), truth, recv, Config{Expect: expect, Now: now, Grace: 2 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"missing:a"}, kinds(r)); diff != "" {
		t.Errorf("with grace (-want +got):\n%s", diff)
	}
	if r.Compared.Truth != 2 || r.Compared.Receiver != 1 {
		t.Errorf("recent rows are still counted as compared: %+v", r.Compared)
	}
}

func TestOutOfOrderSourceIsAnError(t *testing.T) {
	_, err := Compare(t.Context(), rows{row("b", "confirmed"), row("a", "confirmed")}, rows{}, Config{Expect: expect, Now: now}, nil)
	var oe *ErrOrder
	if !errors.As(err, &oe) || oe.Side != "truth" || oe.Prev != "b" || oe.Next != "a" {
		t.Fatalf("err = %v, want the truth's order error", err)
	}
	if _, err := Compare(t.Context(), rows{}, rows{row("a", "x"), row("a", "x")}, Config{Now: now}, nil); !errors.As(err, &oe) {
		t.Fatalf("a repeated key: err = %v, want an order error", err)
	}
}

// failing yields a few rows, then an error: a source that fails part-way.
type failing struct{}

func (failing) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		if yield(row("a", "confirmed"), nil) {
			yield(Row{}, errors.New("connection reset"))
		}
	}
}

func TestSourceErrorAndStop(t *testing.T) {
	if _, err := Compare(t.Context(), failing{}, rows{}, Config{Expect: expect, Now: now}, nil); err == nil {
		t.Fatal("a source failing part-way gave no error")
	}
	stop := errors.New("enough")
	calls := 0
	_, err := Compare(t.Context(), rows{row("a", "confirmed"), row("b", "confirmed")}, rows{}, Config{Expect: expect, Now: now},
		func(Drift) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("found's error = %v after %d calls, want it at once", err, calls)
	}
}

// TestHundredThousandRows: 100,000 keys on each side, 300 drifts of each
// kind injected: every one found, no false one, samples bounded.
func TestHundredThousandRows(t *testing.T) {
	const n = 100_000
	var truth, recv rows
	want := map[Kind]int{}
	for i := range n {
		key := fmt.Sprintf("r-%07d", i)
		switch {
		case i%333 == 0 && want[Missing] < 300: // the receiver lacks it
			truth = append(truth, row(key, "confirmed"))
			want[Missing]++
		case i%333 == 1 && want[Mismatched] < 300:
			truth = append(truth, row(key, "confirmed"))
			recv = append(recv, row(key, "cancelled"))
			want[Mismatched]++
		case i%333 == 2 && want[Orphaned] < 300:
			recv = append(recv, row(key, "active"))
			want[Orphaned]++
		default:
			truth = append(truth, row(key, "confirmed"))
			recv = append(recv, row(key, "active"))
		}
	}
	r, err := Compare(t.Context(), truth, recv, Config{Expect: expect, Now: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[Kind]int{Missing: 300, Mismatched: 300, Orphaned: 300}, r.Drift); diff != "" {
		t.Errorf("drift (-want +got):\n%s", diff)
	}
	if len(r.Samples) != 60 {
		t.Errorf("%d samples, want 20 of each kind", len(r.Samples))
	}
}

func BenchmarkCompare(b *testing.B) {
	var truth, recv rows
	for i := range 100_000 {
		key := fmt.Sprintf("r-%07d", i)
		truth = append(truth, row(key, "confirmed"))
		recv = append(recv, row(key, "active"))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compare(context.Background(), truth, recv, Config{Expect: expect, Now: now}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*len(truth))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestProgress: Progress sees the counts every ProgressEvery rows read,
// both sides together, with the drift found so far.
func TestProgress(t *testing.T) {
	var truth, recv rows
	for i := range 25 {
		truth = append(truth, row(fmt.Sprintf("k%03d", i), "confirmed"))
		if i%5 != 0 {
			recv = append(recv, row(fmt.Sprintf("k%03d", i), "active"))
		}
	}
	var seen []string
	cfg := Config{Expect: expect, Now: now, ProgressEvery: 10, Progress: func(r *Report) {
		seen = append(seen, fmt.Sprintf("%d+%d:%d", r.Compared.Truth, r.Compared.Receiver, r.Total()))
	}}
	if _, err := Compare(context.Background(), truth, recv, cfg, nil); err != nil {
		t.Fatal(err)
	}
	// 45 rows read: progress at 10, 20, 30, 40. A missing key (every
	// fifth) is found when the truth side reads past it, ahead of the
	// receiver side by one row per missing key.
	want := []string{"6+4:1", "11+9:2", "17+13:4", "23+17:5"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}
