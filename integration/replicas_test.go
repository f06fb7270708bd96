package integration

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestMinReplicas runs the built gateway with min_replicas 1 on a Redis
// master that has no replica, then gives it one:
//   - without the replica, an enqueue and a dedupe claim are answered 503
//     store_unavailable with Retry-After, nothing is forwarded, and the
//     shortfalls are counted by op;
//   - once the replica is online, the provider's retries of the same
//     events (same IDs) are accepted: the refused claim was released, so
//     the copy is forwarded at once, not held in_flight for its lease.
//
// The timeout is 500ms, not the default 100ms: the replica must answer
// WAIT in time on a machine busy with other tests.
func TestMinReplicas(t *testing.T) {
	master := redistest.Start(t)
	sink := newUpstream(t, nil)
	up := newUpstream(t, nil)
	global := fmt.Sprintf(`hookgate {
		store redis %s {
			min_replicas 1 500ms
		}
		key_prefix %s
		destination sink {
			url %s
			secret %s
		}
	}`, master.URL(), redistest.Prefix("mr"), sink.URL, devSecret)
	site := fmt.Sprintf(`handle /enqueue {
		webhook_enqueue sink
	}
	handle {
		webhook_verify {
			secret %s
		}
		webhook_dedupe
		reverse_proxy %s
	}`, devSecret, up.Addr())
	g := startGateway(t, site, gatewayOptions{Global: global})

	enqueueID := randomID("evt_")
	enqueueBody := []byte(`{"type":"reservation.held"}`)
	enqueueHeaders := http.Header{"Idempotency-Key": {enqueueID}, "Content-Type": {"application/json"}}
	deliveryBody := []byte(`{"type":"reservation.confirmed"}`)
	deliveryHeaders := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), deliveryBody)

	for _, c := range []struct {
		door string
		url  string
		h    http.Header
		body []byte
	}{
		{"enqueue", g.URL + "/enqueue", enqueueHeaders, enqueueBody},
		{"dedupe", g.URL + "/", deliveryHeaders, deliveryBody},
	} {
		st, hdr, got := post(t, c.url, c.h, c.body)
		if st != http.StatusServiceUnavailable || !strings.Contains(string(got), `"store_unavailable"`) {
			t.Fatalf("%s with no replica, min_replicas 1: %d %s; want 503 store_unavailable", c.door, st, got)
		}
		if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("%s: Retry-After %q; want a number of seconds", c.door, hdr.Get("Retry-After"))
		}
	}
	if n := up.count(); n != 0 {
		t.Fatalf("a refused delivery was forwarded %d times", n)
	}
	metrics := g.Metrics()
	for _, op := range []string{"enqueue", "claim"} {
		if v := metricValue(metrics, fmt.Sprintf(`hookgate_store_replication_shortfalls_total{op="%s"}`, op)); v < 1 {
			t.Errorf("shortfalls of %s: %v; want at least 1", op, v)
		}
	}
	if v := metricValue(metrics, `hookgate_store_replication_shortfalls_total{op="purge"}`); v != 0 {
		t.Errorf("shortfalls of purge: %v; want 0 (every op's series is there from the start)", v)
	}

	replica := redistest.Start(t)
	attachReplica(t, master, replica)

	// A replica that has just come online may take longer than the
	// timeout to acknowledge its first WAIT on a busy machine: a client
	// retries a 503 with the same ID, which is safe, and so does this.
	retry := func(url string, h http.Header, body []byte) (int, []byte) {
		t.Helper()
		var st int
		var got []byte
		for range 10 {
			if st, _, got = post(t, url, h, body); st != http.StatusServiceUnavailable {
				break
			}
		}
		return st, got
	}
	if st, got := retry(g.URL+"/enqueue", enqueueHeaders, enqueueBody); st != http.StatusAccepted {
		t.Fatalf("the enqueue's retry with a replica online: %d %s; want 202", st, got)
	}
	if st, got := retry(g.URL+"/", deliveryHeaders, deliveryBody); st != http.StatusOK {
		t.Fatalf("the delivery's retry with a replica online: %d %s; want 200 (the refused claim released)", st, got)
	}
	if n := up.count(); n != 1 {
		t.Errorf("the delivery was forwarded %d times; want 1", n)
	}
	waitForWithin(t, 30*time.Second, "the enqueued event to be delivered", func() bool { return sink.count() == 1 })
	// What the gateway wrote, the replica has.
	rdb := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer func() { _ = rdb.Close() }()
	if keys, err := rdb.Keys(context.Background(), "*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("the replica holds %d keys (%v); want the gateway's", len(keys), err)
	}
}

// attachReplica makes replica replicate master, and waits until the
// master counts it online.
func attachReplica(t *testing.T, master, replica *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer func() { _ = rdb.Close() }()
	if err := rdb.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(master.Port)).Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	redistest.WaitReplicas(t, master, 1)
}
