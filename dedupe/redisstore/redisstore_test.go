package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/dedupe/storetest"
	"github.com/hookgate/hookgate/internal/redistest"
)

func TestConformanceSingleNode(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = rdb.Close() })
	storetest.Run(t, func(t *testing.T) storetest.Backend { return redisstore.New(rdb, redistest.Prefix("test")) })
}

// TestConformanceCluster runs the suite against a real three-master
// Cluster: every script must touch one slot.
func TestConformanceCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
	t.Cleanup(func() { _ = rdb.Close() })
	storetest.Run(t, func(t *testing.T) storetest.Backend { return redisstore.New(rdb, redistest.Prefix("test")) })
}
