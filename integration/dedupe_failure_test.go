package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestDedupeRedisOutage stops the Redis server mid-run: requests fail
// closed with 503 and nothing is forwarded; when Redis is back, traffic
// flows again without restarting hookgate.
func TestDedupeRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: redisGlobal(srv.URL())})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	send := func(id string) (int, http.Header, []byte) {
		return post(t, g.URL, s.Sign(id, time.Now(), body), body)
	}
	if st, _, got := send(randomID("msg_")); st != 200 {
		t.Fatalf("before the outage: %d %s", st, got)
	}

	srv.Stop()
	before := up.count()
	st, hdr, got := send(randomID("msg_"))
	if st != 503 || problemBody(t, st, hdr, got) != "store_unavailable" || hdr.Get("Retry-After") != "1" {
		t.Fatalf("during the outage: %d Retry-After %q %s; want 503 store_unavailable, Retry-After 1", st, hdr.Get("Retry-After"), got)
	}
	if up.count() != before {
		t.Fatalf("upstream received %d requests during the outage", up.count()-before)
	}

	srv.Restart()
	id := randomID("msg_")
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _, got = send(id)
		if st == 200 {
			break
		}
		if st != 503 || time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %d %s", st, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, hdr, _ := send(id); st != 200 || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("duplicate after recovery: %d replayed %q", st, hdr.Get("Idempotent-Replayed"))
	}
	if m := g.Metrics(); !strings.Contains(m, `hookgate_dedupe_requests_total{result="store_error"} 1`) {
		t.Errorf("store_error not counted:\n%s", grepLines(m, "hookgate_dedupe"))
	}
}

// TestDedupeClientHangsUp checks the forward is detached from the client:
// the upstream's answer is recorded although the client left, and the
// client's retry gets it replayed.
func TestDedupeClientHangsUp(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			time.Sleep(time.Second)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprint(w, `{"enrolled":true}`)
		})
		g := startGateway(t, dedupeSite(up.Addr(), "lease 10s\n\t\tin_flight wait 5s"), gatewayOptions{Global: global})
		body := []byte(`{"type":"reservation.confirmed"}`)
		h := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body)

		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, strings.NewReader(string(body)))
		req.Header = h.Clone()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			t.Fatalf("the impatient client got %d, want its own timeout", resp.StatusCode)
		}

		st, hdr, got := post(t, g.URL, h, body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || string(got) != `{"enrolled":true}` {
			t.Fatalf("retry: %d replayed %q %s; want the recorded answer replayed", st, hdr.Get("Idempotent-Replayed"), got)
		}
		if up.count() != 1 {
			t.Fatalf("upstream received %d copies, want 1", up.count())
		}
	})
}

// TestDedupeKilledBeforeRecord kills hookgate (SIGKILL) after the upstream
// acted but before the outcome was recorded: the one window of a second
// forward. Until the lease expires the retry is told to wait; after it, the
// retry is forwarded once more and counted as lease_expired.
func TestDedupeKilledBeforeRecord(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		acted := make(chan struct{}, 1)
		hold := make(chan struct{})
		var first atomic.Bool
		first.Store(true)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if first.CompareAndSwap(true, false) {
				acted <- struct{}{}
				<-hold // the enrollment is done; hookgate dies before it hears back
			}
			_, _ = fmt.Fprint(w, `{"enrolled":true}`)
		})
		t.Cleanup(func() { close(hold) }) // runs before the upstream closes
		const lease = 3 * time.Second
		site := dedupeSite(up.Addr(), "lease 3s")
		opts := gatewayOptions{Global: global, DataDir: t.TempDir()}
		g := startGateway(t, site, opts)
		body := []byte(`{"type":"reservation.confirmed"}`)
		id := randomID("msg_")
		s := signer(t, "standard", devSecret)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(string(body)))
			req.Header = s.Sign(id, time.Now(), body)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
		<-acted
		claimedAt := time.Now()
		g.Kill()

		opts.Port = 0
		g = startGateway(t, site, opts)
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if time.Since(claimedAt) < lease-500*time.Millisecond {
			if st != 409 || problemBody(t, st, hdr, got) != "in_flight" {
				t.Fatalf("retry within the lease: %d %s; want 409 in_flight", st, got)
			}
			ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
			if ra < 1 || ra > 3 {
				t.Errorf("Retry-After = %q, want 1..3", hdr.Get("Retry-After"))
			}
		}
		time.Sleep(time.Until(claimedAt.Add(lease + 200*time.Millisecond)))
		st, hdr, got = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("retry after the lease: %d %s replayed %q; want forwarded again", st, got, hdr.Get("Idempotent-Replayed"))
		}
		if up.count() != 2 {
			t.Fatalf("upstream received %d copies, want 2 (the crash window)", up.count())
		}
		if m := g.Metrics(); !strings.Contains(m, `hookgate_dedupe_requests_total{result="lease_expired"} 1`) {
			t.Errorf("lease_expired not counted:\n%s", grepLines(m, "hookgate_dedupe"))
		}
		st, hdr, _ = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 2 {
			t.Fatalf("third copy: %d replayed %q upstream %d; want a replay", st, hdr.Get("Idempotent-Replayed"), up.count())
		}
	})
}

