package integration

// The enqueue doors (issue 17): webhook_enqueue and the admin API's
// enqueue refuse what is not a valid event, say the truth when the store
// hangs, and the admin API keeps serving the running config after a
// refused reload and logs a redrive's "by" as a claim.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// problemDetail reads a problem+json answer's reason and detail.
func problemDetail(t *testing.T, status int, h http.Header, body []byte) (reason, detail string) {
	t.Helper()
	reason = problemBody(t, status, h, body)
	var p struct{ Detail string }
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem %q: %v", body, err)
	}
	return reason, p.Detail
}

// request sends method to url with headers and body.
func request(t *testing.T, method, url string, h http.Header, body string) (int, http.Header, []byte) {
	t.Helper()
	return send(t, method, url, h, []byte(body))
}

// waitCount waits until up has received n requests, then a little more
// to see that no more come.
func waitCount(t *testing.T, up *upstream, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for up.count() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if got := up.count(); got != n {
		t.Fatalf("the destination received %d requests, want %d", got, n)
	}
}

// TestEnqueueRefusesWhatIsNotAnEvent: on either store, webhook_enqueue and
// the admin enqueue answer 400 bad_id to an ID that is not 1 to 1024
// bytes of visible ASCII (a CR/LF in the body's ID, a space in the
// header's, a number), 400 malformed_json to a JSON body cut short (its
// ID read from it or not), 400 empty_payload to an empty body, and 405
// with Allow: POST to a GET; none of them is enqueued or delivered.
func TestEnqueueRefusesWhatIsNotAnEvent(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal(storeOf(global), "http://"+up.Addr(), "")})
		key := func(id string) http.Header { return http.Header{"Idempotency-Key": {id}} }
		for _, tc := range []struct {
			name   string
			method string
			header http.Header
			body   string
			status int
			reason string
		}{
			{"CR/LF in the body's ID", http.MethodPost, nil, `{"id":"evt\r\nX-Injected: 1"}`, 400, "bad_id"},
			{"a space in the header's ID", http.MethodPost, key("evt 1"), `{}`, 400, "bad_id"},
			{"an ID over 1024 bytes", http.MethodPost, key(strings.Repeat("k", 1025)), `{}`, 400, "bad_id"},
			{"a number as the body's ID", http.MethodPost, nil, `{"id":42}`, 400, "bad_id"},
			{"an object as the body's ID", http.MethodPost, nil, `{"id":{"n":1}}`, 400, "bad_id"},
			{"JSON cut short, ID from it", http.MethodPost, nil, `{"id":"x",`, 400, "malformed_json"},
			{"JSON cut short, ID in a header", http.MethodPost, key("cut"), `{"type":"reservation.confirmed","reservation_id":"r-`, 400, "malformed_json"},
			{"application/json cut short", http.MethodPost, http.Header{"Idempotency-Key": {"cut-2"}, "Content-Type": {"application/json"}}, `[1,2`, 400, "malformed_json"},
			{"an empty body", http.MethodPost, key("empty"), ``, 400, "empty_payload"},
			{"a GET", http.MethodGet, key("get"), ``, 405, "method_not_allowed"},
		} {
			st, hdr, got := request(t, tc.method, g.URL, tc.header, tc.body)
			if st != tc.status || problemBody(t, st, hdr, got) != tc.reason {
				t.Errorf("%s: %d %s; want %d %s", tc.name, st, got, tc.status, tc.reason)
			}
			if tc.status == 405 && hdr.Get("Allow") != "POST" {
				t.Errorf("%s: Allow = %q, want POST", tc.name, hdr.Get("Allow"))
			}
		}
		admin := g.Admin + "/hookgate/destinations/enrollment/enqueue"
		for _, tc := range []struct{ name, body string }{
			{"CR/LF in the ID", `{"id":"evt\r\nX-Injected: 1","payload":{"a":1}}`},
			{"a space in the ID", `{"id":"evt 1","payload":{"a":1}}`},
			{"a number as the ID", `{"id":42,"payload":{"a":1}}`},
		} {
			st, hdr, got := post(t, admin, http.Header{"Content-Type": {"application/json"}}, []byte(tc.body))
			if st != 400 || problemBody(t, st, hdr, got) != "bad_id" {
				t.Errorf("admin enqueue, %s: %d %s; want 400 bad_id", tc.name, st, got)
			}
		}

		// Nothing was enqueued under "x": its first good enqueue is new.
		st, _, got := post(t, g.URL, nil, []byte(`{"id":"x","type":"reservation.confirmed"}`))
		if st != 202 || !strings.Contains(string(got), `"duplicate":false`) {
			t.Fatalf("a good enqueue of x: %d %s; want 202, not a duplicate", st, got)
		}
		// A body not sent as JSON, its ID in a header, is taken as it is.
		st, _, got = post(t, g.URL, http.Header{"Idempotency-Key": {"plain"}, "Content-Type": {"text/plain"}}, []byte(`reservation r-1 confirmed`))
		if st != 202 {
			t.Fatalf("a text/plain enqueue: %d %s; want 202", st, got)
		}
		waitCount(t, up, 2)
		for _, r := range up.received() {
			if id := r.Header.Get("Webhook-Id"); id != "x" && id != "plain" {
				t.Errorf("the destination received %q", id)
			}
		}
	})
}

