package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/verify"
)

// reconcileExample is the example docs/reconcile.md's step by step runs.
const reconcileExample = "../caddyfiles/reconcile.Caddyfile"

// execSQLFile runs one of caddyfiles/reconcile/'s SQL files, as
// docs/reconcile.md's psql -f does.
func execSQLFile(t *testing.T, conn *pgx.Conn, name string) {
	t.Helper()
	sql, err := os.ReadFile(filepath.Join("../caddyfiles/reconcile", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), string(sql)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestReconcileStory runs docs/reconcile.md's "Reconcile, step by step" against
// caddyfiles/reconcile/'s schema.sql and seed.sql, with a real PostgreSQL
// and caddyfiles/reconcile.Caddyfile run as it is (on the embedded store:
// no Redis): the report of one drift of each kind and exit 1, the row
// inside grace left out; --repair enqueues the two repairs, which reach
// the enrollment service signed and under their deterministic IDs; once
// the receiver applied them (receiver.sql), a rerun is clean, exit 0, and
// repairs nothing more.
func TestReconcileStory(t *testing.T) {
	pg, conn := startPostgres(t)
	execSQLFile(t, conn, "schema.sql")
	execSQLFile(t, conn, "seed.sql")

	// The enrollment service: it records the events (the test applies
	// them with receiver.sql, as docs/reconcile.md does).
	enroll := newUpstream(t, nil)
	admin := freePort(t)
	dir := t.TempDir()
	env := []string{"TRUTH_DSN=" + pg.DSN(), "ENROLL_DSN=" + pg.DSN(), "HOOKGATE_SECRET=" + devSecret,
		fmt.Sprintf("ADMIN=127.0.0.1:%d", admin), "ENROLL_HOOKS=" + enroll.URL + "/hooks",
		fmt.Sprintf("RECEIVER_PORT=%d", freePort(t)), fmt.Sprintf("HEALTH_PORT=%d", freePort(t)),
		"XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "HOME=" + dir}
	logs := startExample(t, reconcileExample, env, admin)
	if !strings.Contains(logs.String(), "store: the embedded file") {
		t.Errorf("the example does not run on the embedded store:\n%s", logs)
	}

	run := func(args ...string) (int, string) {
		t.Helper()
		code, out, errOut := reconcileCmd(t, env, append([]string{"--config", reconcileExample, "--job", "enrollments"}, args...)...)
		if code == 2 {
			t.Fatalf("reconcile %q: exit 2\n%s%s", args, out, errOut)
		}
		return code, out
	}

	// 1. The report: r-1006, confirmed a moment ago, is inside grace:
	// compared, not reported.
	code, out := run()
	if code != 1 {
		t.Fatalf("the first run: exit %d, want 1 (drift)\n%s", code, out)
	}
	for _, want := range []string{
		`job enrollments: compared 5 truth rows, 3 receiver rows in \d+\.\ds`,
		`drift: 1 missing, 1 mismatched, 1 orphaned; 0 repairs enqueued\n`,
		`KEY +KIND +TRUTH +RECEIVER\n`,
		`r-1002 +missing +confirmed +-\n`,
		`r-1003 +mismatched +expired +active\n`,
		`r-1009 +orphaned +- +active\n`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the first report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "r-1006") || strings.Count(out, "\n") != 6 {
		t.Errorf("the first report: want the three drifts alone (r-1006 is inside grace):\n%s", out)
	}

	// 2. --repair: the two repairs enqueued through the gateway's admin
	// API (or already, by a scheduled run whose quarter hour fell in the
	// test), delivered once each, signed with the example's secret.
	code, out = run("--repair")
	m := regexp.MustCompile(`drift: 1 missing, 1 mismatched, 1 orphaned; (\d+) repairs enqueued(?:, (\d+) already enqueued by an earlier run)?\n`).FindStringSubmatch(out)
	if code != 1 || m == nil {
		t.Fatalf("--repair: exit %d, want 1 and the drift\n%s", code, out)
	}
	if repaired, _ := strconv.Atoi(m[1]); repaired+atoiOr0(m[2]) != 2 {
		t.Errorf("--repair: %s enqueued and %s already; want the two repairs\n%s", m[1], m[2], out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for enroll.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // any extra copy
	v := signer(t, "standard", devSecret)
	var got []string
	for _, r := range enroll.received() {
		var ev struct {
			ID, Type, Key, State string
			Version              int64
			OccurredAt           time.Time `json:"occurred_at"`
		}
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatalf("a repair event is not JSON: %v\n%s", err, r.Body)
		}
		if _, err := v.Verify(verify.Request{Method: r.Method, Header: r.Header, Body: r.Body}, time.Now()); err != nil {
			t.Errorf("repair %s: the signature does not verify with the example's secret: %v", ev.ID, err)
		}
		if r.Header.Get("Webhook-Id") != ev.ID || ev.OccurredAt.IsZero() || r.Path != "/hooks" {
			t.Errorf("repair %s: Webhook-Id %q, occurred_at %v, path %s", ev.ID, r.Header.Get("Webhook-Id"), ev.OccurredAt, r.Path)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %d", ev.ID, ev.Type, ev.Key, ev.State, ev.Version))
	}
	slices.Sort(got)
	want := []string{
		"reconcile:r-1002:confirmed:1 reservation.confirmed r-1002 confirmed 1",
		"reconcile:r-1003:expired:2 reservation.expired r-1003 expired 2",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the enrollment service got %q; want the two repairs, once each", got)
	}
	// docs/reconcile.md shows them in the gateway's delivery history.
	list := exec.Command(binary, "deliveries", "list", "--destination", "enrollment", "--address", fmt.Sprintf("127.0.0.1:%d", admin))
	if b, err := list.CombinedOutput(); err != nil || !strings.Contains(string(b), "reconcile:r-1002:confirmed:1") || !strings.Contains(string(b), "reconcile:r-1003:expired:2") {
		t.Errorf("deliveries list: %v\n%s", err, b)
	}

	// 3. The receiver applies them; r-1006's event lands; a person removes
	// the orphan. The rerun is clean, and repairs nothing.
	execSQLFile(t, conn, "receiver.sql")
	code, out = run()
	if code != 0 || !regexp.MustCompile(`compared 5 truth rows, 3 receiver rows in \d+\.\ds\ndrift: 0 missing, 0 mismatched, 0 orphaned; 0 repairs enqueued\n$`).MatchString(out) {
		t.Errorf("the rerun: exit %d, want 0 and no drift\n%s", code, out)
	}
	if code, out = run("--repair"); code != 0 || !strings.Contains(out, "drift: 0 missing, 0 mismatched, 0 orphaned; 0 repairs enqueued\n") {
		t.Errorf("the rerun with --repair: exit %d, want 0 and nothing enqueued\n%s", code, out)
	}
	time.Sleep(200 * time.Millisecond)
	if n := enroll.count(); n != 2 {
		t.Errorf("the enrollment service got %d events in all, want the two repairs", n)
	}
}

// atoiOr0 is s as an int; 0 when empty.
func atoiOr0(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// startExample runs `hookgate run --config path` with env (which sets its
// admin port, admin) and waits until its admin API answers; it is stopped
// when the test ends. It returns the process's logs.
func startExample(t *testing.T, path string, env []string, admin int) *syncBuffer {
	t.Helper()
	cmd := exec.Command(binary, "run", "--config", path)
	cmd.Env = append(os.Environ(), env...)
	logs := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", path, logs)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/config/", admin))
		if err == nil {
			_ = resp.Body.Close()
			return logs
		}
		select {
		case <-done:
			t.Fatalf("%s exited at start:\n%s", path, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start in 20s:\n%s", path, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReconcileMetricsRulesDashboard runs the example's job every second
// in a gateway, against the seeded tables, and checks its metrics against
// what deploy/ queries: every hookgate_reconcile_* name the rules and the
// dashboard read is exported; over the real scrape, the recording rules
// give the run's drift, and HookgateReconcileDrift fires for each kind.
func TestReconcileMetricsRulesDashboard(t *testing.T) {
	pg, conn := startPostgres(t)
	execSQLFile(t, conn, "schema.sql")
	execSQLFile(t, conn, "seed.sql")
	g := startGateway(t, "respond 204", gatewayOptions{Env: []string{"TRUTH_DSN=" + pg.DSN()}, Global: `hookgate {
		reconcile enrollments {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
			expect   expired   none
			every    1s
		}
	}`})
	deadline := time.Now().Add(20 * time.Second)
	m := g.Metrics()
	for metricValue(m, `hookgate_reconcile_last_run_timestamp_seconds{job="enrollments"}`) <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled run completed:\n%s", grepLines(m, "hookgate_reconcile"))
		}
		time.Sleep(100 * time.Millisecond)
		m = g.Metrics()
	}
	for series, want := range map[string]float64{
		`hookgate_reconcile_drift{job="enrollments",kind="missing"}`:    1,
		`hookgate_reconcile_drift{job="enrollments",kind="mismatched"}`: 1,
		`hookgate_reconcile_drift{job="enrollments",kind="orphaned"}`:   1,
		`hookgate_reconcile_period_seconds{job="enrollments"}`:          1,
		// Exported from the schedule's start, so a first failure is an
		// increase.
		`hookgate_reconcile_runs_total{job="enrollments",result="error"}`: 0,
	} {
		if got := metricValue(m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// Every reconcile metric deploy/ reads is exported.
	exported := map[string]bool{}
	var series strings.Builder
	for _, line := range strings.Split(m, "\n") {
		if !strings.HasPrefix(line, "hookgate_reconcile_") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		exported[name] = true
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		fmt.Fprintf(&series, "      - series: '%s'\n        values: '%sx10'\n", line[:i], strconv.FormatFloat(v, 'f', -1, 64))
	}
	for _, file := range []string{"../deploy/prometheus/hookgate-rules.yml", "../deploy/grafana/hookgate.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`hookgate_reconcile_[a-z_]+`).FindAllString(string(b), -1)
		if len(names) == 0 {
			t.Errorf("%s reads no reconcile metric", file)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s reads %s, which hookgate does not export", file, name)
			}
		}
	}

	// The rules over the scrape.
	rules, err := filepath.Abs("../deploy/prometheus/hookgate-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var drift, alerts strings.Builder
	for _, kind := range []string{"missing", "mismatched", "orphaned"} {
		fmt.Fprintf(&drift, "          - labels: 'hookgate:reconcile_drift:newest{reconcile_job=\"enrollments\",kind=%q}'\n            value: 1\n", kind)
		fmt.Fprintf(&alerts, `          - exp_labels:
              severity: ticket
              reconcile_job: enrollments
              kind: %s
            exp_annotations:
              summary: "enrollments: the last reconcile run found 1 %s keys"
              runbook: docs/runbook.md#hookgatereconciledrift
`, kind, kind)
	}
	test := fmt.Sprintf(`rule_files: [%q]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    promql_expr_test:
      - expr: hookgate:reconcile_drift:newest
        eval_time: 5m
        exp_samples:
%s      - expr: hookgate:reconcile_period_seconds:max
        eval_time: 5m
        exp_samples:
          - labels: 'hookgate:reconcile_period_seconds:max{reconcile_job="enrollments"}'
            value: 1
    alert_rule_test:
      - eval_time: 5m
        alertname: HookgateReconcileDrift
        exp_alerts:
%s      - eval_time: 5m
        alertname: HookgateReconcileFailing
        exp_alerts: []
`, rules, series.String(), drift.String(), alerts.String())
	file := filepath.Join(t.TempDir(), "reconcile.test.yml")
	if err := os.WriteFile(file, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "test", "rules", file)
}
