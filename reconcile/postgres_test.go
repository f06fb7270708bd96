package reconcile_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/pgtest"
	"github.com/hookgate/hookgate/reconcile"
)

// seed fills a truth table and a receiver table with 100,000 reservations
// and injects 300 drifts of each kind, plus 50 recent ones (within grace).
func seed(t *testing.T, dsn string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, sql := range []string{
		`CREATE TABLE reservations (id text PRIMARY KEY, status text NOT NULL, version bigint NOT NULL, updated_at timestamptz NOT NULL)`,
		`CREATE TABLE enrollments (reservation_id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL, updated_at timestamptz NOT NULL)`,
		// Truth: every i but the orphans (i % 333 = 2, first 300).
		`INSERT INTO reservations
		 SELECT 'r-' || lpad(i::text, 7, '0'), 'confirmed', 1, now() - interval '1 hour'
		 FROM generate_series(0, 99999) i
		 WHERE NOT (i % 333 = 2 AND i / 333 < 300)`,
		// Receiver: all but the missing (i % 333 = 0), mismatched states
		// (i % 333 = 1), and the orphans.
		`INSERT INTO enrollments
		 SELECT 'r-' || lpad(i::text, 7, '0'),
		        CASE WHEN i % 333 = 1 AND i / 333 < 300 THEN 'cancelled' ELSE 'active' END, 1, now() - interval '1 hour'
		 FROM generate_series(0, 99999) i
		 WHERE NOT (i % 333 = 0 AND i / 333 < 300)`,
		// 50 recent reservations the receiver has not seen yet: in grace.
		`INSERT INTO reservations
		 SELECT 's-' || lpad(i::text, 7, '0'), 'confirmed', 1, now() - interval '10 seconds'
		 FROM generate_series(0, 49) i`,
		`ANALYZE`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// TestPostgresSources compares 100,000 reservations with their
// enrollments in a real PostgreSQL: the 900 injected drifts are found, no
// false one, the recent rows are left to the grace period.
func TestPostgresSources(t *testing.T) {
	srv := pgtest.Start(t)
	seed(t, srv.DSN())
	truth := reconcile.Postgres{DSN: srv.DSN(), Query: `SELECT id, status, version, updated_at FROM reservations`}
	recv := reconcile.Postgres{DSN: srv.DSN(), Query: `SELECT reservation_id, state, version, updated_at FROM enrollments`}
	cfg := reconcile.Config{Expect: map[string]string{"confirmed": "active", "expired": reconcile.None}, Grace: 2 * time.Minute}

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	r, err := reconcile.Compare(context.Background(), truth, recv, cfg, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if r.Drift[reconcile.Missing] != 300 || r.Drift[reconcile.Mismatched] != 300 || r.Drift[reconcile.Orphaned] != 300 {
		t.Errorf("drift = %v, want 300 of each kind", r.Drift)
	}
	if r.Compared.Truth != 100_000-300+50 || r.Compared.Receiver != 100_000-300 {
		t.Errorf("compared = %+v", r.Compared)
	}
	rows := r.Compared.Truth + r.Compared.Receiver
	t.Logf("compared %d rows in %s: %.0f rows/s; heap in use %d KiB before, %d KiB after",
		rows, elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds(), before.HeapInuse>>10, after.HeapInuse>>10)

	// Without grace, the 50 recent reservations are missing too.
	cfg.Grace = 0
	r, err = reconcile.Compare(context.Background(), truth, recv, cfg, nil)
	if err != nil || r.Drift[reconcile.Missing] != 350 {
		t.Errorf("without grace: %v, %v; want 350 missing", r.Drift, err)
	}

	// The receiver served by an HTTP endpoint that pages through the same
	// table gives the same report.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0k3n" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		conn, err := pgx.Connect(r.Context(), srv.DSN())
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = conn.Close(r.Context()) }() // read only: nothing to lose
		rows, err := conn.Query(r.Context(), `SELECT reservation_id, state, version, updated_at FROM enrollments
			WHERE reservation_id COLLATE "C" > $1 ORDER BY reservation_id COLLATE "C" LIMIT 1000`, r.URL.Query().Get("cursor"))
		if err != nil {
			t.Error(err)
			return
		}
		type item struct {
			Key       string    `json:"key"`
			State     string    `json:"state"`
			Version   int64     `json:"version"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		out := struct {
			Items []item `json:"items"`
			Next  string `json:"next,omitempty"`
		}{Items: []item{}}
		for rows.Next() {
			var it item
			if err := rows.Scan(&it.Key, &it.State, &it.Version, &it.UpdatedAt); err != nil {
				t.Error(err)
				return
			}
			out.Items = append(out.Items, it)
		}
		if len(out.Items) == 1000 {
			out.Next = out.Items[len(out.Items)-1].Key
		}
		_ = json.NewEncoder(w).Encode(out) // a reader gone away has nothing to be told
	}))
	defer endpoint.Close()
	cfg.Grace = 2 * time.Minute
	viaHTTP := reconcile.HTTP{URL: endpoint.URL, Header: http.Header{"Authorization": {"Bearer t0k3n"}}}
	rh, err := reconcile.Compare(context.Background(), truth, viaHTTP, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := reconcile.Compare(context.Background(), truth, recv, cfg, nil)
	if rh.Compared != rp.Compared || !maps.Equal(rh.Drift, rp.Drift) || len(rh.Samples) != len(rp.Samples) {
		t.Errorf("the HTTP source's report differs: %+v %v against %+v %v", rh.Compared, rh.Drift, rp.Compared, rp.Drift)
	}
	for i := range rh.Samples {
		if rh.Samples[i].Key != rp.Samples[i].Key || rh.Samples[i].Kind != rp.Samples[i].Kind {
			t.Errorf("sample %d: %s %s, want %s %s", i, rh.Samples[i].Kind, rh.Samples[i].Key, rp.Samples[i].Kind, rp.Samples[i].Key)
		}
	}
	if _, err := reconcile.Compare(context.Background(), truth, reconcile.HTTP{URL: endpoint.URL}, cfg, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the header: err = %v, want the 401", err)
	}

	// A bad query is an error, not a report.
	bad := reconcile.Postgres{DSN: srv.DSN(), Query: `SELECT nope FROM nowhere`}
	if _, err := reconcile.Compare(context.Background(), bad, recv, cfg, nil); err == nil {
		t.Error("a bad query gave no error")
	}
}

// TestPostgresErrorsHideTheDSN: a DSN that does not parse (or not
// unambiguously), or a server that cannot be reached, is an error that
// shows neither the DSN nor its password (pgx quotes a DSN that does not
// parse, masking only what it takes for the password, and names the host
// and database it parsed, which may hold the password's end).
func TestPostgresErrorsHideTheDSN(t *testing.T) {
	for _, dsn := range []string{
		// The password's '@' is not escaped: pgx cannot tell it apart.
		"postgres://app:pa55@w0rd@127.0.0.1:notaport/db?application_name=s3cret",
		"postgres://app:pa55w0rd@127.0.0.1:notaport/db?application_name=s3cret",
		"host=127.0.0.1 port=notaport user=app password=pa55w0rd application_name=s3cret",
		"postgres://app:pa55w0rd@127.0.0.1:1/db?application_name=s3cret&connect_timeout=2",
		// These parse, the password's end read as the host or the
		// database: pgx's errors would name them.
		"postgres://app:pa55@w0rd@127.0.0.1:1/db?application_name=s3cret",
		"postgres://app:5432/w0rd@127.0.0.1:1/db?application_name=s3cret",
		// The password is the user's name too, oddly: still masked.
		"host=127.0.0.1 port=1 user=pa55w0rd password=pa55w0rd application_name=s3cret connect_timeout=2",
	} {
		_, err := reconcile.Compare(t.Context(), reconcile.Postgres{DSN: dsn, Query: "SELECT 1"}, reconcile.HTTP{URL: "http://127.0.0.1:1"}, reconcile.Config{}, nil)
		if err == nil {
			t.Fatalf("%s: no error", dsn)
		}
		for _, s := range []string{"pa55", "w0rd", "s3cret", "notaport", "postgres://", "password="} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error shows %q: %v", s, err)
			}
		}
	}
}