// TestDedupeEmbeddedStoreRestart checks the embedded store keeps records
// across a restart of hookgate, and forgets them after retention.
func TestDedupeEmbeddedStoreRestart(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "retention 3s\n\t\tlease 1s")
	opts := gatewayOptions{DataDir: t.TempDir()}
	g := startGateway(t, site, opts)
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	id := randomID("msg_")
	st, _, first := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	recordedAt := time.Now()
	if st != 200 {
		t.Fatalf("first: %d", st)
	}
	g.Stop()

	g = startGateway(t, site, opts)
	st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || string(got) != string(first) || up.count() != 1 {
		t.Fatalf("after restart: %d replayed %q %s, upstream %d; want the record replayed", st, hdr.Get("Idempotent-Replayed"), got, up.count())
	}
	time.Sleep(time.Until(recordedAt.Add(3*time.Second + 200*time.Millisecond)))
	st, hdr, _ = post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "" || up.count() != 2 {
		t.Fatalf("after retention: %d replayed %q upstream %d; want forwarded as new", st, hdr.Get("Idempotent-Replayed"), up.count())
	}
}

// TestValidateWhileRunning checks `hookgate validate` does not open the
// embedded store, so it works while a gateway holds the file.
func TestValidateWhileRunning(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	g := startGateway(t, site, gatewayOptions{})
	body := []byte(`{}`)
	if st, _, got := post(t, g.URL, signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
		t.Fatalf("status %d: %s", st, got)
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte("{\n\tadmin off\n}\n:0 {\n"+site+"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+g.DataDir)
	// Had validate opened the store, it would fail on the file's lock.
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
}

// TestDedupeRedisStoppedUnderLoad sends 500 concurrent copies (250
// deliveries, two copies each; the second copy of every other delivery
// only once the first is answered) through a gateway whose Redis commands
// share pipelines, and kills Redis once 150 copies have been answered.
// Redis writes its append-only file before it answers (appendfsync
// always), so after a restart it holds every claim it confirmed. Every
// copy is answered: 200 (forwarded, or replayed), 409 in_flight, or 503
// store_unavailable; no delivery reaches the upstream twice; and every
// delivery the upstream saw has its claim in Redis: nothing was forwarded
// unclaimed.
func TestDedupeRedisStoppedUnderLoad(t *testing.T) {
	srv := redistest.StartWith(t, "--appendonly", "yes", "--appendfsync", "always")
	const (
		deliveries = 250
		stopAfter  = 150 // copies answered before Redis is killed
		lateFrom   = 200 // deliveries from here on are first sent once it is down
	)
	stopped := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		_, _ = fmt.Fprint(w, `{"ok":true}`)
	})
	prefix := redistest.Prefix("it")
	global := fmt.Sprintf("hookgate {\n\t\tstore redis %s\n\t\tkey_prefix %s\n\t}", srv.URL(), prefix)
	g := startGateway(t, dedupeSite(up.Addr(), "lease 3s"), gatewayOptions{Global: global})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 500}}
	send := func(h http.Header) string {
		req, _ := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(string(body)))
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		got, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == 200 && resp.Header.Get("Idempotent-Replayed") == "true":
			return "replayed"
		case resp.StatusCode == 200:
			return "forwarded"
		case resp.StatusCode == 409 && strings.Contains(string(got), "in_flight"):
			return "409 in_flight"
		case resp.StatusCode == 503 && strings.Contains(string(got), "store_unavailable"):
			return "503 store_unavailable"
		}
		return fmt.Sprintf("%d %s", resp.StatusCode, got)
	}

	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		wg       sync.WaitGroup
	)
	answered := 0
	answer := func(h http.Header) {
		got := send(h)
		mu.Lock()
		defer mu.Unlock()
		outcomes[got]++
		if answered++; answered == stopAfter {
			srv.Stop()
			close(stopped)
		}
	}
	for i := range deliveries {
		h := s.Sign(fmt.Sprintf("msg_load_%03d", i), time.Now(), body)
		late := i >= lateFrom
		wg.Go(func() {
			if late {
				<-stopped
			}
			if i%2 == 0 {
				answer(h) // the duplicate follows the first copy's answer
				answer(h)
				return
			}
			var pair sync.WaitGroup
			pair.Go(func() { answer(h) })
			pair.Go(func() { answer(h) })
			pair.Wait()
		})
	}
	wg.Wait()

	t.Logf("outcomes: %v", outcomes)
	total := 0
	for got, n := range outcomes {
		total += n
		switch got {
		case "forwarded", "replayed", "409 in_flight", "503 store_unavailable":
		default:
			t.Errorf("%d copies answered %q", n, got)
		}
	}
	if total != 2*deliveries {
		t.Fatalf("%d copies answered, want %d", total, 2*deliveries)
	}
	if outcomes["forwarded"] == 0 || outcomes["503 store_unavailable"] == 0 {
		t.Fatalf("outcomes %v: want forwards before the stop and 503s after it", outcomes)
	}
	if n := up.count(); n != outcomes["forwarded"] {
		t.Errorf("the upstream saw %d copies, %d were answered as forwarded", n, outcomes["forwarded"])
	}
	perID := map[string]int{}
	for _, r := range up.received() {
		perID[r.Header.Get("Webhook-Id")]++
	}
	for id, n := range perID {
		if n > 1 {
			t.Errorf("delivery %s reached the upstream %d times", id, n)
		}
	}

	srv.Restart()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = rdb.Close() }()
	store := redisstore.New(rdb, prefix)
	for id := range perID {
		e, err := store.Get(t.Context(), id, time.Now())
		if err != nil || e.State == dedupe.Absent {
			t.Errorf("delivery %s reached the upstream, but Redis holds no claim of it (%v): forwarded unclaimed", id, err)
		}
	}
}
