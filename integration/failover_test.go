package integration

// The failover tests (issue 32): the gateway on a replicated Redis, a
// Sentinel group or a Cluster with replicas, under load while the master
// is SIGKILLed and a replica promoted. Each run counts, from the client's
// side against the final state, what the failover cost: acknowledged
// enqueues lost, envelopes delivered twice, dedupe duplicates forwarded
// twice, and the error answers the load saw. The counts are reported, not
// judged: with replication asynchronous they depend on the replication
// window. What is asserted holds whatever that window: every request is
// answered 2xx in the end, each error answer is a documented one, and the
// gateway serves again after the failover.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// failoverSettings are the store settings each failover test runs with:
// a name for the report, the lines added to the store redis block, and
// whether the run is judged. With min_replicas 0 the counts are reported,
// not judged: they are what the README tells users. With min_replicas 1
// an acknowledged enqueue is on a replica, and a claim is on one before
// its copy is forwarded (a record cut by the kill is retried until it
// lands on the promoted replica, whose claim it finds): no acknowledged
// enqueue is lost, and no copy is forwarded twice.
var failoverSettings = []struct {
	name, lines string
	judged      bool
}{
	{"min_replicas=0", "", false},
	{"min_replicas=1", "min_replicas 1", true},
}

// sentinelDelays are the replication delays each Sentinel failover runs
// with: none (on loopback a replica is microseconds behind), and 20 ms,
// about a round trip across zones, which widens the window a failover can
// lose. The delay holds what the master sends its replicas, and drops it
// when the master dies (redistest.ReplicationDelay): the writes
// acknowledged in the last 20 ms before the SIGKILL can be lost. Only the
// first failover is delayed; the replica left is reconfigured to
// replicate from the promoted master directly.
var sentinelDelays = []time.Duration{0, 20 * time.Millisecond}

// TestSentinelFailoverCounts runs the load through a Sentinel failover:
// a master, two replicas, three Sentinels; the master SIGKILLed when 40%
// of the enqueues were acknowledged. Each setting runs once per delay of
// the replication link.
func TestSentinelFailoverCounts(t *testing.T) {
	for _, s := range failoverSettings {
		for _, delay := range sentinelDelays {
			name := s.name
			var opts []redistest.SentinelOption
			if delay > 0 {
				name += " delay=" + delay.String()
				opts = append(opts, redistest.ReplicationDelay(delay))
			}
			t.Run(name, func(t *testing.T) {
				runSentinelFailover(t, "sentinel "+name, s.lines, s.judged, opts...)
			})
		}
	}
}

// runSentinelFailover runs the load through a Sentinel failover, with
// lines added to the store redis block, on a group started with opts.
func runSentinelFailover(t *testing.T, label, lines string, judged bool, opts ...redistest.SentinelOption) {
	group := redistest.StartSentinelGroup(t, opts...)
	store := fmt.Sprintf("store redis %s {\n\t\t\tsentinel_master %s\n\t\t\t%s\n\t\t}",
		group.StoreURLs(), redistest.SentinelMaster, lines)
	runFailover(t, label, store, judged, func() time.Duration {
		killed := time.Now()
		old := group.KillMaster()
		group.WaitFailover(old, 60*time.Second)
		return time.Since(killed)
	})
}

// TestClusterFailoverCounts runs the load through a Cluster failover:
// three masters with a replica each; the master of the destination's
// queue SIGKILLed when 40% of the enqueues were acknowledged, then
// restarted once its replica was promoted, to rejoin as that replica's
// replica (redistest.Cluster.Rejoin).
func TestClusterFailoverCounts(t *testing.T) {
	for _, s := range failoverSettings {
		t.Run(s.name, func(t *testing.T) {
			cluster := redistest.StartReplicatedCluster(t)
			store := fmt.Sprintf("store redis %s {\n\t\t\t%s\n\t\t}", cluster.StoreURLs(), s.lines)
			// Every key of the destination's queue has the hash tag {sink}.
			const queueSlot = "{sink}"
			runFailover(t, "cluster "+s.name, store, s.judged, func() time.Duration {
				killed := time.Now()
				old := cluster.KillMaster(queueSlot)
				promoted := cluster.WaitFailover(queueSlot, old, 60*time.Second)
				took := time.Since(killed)
				// The promoted replica has no replica of its own: with
				// min_replicas 1 its slot refuses writes until the dead
				// master, restarted, rejoins as its replica.
				cluster.Rejoin(old, promoted, 60*time.Second)
				return took
			})
		})
	}
}

