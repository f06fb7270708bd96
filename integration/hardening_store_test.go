package integration

// The store's bad days (issue 7): a Redis that refuses writes, sleeps or
// evicts, and a corrupt embedded file.

import (
	"bytes"
	"compress/gzip"
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
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/redistest"
)

// refuseWrites makes srv refuse every write (NOREPLICAS) for d.
func refuseWrites(t *testing.T, rdb *redis.Client, d time.Duration) {
	t.Helper()
	if err := rdb.ConfigSet(context.Background(), "min-replicas-to-write", "1").Err(); err != nil {
		t.Error(err)
		return
	}
	time.AfterFunc(d, func() { rdb.ConfigSet(context.Background(), "min-replicas-to-write", "0") })
}

// TestRecordRetriedWhileRedisRefusesWrites: Redis refuses writes for 1.5s
// right after the upstream answered. The record is retried until the
// lease ends, so it lands, and the retry is replayed. A refusal longer
// than the lease loses the record: counted once (not as a store error on
// top of the forward), and the retry after the lease is lease_expired.
func TestRecordRetriedWhileRedisRefusesWrites(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var refuseFor time.Duration
	var mu sync.Mutex
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		d := refuseFor
		refuseFor = 0
		mu.Unlock()
		if d > 0 {
			refuseWrites(t, rdb, d)
		}
		_, _ = fmt.Fprint(w, `{"enrolled":true}`)
	})
	g := startGateway(t, dedupeSite(up.Addr(), "lease 3s"), gatewayOptions{Global: redisGlobal(srv.URL())})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)

	mu.Lock()
	refuseFor = 1500 * time.Millisecond
	mu.Unlock()
	id := randomID("msg_")
	if st, _, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 200 {
		t.Fatalf("first: %d %s", st, got)
	}
	st, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
		t.Fatalf("retry after 1.5s of refused writes: %d replayed %q, upstream %d; want a replay", st, hdr.Get("Idempotent-Replayed"), up.count())
	}

	// Refused for longer than the lease: the record is lost.
	mu.Lock()
	refuseFor = 4 * time.Second
	mu.Unlock()
	id = randomID("msg_")
	start := time.Now()
	if st, _, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 200 {
		t.Fatalf("first of the second delivery: %d %s", st, got)
	}
	m := g.Metrics()
	if strings.Contains(m, `result="store_error"`) || !strings.Contains(m, `hookgate_dedupe_requests_total{result="forwarded"} 2`) {
		t.Errorf("a lost record counted as more than its forward:\n%s", grepLines(m, "hookgate_dedupe_requests"))
	}
	time.Sleep(time.Until(start.Add(4*time.Second + 200*time.Millisecond)))
	if st, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 200 || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the lease: %d replayed %q; want forwarded again", st, hdr.Get("Idempotent-Replayed"))
	}
	if m := g.Metrics(); !strings.Contains(m, `hookgate_dedupe_requests_total{result="lease_expired"} 1`) {
		t.Errorf("the second forward is not counted as lease_expired:\n%s", grepLines(m, "hookgate_dedupe_requests"))
	}
}

// TestLostClaimIsLetGo: Redis sleeps (DEBUG SLEEP) past the client's
// timeout, so the claim fails with 503; it lands when Redis wakes. The
// gateway releases it under its own token, so the sender's retry is
// forwarded, as a first forward, not held back with 409 until the lease
// ends.
func TestLostClaimIsLetGo(t *testing.T) {
	srv := redistest.StartWith(t, "--enable-debug-command", "yes")
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), "lease 30s"), gatewayOptions{Global: redisGlobal(srv.URL())})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	id := randomID("msg_")
	// A first delivery loads the scripts: the claim sent while Redis
	// sleeps is then an EVALSHA that runs when it wakes.
	if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
		t.Fatalf("before the sleep: %d %s", st, got)
	}

	asleep := exec.Command("redis-cli", "-p", strconv.Itoa(srv.Port), "DEBUG", "SLEEP", "6")
	if err := asleep.Start(); err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer func() { _ = probe.Close() }()
	for probe.Ping(t.Context()).Err() == nil { // until the sleep has begun
		time.Sleep(10 * time.Millisecond)
	}
	st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 503 || problemBody(t, st, hdr, got) != "store_unavailable" {
		t.Fatalf("while Redis sleeps: %d %s; want 503 store_unavailable", st, got)
	}
	_ = asleep.Wait() // Redis is awake: the lost claim has landed
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, hdr, got = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 409 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st != 200 || hdr.Get("Idempotent-Replayed") != "" || up.count() != 2 {
		t.Fatalf("retry after Redis woke: %d %s replayed %q upstream %d; want forwarded (the lost claim let go well before its 30s lease)", st, got, hdr.Get("Idempotent-Replayed"), up.count())
	}
	if m := g.Metrics(); strings.Contains(m, `result="lease_expired"`) {
		t.Errorf("the first forward is counted as lease_expired:\n%s", grepLines(m, "hookgate_dedupe_requests"))
	}
}

