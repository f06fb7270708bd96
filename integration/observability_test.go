package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// promtool runs Prometheus's promtool; CI installs it (Debian's
// prometheus package). Under -short (the fast tier, which needs no
// promtool) the test skips instead.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs promtool: skipped under -short")
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool is not on PATH: install it (Debian: apt-get install prometheus); .ci/run does")
	}
	cmd := exec.Command("promtool", args...)
	cmd.Dir = "../deploy/prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestPrometheusRules checks the recording rules and alerts, and runs their
// unit tests: each alert fires on a synthetic series of its failure and
// stays silent on a healthy one.
func TestPrometheusRules(t *testing.T) {
	promtool(t, "check", "rules", "hookgate-rules.yml")
	if out := promtool(t, "test", "rules", "hookgate-rules.test.yml"); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}

	// Every alert has a runbook link, to a section of docs/runbook.md.
	rules, err := os.ReadFile("../deploy/prometheus/hookgate-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbook), -1) {
		sections[strings.ToLower(m[1])] = true // GitHub's anchor of a one-word heading
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllStringSubmatch(string(rules), -1)
	links := regexp.MustCompile(`runbook: docs/runbook\.md#(\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 || len(links) != len(alerts) {
		t.Fatalf("%d alerts, %d runbook links: want one each", len(alerts), len(links))
	}
	for i, a := range alerts {
		if anchor := links[i][1]; anchor != strings.ToLower(a[1]) || !sections[anchor] {
			t.Errorf("alert %s links to docs/runbook.md#%s: want its own section, ## %s", a[1], anchor, a[1])
		}
	}
}

// metricValue reads one sample from a /metrics text; -1 when absent.
func metricValue(metrics, series string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// TestSLIMetricsAndDashboard runs traffic with failures through a gateway
// that is both a receiver and a sender, then scrapes /metrics:
//   - the delivery-age histogram counts every delivered event, and the
//     time to DLQ is under the retry window;
//   - every metric the Grafana dashboard and the Prometheus rules query is
//     one hookgate exports, so no panel is empty for want of a metric.
func TestSLIMetricsAndDashboard(t *testing.T) {
	srv := redistest.Start(t)
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(400) })
	down := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(503) })
	port := freePort(t)
	receiver := fmt.Sprintf("http://127.0.0.1:%d", port)
	app := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		store redis %s
		key_prefix %s
		sender {
			attempts 2
			backoff 10ms 50ms
			breaker {
				failures 8
				open 1h
			}
		}
		destination ok {
			url %s/hooks
			secret %s
		}
		destination bad {
			url http://%s
			secret %s
		}
		destination down {
			url http://%s
			secret %s
			workers 1
		}
	}`, srv.URL(), redistest.Prefix("it"), receiver, devSecret, bad.Addr(), devSecret, down.Addr(), devSecret)
	site := fmt.Sprintf(`
	route /enqueue/ok {
		webhook_enqueue ok
	}
	route /enqueue/bad {
		webhook_enqueue bad
	}
	route /enqueue/down {
		webhook_enqueue down
	}
}

http://127.0.0.1:%d {
	webhook_verify {
		secret %s
	}
	webhook_dedupe
	webhook_freshness {
		entity {webhook.json.reservation_id}
		event_time {webhook.json.occurred_at}
	}
	reverse_proxy %s`, port, devSecret, app.Addr())
	g := startGateway(t, site, gatewayOptions{Global: global})

	now := time.Now().UTC()
	for i := range 30 {
		body := event("reservation.confirmed", fmt.Sprint("r-", i), now.Add(-time.Minute))
		if st, _, got := post(t, g.URL+"/enqueue/ok", http.Header{"Idempotency-Key": {fmt.Sprint("ok-", i)}}, body); st != 202 {
			t.Fatalf("enqueue: %d %s", st, got)
		}
	}
	for i := range 5 {
		post(t, g.URL+"/enqueue/bad", http.Header{"Idempotency-Key": {fmt.Sprint("bad-", i)}}, []byte(`{}`))
		post(t, g.URL+"/enqueue/down", http.Header{"Idempotency-Key": {fmt.Sprint("down-", i)}}, []byte(`{}`))
	}
	// The receiver side: a duplicate (replayed) and a stale event.
	s := signer(t, "standard", devSecret)
	stale := event("reservation.expired", "r-1", now.Add(-time.Hour))
	for range 2 {
		post(t, receiver, s.Sign("msg_stale", time.Now(), stale), stale)
	}

	deadline := time.Now().Add(30 * time.Second)
	m := g.Metrics()
	for metricValue(m, `hookgate_sender_deliveries_total{destination="ok",outcome="delivered"}`) < 30 ||
		metricValue(m, `hookgate_sender_deliveries_total{destination="bad",outcome="dead"}`) < 5 ||
		metricValue(m, `hookgate_sender_breaker_state{destination="down"}`) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not settle:\n%s", grepLines(m, "hookgate_sender"))
		}
		time.Sleep(100 * time.Millisecond)
		m = g.Metrics()
	}
	// A redrive, and a store outage for the store-error series.
	if out, err := cli(t, g, "dlq", "redrive", "--destination", "bad", "--limit", "1"); err != nil {
		t.Fatalf("redrive: %v\n%s", err, out)
	}
	// The redriven letter dies again before the outage: this Redis keeps
	// nothing across a restart.
	deadline = time.Now().Add(20 * time.Second)
	for metricValue(m, `hookgate_sender_deliveries_total{destination="bad",outcome="dead"}`) < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("the redrive did not settle:\n%s", grepLines(m, "hookgate_sender"))
		}
		time.Sleep(100 * time.Millisecond)
		m = g.Metrics()
	}
	// The DLQ's size and its oldest letter's age (before the outage: this
	// Redis keeps nothing across its restart).
	// The counter counts a dead letter as it dies; the queue holds it once
	// settled.
	deadline = time.Now().Add(10 * time.Second)
	for metricValue(m, `hookgate_sender_queue_depth{destination="bad",state="dead"}`) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("bad's DLQ size is not its 5 dead letters:\n%s", grepLines(m, "hookgate_sender_queue_depth"))
		}
		time.Sleep(50 * time.Millisecond)
		m = g.Metrics()
	}
	if age := metricValue(m, `hookgate_sender_dlq_oldest_age_seconds{destination="bad"}`); age <= 0 {
		t.Errorf("bad's oldest dead letter is %v s old, want > 0", age)
	}
	srv.Stop()
	post(t, receiver, s.Sign("msg_outage", time.Now(), []byte(`{}`)), []byte(`{}`))
	post(t, g.URL+"/enqueue/ok", http.Header{"Idempotency-Key": {"ok-outage"}}, []byte(`{}`))
	// Down until the sender has counted a failed lease (its idle poll is at
	// most a second; go-redis's own dial retries hide a shorter outage).
	deadline = time.Now().Add(15 * time.Second)
	for !strings.Contains(g.Metrics(), "hookgate_sender_store_errors_total{") {
		if time.Now().After(deadline) {
			t.Fatal("the sender counted no store error while Redis was down")
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.Restart()
	deadline = time.Now().Add(20 * time.Second)
	m = g.Metrics()
	for metricValue(m, `hookgate_sender_queue_depth{destination="ok",state="queued"}`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the outage did not settle:\n%s", grepLines(m, "hookgate_sender"))
		}
		time.Sleep(100 * time.Millisecond)
		m = g.Metrics()
	}

	delivered := metricValue(m, `hookgate_sender_deliveries_total{destination="ok",outcome="delivered"}`)
	if age := metricValue(m, `hookgate_sender_delivery_age_seconds_count{destination="ok"}`); age != delivered || delivered < 30 {
		t.Errorf("the delivery-age histogram counts %v events, %v were delivered", age, delivered)
	}
	// Retry window: 2 attempts, a backoff of at most 50ms, answers on
	// loopback. "down" also opens its breaker after 8 failures, when at
	// least three of its five have died.
	for _, dest := range []string{"bad", "down"} {
		count := metricValue(m, fmt.Sprintf(`hookgate_sender_time_to_dlq_seconds_count{destination=%q}`, dest))
		within := metricValue(m, fmt.Sprintf(`hookgate_sender_time_to_dlq_seconds_bucket{destination=%q,le="1"}`, dest))
		if count <= 0 || within != count {
			t.Errorf("%s: %v of %v dead letters quarantined within 1s, want all", dest, within, count)
		}
		// Two attempts apart: never no time at all.
		if sum := metricValue(m, fmt.Sprintf(`hookgate_sender_time_to_dlq_seconds_sum{destination=%q}`, dest)); sum <= 0 {
			t.Errorf("%s: time to DLQ sums to %v, want > 0", dest, sum)
		}
	}
	// Every destination's counters exist from the start, at 0 where
	// nothing happened: a rule that divides by them is never empty.
	for _, series := range []string{
		`hookgate_sender_deliveries_total{destination="ok",outcome="dead"}`,
		`hookgate_sender_deliveries_total{destination="bad",outcome="delivered"}`,
		`hookgate_sender_attempts_total{destination="ok",result="permanent"}`,
	} {
		if v := metricValue(m, series); v != 0 {
			t.Errorf("%s = %v, want 0 (exported from the start)", series, v)
		}
	}
	rulesOverScrape(t, m, []string{"bad", "down", "ok"})
	if metricValue(m, `hookgate_dedupe_requests_total{result="replayed"}`) < 1 || metricValue(m, `hookgate_freshness_total{result="applied"}`) < 30 {
		t.Errorf("receiver metrics missing:\n%s", grepLines(m, "hookgate_dedupe")+grepLines(m, "hookgate_freshness"))
	}

	// Every name the dashboard and the rules query is exported (or is a
	// recording rule).
	exported := map[string]bool{}
	for _, line := range strings.Split(m, "\n") {
		if name, _, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") {
			exported[name] = true
		} else if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			exported[name] = true
		}
	}
	rules, err := os.ReadFile("../deploy/prometheus/hookgate-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(string(rules), -1) {
		recorded[m[1]] = true
	}
	names := regexp.MustCompile(`hookgate[_:][a-z0-9_:]+`)
	check := func(where, expr string) {
		for _, name := range names.FindAllString(expr, -1) {
			if strings.HasPrefix(name, "hookgate_reconcile_") {
				continue // this gateway runs no reconcile job: TestReconcileMetricsRulesDashboard checks them
			}
			if name == "hookgate_store_replication_shortfalls_total" {
				continue // exported with min_replicas, which this gateway does not set: TestMinReplicas scrapes it
			}
			if !exported[name] && !recorded[name] {
				t.Errorf("%s queries %s, which hookgate does not export", where, name)
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?s)expr: \|?\s*(.*?)\n\s*(?:labels|annotations|for|- record|- alert|$)`).FindAllStringSubmatch(string(rules), -1) {
		check("a rule", m[1])
	}
	raw, err := os.ReadFile("../deploy/grafana/hookgate.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []panel // a collapsed row's
	}
	var dash struct{ Panels []panel }
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				queries++
				check("panel "+p.Title, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	if queries < 20 {
		t.Errorf("the dashboard has %d queries, want its two rows' worth", queries)
	}
}

// rulesOverScrape evaluates the recording rules with promtool over the
// series of a real scrape, each made a steady ramp (so every counter has
// a rate), and checks that each SLI ratio exists for every destination:
// a rule that needs a series hookgate does not export would be empty.
func rulesOverScrape(t *testing.T, scrape string, dests []string) {
	t.Helper()
	var series strings.Builder
	for _, line := range strings.Split(scrape, "\n") {
		if !strings.HasPrefix(line, "hookgate_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || v < 0 {
			continue
		}
		fmt.Fprintf(&series, "      - series: '%s'\n        values: '0+%sx90'\n", line[:i], strconv.FormatFloat(v, 'f', -1, 64))
	}
	var want strings.Builder
	for _, d := range dests {
		fmt.Fprintf(&want, "          - labels: '{destination=%q}'\n            value: 1\n", d)
	}
	rules, err := filepath.Abs("../deploy/prometheus/hookgate-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	test := fmt.Sprintf(`rule_files: [%q]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    promql_expr_test:
      - expr: count by (destination) (hookgate:sender_delivery_errors:ratio_rate1h >= 0)
        eval_time: 80m
        exp_samples:
%s      - expr: count by (destination) (hookgate:sender_attempts_per_delivery:ratio_rate1h >= 0)
        eval_time: 80m
        exp_samples:
%s      - expr: count(hookgate:dedupe_replays_per_forward:ratio_rate1h >= 0)
        eval_time: 80m
        exp_samples:
          - labels: '{}'
            value: 1
`, rules, series.String(), want.String(), want.String())
	file := filepath.Join(t.TempDir(), "scrape.test.yml")
	if err := os.WriteFile(file, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "test", "rules", file)
}