// redisPID is the process ID of the redis-server srv.
func redisPID(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = rdb.Close() }()
	info, err := rdb.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no process_id in INFO server:\n%s", info)
	return 0
}

// TestEnqueueRetryAfterRedisHung: Redis hangs (SIGSTOP) while events are
// enqueued. Each is answered 503 store_unavailable, saying the outcome is
// unknown and a retry with the same ID is safe, never that nothing was
// stored: the scripts sent to the hung Redis run when it wakes. Retried
// with the same IDs once Redis is back, every event is answered 202
// (duplicate when the lost enqueue had landed) and delivered once.
func TestEnqueueRetryAfterRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	delivered := map[string]int{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		delivered[r.Header.Get("Webhook-Id")]++
		mu.Unlock()
	})
	global := senderGlobal(fmt.Sprintf("store redis %s\n\t\tkey_prefix %s", srv.URL(), redistest.Prefix("it")), "http://"+up.Addr(), "")
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: global})
	// A first enqueue loads the script: those sent while Redis hangs are
	// EVALSHAs that run when it wakes.
	if st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {"warm"}}, []byte(`{"n":0}`)); st != 202 {
		t.Fatalf("before Redis hangs: %d %s", st, got)
	}
	pid := redisPID(t, srv)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	const n = 3
	body := func(i int) []byte { return fmt.Appendf(nil, `{"type":"reservation.confirmed","n":%d}`, i) }
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, hdr, got := post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprint("hung-", i)}}, body(i))
			if st != 503 {
				t.Errorf("enqueue %d while Redis hangs: %d %s; want 503", i, st, got)
				return
			}
			reason, detail := problemDetail(t, st, hdr, got)
			if reason != "store_unavailable" || hdr.Get("Retry-After") == "" {
				t.Errorf("enqueue %d while Redis hangs: %s, Retry-After %q; want store_unavailable with Retry-After", i, got, hdr.Get("Retry-After"))
			}
			if strings.Contains(detail, "nothing") || !strings.Contains(detail, "unknown") || !strings.Contains(detail, "same delivery ID") {
				t.Errorf("the 503 says %q: it must say the outcome is unknown and a retry with the same ID is safe", detail)
			}
		})
	}
	wg.Wait()
	resume()
	if t.Failed() {
		return
	}

	landed := 0
	for i := range n {
		var st int
		var got []byte
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _, got = post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprint("hung-", i)}}, body(i))
			if st != 503 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		var a struct {
			State     string
			Duplicate bool
		}
		if st != 202 || json.Unmarshal(got, &a) != nil {
			t.Fatalf("retry of hung-%d with the same ID: %d %s; want 202", i, st, got)
		}
		if a.Duplicate {
			landed++
		}
	}
	t.Logf("%d of %d enqueues answered 503 had in fact landed", landed, n)
	waitCount(t, up, n+1)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if c := delivered[fmt.Sprint("hung-", i)]; c != 1 {
			t.Errorf("hung-%d delivered %d times, want once", i, c)
		}
	}
}

