package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/pgtest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestReconcileCommand runs `hookgate reconcile` on a job declared in a
// Caddyfile, against a real PostgreSQL: exit 1 with the drift reported,
// 0 once it is fixed, 2 (and nothing on stdout) on an error.
func TestReconcileCommand(t *testing.T) {
	srv, conn := startPostgres(t)
	for _, sql := range []string{
		`CREATE TABLE reservations (id text, status text, version bigint, updated_at timestamptz)`,
		`CREATE TABLE enrollments (reservation_id text, state text, version bigint, updated_at timestamptz)`,
		`INSERT INTO reservations VALUES
			('r-1', 'confirmed', 3, now() - interval '1 hour'),
			('r-2', 'confirmed', 1, now() - interval '1 hour'),
			('r-3', 'expired', 2, now() - interval '1 hour'),
			('r-4', 'confirmed', 1, now() - interval '1 hour')`,
		`INSERT INTO enrollments VALUES
			('r-1', 'active', 3, now() - interval '1 hour'),
			('r-3', 'active', 1, now() - interval '1 hour'),
			('r-4', 'cancelled', 1, now() - interval '1 hour'),
			('r-9', 'active', 1, now() - interval '1 hour')`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	// The same enrollments over HTTP, a page of two rows at a time, for a
	// bearer token only.
	enrollAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		after := r.URL.Query().Get("cursor")
		rows, err := conn.Query(r.Context(), `SELECT reservation_id, state, version, updated_at FROM enrollments
			WHERE reservation_id > $1 ORDER BY reservation_id COLLATE "C" LIMIT 2`, after)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		type item struct {
			Key       string    `json:"key"`
			State     string    `json:"state"`
			Version   int64     `json:"version"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		var page struct {
			Items []item `json:"items"`
			Next  string `json:"next,omitempty"`
		}
		for rows.Next() {
			var it item
			if err := rows.Scan(&it.Key, &it.State, &it.Version, &it.UpdatedAt); err != nil {
				t.Error(err)
				return
			}
			page.Items = append(page.Items, it)
		}
		if len(page.Items) == 2 {
			page.Next = page.Items[1].Key
		}
		_ = json.NewEncoder(w).Encode(page) // a reader gone away has nothing to be told
	}))
	defer enrollAPI.Close()
	caddyfile := `{
	hookgate {
		reconcile enrollments {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
			expect   expired   none
			grace    2m
		}
		reconcile enrollments-api {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver http ` + enrollAPI.URL + ` {
				header Authorization "Bearer {env.ENROLL_TOKEN}"
			}
			expect   confirmed active
			expect   expired   none
		}
	}
}
`
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(binary, append([]string{"reconcile", "--config", path}, args...)...)
		cmd.Env = append(os.Environ(), "TRUTH_DSN="+srv.DSN(), "ENROLL_TOKEN=s3cret-token")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("--job", "enrollments", "--format", "json")
	if code != 1 {
		t.Fatalf("with drift: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var r struct {
		Job      string
		Compared struct{ Truth, Receiver int }
		Drift    map[string]int
		Samples  []struct {
			Key, Kind                 string
			TruthState, ReceiverState *string `json:"-"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, out)
	}
	// r-2 missing; r-3 held although expired; r-4 in another state; r-9 orphaned.
	if r.Job != "enrollments" || r.Compared.Truth != 4 || r.Compared.Receiver != 4 ||
		r.Drift["missing"] != 1 || r.Drift["mismatched"] != 2 || r.Drift["orphaned"] != 1 || len(r.Samples) != 4 {
		t.Fatalf("report = %+v\n%s", r, out)
	}
	if !strings.Contains(out, `"truth_state":null`) || !strings.Contains(out, `"receiver_state":null`) || strings.Count(out, "\n") != 1 {
		t.Errorf("want one JSON line with an absent state as null:\n%s", out)
	}
	if code, out, _ := run("--job", "enrollments"); code != 1 || !strings.Contains(out, "drift: 1 missing, 2 mismatched, 1 orphaned") {
		t.Errorf("table report: exit %d\n%s", code, out)
	}
	// The receiver over HTTP (paged, its token from the environment): the
	// same report.
	if code, out, errOut := run("--job", "enrollments-api"); code != 1 || !strings.Contains(out, "drift: 1 missing, 2 mismatched, 1 orphaned") {
		t.Errorf("the HTTP receiver: exit %d\n%s%s", code, out, errOut)
	}

	for _, sql := range []string{
		`INSERT INTO enrollments VALUES ('r-2', 'active', 1, now() - interval '1 hour')`,
		`DELETE FROM enrollments WHERE reservation_id IN ('r-3', 'r-9')`,
		`UPDATE enrollments SET state = 'active' WHERE reservation_id = 'r-4'`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := run("--job", "enrollments"); code != 0 || !strings.Contains(out, "drift: 0 missing, 0 mismatched, 0 orphaned") {
		t.Errorf("after the fix: exit %d\n%s%s", code, out, errOut)
	}

	if code, out, errOut := run("--job", "nope"); code != 2 || out != "" || !strings.Contains(errOut, `no reconcile job "nope"`) {
		t.Errorf("an unknown job: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	cmd := exec.Command(binary, "reconcile", "--config", path, "--job", "enrollments")
	cmd.Env = append(os.Environ(), "TRUTH_DSN=postgres://postgres@127.0.0.1:1/postgres")
	if out, err := cmd.Output(); err == nil || len(out) != 0 {
		t.Errorf("an unreachable database: %v, stdout %q; want exit 2 and nothing printed", err, out)
	} else if exit := new(exec.ExitError); errors.As(err, &exit) && exit.ExitCode() != 2 {
		t.Errorf("an unreachable database: exit %d, want 2", exit.ExitCode())
	}
}

// TestReconcileRepair: --repair --limit 2 enqueues exactly two corrective
// events through the sender; a second run re-sends neither (their
// deterministic IDs are duplicates); once a hookgate receiver applied
// them, a run finds two fewer drifts.
func TestReconcileRepair(t *testing.T) {
	srv, conn := startPostgres(t)
	reservationTables(t, conn)
	up, appliedSoFar := enrollmentService(t, conn)
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	g := startGateway(t, "", gatewayOptions{Global: senderGlobal("store file", recv.URL, "")})

	run, drift := repairJob(t, srv.DSN(), g.Admin)

	if out, err := cli(t, g, "destinations", "pause", "enrollment"); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	code, r := run("--repair", "--limit", "2")
	if code != 1 || r["repaired"] != float64(2) || drift(r) != "1/2/1" {
		t.Fatalf("first repair: exit %d, %v", code, r)
	}
	// A second run before delivery: the first two are duplicates (not
	// re-sent, not counted); the limit lets the next drift through.
	if _, r = run("--repair", "--limit", "2"); r["repaired"] != float64(1) {
		t.Fatalf("second repair before delivery: %v; want only r-4 newly enqueued", r)
	}
	if out, err := cli(t, g, "destinations", "resume", "enrollment"); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	got := waitRepairs(appliedSoFar, 3)
	want := []string{"reconcile:r-2:confirmed:1 reservation.confirmed", "reconcile:r-3:expired:2 reservation.expired", "reconcile:r-4:confirmed:5 reservation.confirmed"}
	if !slices.Equal(got, want) {
		t.Fatalf("the receiver applied %q; want the three repairs, once each", got)
	}
	if code, r = run(); code != 1 || drift(r) != "0/0/1" {
		t.Fatalf("after the repairs: exit %d, drift %s; want the orphan alone (0/0/1): orphans are never repaired", code, drift(r))
	}
}

// reservationTables creates the truth and receiver tables with three
// drifts: r-2 missing, r-3 expired but enrolled, r-4 enrolled in the
// wrong state; and r-9, an orphan.
func reservationTables(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, sql := range []string{
		`CREATE TABLE reservations (id text, status text, version bigint, updated_at timestamptz)`,
		`CREATE TABLE enrollments (reservation_id text PRIMARY KEY, state text, version bigint, updated_at timestamptz)`,
		`INSERT INTO reservations VALUES
			('r-2', 'confirmed', 1, now() - interval '1 hour'),
			('r-3', 'expired', 2, now() - interval '1 hour'),
			('r-4', 'confirmed', 5, now() - interval '1 hour')`,
		`INSERT INTO enrollments VALUES
			('r-3', 'active', 1, now() - interval '1 hour'),
			('r-4', 'cancelled', 1, now() - interval '1 hour'),
			('r-9', 'active', 1, now() - interval '1 hour')`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
}

// enrollmentService is a receiver that applies reservation events to the
// enrollments table; applied lists the "<id> <type>" it applied.
func enrollmentService(t *testing.T, conn *pgx.Conn) (up *upstream, applied func() []string) {
	var got []string
	var mu sync.Mutex
	up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var ev struct {
			ID, Type, Key, State string
			Version              int64
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(400)
			return
		}
		sql := `INSERT INTO enrollments VALUES ($1, 'active', $2, now() - interval '1 hour')
			ON CONFLICT (reservation_id) DO UPDATE SET state = 'active', version = $2`
		if ev.State == "expired" {
			sql = `DELETE FROM enrollments WHERE reservation_id = $1 AND $2::bigint IS NOT NULL`
		}
		mu.Lock() // one connection: one statement at a time
		defer mu.Unlock()
		if _, err := conn.Exec(context.Background(), sql, ev.Key, ev.Version); err != nil {
			t.Error(err)
		}
		got = append(got, ev.ID+" "+ev.Type)
	})
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// waitRepairs waits until n events are applied (or 20s pass), then a
// little more for any extra copy, and returns them sorted.
func waitRepairs(applied func() []string, n int) []string {
	deadline := time.Now().Add(20 * time.Second)
	for len(applied()) < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	got := applied()
	slices.Sort(got)
	return got
}

// TestReconcileSchedule runs a job with `every 2s` and repair in two
// gateways sharing a Redis store: each slot runs once, in one of them
// (the other counts it skipped); the repairs reach the receiver once
// each; the drift gauge ends at the orphan alone.
func TestReconcileSchedule(t *testing.T) {
	pg, conn := startPostgres(t)
	reservationTables(t, conn)
	up, applied := enrollmentService(t, conn)
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})

	rd := redistest.Start(t)
	store := fmt.Sprintf("store redis %s\n\t\tkey_prefix %s", rd.URL(), redistest.Prefix("it"))
	global := strings.TrimSuffix(senderGlobal(store, recv.URL, ""), "}") + `
		reconcile enrollments {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
			expect   expired   none
			grace    1s
			every    2s
			repair {
				destination enrollment
				event_type  reservation.{state}
			}
		}
	}`
	opts := gatewayOptions{Global: global, Env: []string{"TRUTH_DSN=" + pg.DSN()}}
	a, b := startGateway(t, "", opts), startGateway(t, "", opts)

	want := []string{"reconcile:r-2:confirmed:1 reservation.confirmed", "reconcile:r-3:expired:2 reservation.expired", "reconcile:r-4:confirmed:5 reservation.confirmed"}
	if got := waitRepairs(applied, 3); !slices.Equal(got, want) {
		t.Fatalf("the receiver applied %q; want the three repairs, once each", got)
	}
	// Let two more slots pass, then scrape both in the middle of a slot,
	// when its run is over.
	next := time.Now().Truncate(2 * time.Second).Add(2 * time.Second)
	time.Sleep(time.Until(next.Add(4*time.Second + time.Second)))
	runs := func(m, result string) float64 {
		return max(0, metricValue(m, `hookgate_reconcile_runs_total{job="enrollments",result="`+result+`"}`))
	}
	ma, mb := a.Metrics(), b.Metrics()
	ranA, ranB := runs(ma, "drift")+runs(ma, "clean"), runs(mb, "drift")+runs(mb, "clean")
	triedA, triedB := ranA+runs(ma, "skipped")+runs(ma, "error"), ranB+runs(mb, "skipped")+runs(mb, "error")
	if runs(ma, "error")+runs(mb, "error") > 0 {
		t.Errorf("failed runs:\n%s\n%s", a.logs, b.logs)
	}
	// Both instances tried every slot since each started; the slots are
	// the later one's plus the earlier one's head start: each ran once.
	if ranA+ranB != max(triedA, triedB) || runs(ma, "skipped")+runs(mb, "skipped") == 0 {
		t.Errorf("ran %v+%v times in max(%v, %v) slots; want each slot run once", ranA, ranB, triedA, triedB)
	}
	// The drift gauge of the instance that ran the last slot.
	last := ma
	if metricValue(mb, `hookgate_reconcile_last_run_timestamp_seconds{job="enrollments"}`) >
		metricValue(ma, `hookgate_reconcile_last_run_timestamp_seconds{job="enrollments"}`) {
		last = mb
	}
	for kind, n := range map[string]float64{"missing": 0, "mismatched": 0, "orphaned": 1} {
		if v := metricValue(last, `hookgate_reconcile_drift{job="enrollments",kind="`+kind+`"}`); v != n {
			t.Errorf("hookgate_reconcile_drift %s = %v, want %v", kind, v, n)
		}
	}
	if metricValue(ma, `hookgate_reconcile_last_run_timestamp_seconds{job="enrollments"}`) <= 0 && metricValue(mb, `hookgate_reconcile_last_run_timestamp_seconds{job="enrollments"}`) <= 0 {
		t.Error("hookgate_reconcile_last_run_timestamp_seconds is missing")
	}
	if metricValue(ma, `hookgate_reconcile_duration_seconds_count{job="enrollments"}`)+
		metricValue(mb, `hookgate_reconcile_duration_seconds_count{job="enrollments"}`) < 2 {
		t.Error("hookgate_reconcile_duration_seconds lacks the runs")
	}
	if got := applied(); len(got) != 3 {
		t.Errorf("after more slots the receiver applied %q; want the three repairs alone", got)
	}
}

// repairCaddyfile declares the enrollments job with its repair block.
const repairCaddyfile = `{
	hookgate {
		reconcile enrollments {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
			expect   expired   none
			repair {
				destination enrollment
				event_type  reservation.{state}
			}
		}
	}
}
`

// repairJob writes a Caddyfile with the enrollments job and its repair
// block; run runs `hookgate reconcile` on it (JSON report, repairs through
// admin) and drift formats a report's drift as missing/mismatched/orphaned.
func repairJob(t *testing.T, dsn, admin string) (run func(args ...string) (int, map[string]any), drift func(map[string]any) string) {
	path := writeCaddyfile(t, repairCaddyfile)
	run = func(args ...string) (int, map[string]any) {
		code, out, errOut := reconcileCmd(t, []string{"TRUTH_DSN=" + dsn}, append([]string{"--config", path, "--job", "enrollments", "--format", "json", "--address", admin}, args...)...)
		var r map[string]any
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("exit %d, not a JSON report: %v\n%s%s", code, err, out, errOut)
		}
		return code, r
	}
	drift = func(r map[string]any) string {
		d := r["drift"].(map[string]any)
		return fmt.Sprintf("%v/%v/%v", d["missing"], d["mismatched"], d["orphaned"])
	}
	return run, drift
}

