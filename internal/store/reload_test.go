package store

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestClusterFindsThePromotedReplica: after a master dies and the Cluster
// promotes its replica, a write to its slots succeeds again once the
// client has seen the new map. Without reloadOnNodeFailure the client
// reloads it only once a minute (go-redis's ClusterStateReloadInterval),
// and every write to those slots fails until then; with it, the writes
// that fail ask for the reload.
func TestClusterFindsThePromotedReplica(t *testing.T) {
	c := redistest.StartReplicatedCluster(t)
	opts, err := RedisOptions(strings.Fields(c.StoreURLs()), "")
	if err != nil {
		t.Fatal(err)
	}
	rdb, ok := redis.NewUniversalClient(opts).(*redis.ClusterClient)
	if !ok {
		t.Fatal("not a Cluster client")
	}
	t.Cleanup(func() { _ = rdb.Close() })
	sendScriptsOnce(rdb)
	reloadOnNodeFailure(rdb)
	const key = "{failover}:k"
	if err := rdb.Set(t.Context(), key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := c.KillMaster(key)
	c.WaitFailover(key, old, 30*time.Second)

	// The Cluster answers with the promoted replica now. The client's
	// first writes may still go to the dead master; each failure asks
	// for a reload. Well within go-redis's minute, a write succeeds.
	deadline := time.Now().Add(20 * time.Second)
	failures := 0
	for {
		err := rdb.Set(t.Context(), key, "after", 0).Err()
		if err == nil {
			break
		}
		failures++
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded in 20 s after the promotion (%d failures; last: %v): the client did not reload its slot map", failures, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d writes failed after the promotion before the client found the new master", failures)
}
