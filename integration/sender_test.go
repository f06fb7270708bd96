package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// applier is the test receiver behind a hookgate receiver: it applies an
// event when it answers 2xx, and misbehaves by a seeded plan: 30% of
// requests get 503 (not applied), 10% are applied and answered after the
// sender's timeout.
type applier struct {
	*httptest.Server
	mu      sync.Mutex
	applied map[string]int
	seen    map[string]int
}

func newApplier(t *testing.T, slow time.Duration) *applier {
	a := &applier{applied: map[string]int{}, seen: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		a.mu.Lock()
		a.seen[id]++
		n := a.seen[id]
		a.mu.Unlock()
		switch roll := dice(id, n, "upstream"); {
		case roll < 30:
			w.WriteHeader(503)
			return
		case roll < 40:
			a.apply(id)
			time.Sleep(slow)
		default:
			a.apply(id)
		}
		_, _ = w.Write([]byte(`{"applied":true}`))
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *applier) apply(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.applied[id]++
}

// dice is a seeded roll in [0, 100) for the n-th request of id at a stage:
// the same plan on every run.
func dice(id string, n int, stage string) int {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%d/%s", id, n, stage)
	return rand.New(rand.NewPCG(h.Sum64(), 7)).IntN(100)
}

// dropper stands between the sender and the hookgate receiver: for 5% of
// requests it lets the receiver answer (and so commit), then drops the
// connection before the sender hears back.
func dropper(t *testing.T, target string) (*httptest.Server, *atomic.Int64) {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var seen sync.Map
	drops := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		v, _ := seen.LoadOrStore(id, new(atomic.Int64))
		n := int(v.(*atomic.Int64).Add(1))
		if dice(id, n, "drop") < 5 {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r) // the receiver answers in full
			drops.Add(1)
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, drops
}

// senderSite is a gateway with a sender to destination "enrollment" at
// destURL, and a producer endpoint /events on the site.
func senderGlobal(store, destURL, extra string) string {
	return fmt.Sprintf(`hookgate {
		%s
		sender {
			workers 20
			attempts 30
			backoff 20ms 200ms
			timeout 1s
			lease 5s
			breaker {
				failures 1000
			}
			%s
		}
		destination enrollment {
			url %s
			secret %s
		}
	}`, store, extra, destURL, devSecret)
}

// storeOf is the store lines of a backends() global option: the embedded
// store for "", else the Redis store and key prefix.
func storeOf(global string) string {
	if global == "" {
		return "store file"
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(global), "hookgate {"), "}"))
}