// TestWatermarkIsAMaxRegister: an instance is paused (SIGSTOP) after the
// upstream answered 2xx, past its entity lease; another instance takes
// the lease for an event the upstream does not apply. When the first
// resumes, its event was applied, so the watermark moves although its
// lease is gone: an older event is stale afterwards.
func TestWatermarkIsAMaxRegister(t *testing.T) {
	srv := redistest.Start(t)
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case bytes.Contains(body, []byte("reservation.confirmed")):
			w.Header().Set("Content-Length", "16")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-release
			_, _ = w.Write([]byte(`{"applied":true}`))
		case bytes.Contains(body, []byte("reservation.cancelled")):
			w.WriteHeader(500) // not applied
		default:
			_, _ = w.Write([]byte(`{"applied":true}`))
		}
	})
	site := fmt.Sprintf(`
	webhook_verify {
		secret %s
	}
	webhook_freshness {
		entity {webhook.json.reservation_id}
		event_time {webhook.json.occurred_at}
		lease 2s
		entity_busy reject
	}
	reverse_proxy %s`, devSecret, up.Addr())
	global := redisGlobal(srv.URL())
	g1 := startGateway(t, site, gatewayOptions{Global: global})
	g2 := startGateway(t, site, gatewayOptions{Global: global})
	s := signer(t, "standard", devSecret)
	r := randomID("r-")
	t0 := time.Now().Add(-time.Minute)

	confirmed := event("reservation.confirmed", r, t0)
	req, _ := http.NewRequest(http.MethodPost, g1.URL, bytes.NewReader(confirmed))
	req.Header = s.Sign(randomID("msg_"), time.Now(), confirmed)
	acquired := time.Now()
	resp, err := http.DefaultClient.Do(req) // returns once g1 has passed the 200 on
	if err != nil {
		t.Fatal(err)
	}
	_ = g1.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(time.Until(acquired.Add(2*time.Second + 300*time.Millisecond)))
	cancelled := event("reservation.cancelled", r, t0.Add(time.Second))
	if st, _, got := post(t, g2.URL, s.Sign(randomID("msg_"), time.Now(), cancelled), cancelled); st != 500 {
		t.Fatalf("an event on the second instance after the lease: %d %s; want forwarded (500)", st, got)
	}
	_ = g1.cmd.Process.Signal(syscall.SIGCONT)
	close(release)
	_, _ = io.ReadAll(resp.Body) // g1 finished the event: whole, or cut at its deadline
	_ = resp.Body.Close()

	older := event("reservation.expired", r, t0.Add(-time.Second))
	st, _, got := post(t, g2.URL, s.Sign(randomID("msg_"), time.Now(), older), older)
	if st != 200 || !strings.Contains(string(got), `"stale"`) {
		t.Fatalf("an event older than the applied one: %d %s; want stale (the watermark moved)", st, got)
	}
	if up.count() != 2 {
		t.Fatalf("upstream received %d requests, want 2", up.count())
	}
}

// TestEvictionPolicyIsChecked: every hookgate key has a TTL, so Redis's
// volatile-* policies evict exactly hookgate's records. The gateway reads
// maxmemory-policy at start and warns unless it is noeviction, or says it
// could not check.
func TestEvictionPolicyIsChecked(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the log; "" for no warning
	}{
		{"volatile-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}, `"maxmemory-policy":"volatile-lru"`},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, `"maxmemory-policy":"allkeys-lru"`},
		{"CONFIG renamed", []string{"--rename-command", "CONFIG", ""}, "could not check Redis maxmemory-policy"},
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.StartWith(t, tt.args...)
			up := newUpstream(t, nil)
			g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: redisGlobal(srv.URL())})
			body := []byte(`{}`)
			// A request makes sure the store is open, and the check done.
			post(t, g.URL, signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body), body)
			deadline := time.Now().Add(10 * time.Second)
			for tt.want != "" && !strings.Contains(g.logs.String(), tt.want) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			logs := g.logs.String()
			switch {
			case tt.want != "" && !strings.Contains(logs, tt.want):
				t.Fatalf("no warning with %q in the log:\n%s", tt.want, logs)
			case tt.want == "" && strings.Contains(logs, "maxmemory-policy"):
				t.Fatalf("a warning although the policy is noeviction:\n%s", logs)
			}
		})
	}
}

