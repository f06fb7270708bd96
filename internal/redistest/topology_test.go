package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinelGroupFailover: the group's master SIGKILLed, the Sentinels
// promote a replica, which accepts writes.
func TestSentinelGroupFailover(t *testing.T) {
	g := StartSentinelGroup(t)
	old := g.KillMaster()
	promoted := g.WaitFailover(old, 30*time.Second)
	if promoted == old {
		t.Fatalf("the master is still %s", old.Addr())
	}
}

// TestClusterFailover: the master of a key's slot SIGKILLed, its replica
// takes the slot over and accepts writes to it.
func TestClusterFailover(t *testing.T) {
	c := StartReplicatedCluster(t)
	const key = "{sink}:probe"
	old := c.KillMaster(key)
	promoted := c.WaitFailover(key, old, 30*time.Second)
	if promoted == old {
		t.Fatalf("the slot is still served by %s", old.Addr())
	}
}

// TestSentinelGroupReplicationDelay: with ReplicationDelay the replicas
// see a write on the master not before the delay, and the group still
// fails over (KillMaster checks the replicas are behind the proxy then).
func TestSentinelGroupReplicationDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	g := StartSentinelGroup(t, ReplicationDelay(d))
	m := g.Master()
	wrote := time.Now()
	if err := acceptsWrite(m.Addr()); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Servers[1:] {
		c := redis.NewClient(&redis.Options{Addr: r.Addr()})
		t.Cleanup(func() { _ = c.Close() }) // a probe
		poll(t, 10*time.Second, "the write on replica "+r.Addr(), func() (bool, string) {
			n, err := c.Exists(t.Context(), "redistest:probe").Result()
			if err != nil {
				return false, err.Error()
			}
			return n == 1, "not there yet"
		})
		// Only a lower bound: the write cannot arrive before the delay.
		if seen := time.Since(wrote); seen < d {
			t.Errorf("replica %s had the write %s after it was sent; want not before %s", r.Addr(), seen, d)
		}
	}
	old := g.KillMaster()
	if promoted := g.WaitFailover(old, 30*time.Second); promoted == old {
		t.Fatalf("the master is still %s", old.Addr())
	}
}