// enqueueEvents POSTs n events to the gateway's webhook_enqueue, with
// delivery IDs prefix-0..n-1, 8 at a time.
func enqueueEvents(t *testing.T, url, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range ids {
				body := fmt.Appendf(nil, `{"type":"reservation.confirmed","reservation_id":"r-%d","pad":%q}`, i, strings.Repeat("x", 400))
				st, _, got := post(t, url, http.Header{"Idempotency-Key": {fmt.Sprintf("%s-%d", prefix, i)}}, body)
				if st != 202 {
					t.Errorf("enqueue %d: %d %s", i, st, got)
				}
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
}

// waitApplied waits until every event prefix-0..n-1 is applied, and
// checks none is applied twice.
func waitApplied(t *testing.T, a *applier, prefix string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a.mu.Lock()
		missing, twice := 0, []string{}
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			switch a.applied[id] {
			case 0:
				missing++
			case 1:
			default:
				twice = append(twice, id)
			}
		}
		a.mu.Unlock()
		if len(twice) > 0 {
			t.Fatalf("applied more than once: %v", twice)
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never applied", missing, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSenderChaosExactlyOnce sends events through the sender to a real
// hookgate receiver (verify + dedupe) in front of a receiver that answers
// 503 to 30% of requests and times out on 10%, with 5% of answers lost
// after the receiver committed: every event is applied once, none lost.
// 10,000 events a store (about 80 s each with -race on 2 cores); 1,000
// under -short.
func TestSenderChaosExactlyOnce(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		store := storeOf(global)
		up := newApplier(t, 1500*time.Millisecond)
		receiverPort := freePort(t)
		receiverURL := fmt.Sprintf("http://127.0.0.1:%d", receiverPort)
		drop, drops := dropper(t, receiverURL)
		site := fmt.Sprintf(`
	route /events {
		webhook_enqueue enrollment
	}
}

http://127.0.0.1:%d {
	webhook_verify {
		secret %s
	}
	webhook_dedupe {
		in_flight wait 3s
	}
	reverse_proxy %s`, receiverPort, devSecret, up.Listener.Addr())
		g := startGateway(t, site, gatewayOptions{Global: senderGlobal(store, drop.URL, "")})
		n := 10000 // the size; HOOKGATE_CHAOS_EVENTS=1000 for a quicker run
		if testing.Short() {
			n = 1000 // the fast tier: the run is bound by the receiver's sleeps, not CPU
		}
		if v, err := strconv.Atoi(os.Getenv("HOOKGATE_CHAOS_EVENTS")); err == nil && v > 0 {
			n = v
		}
		enqueueEvents(t, g.URL+"/events", "evt", n)
		waitApplied(t, up, "evt", n, 90*time.Second+time.Duration(n)*20*time.Millisecond)
		if drops.Load() == 0 {
			t.Error("no answer was dropped: the plan did not run")
		}
		// Applied is not yet delivered: the sender may still be retrying
		// an attempt that timed out, to get the receiver's replay.
		delivered := fmt.Sprintf(`hookgate_sender_deliveries_total{destination="enrollment",outcome="delivered"} %d`, n)
		deadline := time.Now().Add(30 * time.Second)
		m := g.Metrics()
		for !strings.Contains(m, delivered) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			m = g.Metrics()
		}
		for _, want := range []string{
			delivered,
			`hookgate_sender_attempts_total{destination="enrollment",result="transient"}`,
			fmt.Sprintf(`hookgate_sender_enqueued_total{destination="enrollment",result="queued"} %d`, n),
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "hookgate_sender"))
			}
		}
	})
}

// TestSenderSurvivesSIGKILL kills the sending gateway mid-run and starts
// it again on the same store: every event is still applied, once.
func TestSenderSurvivesSIGKILL(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		store := storeOf(global)
		up := newApplier(t, 1500*time.Millisecond)
		// The receiver's gateway is its own process: the sender's dies.
		recv := startGateway(t, dedupeSite(up.Listener.Addr().String(), "in_flight wait 3s"), gatewayOptions{Global: global})
		opts := gatewayOptions{Global: senderGlobal(store, recv.URL, ""), DataDir: t.TempDir()}
		site := "webhook_enqueue enrollment"
		g := startGateway(t, site, opts)
		const n = 600
		enqueueEvents(t, g.URL, "kill", n)
		deadline := time.Now().Add(30 * time.Second)
		for {
			up.mu.Lock()
			applied := len(up.applied)
			up.mu.Unlock()
			if applied > n/5 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		g.Kill()
		opts.Port = 0
		startGateway(t, site, opts)
		waitApplied(t, up, "kill", n, 90*time.Second)
	})
}

