package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
)

// quiet drops go-redis's own log lines: the dial failures while a test's
// Redis is down are expected.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// TestBatchedRequestsWithRedisStoppedMidway drives 500 concurrent copies
// (250 keys, two copies each) through a Deduper on the batched store and
// kills Redis while they run. Redis writes its append-only file before it
// answers (appendfsync always), so after a restart it holds every claim
// it confirmed. Every copy must be answered: forwarded (at most once per
// key), replayed, rejected as in flight, or a store error (the handler's
// 503); and every forwarded copy's claim must be in Redis: nothing went
// upstream unclaimed.
func TestBatchedRequestsWithRedisStoppedMidway(t *testing.T) {
	srv := redistest.StartWith(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	pfx := redistest.Prefix("test")
	store := redisstore.New(rdb, pfx)
	t0 := time.Now()
	d, err := dedupe.New(store, dedupe.Config{}, dedupe.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}

	const (
		copies  = 500
		keys    = 250
		stopAt  = 100 // decisions before Redis is killed
		lateKey = 200 // copies of keys from here on start once it is down
	)
	type forward struct{ key, token string }
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		forwards []forward
		decided  int
		stopped  = make(chan struct{})
		wg       sync.WaitGroup
	)
	answer := func(key string, body []byte) string {
		ctx := t.Context()
		dec, err := d.BeginBody(ctx, key, body, nil)
		mu.Lock()
		decided++
		if decided == stopAt {
			srv.Stop()
			close(stopped)
		}
		mu.Unlock()
		if err != nil {
			return "503"
		}
		switch dec.Action {
		case dedupe.Replay:
			return "replayed"
		case dedupe.Reject:
			if errors.Is(dec.Err, dedupe.ErrInFlight) {
				return "409 in_flight"
			}
			return "422 mismatch"
		}
		// Forward: the upstream is this line.
		mu.Lock()
		forwards = append(forwards, forward{key, dec.Token})
		mu.Unlock()
		fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		// The server stops midway: a Finish that fails then is the scenario.
		_, _ = d.Finish(fctx, key, dec, dedupe.Response{Status: http.StatusOK, Body: []byte("ok")})
		return "forwarded"
	}
	for i := range copies {
		key := fmt.Sprintf("k%03d", i%keys)
		late := i%keys >= lateKey
		wg.Go(func() {
			if late {
				<-stopped
			}
			got := answer(key, []byte(`{"id":"`+key+`"}`))
			mu.Lock()
			outcomes[got]++
			mu.Unlock()
		})
	}
	wg.Wait()

	total := 0
	for _, n := range outcomes {
		total += n
	}
	t.Logf("outcomes: %v", outcomes)
	if total != copies {
		t.Fatalf("%d copies answered, want %d", total, copies)
	}
	if outcomes["forwarded"] == 0 || outcomes["503"] == 0 {
		t.Fatalf("outcomes %v: want forwards before the stop and 503s after it", outcomes)
	}
	if n := outcomes["422 mismatch"]; n != 0 {
		t.Errorf("%d copies rejected as a mismatch: every copy of a key has one body", n)
	}
	perKey := map[string]int{}
	for _, f := range forwards {
		if perKey[f.key]++; perKey[f.key] > 1 {
			t.Errorf("key %s forwarded %d times", f.key, perKey[f.key])
		}
	}

	// After a restart (the append-only file reloaded), every forward's
	// claim is there, held (claimed or recorded) by its token.
	srv.Restart()
	check := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = check.Close() }()
	for _, f := range forwards {
		tok, err := redisstore.Token(t.Context(), check, pfx, f.key)
		if err != nil || tok != f.token {
			t.Errorf("key %s was forwarded under token %s, but Redis holds %q (%v): forwarded unclaimed", f.key, f.token, tok, err)
		}
	}
}

// TestClaimsOnClusterShareSplitPipelines: concurrent claims of keys in
// every slot go through the batcher on a three-master Cluster, where
// go-redis splits each pipeline by node; every claim lands on its key's
// TestClaimsOnCluster: 300 concurrent claims over a three-master Cluster
// each land on their own key with their own token.
func TestClaimsOnCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	pfx := redistest.Prefix("test")
	store := redisstore.New(rdb, pfx)
	now := time.Now()
	const n = 300
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("key-%d", i)
			fp := dedupe.FingerprintOf([]byte(key))
			res, err := store.Claim(t.Context(), key, dedupe.Claim{Fingerprint: fp, Token: "tok-" + key, Lease: time.Minute, Retention: time.Hour, Now: now})
			switch {
			case err != nil:
				errs[i] = err
			case res.Status != dedupe.Claimed:
				errs[i] = fmt.Errorf("claim %s: %v, want claimed", key, res.Status)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		key := fmt.Sprintf("key-%d", i)
		e, err := store.Get(t.Context(), key, now)
		if err != nil || e.State != dedupe.StateClaimed || e.Fingerprint != dedupe.FingerprintOf([]byte(key)) {
			t.Errorf("Get(%s) = %+v, %v; want its own claim", key, e, err)
		}
		tok, err := redisstore.Token(t.Context(), rdb, pfx, key)
		if err != nil || tok != "tok-"+key {
			t.Errorf("%s: token %q (%v), want tok-%s", key, tok, err, key)
		}
	}
}

