package redistest

import (
	"testing"
	"time"
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