// runGatewayToExit runs `hookgate run` on a Caddyfile whose site is site,
// with the embedded store in dataDir, and returns its output once it
// exits (it must, within 20s).
func runGatewayToExit(t *testing.T, site, dataDir string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	caddyfile := fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n}\nhttp://127.0.0.1:%d {\n%s\n}\n", freePort(t), site)
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dataDir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("hookgate did not exit in 20s:\n%s", out)
	}
	return string(out), err
}

// storeCheck runs `hookgate store check args...`.
func storeCheck(t *testing.T, dataDir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"store", "check"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dataDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCorruptStateFile: a truncated or scribbled state.db is a clear error
// at start, naming the file and the remedy, never a panic with a
// goroutine dump; `hookgate store check` finds it too. A file locked by
// another gateway is told apart from a corrupt one.
func TestCorruptStateFile(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	s := signer(t, "standard", devSecret)
	for _, damage := range []string{"truncated", "truncated to 2 pages", "scribbled"} {
		t.Run(damage, func(t *testing.T) {
			data := t.TempDir()
			g := startGateway(t, site, gatewayOptions{DataDir: data})
			for i := range 200 {
				body := fmt.Appendf(nil, `{"n":%d,"pad":%q}`, i, strings.Repeat("x", 500))
				post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body)
			}
			g.Stop()
			file := filepath.Join(data, "caddy", "hookgate", "state.db")
			if out, err := storeCheck(t, data); err != nil || !strings.Contains(out, "sound") {
				t.Fatalf("store check of a sound file: %v\n%s", err, out)
			}
			switch damage {
			case "truncated":
				// Half of the pages in use: the file itself runs on past
				// them (bbolt grows it ahead, by up to 16 MiB under the
				// store's large initial mmap).
				if err := os.Truncate(file, usedSize(t, file)/2); err != nil {
					t.Fatal(err)
				}
			case "truncated to 2 pages":
				if err := os.Truncate(file, 2*4096); err != nil {
					t.Fatal(err)
				}
			case "scribbled":
				f, err := os.OpenFile(file, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				junk := make([]byte, 4*4096)
				for i := range junk {
					junk[i] = byte(i * 7)
				}
				if _, err := f.WriteAt(junk, 4*4096); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// The check first, on the file as damaged (a gateway's start
			// could touch it).
			if out, err := storeCheck(t, data, filepath.Dir(file)); err == nil || !strings.Contains(out, "is corrupt") || strings.Contains(out, "goroutine ") {
				t.Errorf("store check of a %s file: %v\n%s", damage, err, out)
			}
			out, err := runGatewayToExit(t, site, data)
			if err == nil {
				t.Fatalf("hookgate started on a %s file:\n%s", damage, out)
			}
			for _, want := range []string{file, "is corrupt", "move the file aside", "hookgate store check"} {
				if !strings.Contains(out, want) {
					t.Errorf("the error lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "another hookgate") {
				t.Errorf("a panic dump or the lock hint for a corrupt file:\n%s", out)
			}
		})
	}
	// Two files damaged at random that bbolt's own check cannot survive:
	// on one it faults on a goroutine of its own (no recover reaches it),
	// on the other its page walk never ends. The check runs in a child
	// process: the crash and the loop end the child, and are corruption.
	unzip := func(t *testing.T, fixture, data string) string {
		t.Helper()
		f, err := os.Open(filepath.Join("testdata", "corrupt", fixture+".db.gz"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(data, "caddy", "hookgate", "state.db")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	t.Run("a fault in bbolt's check", func(t *testing.T) {
		data := t.TempDir()
		file := unzip(t, "fault", data)
		if out, err := storeCheck(t, data); err == nil || !strings.Contains(out, "is corrupt") || !strings.Contains(out, "crashed") || strings.Contains(out, "goroutine ") {
			t.Errorf("store check: %v\n%s", err, out)
		}
		out, err := runGatewayToExit(t, site, data)
		if err == nil || !strings.Contains(out, file) || !strings.Contains(out, "is corrupt") || strings.Contains(out, "goroutine ") {
			t.Errorf("the gateway's start: %v\n%s", err, out)
		}
	})
	t.Run("a loop in bbolt's check", func(t *testing.T) {
		data := t.TempDir()
		unzip(t, "loop", data)
		out, err := storeCheck(t, data, "--timeout", "3s")
		if err == nil || !strings.Contains(out, "is corrupt") || !strings.Contains(out, "did not finish within 3s") {
			t.Errorf("store check: %v\n%s", err, out)
		}
	})
	t.Run("empty", func(t *testing.T) {
		// A file created and never written (a crash before bbolt's first
		// sync, a touch): a new store, not a corrupt one.
		data := t.TempDir()
		file := filepath.Join(data, "caddy", "hookgate", "state.db")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := storeCheck(t, data); err != nil || !strings.Contains(out, "empty") {
			t.Errorf("store check of an empty file: %v\n%s", err, out)
		}
		g := startGateway(t, site, gatewayOptions{DataDir: data})
		body := []byte(`{}`)
		if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
			t.Errorf("a gateway on an empty file: %d %s", st, got)
		}
	})
	t.Run("locked", func(t *testing.T) {
		data := t.TempDir()
		g := startGateway(t, site, gatewayOptions{DataDir: data})
		body := []byte(`{}`)
		post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body)
		out, err := storeCheck(t, data)
		if err == nil || !strings.Contains(out, "held by a running gateway") || !strings.Contains(out, "hookgate store backup") || strings.Contains(out, "corrupt") {
			t.Fatalf("store check of a file in use: %v\n%s; want the lock hint and the way to back it up", err, out)
		}
	})
}

// TestStoreCheckOfATruncatedCopy: a copy of a store file cut short (a
// backup cut off) is found corrupt by its size, before bbolt's check reads
// a page past its end, which would be a SIGBUS on bbolt's own goroutine.
func TestStoreCheckOfATruncatedCopy(t *testing.T) {
	up := newUpstream(t, nil)
	data := t.TempDir()
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{DataDir: data, Global: senderGlobal("store file", "http://"+up.Addr(), "")})
	for i := range 20 {
		post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprint("e-", i)}}, []byte(`{}`))
	}
	g.Stop()
	whole, err := os.ReadFile(filepath.Join(data, "caddy", "hookgate", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{8192, 16384} {
		cut := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := storeCheck(t, data, cut)
		if err == nil || !strings.Contains(out, "is corrupt") || !strings.Contains(out, "truncated") || strings.Contains(out, "goroutine ") {
			t.Errorf("store check of the first %d bytes: %v\n%s", n, err, out)
		}
	}
}

// TestEvictionForgetsRecords: why noeviction is the only safe policy, on
// a real Redis whose memory fills under volatile-lru: Redis evicts
// hookgate's records (every one has a TTL), and their duplicates reach the
// upstream again; the start-up warning names that consequence. (Under
// noeviction a full Redis refuses writes instead: claims get 503, and a
// refused record is retried, TestRecordRetriedWhileRedisRefusesWrites.)
func TestEvictionForgetsRecords(t *testing.T) {
	const n = 1500 // about 3 MB of records, where 2 MB fit
	answer := bytes.Repeat([]byte("x"), 2<<10)
	srv := redistest.StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-lru")
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) { _, _ = w.Write(answer) })
	g := startGateway(t, dedupeSite(up.Addr(), "replay_cache off"), gatewayOptions{Global: redisGlobal(srv.URL())})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	for i := range n {
		id := fmt.Sprintf("msg_%04d", i)
		if st, _, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 200 {
			t.Fatalf("%s: %d %s", id, st, got)
		}
	}
	for i := range n {
		id := fmt.Sprintf("msg_%04d", i)
		post(t, g.URL, s.Sign(id, time.Now(), body), body)
	}
	again := up.count() - n
	if again == 0 {
		t.Errorf("no duplicate forwarded again: Redis evicted nothing (its memory did not fill?)")
	}
	t.Logf("volatile-lru: %d of %d duplicates forwarded again", again, n)
	if !strings.Contains(g.logs.String(), "an evicted dedupe record lets its duplicates through to the upstream again") {
		t.Errorf("no warning naming the consequence:\n%s", grepLines(g.logs.String(), "maxmemory"))
	}
}

// usedSize is the size of the pages a bbolt file uses, as its last
// transaction sees them (the file may be longer: bbolt grows it ahead).
func usedSize(t *testing.T, file string) int64 {
	t.Helper()
	db, err := bolt.Open(file, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }() // read only
	var n int64
	if err := db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
