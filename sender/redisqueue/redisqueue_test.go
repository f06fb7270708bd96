package redisqueue_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/queuetest"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

func prefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "test" + hex.EncodeToString(b)
}

func TestConformanceSingleNode(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, prefix(), retention)
	})
}

// TestConformanceCluster runs the suite against a real three-master
// Cluster: every script must touch one slot.
func TestConformanceCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
	t.Cleanup(func() { rdb.Close() })
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, prefix(), retention)
	})
}