// TestEnqueueAnswers: the same ID twice is one envelope, another payload
// under it is 422, no ID is 400, an oversized body 413.
func TestEnqueueAnswers(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_enqueue enrollment {\n\t\tmax_body 1KiB\n\t}", gatewayOptions{Global: senderGlobal("store file", "http://"+up.Addr(), "")})
	answer := func(h http.Header, body string) (int, map[string]any, []byte) {
		st, hdr, got := post(t, g.URL, h, []byte(body))
		var m map[string]any
		if st == 202 {
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("a 202 answer %q: %v", got, err)
			}
		} else {
			m = map[string]any{"reason": problemBody(t, st, hdr, got)}
		}
		return st, m, got
	}
	st, m, got := answer(nil, `{"id":"evt_body","type":"x"}`)
	if st != 202 || m["id"] != "evt_body" || m["state"] != "queued" || m["duplicate"] != false || m["destination"] != "enrollment" {
		t.Fatalf("first enqueue: %d %s", st, got)
	}
	if st, m, got = answer(nil, `{"id":"evt_body","type":"x"}`); st != 202 || m["duplicate"] != true {
		t.Fatalf("same ID again: %d %s; want a duplicate", st, got)
	}
	if st, m, got = answer(nil, `{"id":"evt_body","type":"y"}`); st != 422 || m["reason"] != "key_reused_with_different_payload" {
		t.Fatalf("same ID, another payload: %d %s", st, got)
	}
	if st, m, got = answer(nil, `{"type":"no id"}`); st != 400 || m["reason"] != "missing_idempotency_key" {
		t.Fatalf("no ID: %d %s", st, got)
	}
	if st, m, got = answer(http.Header{"Idempotency-Key": {"k"}}, strings.Repeat("x", 2048)); st != 413 || m["reason"] != "body_too_large" {
		t.Fatalf("2 KiB body: %d %s", st, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for up.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if rs := up.received(); len(rs) != 1 || !bytes.Equal(rs[0].Body, []byte(`{"id":"evt_body","type":"x"}`)) || rs[0].Header.Get("Webhook-Signature") == "" {
		t.Fatalf("the destination received %d requests; want the first payload, byte for byte, signed", len(rs))
	}
}

// cli runs a hookgate subcommand against g's admin API.
func cli(t *testing.T, g *gateway, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--address", g.Admin)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDeadLettersRedrive: 50 events die (the receiver answers 400; for
// five of them the receiver had in fact applied the event and only the
// answer was lost). The CLI and admin API summarise, list and show them; a
// redrive of 10 moves exactly 10, which are delivered with the redrive ID;
// a redrive of the five that had landed is answered by the receiver's
// dedupe with a replay: each applied once in total.
func TestDeadLettersRedrive(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		store := storeOf(global)
		var healthy atomic.Bool
		var mu sync.Mutex
		applied := map[string]int{}
		redriveIDs := map[string]string{}
		landed := func(id string) bool { return id >= "dl-00" && id <= "dl-04" }
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			id := r.Header.Get("Webhook-Id")
			if !healthy.Load() && !landed(id) {
				w.WriteHeader(400)
				return
			}
			mu.Lock()
			applied[id]++
			redriveIDs[id] = r.Header.Get("Hookgate-Redrive-Id")
			mu.Unlock()
			_, _ = w.Write([]byte(`{"applied":true}`))
		})
		recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: global})
		// Before the fix, the answers of the five that landed are lost on
		// the way back: the sender sees a 400.
		target, _ := url.Parse(recv.URL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !healthy.Load() && landed(r.Header.Get("Webhook-Id")) {
				proxy.ServeHTTP(httptest.NewRecorder(), r)
				w.WriteHeader(400)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(lossy.Close)
		g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal(store, lossy.URL, "")})
		for i := range 50 {
			body := fmt.Appendf(nil, `{"type":"reservation.confirmed","n":%d}`, i)
			if st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprintf("dl-%02d", i)}}, body); st != 202 {
				t.Fatalf("enqueue: %d %s", st, got)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, _ := cli(t, g, "dlq", "summary", "--format", "json")
			if strings.Contains(out, `"total": 50`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("50 dead letters never showed:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		out, err := cli(t, g, "dlq", "summary")
		if err != nil || !strings.Contains(out, "enrollment") || !strings.Contains(out, "http_4xx") || !strings.Contains(out, "total: 50") {
			t.Fatalf("dlq summary: %v\n%s", err, out)
		}
		out, err = cli(t, g, "dlq", "show", "dl-07")
		if err != nil || !strings.Contains(out, `"last_status": 400`) || !strings.Contains(out, `"attempt_log"`) || !strings.Contains(out, `"n": 7`) {
			t.Fatalf("dlq show: %v\n%s", err, out)
		}
		out, err = cli(t, g, "dlq", "list", "--limit", "20", "--format", "json")
		if err != nil || strings.Count(out, `"id"`) != 20 || !strings.Contains(out, `"next_cursor": "enrollment|`) {
			t.Fatalf("dlq list: %v\n%s", err, out)
		}
		out, err = cli(t, g, "dlq", "redrive", "--dry-run", "--class", "http_4xx")
		if err != nil || !strings.Contains(out, "50 dead letters match") {
			t.Fatalf("dry run: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "dlq", "redrive"); err == nil || !strings.Contains(out, "needs --limit") {
			t.Fatalf("a redrive without --limit: %v\n%s", err, out)
		}

		healthy.Store(true)
		out, err = cli(t, g, "dlq", "redrive", "--limit", "10", "--id", "dl-10", "--id", "dl-11", "--id", "dl-12", "--id", "dl-13",
			"--id", "dl-14", "--id", "dl-15", "--id", "dl-16", "--id", "dl-17", "--id", "dl-18", "--id", "dl-19", "--id", "dl-20", "--format", "json")
		var rd struct {
			ID             string `json:"redrive_id"`
			Matched, Moved int
		}
		if err != nil || json.Unmarshal([]byte(out), &rd) != nil || rd.Matched != 11 || rd.Moved != 10 || !strings.HasPrefix(rd.ID, "rd_") {
			t.Fatalf("redrive 10 of 11: %v\n%s", err, out)
		}
		deadline = time.Now().Add(30 * time.Second)
		for {
			out, _ = cli(t, g, "dlq", "redrive", "--status", rd.ID)
			if strings.Contains(out, `"delivered": 10`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the redrive never finished:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(out, `"by": "cli: `) || !strings.Contains(out, `"moved": 10`) {
			t.Errorf("redrive record lacks who or how many:\n%s", out)
		}
		mu.Lock()
		moved := 0
		for i := 10; i <= 20; i++ { // 10 of these 11, the oldest dead first
			id := fmt.Sprintf("dl-%02d", i)
			switch {
			case applied[id] == 1 && redriveIDs[id] == rd.ID:
				moved++
			case applied[id] != 0:
				t.Errorf("%s applied %d times with redrive ID %q; want once, %s", id, applied[id], redriveIDs[id], rd.ID)
			}
		}
		mu.Unlock()
		if moved != 10 {
			t.Errorf("%d redriven events applied, want 10", moved)
		}
		if out, _ := cli(t, g, "dlq", "summary", "--format", "json"); !strings.Contains(out, `"total": 40`) {
			t.Errorf("after redriving 10 of 50:\n%s", out)
		}

		// The five that had landed: the receiver's dedupe replays them.
		before := up.count()
		out, err = cli(t, g, "dlq", "redrive", "--limit", "5", "--id", "dl-00", "--id", "dl-01", "--id", "dl-02", "--id", "dl-03", "--id", "dl-04", "--format", "json")
		if err != nil || json.Unmarshal([]byte(out), &rd) != nil || rd.Moved != 5 {
			t.Fatalf("redrive of the landed: %v\n%s", err, out)
		}
		deadline = time.Now().Add(30 * time.Second)
		for !strings.Contains(out, `"delivered": 5`) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			out, _ = cli(t, g, "dlq", "redrive", "--status", rd.ID)
		}
		if up.count() != before {
			t.Errorf("the receiver forwarded %d redriven copies that had landed; want replays", up.count()-before)
		}
		mu.Lock()
		for i := range 5 {
			if n := applied[fmt.Sprintf("dl-%02d", i)]; n != 1 {
				t.Errorf("dl-%02d applied %d times, want once", i, n)
			}
		}
		mu.Unlock()

		out, err = cli(t, g, "dlq", "purge", "--id", "dl-30")
		if err != nil || !strings.Contains(out, "1 dead letter removed") {
			t.Fatalf("purge: %v\n%s", err, out)
		}
		out, err = cli(t, g, "destinations", "list")
		if err != nil || !strings.Contains(out, "enrollment") || !strings.Contains(out, "active") || !strings.Contains(out, "closed") {
			t.Fatalf("destinations list: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "dlq", "summary", "--class", "bogus"); err == nil || !strings.Contains(out, "unknown error class") {
			t.Fatalf("a bad class: %v\n%s", err, out)
		}
	})
}

// TestDestinationPauseResume: paused by the CLI, a destination keeps its
// events; resumed, it delivers them.
func TestDestinationPauseResume(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal("store file", "http://"+up.Addr(), "")})
	if out, err := cli(t, g, "destinations", "pause", "enrollment"); err != nil || !strings.Contains(out, "enrollment: paused") {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {"p-1"}}, []byte(`{}`))
	if st != 202 || !strings.Contains(string(got), `"state":"paused"`) {
		t.Fatalf("enqueue while paused: %d %s", st, got)
	}
	time.Sleep(300 * time.Millisecond)
	if up.count() != 0 {
		t.Fatal("a paused destination was delivered to")
	}
	if out, err := cli(t, g, "destinations", "resume", "enrollment"); err != nil || !strings.Contains(out, "enrollment: active") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for up.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if up.count() != 1 {
		t.Fatalf("after resume the destination got %d requests, want 1", up.count())
	}
	if out, err := cli(t, g, "destinations", "pause", "nowhere"); err == nil || !strings.Contains(out, "no destination") {
		t.Fatalf("pause of an unknown destination: %v\n%s", err, out)
	}
}