// writeCaddyfile writes a Caddyfile into a temp dir and returns its path.
func writeCaddyfile(t *testing.T, caddyfile string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// reconcileCmd runs `hookgate reconcile args...` with env added to the
// environment, and returns its exit code, stdout and stderr.
func reconcileCmd(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"reconcile"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestReconcileRepairAtScale: 100,000 reservations with 300 drifts of
// each kind; --repair --limit 100 enqueues exactly 100 events, which a
// hookgate receiver applies; a rerun finds 100 fewer drifts, and the next
// --repair --limit 100 sends 100 new ones and none of the first.
func TestReconcileRepairAtScale(t *testing.T) {
	srv, conn := startPostgres(t)
	for _, sql := range []string{
		`CREATE TABLE reservations (id text, status text, version bigint, updated_at timestamptz)`,
		`CREATE TABLE enrollments (reservation_id text PRIMARY KEY, state text, version bigint, updated_at timestamptz)`,
		// Orphans: i % 333 = 2 (the first 300) are not in the truth.
		`INSERT INTO reservations SELECT 'r-' || lpad(i::text, 6, '0'), 'confirmed', 1, now() - interval '1 hour'
		   FROM generate_series(0, 99999) i WHERE NOT (i % 333 = 2 AND i / 333 < 300)`,
		// Missing: i % 333 = 0; mismatched: i % 333 = 1 (cancelled).
		`INSERT INTO enrollments SELECT 'r-' || lpad(i::text, 6, '0'),
		        CASE WHEN i % 333 = 1 AND i / 333 < 300 THEN 'cancelled' ELSE 'active' END, 1, now() - interval '1 hour'
		   FROM generate_series(0, 99999) i WHERE NOT (i % 333 = 0 AND i / 333 < 300)`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	up, applied := enrollmentService(t, conn)
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	g := startGateway(t, "", gatewayOptions{Global: senderGlobal("store file", recv.URL, "")})
	run, drift := repairJob(t, srv.DSN(), g.Admin)

	code, r := run("--repair", "--limit", "100")
	if code != 1 || r["repaired"] != float64(100) || drift(r) != "300/300/300" {
		t.Fatalf("first repair: exit %d, repaired %v, drift %s; want 100 and 300/300/300", code, r["repaired"], drift(r))
	}
	first := waitRepairs(applied, 100)
	if len(first) != 100 {
		t.Fatalf("the receiver applied %d events; want 100", len(first))
	}
	if code, r = run(); code != 1 || drift(r) != "250/250/300" {
		// The first 100 drifts in key order alternate: r-000000 missing,
		// r-000001 mismatched, r-000333 missing...
		t.Fatalf("after the first repairs: exit %d, drift %s; want 100 fewer (250/250/300)", code, drift(r))
	}
	if _, r = run("--repair", "--limit", "100"); r["repaired"] != float64(100) {
		t.Fatalf("second repair: repaired %v; want 100 new", r["repaired"])
	}
	all := waitRepairs(applied, 200)
	if len(all) != 200 || len(slices.Compact(slices.Clone(all))) != 200 {
		t.Fatalf("the receiver applied %d events (%d distinct); want 200, none twice", len(all), len(slices.Compact(slices.Clone(all))))
	}
	if _, r = run(); drift(r) != "200/200/300" {
		t.Fatalf("after the second repairs: drift %s; want 200/200/300", drift(r))
	}
	// Two repairs of 100: 200 events ever queued, none re-sent.
	if n := metricValue(g.Metrics(), `hookgate_sender_enqueued_total{destination="enrollment",result="queued"}`); n != 200 {
		t.Errorf("the sender queued %v repair events, want 200", n)
	}
}

// startPostgres starts a PostgreSQL server for the test and connects to
// it; the connection closes when the test ends.
func startPostgres(t *testing.T) (*pgtest.Server, *pgx.Conn) {
	srv := pgtest.Start(t)
	conn, err := pgx.Connect(t.Context(), srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return srv, conn
}

// TestReconcileRepairAlreadyRepaired: after a repair run, the first
// drifting key's truth row is updated (its updated_at moved, its version
// did not), so its deterministic delivery ID is now enqueued with another
// payload and the admin API answers 422 key_reused_with_different_payload.
// That key is already repaired: the next --repair run is exit 1 (drift),
// not 2, counts nothing repaired, and compares every key after it.
func TestReconcileRepairAlreadyRepaired(t *testing.T) {
	srv, conn := startPostgres(t)
	reservationTables(t, conn)
	up, _ := enrollmentService(t, conn)
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	g := startGateway(t, "", gatewayOptions{Global: senderGlobal("store file", recv.URL, "")})
	run, drift := repairJob(t, srv.DSN(), g.Admin)
	// Paused: the repairs stay queued and the drift stays.
	if out, err := cli(t, g, "destinations", "pause", "enrollment"); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	if code, r := run("--repair"); code != 1 || r["repaired"] != float64(3) || drift(r) != "1/2/1" {
		t.Fatalf("first repair: exit %d, %v", code, r)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE reservations SET updated_at = now() - interval '30 minutes' WHERE id = 'r-2'`); err != nil {
		t.Fatal(err)
	}
	code, r := run("--repair")
	if code != 1 || r["repaired"] != float64(0) || drift(r) != "1/2/1" {
		t.Errorf("after r-2's updated_at moved: exit %d, repaired %v, drift %s; want 1, 0, 1/2/1", code, r["repaired"], drift(r))
	}
	if c := r["compared"].(map[string]any); c["truth"] != float64(3) || c["receiver"] != float64(3) {
		t.Errorf("compared %v; want every key", c)
	}
	path := writeCaddyfile(t, repairCaddyfile)
	code, out, errOut := reconcileCmd(t, []string{"TRUTH_DSN=" + srv.DSN()}, "--config", path, "--job", "enrollments", "--address", g.Admin, "--repair")
	if code != 1 || !strings.Contains(out, "0 repairs enqueued, 3 already enqueued by an earlier run") {
		t.Errorf("table report: exit %d\n%s%s", code, out, errOut)
	}
}

// TestReconcileRepairUnrepairable: a key that cannot make a valid
// delivery ID ("r-2 b" holds a space) is reported (a warning naming it,
// "unrepairable" in the report) and not enqueued; the run goes on, and
// the keys after it are repaired.
func TestReconcileRepairUnrepairable(t *testing.T) {
	srv, conn := startPostgres(t)
	reservationTables(t, conn)
	if _, err := conn.Exec(t.Context(), `INSERT INTO reservations VALUES ('r-2 b', 'confirmed', 1, now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	up, applied := enrollmentService(t, conn)
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	g := startGateway(t, "", gatewayOptions{Global: senderGlobal("store file", recv.URL, "")})
	path := writeCaddyfile(t, repairCaddyfile)
	code, out, errOut := reconcileCmd(t, []string{"TRUTH_DSN=" + srv.DSN()}, "--config", path, "--job", "enrollments", "--format", "json", "--address", g.Admin, "--repair")
	var r struct {
		Drift                  map[string]int
		Repaired, Unrepairable int
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d, not a JSON report: %v\n%s%s", code, err, out, errOut)
	}
	if code != 1 || r.Drift["missing"] != 2 || r.Repaired != 3 || r.Unrepairable != 1 {
		t.Errorf("exit %d, %+v; want 1, 2 missing, 3 repaired, 1 unrepairable\n%s", code, r, errOut)
	}
	if !strings.Contains(errOut, `"r-2 b"`) {
		t.Errorf("stderr does not name the unrepairable key:\n%s", errOut)
	}
	want := []string{"reconcile:r-2:confirmed:1 reservation.confirmed", "reconcile:r-3:expired:2 reservation.expired", "reconcile:r-4:confirmed:5 reservation.confirmed"}
	if got := waitRepairs(applied, 3); !slices.Equal(got, want) {
		t.Errorf("the receiver applied %q; want the three valid repairs", got)
	}
	code, out, _ = reconcileCmd(t, []string{"TRUTH_DSN=" + srv.DSN()}, "--config", path, "--job", "enrollments", "--address", g.Admin, "--repair")
	if code != 1 || !strings.Contains(out, "drift: 1 missing, 0 mismatched, 1 orphaned; 0 repairs enqueued, 1 unrepairable") {
		t.Errorf("table report after the repairs: exit %d\n%s", code, out)
	}
}

// TestReconcileUsageErrors: a usage error is exit 2 (any error), never
// 1 (drift), with nothing on stdout.
func TestReconcileUsageErrors(t *testing.T) {
	path := writeCaddyfile(t, repairCaddyfile)
	for _, args := range [][]string{
		{"--config", path, "--job", "enrollments", "--nope"},
		{"--config", path, "--job", "enrollments", "--limit", "many"},
		{"--config", path, "--job", "enrollments", "--limit", "0", "--repair"},
		{"--config", path, "--job", "enrollments", "--timeout", "soon"},
		{"--config", path, "--job", "enrollments", "--timeout", "0s"},
		{"--config", path, "--job", "enrollments", "--format", "yaml"},
		{"--config", path},
		{"--config", path, "enrollments"},
		{"--config", path, "--job", "nope"},
	} {
		code, out, errOut := reconcileCmd(t, []string{"TRUTH_DSN=postgres://127.0.0.1:1/x"}, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Error:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, an error", args, code, out, errOut)
		}
	}
}

// TestReconcileTimeout: --timeout bounds a run whose query takes longer:
// exit 2, nothing on stdout, an error that says so.
func TestReconcileTimeout(t *testing.T) {
	srv, conn := startPostgres(t)
	reservationTables(t, conn)
	path := writeCaddyfile(t, `{
	hookgate {
		reconcile slow {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations, pg_sleep(60)"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
		}
	}
}
`)
	start := time.Now()
	code, out, errOut := reconcileCmd(t, []string{"TRUTH_DSN=" + srv.DSN()}, "--config", path, "--job", "slow", "--timeout", "2s")
	if took := time.Since(start); code != 2 || out != "" || !strings.Contains(errOut, "took longer than 2s (--timeout)") || took > 20*time.Second {
		t.Errorf("exit %d after %s, stdout %q, stderr %q; want 2 within seconds, the timeout named", code, took.Round(time.Millisecond), out, errOut)
	}
}

// TestReconcileErrorsHideSecrets: an HTTP receiver that redirects is exit
// 2 with an error naming the status and scheme://host:port alone (not its
// user info, path or query), and the redirect is not followed with the
// token; a DSN that does not parse is exit 2 and never shown.
func TestReconcileErrorsHideSecrets(t *testing.T) {
	var reached atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = fmt.Fprint(w, `{"items":[]}`)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/moved", http.StatusFound)
	}))
	defer redirecting.Close()
	secretURL := strings.Replace(redirecting.URL, "://", "://us3r:pa55w0rd@", 1) + "/tenants/p4th-s3cret/enrollments?api_key=qu3ry-s3cret"
	path := writeCaddyfile(t, `{
	hookgate {
		reconcile enrollments {
			truth    http {env.ENROLL_URL} {
				header Authorization "Bearer {env.ENROLL_TOKEN}"
			}
			receiver http {env.ENROLL_URL}
			expect   confirmed active
		}
		reconcile db {
			truth    postgres {env.TRUTH_DSN} "SELECT 1, 2, 3, now()"
			receiver postgres {env.TRUTH_DSN} "SELECT 1, 2, 3, now()"
			expect   confirmed active
		}
	}
}
`)
	env := []string{"ENROLL_URL=" + secretURL, "ENROLL_TOKEN=t0k3n", "TRUTH_DSN=postgres://app:pa55@w0rd@127.0.0.1:5432/db?application_name=s3cret"}
	code, out, errOut := reconcileCmd(t, env, "--config", path, "--job", "enrollments")
	if code != 2 || out != "" || !strings.Contains(errOut, "302") || !strings.Contains(errOut, redirecting.URL+",") {
		t.Errorf("a redirect: exit %d, stdout %q, stderr %q; want 2 and an error naming 302 and %s", code, out, errOut, redirecting.URL)
	}
	if reached.Load() != 0 {
		t.Errorf("the redirect was followed %d times", reached.Load())
	}
	code, out, errOut2 := reconcileCmd(t, env, "--config", path, "--job", "db")
	if code != 2 || out != "" || !strings.Contains(errOut2, "DSN does not parse") {
		t.Errorf("a DSN that does not parse: exit %d, stdout %q, stderr %q", code, out, errOut2)
	}
	for _, secret := range []string{"us3r", "pa55", "w0rd", "p4th-s3cret", "qu3ry-s3cret", "t0k3n", "s3cret", "postgres://"} {
		if strings.Contains(errOut+errOut2, secret) {
			t.Errorf("stderr shows %q:\n%s%s", secret, errOut, errOut2)
		}
	}
}