// TestClusterSlowMasterHoldsOnlyItsKeys: with one master paused, a claim
// of a key on another master answers at once; on a shared pipeline it
// would wait for the paused one.
func TestClusterSlowMasterHoldsOnlyItsKeys(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	store := redisstore.New(rdb, redistest.Prefix("test"))
	ctx := t.Context()
	claim := func(ctx context.Context, key string) error {
		_, err := store.Claim(ctx, key, dedupe.Claim{Fingerprint: dedupe.FingerprintOf([]byte(key)), Token: "t", Lease: time.Minute, Retention: time.Hour, Now: time.Now()})
		return err
	}
	// Warm every master's connection and scripts.
	for i := range 30 {
		if err := claim(ctx, fmt.Sprint("warm-", i)); err != nil {
			t.Fatal(err)
		}
	}
	master := func(key string) *redis.Client {
		m, err := rdb.MasterForKey(ctx, "x:{"+key+"}") // the slot of the store's key
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	slowKey, slow := "slow", master("slow")
	var other string
	for i := 0; other == ""; i++ {
		if key := fmt.Sprint("other-", i); master(key).Options().Addr != slow.Options().Addr {
			other = key
		}
	}
	if err := slow.Do(ctx, "CLIENT", "PAUSE", "3000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = claim(ctx, slowKey) }() // held by the pause: only the other claim is judged
	time.Sleep(50 * time.Millisecond)
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := claim(c, other); err != nil {
		t.Fatalf("a claim on a healthy master while another is paused: %v", err)
	}
}

// TestScriptsReloadAfterFlush: a Redis that lost its scripts (restarted,
// SCRIPT FLUSH) answers the pipelined EVALSHA with NOSCRIPT without
// running it; the store runs the script again on its own and goes on.
func TestScriptsReloadAfterFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	store := redisstore.New(rdb, redistest.Prefix("test"))
	now := time.Now()
	fp := dedupe.FingerprintOf([]byte("x"))
	claim := dedupe.Claim{Fingerprint: fp, Token: "t1", Lease: time.Minute, Retention: time.Hour, Now: now}
	for i, key := range []string{"a", "b"} {
		if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := store.Claim(t.Context(), key, claim)
		if err != nil || res.Status != dedupe.Claimed {
			t.Fatalf("claim %d after SCRIPT FLUSH = %v, %v; want claimed", i, res.Status, err)
		}
		// A resent claim under the same token answers as the first did.
		if res, err := store.Claim(t.Context(), key, claim); err != nil || res.Status != dedupe.Claimed {
			t.Fatalf("claim %d resent = %v, %v; want claimed", i, res.Status, err)
		}
		if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := store.Record(t.Context(), key, "t1", dedupe.Record{Status: 200}, time.Hour, now); err != nil {
			t.Fatalf("record %d after SCRIPT FLUSH: %v", i, err)
		}
	}
}

// BenchmarkDeduperUnique is the forward path of a unique delivery (claim,
// then record) on a real Redis, 32 goroutines per CPU at once as under
// load; it reports the round trips (pipelines) per forward.
func BenchmarkDeduperUnique(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	store := redisstore.New(rdb, redistest.Prefix("test"))
	d, err := dedupe.New(store, dedupe.Config{ReplayCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1"}`)
	fp := dedupe.FingerprintOf(body)
	sum := func() dedupe.Fingerprint { return fp } // computed once, as a placeholder's SHA-256 is
	header := http.Header{"Content-Type": {"application/json"}}
	var seq sync.Mutex
	n := 0
	next := func() string {
		seq.Lock()
		defer seq.Unlock()
		n++
		return fmt.Sprintf("bench-%d", n)
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := next()
			dec, err := d.BeginBody(context.Background(), key, body, sum)
			if err != nil || dec.Action != dedupe.Forward {
				b.Fatalf("BeginBody = %+v, %v", dec, err)
			}
			if _, err := d.Finish(context.Background(), key, dec, dedupe.Response{Status: 200, Header: header, Body: []byte(`{"ok":true}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	st := store.Stats()
	b.ReportMetric(float64(st.Pipelines)/float64(b.N), "trips/op")
}