// The load of one run: failoverEnqueues events enqueued through
// webhook_enqueue, and failoverDeliveries deliveries through
// webhook_dedupe, each sent twice, by failoverClients goroutines.
const (
	failoverEnqueues   = 2000
	failoverDeliveries = 1000
	failoverClients    = 8
	// failoverRetryEvery is how long a client waits before it retries a
	// request that failed, as a provider would (with the same ID).
	failoverRetryEvery = 100 * time.Millisecond
	// failoverGiveUp bounds how long one request is retried. Past a
	// Cluster failover the gateway's client finds the promoted replica
	// only when it reloads the slot map, every 60 s (go-redis's
	// ClusterStateReloadInterval): a connection refused by the dead master
	// does not make it reload.
	failoverGiveUp = 90 * time.Second
)

// failoverLoad is what the load saw, shared by its goroutines.
type failoverLoad struct {
	mu         sync.Mutex
	acked      map[string]bool // enqueue IDs answered 202
	requests   int             // answers (and transport errors) in all
	errors     int             // answers other than 2xx, and transport errors
	firstErr   time.Time
	lastErr    time.Time
	firstErrAt int // requests answered before the first error
	lastErrAt  int // requests answered up to the last error
	unexpected []string
	answers    map[string]int // the error answers by door, status and reason
	enqueued   atomic.Int64   // enqueues acknowledged so far
}

// note records one answer at door ("enqueue" or "dedupe"): status 0 is a
// transport error.
func (l *failoverLoad) note(door string, status int, reason string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if status >= 200 && status < 300 {
		return
	}
	now := time.Now()
	l.errors++
	if l.firstErr.IsZero() {
		l.firstErr, l.firstErrAt = now, l.requests
	}
	l.lastErr, l.lastErrAt = now, l.requests
	l.answers[fmt.Sprintf("%s %d %s", door, status, reason)]++
	// The documented answers while the store fails over: 503
	// store_unavailable (outcome unknown, retry with the same ID), and
	// dedupe's 409 in_flight (a claim not yet settled, retry later).
	documented := status == 503 && reason == "store_unavailable" || status == 409 && reason == "in_flight"
	if !documented && len(l.unexpected) < 20 {
		if err != nil {
			l.unexpected = append(l.unexpected, "transport error: "+err.Error())
		} else {
			l.unexpected = append(l.unexpected, fmt.Sprintf("%d %s", status, reason))
		}
	}
}