// TestAdminAPIFollowsTheRunningConfig: a reload that Caddy refuses (a
// webhook_enqueue naming a destination that is not configured) leaves the
// old config running; the admin API, the CLI and the admin enqueue
// (reconcile's repairs) keep working on it.
func TestAdminAPIFollowsTheRunningConfig(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, "route /events {\n\t\twebhook_enqueue enrollment\n\t}", gatewayOptions{Global: senderGlobal(storeOf(global), "http://"+up.Addr(), "")})
		running, err := os.ReadFile(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		refused := filepath.Join(t.TempDir(), "Caddyfile")
		bad := strings.Replace(string(running), "webhook_enqueue enrollment", "webhook_enqueue nowhere", 1)
		if err := os.WriteFile(refused, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "reload", "--config", refused, "--adapter", "caddyfile",
			"--address", strings.TrimPrefix(g.Admin, "http://"), "--force").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "nowhere") || !strings.Contains(string(out), "is not configured") {
			t.Fatalf("the reload with an unknown destination: %v\n%s", err, out)
		}

		// Caddy stops the previous admin server in the background: a
		// request may meet it as it closes.
		var resp *http.Response
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err = http.Get(g.Admin + "/hookgate/destinations"); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Destinations []struct{ Name string }
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || len(list.Destinations) != 1 || list.Destinations[0].Name != "enrollment" {
			t.Fatalf("GET /hookgate/destinations after the refused reload: %s %+v %v; want 200 with enrollment", resp.Status, list, err)
		}
		if out, err := cli(t, g, "destinations", "list"); err != nil || !strings.Contains(out, "enrollment") {
			t.Fatalf("hookgate destinations list after the refused reload: %v\n%s", err, out)
		}
		st, _, got := post(t, g.Admin+"/hookgate/destinations/enrollment/enqueue", http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"id":"repair-1","event_type":"reservation.confirmed","payload":{"key":"r-1"}}`))
		if st != 202 {
			t.Fatalf("admin enqueue after the refused reload: %d %s; want 202", st, got)
		}
		if st, _, got := post(t, g.URL+"/events", http.Header{"Idempotency-Key": {"evt-1"}}, []byte(`{"n":1}`)); st != 202 {
			t.Fatalf("webhook_enqueue after the refused reload: %d %s; want 202", st, got)
		}
		waitCount(t, up, 2)
		if rs := up.received(); rs[0].Header.Get("Webhook-Id") != "repair-1" && rs[1].Header.Get("Webhook-Id") != "repair-1" {
			t.Errorf("repair-1 was not delivered")
		}

		// A good reload after it: the admin API serves the new config.
		if out, err := exec.Command(binary, "reload", "--config", g.Config, "--adapter", "caddyfile",
			"--address", strings.TrimPrefix(g.Admin, "http://"), "--force").CombinedOutput(); err != nil {
			t.Fatalf("a good reload: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "destinations", "list"); err != nil || !strings.Contains(out, "enrollment") {
			t.Fatalf("hookgate destinations list after a good reload: %v\n%s", err, out)
		}
	})
}

// TestRedriveByIsLoggedAsAClaim: a redrive's "by" is the caller's claim
// (the admin endpoint knows no identity): it is logged as claimed_by,
// beside the remote address.
func TestRedriveByIsLoggedAsAClaim(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal("store file", "http://"+up.Addr(), "")})
	st, _, got := post(t, g.Admin+"/hookgate/dlq/redrive", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"limit":10,"by":"alice@ops"}`))
	if st != 200 {
		t.Fatalf("redrive: %d %s", st, got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.logs.String(), `"claimed_by":"alice@ops","remote_addr":"127.0.0.1:`) {
		if time.Now().After(deadline) {
			t.Fatal(`no log line with "claimed_by":"alice@ops" and the remote address`)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