// TestBreakerOpensOnEveryInstance: two instances share Redis. A
// destination that is down opens its breaker, and every instance sees it
// open; while it is, the receiver sees no attempt and none is charged, and
// a healthy destination keeps delivering.
func TestBreakerOpensOnEveryInstance(t *testing.T) {
	srv := redistest.Start(t)
	var down atomic.Int64
	downURL := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		down.Add(1)
		w.WriteHeader(503)
	})
	healthy := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		store redis %s
		key_prefix %s
		sender {
			attempts 100
			backoff 10ms 20ms
			breaker {
				failures 3
				open 1h
			}
		}
		destination down {
			url http://%s
			secret %s
			workers 1
		}
		destination healthy {
			url http://%s
			secret %s
		}
	}`, srv.URL(), redistest.Prefix("it"), downURL.Addr(), devSecret, healthy.Addr(), devSecret)
	site := "route /down {\n\t\twebhook_enqueue down\n\t}\n\troute /healthy {\n\t\twebhook_enqueue healthy\n\t}"
	// The first instance meets the outage and opens the breaker; the
	// second starts after, and finds it open in the shared state: it never
	// tries the destination itself, though the queue it shares holds 20
	// events for it.
	g1 := startGateway(t, site, gatewayOptions{Global: global})
	for i := range 20 {
		post(t, g1.URL+"/down", http.Header{"Idempotency-Key": {fmt.Sprint("down-", i)}}, []byte(`{}`))
	}
	breaker := func(g *gateway) string {
		out, _ := cli(t, g, "destinations", "list", "--format", "json")
		_, after, _ := strings.Cut(out, `"name": "down",`)
		_, after, _ = strings.Cut(after, `"breaker": "`)
		state, _, _ := strings.Cut(after, `"`)
		return state
	}
	waitOpen := func(g *gateway) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for breaker(g) != "open" {
			if time.Now().After(deadline) {
				out, _ := cli(t, g, "destinations", "list")
				t.Fatalf("the breaker is not open:\n%s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitOpen(g1)
	attempts := down.Load()
	// Three failing attempts open it; one more may have been in flight.
	if attempts > 3+1 {
		t.Errorf("the down destination got %d attempts before its breaker opened, want at most 4", attempts)
	}
	g2 := startGateway(t, site, gatewayOptions{Global: global})
	waitOpen(g2)
	for i := range 200 {
		g := g1
		if i%2 == 1 {
			g = g2
		}
		post(t, g.URL+"/healthy", http.Header{"Idempotency-Key": {fmt.Sprint("ok-", i)}}, []byte(`{}`))
	}
	deadline := time.Now().Add(20 * time.Second)
	for healthy.count() < 200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if healthy.count() != 200 {
		t.Fatalf("the healthy destination got %d of 200 while the other's breaker was open", healthy.count())
	}
	if got := down.Load(); got != attempts {
		t.Fatalf("the down destination got %d attempts while its breaker was open", got-attempts)
	}
	out, _ := cli(t, g1, "destinations", "list", "--format", "json")
	if !strings.Contains(out, `"queued": 20`) && !strings.Contains(out, `"queued": 19`) && !strings.Contains(out, `"queued": 18`) {
		t.Errorf("the down destination's events are not all kept queued:\n%s", out)
	}
	m := g1.Metrics()
	for _, want := range []string{
		`hookgate_sender_breaker_state{destination="down"} 2`,
		`hookgate_sender_breaker_state{destination="healthy"} 0`,
		`hookgate_sender_queue_depth{destination="healthy",state="queued"} 0`,
		`hookgate_sender_dlq_oldest_age_seconds{destination="down"} 0`,
		`hookgate_sender_oldest_ready_age_seconds{destination="down"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "hookgate_sender"))
		}
	}
}

// TestSenderRecoversFromARedisRestart: Redis (AOF, fsync always) is killed
// under load and started again. The workers recover by themselves; every
// event that was accepted is applied once, and no envelope stays leased.
func TestSenderRecoversFromARedisRestart(t *testing.T) {
	srv := redistest.StartWith(t, "--appendonly", "yes", "--appendfsync", "always")
	up := newApplier(t, 1500*time.Millisecond)
	recv := startGateway(t, dedupeSite(up.Listener.Addr().String(), "in_flight wait 3s"), gatewayOptions{})
	global := senderGlobal(fmt.Sprintf("store redis %s\n\t\tkey_prefix %s", srv.URL(), redistest.Prefix("it")), recv.URL, "")
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: global})
	const n = 500
	enqueueEvents(t, g.URL, "restart", n)
	deadline := time.Now().Add(30 * time.Second)
	for {
		up.mu.Lock()
		applied := len(up.applied)
		up.mu.Unlock()
		if applied > n/10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Stop()
	time.Sleep(time.Second)
	srv.Restart()
	waitApplied(t, up, "restart", n, 90*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for {
		out, _ := cli(t, g, "destinations", "list", "--format", "json")
		if strings.Contains(out, `"queued": 0`) && strings.Contains(out, `"leased": 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("envelopes left in the queue after every event was applied:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSenderReloadLosesNothing reloads the config while deliveries are in
// flight: the new config's workers start before the old ones stop, and
// every event is delivered once.
func TestSenderReloadLosesNothing(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")+r.Header.Get("Webhook-Id")]++
		mu.Unlock()
	})
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal("store file", "http://"+up.Addr(), "")})
	const n = 400
	enqueueEvents(t, g.URL, "reload", n)
	caddyfile, err := os.ReadFile(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		req, _ := http.NewRequest(http.MethodPost, g.Admin+"/load", bytes.NewReader(caddyfile))
		req.Header.Set("Content-Type", "text/caddyfile")
		req.Header.Set("Cache-Control", "must-revalidate") // reload even though nothing changed
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("reload: %s", resp.Status)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered after the reloads", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if starts := strings.Count(g.logs.String(), "sender started"); starts != 4 {
		t.Errorf("the sender started %d times, want 4 (three reloads)", starts)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s delivered %d times across the reloads", id, c)
		}
	}
}