// runFailover runs the load on a gateway with store (the hookgate store
// block, e.g. "store redis <urls> { sentinel_master mymaster }"), calls
// failover (which SIGKILLs the master and waits for the promotion) once
// 40% of the enqueues were acknowledged, keeps the load running through
// it, settles, and reports the counts under label; a judged run fails
// on an acknowledged enqueue lost or a copy forwarded twice.
func runFailover(t *testing.T, label, store string, judged bool, failover func() time.Duration) {
	sink := newUpstream(t, nil)
	applied := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		%s
		key_prefix %s
		sender {
			workers 8
			attempts 50
			backoff 50ms 1s
			timeout 2s
			lease 5s
		}
		destination sink {
			url %s
			secret %s
		}
	}`, store, redistest.Prefix("fo"), sink.URL, devSecret)
	// A dedupe lease of 15 s: a claim whose record the failover lost is
	// taken over (and counted) within the run, not after 30 s; and a
	// record the failover held up lands within the lease (a record that
	// failed for its whole lease, the Cluster's 4 s failover against a 5 s
	// lease, is forwarded again and says so: the guarantee's first window,
	// not a write the failover lost). No replay
	// cache: a copy is judged by the store alone, as on another instance;
	// the cache would hide a record the failover lost.
	site := fmt.Sprintf(`handle /enqueue {
		webhook_enqueue sink
	}
	handle {
		webhook_verify {
			secret %s
		}
		webhook_dedupe {
			lease 15s
			replay_cache off
		}
		reverse_proxy %s
	}`, devSecret, applied.Addr())
	g := startGateway(t, site, gatewayOptions{Global: global})

	client := &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: failoverClients},
	}
	load := &failoverLoad{acked: map[string]bool{}, answers: map[string]int{}}
	prefix := randomID("fo")
	sign := signer(t, "standard", devSecret)

	// The load stops when the test ends, however it ends: the failover
	// runs on the test's goroutine and may stop it (t.Fatal).
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	// The failover starts once 40% of the enqueues were acknowledged.
	trigger := make(chan struct{})
	var triggerOnce sync.Once

	// Jobs: enqueue i is i >= 0, delivery j is -(j+1); interleaved.
	jobs := make(chan int)
	start := time.Now()
	for range failoverClients {
		wg.Go(func() {
			for job := range jobs {
				if job >= 0 {
					id := fmt.Sprintf("%s-enq-%d", prefix, job)
					body := fmt.Appendf(nil, `{"type":"failover.enqueued","n":%d}`, job)
					h := http.Header{"Idempotency-Key": {id}, "Content-Type": {"application/json"}}
					if !untilAnswered(ctx, client, load, "enqueue", g.URL+"/enqueue", h, body) {
						if ctx.Err() == nil {
							t.Errorf("enqueue %s: no 2xx in %s", id, failoverGiveUp)
						}
						continue
					}
					load.mu.Lock()
					load.acked[id] = true
					load.mu.Unlock()
					if load.enqueued.Add(1) >= failoverEnqueues*4/10 {
						triggerOnce.Do(func() { close(trigger) })
					}
					continue
				}
				id := fmt.Sprintf("%s-msg-%d", prefix, -job-1)
				body := fmt.Appendf(nil, `{"type":"failover.delivered","n":%d}`, -job-1)
				h := sign.Sign(id, time.Now(), body)
				// The provider's retry: the same delivery, sent again
				// once the first copy was answered.
				for copyN := range 2 {
					if !untilAnswered(ctx, client, load, "dedupe", g.URL+"/", h, body) && ctx.Err() == nil {
						t.Errorf("delivery %s, copy %d: no 2xx in %s", id, copyN+1, failoverGiveUp)
					}
				}
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		send := func(job int) bool {
			select {
			case jobs <- job:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for i := range max(failoverEnqueues, failoverDeliveries) {
			if i < failoverEnqueues && !send(i) {
				return
			}
			if i < failoverDeliveries && !send(-(i + 1)) {
				return
			}
		}
	})
	loadDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(loadDone)
	}()

	select {
	case <-trigger:
	case <-loadDone:
		t.Fatal("the load ended before the failover started")
	}
	killed := time.Now()
	failoverTook := failover()
	<-loadDone
	loadTook := time.Since(start)
	if t.Failed() {
		return
	}

	// Settle: the queue empty, nothing leased (a lease the failover
	// brought back is retried when it ends).
	var depth failoverDepth
	waitForWithin(t, 90*time.Second, "the queue to empty", func() bool {
		d, ok := sinkDepth(client, g.Admin)
		depth = d
		return ok && d.Queued == 0 && d.Leased == 0
	})

	// The gateway serves again: a new enqueue and a new delivery are
	// answered 2xx, within 30 s (with min_replicas, the replica left may
	// still be syncing from the promoted master: until it is, the
	// gateway answers 503).
	id := prefix + "-after"
	body := []byte(`{"type":"failover.after"}`)
	for _, c := range []struct {
		what, url string
		h         http.Header
		want      int
	}{
		{"an enqueue", g.URL + "/enqueue", http.Header{"Idempotency-Key": {id}}, 202},
		{"a delivery", g.URL + "/", sign.Sign(id, time.Now(), body), 200},
	} {
		var st int
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(failoverRetryEvery) {
			if st, _, err = try(t.Context(), client, c.url, c.h, body); st == c.want || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || st != c.want {
			t.Errorf("%s after the failover: %d %v for 30s; want %d", c.what, st, err, c.want)
		}
	}

	// Count, client side, against what the upstreams received.
	delivered := countByID(sink.received())
	forwarded := countByID(applied.received())
	lost, twice, forwardedTwice, notForwarded := 0, 0, 0, 0
	load.mu.Lock()
	defer load.mu.Unlock()
	for id := range load.acked {
		if delivered[id] == 0 {
			lost++
		}
	}
	for _, n := range delivered {
		if n > 1 {
			twice++
		}
	}
	for j := range failoverDeliveries {
		switch forwarded[fmt.Sprintf("%s-msg-%d", prefix, j)] {
		case 0:
			notForwarded++
		case 1:
		default:
			forwardedTwice++
		}
	}
	window := load.lastErr.Sub(load.firstErr)
	// How long the errors went on after the topology had promoted a
	// replica that accepts writes (negative: they ended before).
	past := load.lastErr.Sub(killed.Add(failoverTook))
	t.Logf("%s: acked %d, lost %d, delivered twice %d, forwarded twice %d, dead %d, "+
		"errors %d over %s (requests %d to %d of %d), failover %s, errors until %s past it, load %s",
		label, len(load.acked), lost, twice, forwardedTwice, depth.Dead,
		load.errors, window.Round(time.Millisecond), load.firstErrAt, load.lastErrAt, load.requests,
		failoverTook.Round(time.Millisecond), past.Round(time.Millisecond), loadTook.Round(time.Millisecond))
	t.Logf("%s: error answers %v", label, load.answers)
	if len(load.unexpected) > 0 {
		t.Errorf("answers that are not 2xx, 503 store_unavailable or 409 in_flight: %q", load.unexpected)
	}
	// A delivery answered 2xx was forwarded at least once: dedupe never
	// answers 2xx on its own but to replay a forward's record.
	if notForwarded > 0 {
		t.Errorf("%d deliveries answered 2xx were never forwarded", notForwarded)
	}
	if judged && (lost > 0 || forwardedTwice > 0) {
		t.Errorf("%s: %d acknowledged enqueues lost, %d copies forwarded twice; want 0 and 0", label, lost, forwardedTwice)
	}
}

// untilAnswered sends body to url until it is answered 2xx, waiting
// failoverRetryEvery after each failure, for failoverGiveUp at most; it
// notes every answer in load.
func untilAnswered(ctx context.Context, client *http.Client, load *failoverLoad, door, url string, h http.Header, body []byte) bool {
	deadline := time.Now().Add(failoverGiveUp)
	for {
		st, reason, err := try(ctx, client, url, h, body)
		if ctx.Err() != nil {
			return false // the test ended: not an answer
		}
		load.note(door, st, reason, err)
		if st >= 200 && st < 300 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(failoverRetryEvery):
		case <-ctx.Done():
			return false
		}
	}
}

// try POSTs body to url once, and returns the status and, for a
// problem+json answer, its reason; status 0 with a transport error.
func try(ctx context.Context, client *http.Client, url string, h http.Header, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var p struct{ Reason string }
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		_ = json.Unmarshal(b, &p) // a reason that does not decode is reported empty
	}
	return resp.StatusCode, p.Reason, nil
}

// failoverDepth is the sink destination's depth in the admin API.
type failoverDepth struct {
	Queued, Leased, Paused, Dead int
}

// sinkDepth reads the sink destination's depth from the admin API; ok is
// false when it did not answer.
func sinkDepth(client *http.Client, admin string) (failoverDepth, bool) {
	resp, err := client.Get(admin + "/hookgate/destinations")
	if err != nil {
		return failoverDepth{}, false
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct {
		Destinations []struct {
			Name  string
			Depth failoverDepth
		}
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return failoverDepth{}, false
	}
	for _, d := range list.Destinations {
		if d.Name == "sink" {
			return d.Depth, true
		}
	}
	return failoverDepth{}, false
}

// countByID counts the requests by their Webhook-Id.
func countByID(rs []recorded) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		n[r.Header.Get("Webhook-Id")]++
	}
	return n
}

// waitForWithin polls cond every 100 ms for up to within.
func waitForWithin(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
